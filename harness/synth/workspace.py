"""The project a synthetic session works on, as its tools see it: the corpus's real files, changed
by the session's edits, and what each tool prints about them.

Outputs follow the formats of the real Claude Code logs in ``../shared/traces/real`` (2.0.76 and
2.1.39): ``Read`` numbers lines ``{n:>6}→{line}`` and returns at most 2,000 lines; ``Grep`` in
content mode prints ``path:line:text`` (no path for a single file), in files mode ``Found N
files`` and the paths; ``Glob`` prints absolute paths; ``Edit`` acknowledges with or without a
``cat -n`` snippet; a failing ``Bash`` command is an error result starting ``Exit code N``.
Everything is computed from the current files (a read after an edit shows the edit; a grep matches
real lines), except test runs, which are the real pytest output recorded for the tree's state
(:mod:`ctxsim.harness.synth.corpus`): the clean tree, one bug, or one bug with one wrong attempt. The
generator only changes Python files in ways that have a recording (a bug, its attempts, its fix),
so every test output shown is the real output of the tree the session has at that point.
"""

from __future__ import annotations

import fnmatch
import hashlib
from dataclasses import dataclass

from ctxsim.harness.synth.corpus import CWD, Corpus, LineChange, Mutation, Run, SourceFile

READ_MAX_LINES = 2_000          # Claude Code's Read returns at most 2,000 lines without a limit
NUM_WIDTH = 6                   # "{n:>6}→": the line-number prefix of Claude Code's Read
ARROW = "\u2192"


def numbered(lines: list[str] | tuple[str, ...], first: int) -> str:
    """Lines as Claude Code's Read shows them, the first numbered ``first``."""
    return "\n".join(f"{first + i:>{NUM_WIDTH}}{ARROW}{ln}" for i, ln in enumerate(lines))


def abspath(path: str) -> str:
    return f"{CWD}/{path}"


@dataclass(frozen=True)
class Output:
    """A tool's result: the text and whether the tool reported an error."""

    text: str
    is_error: bool = False


class Workspace:
    """The files of one session (all of its launches), and the bug under repair, if any."""

    def __init__(self, corpus: Corpus) -> None:
        self.c = corpus
        self._cur: dict[str, list[str]] = {}    # files changed in the working tree
        self._head: dict[str, list[str]] = {}   # files changed in the last commit (vs the corpus)
        self.bug: Mutation | None = None
        self.attempt: int | None = None          # index of the wrong attempt in the tree, if any
        self.commits = 0
        self.last_pull = ""
        self._texts: dict[str, SourceFile] = {}   # text and line index of changed files
        self._version = 0                          # bumped on every change (caches below)
        self._memo: dict = {}                      # cleared on every change
        self._pver: dict[str, int] = {}            # per-file change counters (caches keyed by them)
        self._hits: dict = {}
        self._scopes: dict = {}

    # --- files -----------------------------------------------------------------------------------
    def lines(self, path: str) -> list[str] | tuple[str, ...]:
        cur = self._cur.get(path)
        return cur if cur is not None else self.c.files[path].lines

    def text(self, path: str) -> str:
        cur = self._cur.get(path)
        if cur is None:
            return self.c.files[path].text
        f = self._texts.get(path)
        if f is None:
            f = self._texts[path] = SourceFile(path, "\n".join(cur), tuple(cur))
        return f.text

    def _file(self, path: str) -> SourceFile:
        self.text(path)
        return self._texts.get(path) or self.c.files[path]

    def head_lines(self, path: str) -> list[str] | tuple[str, ...]:
        h = self._head.get(path)
        return h if h is not None else self.c.files[path].lines

    def exists(self, path: str) -> bool:
        return path in self.c.files

    def _changed(self, path: str) -> None:
        self._texts.pop(path, None)
        self._version += 1
        self._pver[path] = self._pver.get(path, 0) + 1
        self._memo.clear()

    def modified(self) -> list[str]:
        got = self._memo.get("modified")
        if got is None:
            got = self._memo["modified"] = sorted(p for p in self._cur if list(self._cur[p]) != list(self.head_lines(p)))
        return got

    def _set_line(self, store: dict[str, list[str]], ch: LineChange, new: str) -> None:
        lines = store.get(ch.path)
        if lines is None:
            # a file not in the tree's store is as in HEAD; a file not in HEAD's store is as in the corpus
            base = self._head.get(ch.path) if store is self._cur else None
            lines = store[ch.path] = list(base if base is not None else self.c.files[ch.path].lines)
        lines[ch.line - 1] = new
        self._changed(ch.path)

    def replace(self, path: str, old: str, new: str) -> bool:
        """An Edit: ``old`` (which must occur once) becomes ``new``; False when it does not match."""
        text = self.text(path)
        if text.count(old) != 1:
            return False
        self._cur[path] = text.replace(old, new, 1).split("\n")
        self._changed(path)
        return True

    # --- the bug and its repair --------------------------------------------------------------------
    def introduce(self, m: Mutation) -> None:
        """A bug arrives committed (a colleague's change the user pulled): tree and HEAD have it."""
        assert self.bug is None and self.lines(m.path)[m.change.line - 1] == m.change.old
        self.bug, self.attempt = m, None
        for store in (self._cur, self._head):
            self._set_line(store, m.change, m.change.new)

    def pull(self, m: Mutation) -> str:
        """``git pull --ff-only`` bringing a colleague's commit that holds bug ``m``: the fast-forward
        message git prints (ids: SHA-1s of the change, deterministic; not git's commit ids)."""
        before = hashlib.sha1(f"{self.commits}:{m.id}:before".encode()).hexdigest()[:7]
        after = hashlib.sha1(f"{self.commits}:{m.id}".encode()).hexdigest()[:7]
        self.introduce(m)
        self.commits += 1
        name = m.path
        return (f"Updating {before}..{after}\nFast-forward\n {name} | 2 +-\n"
                " 1 file changed, 1 insertion(+), 1 deletion(-)")

    def region(self, path: str, first: int, last: int) -> str:
        ls = self.lines(path)
        return "\n".join(ls[first - 1:last])

    def edit_lines(self, path: str, first: int, last: int, changes: dict[int, str]) -> tuple[str, str]:
        """Replace whole lines (1-based) inside ``first..last``; returns (old_string, new_string)."""
        old = self.region(path, first, last)
        lines = list(self.lines(path))
        for ln, text in changes.items():
            lines[ln - 1] = text
        new = "\n".join(lines[first - 1:last])
        self._cur[path] = lines
        self._changed(path)
        return old, new

    def try_attempt(self, i: int, context: tuple[int, int]) -> tuple[str, str]:
        """Apply wrong attempt ``i`` (undoing the previous one): the Edit's old and new strings."""
        m = self.bug
        assert m is not None
        changes = self._undo_attempt()
        a = m.attempts[i].change
        changes[a.line] = a.new
        self.attempt = i
        return self.edit_lines(m.path, *self._span(context, changes), changes)

    def fix(self, context: tuple[int, int]) -> tuple[str, str]:
        """Undo the bug (and any attempt): the Edit's old and new strings."""
        m = self.bug
        assert m is not None
        changes = {m.change.line: m.change.old, **self._undo_attempt()}
        span = self._span(context, changes)
        self.bug, self.attempt = None, None
        return self.edit_lines(m.path, *span, changes)

    def _undo_attempt(self) -> dict[int, str]:
        """The line change that undoes the wrong attempt in the tree (none when there is none)."""
        if self.attempt is None:
            return {}
        prev = self.bug.attempts[self.attempt].change  # type: ignore[union-attr]
        return {prev.line: prev.old}

    def _span(self, context: tuple[int, int], changes: dict[int, str]) -> tuple[int, int]:
        before, after = context
        n = len(self.lines(self.bug.path))  # type: ignore[union-attr]
        return max(1, min(changes) - before), min(n, max(changes) + after)

    def attempt_line(self, i: int) -> int:
        return self.bug.attempts[i].change.line  # type: ignore[union-attr]

    # --- tests ------------------------------------------------------------------------------------
    def failing_modules(self) -> set[str]:
        return {n.split("::")[0] for n in self.bug.failing} if self.bug else set()

    def pytest(self, what: str, module: str | None = None) -> tuple[str, Run] | None:
        """The recorded run for the tree as it is, or None when there is none.

        ``what``: "x" (module, -x -q), "short" (module, --tb=short), "test" (the first failing test),
        "q" (module, -q), "v" (module, -v), "suite" (-q), "suite_v" (-v). With a bug in the tree, a
        module none of whose tests fail under it prints what it prints on the clean tree (the
        recording of the clean tree is used for it)."""
        m = self.bug
        if what in ("suite", "suite_v"):
            if m is None:
                r = self.c.clean_suite["q" if what == "suite" else "v"]
                return r.cmd, r
            if what == "suite" and self.attempt is None:
                return m.runs["suite"].cmd, m.runs["suite"]
            return None
        module = module or (m.module if m else None)
        if module is None:
            return None
        if m is not None and module in self.failing_modules():
            if module != m.module:
                return None
            if self.attempt is not None:
                r = m.attempts[self.attempt].run
                return (r.cmd, r) if what == "x" else None
            key = {"q": "short", "v": "short"}.get(what, what)
            r = m.runs.get(key)
            return (r.cmd, r) if r is not None else None
        runs = self.c.clean_modules.get(module)
        if runs is None or what == "test":
            return None
        r = runs["v" if what == "v" else "q"]
        cmd = {"x": f"python -m pytest {module} -x -q", "short": f"python -m pytest {module} -q --tb=short"}.get(what, r.cmd)
        return cmd, r

    # --- tool outputs -------------------------------------------------------------------------------
    def read(self, path: str, offset: int | None = None, limit: int | None = None) -> Output:
        ls = self.lines(path)
        n = self.n_lines(path)
        first = offset or 1
        last = min(n, first - 1 + (limit or READ_MAX_LINES))
        if n == 0:
            return Output("<system-reminder>Warning: the file exists but the contents are empty.</system-reminder>")
        return Output(numbered(ls[first - 1:last], first))

    def read_size(self, path: str, first: int, last: int) -> int:
        return self._file(path).chars(first, last) + (NUM_WIDTH + 2) * (last - first + 1) - 1

    def n_lines(self, path: str) -> int:
        ls = self.lines(path)
        return len(ls) - (1 if ls and ls[-1] == "" else 0)   # a final newline ends the last line

    def scope(self, under: str | None, glob: str | None = None) -> list[str]:
        """Files under a directory (or one file), optionally filtered by a glob on the name or path."""
        got = self._scopes.get((under, glob))
        if got is None:
            got = self._scopes[(under, glob)] = self._scope(under, glob)
        return got

    def _scope(self, under: str | None, glob: str | None) -> list[str]:
        if under and under in self.c.files:
            files = [under]
        else:
            pre = (under.rstrip("/") + "/") if under else ""
            files = [p for p in self.c.paths if p.startswith(pre)]
        if glob:
            files = [p for p in files if fnmatch.fnmatch(p.rsplit("/", 1)[-1], glob) or fnmatch.fnmatch(p, glob)]
        return files

    def matches(self, pattern: str, files: list[str]) -> list[tuple[str, int]]:
        """(path, line) of every line containing one of the ``|``-separated literals of ``pattern``."""
        out: list[tuple[str, int]] = []
        for p in files:
            key = (pattern, p, self._pver.get(p, 0))
            got = self._hits.get(key)
            if got is None:
                got = self._hits[key] = self._matches(pattern, [p])
            out += got
        return out

    def _matches(self, pattern: str, files: list[str]) -> list[tuple[str, int]]:
        alts = [a for a in pattern.split("|") if a]
        out: list[tuple[str, int]] = []
        for p in files:
            f = self._file(p)
            text = f.text
            hits: set[int] = set()
            for a in alts:
                i = text.find(a)
                while i >= 0:
                    hits.add(f.line_of_offset(i))
                    nl = text.find("\n", i)
                    if nl < 0:
                        break
                    i = text.find(a, nl + 1)
            out.extend((p, ln) for ln in sorted(hits))
        return out

    def grep(self, pattern: str, under: str | None, glob: str | None = None, mode: str = "content",
             context: int = 0, head_limit: int | None = None) -> Output:
        files = self.scope(under, glob)
        hits = self.matches(pattern, files)
        if mode == "files_with_matches":
            found = sorted({p for p, _ in hits})
            if not found:
                return Output("No files found")
            if head_limit:
                found = found[:head_limit]
            return Output(f"Found {len(found)} file{'s' if len(found) != 1 else ''}\n" + "\n".join(found))
        if not hits:
            return Output("No matches found")
        single = bool(under) and under in self.c.files   # ripgrep prints no path for a single-file search
        out: list[str] = []
        last_key = None
        for p, ln in hits:
            ls = self.lines(p)
            lo, hi = max(1, ln - context), min(len(ls), ln + context)
            if context and last_key is not None and (last_key[0] != p or lo > last_key[1] + 1):
                out.append("--")
            start = lo if last_key is None or last_key[0] != p else max(lo, last_key[1] + 1)
            for k in range(start, hi + 1):
                sep = ":" if k == ln or (p, k) in hits else "-"
                out.append((f"{k}{sep}" if single else f"{p}{sep}{k}{sep}") + ls[k - 1])
            last_key = (p, hi)
        if head_limit:
            out = out[:head_limit]
        return Output("\n".join(out))

    def glob(self, pattern: str) -> Output:
        got = self._memo.get(("glob", pattern))
        if got is None:
            got = self._memo[("glob", pattern)] = self._glob(pattern)
        return got

    def _glob(self, pattern: str) -> Output:
        found = self._scopes.get(("glob", pattern))
        if found is None:
            found = self._scopes[("glob", pattern)] = [
                p for p in self.c.paths if fnmatch.fnmatch(p, pattern) or fnmatch.fnmatch(p, pattern.replace("**/", ""))]
        found = list(found)
        if not found:
            return Output("No files found")
        mod = set(self.modified())
        found.sort(key=lambda p: (p not in mod, p))   # Claude Code lists the most recently modified first
        return Output("\n".join(abspath(p) for p in found))

    def edit_ack(self, path: str, snippet: tuple[int, int] | None = None) -> Output:
        if snippet is None:
            return Output(f"The file {abspath(path)} has been updated successfully.")
        first, last = snippet
        return Output(f"The file {abspath(path)} has been updated. Here's the result of running `cat -n` on a "
                      f"snippet of the edited file:\n" + numbered(self.lines(path)[first - 1:last], first))

    # --- shell ------------------------------------------------------------------------------------
    def git_status(self) -> str:
        mod = self.modified()
        if not mod:
            return "On branch main\nnothing to commit, working tree clean"
        body = "\n".join(f"\tmodified:   {p}" for p in mod)
        return ("On branch main\nChanges not staged for commit:\n"
                "  (use \"git add <file>...\" to update what will be committed)\n"
                "  (use \"git restore <file>...\" to discard changes in working directory)\n"
                f"{body}\n\nno changes added to commit (use \"git add\" and/or \"git commit -a\")")

    def git_diff(self, path: str | None = None) -> str:
        parts = []
        for p in self.modified():
            if path and p != path:
                continue
            key = ("diff", p, self._pver.get(p, 0))
            got = self._hits.get(key)
            if got is None:
                got = self._hits[key] = self._git_diff(p)
            parts.append(got)
        return "\n".join(parts)

    def _git_diff(self, path: str | None = None) -> str:
        """``git diff`` of the working tree against HEAD (3 lines of context, git's default funcname
        rule: the last line above the hunk that starts with a letter, ``_`` or ``$``)."""
        out: list[str] = []
        for p in self.modified():
            if path and p != path:
                continue
            a, b = list(self.head_lines(p)), list(self.lines(p))
            ha, hb = _blob("\n".join(a)), _blob("\n".join(b))
            out += [f"diff --git a/{p} b/{p}", f"index {ha}..{hb} 100644", f"--- a/{p}", f"+++ b/{p}"]
            # the trailing "" of a final newline is not a line
            a_, b_ = (a[:-1] if a and a[-1] == "" else a), (b[:-1] if b and b[-1] == "" else b)
            for i1, i2, j1, j2, ops in _hunks(a_, b_):
                func = next((a_[k] for k in range(i1 - 1, -1, -1) if a_[k][:1].isalpha() or a_[k][:1] in "_$"), "")
                out.append(f"@@ -{_range(i1, i2)} +{_range(j1, j2)} @@" + (f" {func}" if func else ""))
                out += ops
        return "\n".join(out)

    def commit(self, message: str) -> str:
        """``git commit -am MESSAGE``: HEAD takes the tree. The abbreviated id is a SHA-1 of the
        message and the diff (deterministic; not git's commit hash, which needs an author and a date)."""
        mod = self.modified()
        if not mod:
            return "On branch main\nnothing to commit, working tree clean"
        diff = self.git_diff()
        ins = sum(1 for ln in diff.split("\n") if ln.startswith("+") and not ln.startswith("+++"))
        dels = sum(1 for ln in diff.split("\n") if ln.startswith("-") and not ln.startswith("---"))
        for p in mod:
            self._head[p] = list(self.lines(p))
            self._changed(p)
        self.commits += 1
        h = hashlib.sha1((message + "\n" + diff).encode()).hexdigest()[:7]
        files = f"{len(mod)} file{'s' if len(mod) != 1 else ''} changed"
        return (f"[main {h}] {message}\n {files}, {ins} insertion{'s' if ins != 1 else ''}(+), "
                f"{dels} deletion{'s' if dels != 1 else ''}(-)")

    def cat(self, path: str, first: int | None = None, last: int | None = None) -> str:
        ls = self.lines(path)
        n = self.n_lines(path)
        return "\n".join(ls[(first or 1) - 1:min(n, last or n)])

    def wc_l(self, paths: list[str]) -> str:
        rows = [(self.n_lines(p), p) for p in paths]
        width = max(len(str(sum(n for n, _ in rows))), 1)
        out = [f"{n:>{width + 1}} {p}" for n, p in rows]
        if len(rows) > 1:
            out.append(f"{sum(n for n, _ in rows):>{width + 1}} total")
        return "\n".join(out)

    def ls(self, under: str) -> str:
        pre = under.rstrip("/") + "/"
        names = sorted({p[len(pre):].split("/")[0] for p in self.c.paths if p.startswith(pre)})
        return "\n".join(names)


def _blob(text: str) -> str:
    data = text.encode("utf-8")
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()[:7]


def _range(start: int, end: int) -> str:
    n = end - start
    return f"{start + (1 if n else 0)},{n}" if n != 1 else f"{start + 1}"


def _hunks(a: list[str], b: list[str], ctx: int = 3):
    """Unified-diff hunks of ``a`` -> ``b`` with ``ctx`` lines of context. The session's edits change
    lines in place (same count: each changed line is a -/+ pair) or replace one region (the common
    head and tail are kept, the middle is replaced): both cases give the minimal diff, as git does."""
    if len(a) == len(b):
        changed = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
        spans: list[list[int]] = []
        for i in changed:
            if spans and i - spans[-1][1] <= 2 * ctx + 1:
                spans[-1][1] = i
            else:
                spans.append([i, i])
        for lo, hi in spans:
            s, e = max(0, lo - ctx), min(len(a), hi + 1 + ctx)
            ops = []
            k = s
            while k < e:
                if a[k] == b[k]:
                    ops.append(" " + a[k])
                    k += 1
                    continue
                j = k
                while j < e and a[j] != b[j]:
                    j += 1
                ops += ["-" + x for x in a[k:j]] + ["+" + x for x in b[k:j]]
                k = j
            yield s, e, s, e, ops
        return
    pre = 0
    while pre < min(len(a), len(b)) and a[pre] == b[pre]:
        pre += 1
    suf = 0
    while suf < min(len(a), len(b)) - pre and a[len(a) - 1 - suf] == b[len(b) - 1 - suf]:
        suf += 1
    s = max(0, pre - ctx)
    ea, eb = len(a) - suf, len(b) - suf
    ta, tb = min(len(a), ea + ctx), min(len(b), eb + ctx)
    ops = [" " + x for x in a[s:pre]] + ["-" + x for x in a[pre:ea]] + ["+" + x for x in b[pre:eb]] + \
          [" " + x for x in a[ea:ta]]
    yield s, ta, s, tb, ops
