"""Instruction files: NovaCode's first memory layer, "what are this project's rules" (N-INST-1…3).

The loader reads real files from a real directory tree. Discovery (N-INST-1), in priority order:
the user's global conventions file ``~/.novacode/NOVACODE.md``; then ``NOVACODE.md`` in every
directory from the git root (the nearest ancestor holding a ``.git``) down to the working directory;
last, the working directory's local override ``NOVACODE.local.md``. Without a git root only the
working directory's own files are read: walking up to ``/`` would pull in conventions of unrelated
projects.

``@./path`` references (N-INST-2) are replaced inline by the referenced file's content, expanded
recursively up to five levels below the file that holds them; a file is expanded at most once per
load (de-duplicated by absolute path, which also breaks cycles); references inside fenced code
blocks (and inline code spans, as Claude Code does) are left as written. A reference that cannot be
expanded stays as written, and the reason is kept in ``warnings``.

A replay reads only its own session (issue 44): given ``top`` (the run directory, which holds the
simulated home and project), the git root is looked for no higher than ``top``, and a file is read
only when its real path (symlinks resolved) is inside ``top``: an ``@/proc/self/environ``, an
``@/etc/...`` or a symlink out of the run directory stays as written. Each file is read up to
MAX_FILE_CHARS and no further (a 300 MB include is never read whole).

The product is resident (N-INST-3): one user message sent with every request, so it is paid for (and
cached) on every call. It is built once per session: rules, not volatile state, belong here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ctxsim.harness.model.conversation import Message

USER_DIR = ".novacode"                   # N-INST-1: ~/.novacode/NOVACODE.md
PROJECT_FILE = "NOVACODE.md"             # N-INST-1: project conventions, each level root → cwd
LOCAL_FILE = "NOVACODE.local.md"         # N-INST-1: the working directory's local override
MAX_INCLUDE_DEPTH = 5                    # N-INST-2: at most 5 levels of @-includes
MAX_FILE_CHARS = 200_000                 # guard: a runaway include is cut (not a rule; a safety cap)

# ``@./x``, ``@../x``, ``@~/x`` or ``@/abs/x``; not preceded by a word character (an e-mail address)
INCLUDE_RE = re.compile(r"(?<![\w@])@((?:\.{1,2}/|~/|/)[^\s`'\"()<>\[\]{},;]+)")
FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
CODE_SPAN_RE = re.compile(r"(`+)(?:(?!\1).)+?\1")


@dataclass(frozen=True)
class InstructionFile:
    path: Path
    scope: str            # "user" | "project" | "local"
    text: str             # after include expansion


@dataclass
class InstructionSet:
    """What the loader found: the files in priority order, the includes it expanded, and why any
    reference was left alone."""

    files: list[InstructionFile] = field(default_factory=list)
    included: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return render(self.files)

    def message(self) -> Message | None:
        """The resident user message (N-INST-3), or None when there is nothing to say."""
        if not self.files:
            return None
        return Message.user(self.text, origin="instructions")


def find_git_root(start: Path, top: Path | None = None) -> Path | None:
    """The nearest directory at or above ``start`` holding a ``.git`` (directory or file, as in a
    worktree), looked for no higher than ``top`` when ``start`` is inside it (a replay's run
    directory: a repository the run directory happens to sit in is the machine's, not the
    session's)."""
    d = start.resolve()
    bound = _bound(d, top)
    for p in (d, *d.parents):
        if (p / ".git").exists():
            return p
        if p == bound:
            break
    return None


def _bound(d: Path, top: Path | None) -> Path | None:
    """``top`` resolved, when ``d`` (resolved) is at or below it."""
    if top is None:
        return None
    t = Path(top).resolve()
    return t if d == t or t in d.parents else None


def _inside(path: Path, roots: tuple[Path, ...]) -> bool:
    """Whether ``path`` (resolved: symlinks followed) is at or below one of ``roots`` (resolved);
    no roots: anywhere (a loader called without a run directory)."""
    return not roots or any(path == r or r in path.parents for r in roots)


def _roots(home: Path | None, cwd: Path, top: Path | None) -> tuple[Path, ...]:
    """Where this load may read: ``top`` (the run directory) when the working directory is in it,
    and the home directory when it is outside ``top``; nothing (anywhere) without ``top``."""
    bound = _bound(Path(cwd).resolve(), top)
    if bound is None:
        return ()
    h = Path(home).resolve() if home is not None else None
    return (bound,) if h is None or _inside(h, (bound,)) else (bound, h)


def read_head(path: Path, limit: int = MAX_FILE_CHARS) -> str:
    """The first ``limit`` characters of a text file, reading no further (never the whole of a
    huge file); undecodable bytes replaced."""
    with path.open("r", encoding="utf-8", errors="replace") as fh:
        return fh.read(limit)


def discover(home: Path | None, cwd: Path, top: Path | None = None) -> list[tuple[Path, str]]:
    """The instruction files that exist, in priority order (N-INST-1), with their scope; with
    ``top``, only those whose real path is inside it (module docstring)."""
    roots = _roots(home, cwd, top)
    out: list[tuple[Path, str]] = []

    def take(f: Path, scope: str) -> None:
        if f.is_file() and _inside(f.resolve(), roots):
            out.append((f.resolve(), scope))

    if home is not None:
        take(Path(home) / USER_DIR / PROJECT_FILE, "user")
    cwd = Path(cwd).resolve()
    root = find_git_root(cwd, top)
    levels = [cwd] if root is None else [root, *(root / p for p in _descend(cwd.relative_to(root)))]
    for d in levels:
        take(d / PROJECT_FILE, "project")
    take(cwd / LOCAL_FILE, "local")
    return out


def _descend(rel: Path) -> list[Path]:
    """``a/b/c`` → ``[a, a/b, a/b/c]``: the levels below the root, top down."""
    parts = rel.parts
    return [Path(*parts[: i + 1]) for i in range(len(parts))]


def expand(path: Path, text: str, depth: int, seen: set[Path], out: InstructionSet,
           home: Path | None, roots: tuple[Path, ...] = ()) -> str:
    """``text`` (the content of ``path``) with its ``@``-references replaced by the referenced
    files' expanded content (N-INST-2). ``depth`` is the include level of ``path`` (0: a discovered
    file); ``seen`` holds the absolute paths already expanded in this load; a reference whose real
    path is outside ``roots`` (when given) is left as written."""
    lines = text.split("\n")
    fence: str | None = None
    for i, line in enumerate(lines):
        m = FENCE_RE.match(line)
        if fence is not None:
            close = line.strip()
            if m and close == close[0] * len(close) and close[0] == fence[0] and len(close) >= len(fence):
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        if "@" not in line:
            continue
        lines[i] = _expand_line(path, line, depth, seen, out, home, roots)
    return "\n".join(lines)


def _expand_line(path: Path, line: str, depth: int, seen: set[Path], out: InstructionSet,
                 home: Path | None, roots: tuple[Path, ...]) -> str:
    spans = [(m.start(), m.end()) for m in CODE_SPAN_RE.finditer(line)]

    def repl(m: re.Match[str]) -> str:
        if any(a <= m.start() < b for a, b in spans):
            return m.group(0)  # inside an inline code span: left as written
        ref = m.group(1).rstrip(".:")
        trailing = m.group(1)[len(ref):]
        target = _resolve(path, ref, home)
        if target is None:
            out.warnings.append(f"{path}: @{ref}: '~' with no home directory")
            return m.group(0)
        if depth + 1 > MAX_INCLUDE_DEPTH:
            out.warnings.append(f"{path}: @{ref}: not expanded, deeper than {MAX_INCLUDE_DEPTH} levels")
            return m.group(0)
        if not _inside(target, roots):
            out.warnings.append(f"{path}: @{ref}: {target} is outside the session (a run reads only its own "
                                "files): not read")
            return m.group(0)
        if target in seen:
            out.warnings.append(f"{path}: @{ref}: {target} already included (cycle or duplicate)")
            return m.group(0)
        if not target.is_file():
            out.warnings.append(f"{path}: @{ref}: no such file {target}")
            return m.group(0)
        try:
            content = read_head(target)
        except OSError as e:
            out.warnings.append(f"{path}: @{ref}: cannot read {target}: {e.strerror or e}")
            return m.group(0)
        seen.add(target)
        out.included.append(target)
        return expand(target, content, depth + 1, seen, out, home, roots).rstrip("\n") + trailing

    return INCLUDE_RE.sub(repl, line)


def _resolve(base: Path, ref: str, home: Path | None) -> Path | None:
    if ref.startswith("~/"):
        if home is None:
            return None
        return (Path(home) / ref[2:]).resolve()
    if ref.startswith("/"):
        return Path(ref).resolve()
    return (base.parent / ref).resolve()


def load(home: Path | None, cwd: Path, top: Path | None = None) -> InstructionSet:
    """Discover and expand every instruction file (N-INST-1, N-INST-2), reading nothing outside
    ``top`` when given (the run directory: module docstring)."""
    out = InstructionSet()
    roots = _roots(home, cwd, top)
    found = discover(home, cwd, top)
    seen: set[Path] = {p for p, _ in found}  # a discovered file is never pulled in again by @
    for path, scope in found:
        try:
            raw = read_head(path)
        except OSError as e:
            out.warnings.append(f"{path}: cannot read: {e.strerror or e}")
            continue
        out.files.append(InstructionFile(path, scope, expand(path, raw, 0, seen, out, home, roots)))
    return out


_SCOPE_NOTE = {
    "user": "the user's global instructions for all projects",
    "project": "project instructions, checked into the codebase",
    "local": "the user's local overrides for this project, not checked in",
}


def render(files: list[InstructionFile]) -> str:
    """The resident block (N-INST-3). Later files take precedence, and the header says so."""
    if not files:
        return ""
    parts = ["<instructions>",
             "Codebase and user instructions follow, in priority order (later ones take precedence). "
             "Follow them exactly as written."]
    for f in files:
        parts.append(f"\nContents of {f.path} ({_SCOPE_NOTE[f.scope]}):\n\n{f.text.strip()}")
    parts.append("</instructions>")
    return "\n".join(parts)
