"""What Claude Code re-attaches after a compaction, rebuilt from what a log holds.

Documented (code.claude.com/docs/en/context-window, "What survives compaction", read 2026-12-01
from the page's Markdown source as mirrored by fornewid/claude-code-docs-changelog
docs/context-window.md @0a63f94): "Right after compaction, Claude Code re-reads up to five of the
files Claude has read or edited in the session, choosing the ones modified most recently [...] A
file over 5,000 tokens comes back as a path reference without its content, shown as `Referenced
file` instead of `Read`"; the plan written in plan mode is re-injected from disk; invoked skill
bodies are "re-injected, capped at 5,000 tokens per skill and 25,000 tokens total; oldest dropped
first" (truncation keeps the start). What the docs do not give is reported (readings of
``src/services/compact/compact.ts``; ../shared/peers.md): a 50,000-token budget for all files
(``POST_COMPACT_TOKEN_BUDGET``; with over-cap files sent as a path it never binds at 5 × 5,000), the
size estimate (``roughTokenCountEstimation``: 4 characters per token), the reference's wording
(the ``compact_file_reference`` attachment, Claude Code 2.1.18 bundle) and the todo list.

What the log holds is what the agent saw, so a file is rebuilt as the log last showed it
(:class:`FileView`): the lines its reads returned, by line number (a partial read updates only
its lines), made whole by a full read or a Write, and moved by the later Edits (applied where
their text is found). Claude Code re-reads the file from disk; lines the log never showed are
not invented, so a file the log saw only in part comes back shorter than it was. "Modified most
recently": a file edited or written in the session was modified then, after every file only read
(whose modification time is older than the session and not in the log: those rank by their
latest read, an assumption). The rendering is Claude Code's (a Read call and its result, as
``<system-reminder>`` meta messages). The skill tracking is NovaCode's
(:mod:`ctxsim.strategies.novacode.restore`, N-COMP-11 uses the same reported caps).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ctxsim.harness.model.conversation import Block, Message
from ctxsim.harness.model.mentions import NUMBERED_LINE, edits_of, read_attachment
from ctxsim.harness.model.trace import LOGGED_ONLY
from ctxsim.strategies.novacode.restore import (
    RESTORE_FILE_TOKENS,
    RESTORE_MAX_FILES,
    RESTORE_SKILL_TOKENS,
    RESTORE_TOTAL_TOKENS,
    ReadTracker,
)

SKILL_TOKENS_EACH = 5_000   # docs (context-window, "What survives compaction"): 5,000 tokens per skill
CHARS_PER_TOKEN = 4.0       # roughTokenCountEstimation: content.length / 4 (reported, Claude Code)
TODO_TOOLS = ("TodoWrite",)
PLAN_TOOLS = ("ExitPlanMode",)
EDIT_TOOLS = ("Edit", "MultiEdit")
WRITE_TOOLS = ("Write",)
# the compact_file_reference attachment (Claude Code 2.1.18 bundle, reported)
REFERENCE = ("Note: {path} was read before the last conversation was summarized, but the contents are too large "
             "to include. Use Read tool if you need to access it.")


HEAD_LINES = 100   # what a file over the cap came back as to 1.0.51: its first 100 lines (bundles below)


@dataclass(frozen=True)
class ReattachCaps:
    max_files: int = RESTORE_MAX_FILES          # docs: "up to five"
    file_tokens: int = RESTORE_FILE_TOKENS      # docs: over 5,000 tokens, a path reference only
    total_tokens: int = RESTORE_TOTAL_TOKENS    # reported budget of all files (never binds at 5 × 5,000)
    skill_tokens: int = SKILL_TOKENS_EACH
    skills_total_tokens: int = RESTORE_SKILL_TOKENS
    chars_per_token: float = CHARS_PER_TOKEN
    order: Literal["modified", "read"] = "modified"
    # what a file over ``file_tokens`` comes back as: a path reference (docs), its first HEAD_LINES
    # lines, or nothing
    over_cap: Literal["reference", "head", "none"] = "reference"
    head_lines: int = HEAD_LINES   # the lines of a file over the cap re-read where ``over_cap`` is "head" (same check)
    # whether a resumed launch rebuilds readFileState from the conversation's full Reads and Writes (the
    # REPL from 2.0.59: bundles 2.0.59, 2.0.62, 2.0.69, 2.0.76, 2.1.0, 2.1.12; not 2.0.58 and before: it
    # begins empty but for the todo file, 1.0.33, 1.0.81, 2.0.14, 2.0.54)
    resume_rebuilds: bool = True

    def over(self, content: str, count: Callable[[str], int] | None = None) -> bool:
        """Whether a file's content passes ``file_tokens`` as the Read tool measured it (the bundles'
        check, 1.0.30 cli.js on: the estimate, length / 4, clears a file at a quarter of the limit or less;
        past it, the API's count of the raw content decides: ``count``, the run's StrategyEnv.count_tokens;
        without one, the estimate decides throughout).

        Evidence, issue 41: of the 318 post-compaction file attachments whose size the 2.1.105+ logs show
        (development population and both outside samples), what came back whole or as a path reference
        agrees with this count on 299 (310 with each family's median fitted scale as the factor) and with
        the estimate alone on 296 (a 22,246-character Sonnet 4.5 file, an estimate of 5,561, came back
        whole). On the first call after the population's 101 other compactions the two are even (within
        10% of the log's context: 65% counted, 66% estimated), with fewer gross over-estimates (over 1.2×:
        7 against 12): the file the replay knows is the log's last view of it, which moves either way."""
        estimate = len(content) / self.chars_per_token
        if count is None:
            return estimate > self.file_tokens
        return estimate > self.file_tokens / 4 and count(content) > self.file_tokens


# What Claude Code's compact routine re-attached, release by release, read in its published bundle
# (npm @anthropic-ai/claude-code, cli.js; the post-compact restore: the readFileState entries but the
# todo and memory files, newest timestamp first, the first 5, each re-read with a token limit, then
# kept in order while their JSON's length / 4 fits the budget, a file that does not fit skipped):
# * 1.0.17-1.0.22: no limit but the Read tool's own 25,000 tokens (a file over it is not restored; one
#   over 256 KB comes back as its first 100 lines), no budget;
# * 1.0.23-1.0.84: 10,000 tokens a file, 50,000 in all; a file over it is re-read as its first 100 lines
#   to 1.0.51 (a literal ``limit:100``) and as its first 2,000 from 1.0.53 (a named constant, ``=2000``, the
#   Read tool's default line limit: 1.0.53-1.0.59, 1.0.70, 1.0.81 and 1.0.84 read; there is no 1.0.52),
#   under the same 10,000-token check (the context passes ``maxTokens`` to that read too: 1.0.81's
#   ``BjB``), and a head over it is not restored: from 1.0.53 a file over the cap mostly does not come back;
# * 1.0.85 on: 5,000 a file (over it, the compact_file_reference path), 50,000 in all (2.0.0, 2.0.14 the same).
# The timestamp of a read was the moment of the read (Date.now()) to 1.0.113 and the file's mtime from
# 1.0.114 (an edit's, its mtime, throughout): most recently read or edited first, then most recently
# modified (the docs' "modified most recently"). Versions checked: 1.0.17, 1.0.21-1.0.24, 1.0.27, 1.0.31,
# 1.0.33, 1.0.81, 1.0.83-1.0.86, 1.0.88-1.0.90, 1.0.100, 1.0.110, 1.0.113-1.0.115, 1.0.117, 1.0.120,
# 1.0.128, 2.0.0, 2.0.14.
RELEASE_CAPS: tuple[tuple[tuple[int, int, int], dict[str, Any]], ...] = (   # each row: what changed at that release
    ((0, 0, 0), {"file_tokens": 25_000, "total_tokens": 10_000_000, "over_cap": "none", "order": "read",
                 "resume_rebuilds": False}),
    ((1, 0, 23), {"file_tokens": 10_000, "total_tokens": 50_000, "over_cap": "head"}),
    ((1, 0, 53), {"head_lines": 2_000}),
    ((1, 0, 85), {"file_tokens": 5_000, "over_cap": "reference"}),
    ((1, 0, 114), {"order": "modified"}),
    ((2, 0, 59), {"resume_rebuilds": True}),
)


def caps_for(version: tuple[int, int, int], **given: Any) -> ReattachCaps:
    """The caps of Claude Code ``version`` (:data:`RELEASE_CAPS`: every change at or before it, in order),
    with ``given`` (a run's own settings, None left out) over them."""
    caps: dict[str, Any] = {}
    for first, changed in RELEASE_CAPS:
        if first <= version:
            caps.update(changed)
    return ReattachCaps(**{**caps, **{k: v for k, v in given.items() if v is not None}})


def numbered_lines(text: str) -> dict[int, str]:
    """The lines of a Read result, by number (none: not a file's text, e.g. an error or a stub)."""
    out: dict[int, str] = {}
    for ln in text.split("\n"):
        m = NUMBERED_LINE.match(ln)
        if m:
            out[int(m.group(1))] = m.group(2)
    return out


class FileView:
    """One file as the log last showed it (see the module docstring).

    The known lines are held either by number (``lines``) or as contiguous runs of them, each one
    string (first line number, text): an Edit finds and replaces its text in the runs and shifts
    the later ones, so a long session's many Edits of a big file do not rebuild a dict of all its
    lines each time. Whichever form is asked for is made from the other on demand (losslessly: a
    line never holds a newline)."""

    def __init__(self, lines: dict[int, str] | None = None, raw: str | None = None, modified: int | None = None,
                 accessed: int = 0, edits_not_placed: int = 0) -> None:
        self._lines: dict[int, str] | None = dict(lines) if lines else {}
        self._runs_: list[tuple[int, str]] | None = None
        self.raw = raw                            # a read with no numbered lines, kept as it came (nothing better known)
        self.modified = modified                  # order of the last Edit/Write in the session (None: only read)
        self.accessed = accessed                  # order of the last read, Edit or Write
        self.edits_not_placed = edits_not_placed  # Edits whose text the known lines do not hold (the file moved unseen)
        # true tokens per scaled cl100k token of this file's text, as the log measured its last read
        # (harness/fidelity/measured.py): re-attached, the same text counts as it counted then
        self.token_factor = 1.0

    @property
    def lines(self) -> dict[int, str]:
        if self._lines is None:
            self._lines = {n: t for start, text in self._runs_ or () for n, t in enumerate(text.split("\n"), start)}
            self._runs_ = None
        return self._lines

    @lines.setter
    def lines(self, value: dict[int, str]) -> None:
        self._lines, self._runs_ = value, None

    def __repr__(self) -> str:
        return (f"FileView(lines={self.lines!r}, raw={self.raw!r}, modified={self.modified!r}, "
                f"accessed={self.accessed!r}, edits_not_placed={self.edits_not_placed!r})")

    def known(self) -> bool:
        """Any line (or a raw read) known."""
        return bool(self._runs_ if self._lines is None else self._lines) or bool(self.raw)

    def read(self, text: str, partial: bool) -> None:
        got = numbered_lines(text)
        if not got:   # not numbered: kept only while nothing numbered is known (a stub must not replace the text)
            if not self.lines:
                self.raw = text
            return
        if partial:
            self.lines.update(got)
        else:
            self.lines = got
        self.raw = None

    def write(self, content: str) -> None:
        self._lines, self._runs_ = None, [(1, content)]   # lines 1.. of ``content``, one run
        self.raw = None

    def edit(self, old: str, new: str, replace_all: bool = False) -> None:
        if not old:   # Claude Code's Edit with an empty old_string creates the file
            self.write(new)
            return
        runs = self._runs()
        hits = [(i, run[1].count(old)) for i, run in enumerate(runs)]
        total = sum(n for _, n in hits)
        if total == 0 or (total > 1 and not replace_all):
            self.edits_not_placed += 1
            return
        runs = list(runs)
        for i, n in reversed(hits):   # last run first: earlier line numbers stay valid
            if n:
                start, text = runs[i]
                after = text.replace(old, new) if replace_all else text.replace(old, new, 1)
                delta = after.count("\n") - text.count("\n")
                runs[i] = (start, after)
                if delta:   # the lines after the run move with it
                    runs[i + 1:] = [(s + delta, t) for s, t in runs[i + 1:]]
        self._lines, self._runs_ = None, runs

    def _runs(self) -> list[tuple[int, str]]:
        """Contiguous runs of known lines: (first line number, their text joined)."""
        if self._lines is None:
            return self._runs_ or []
        out: list[tuple[int, list[str]]] = []
        lines = self._lines
        for n in sorted(lines):
            if out and n == out[-1][0] + len(out[-1][1]):
                out[-1][1].append(lines[n])
            else:
                out.append((n, [lines[n]]))
        runs = [(s, "\n".join(ls)) for s, ls in out]
        self._lines, self._runs_ = None, runs
        return runs

    def head(self, n: int) -> str:
        """:meth:`text` cut to ``n`` lines, what a Read with ``limit`` n returns: the first ``n`` lines the
        log showed (a file seen only further down comes back at that size, not invented)."""
        if not self.lines:
            return "\n".join((self.raw or "").split("\n")[:n])
        return "\n".join(f"{k:6d}\u2192{self.lines[k]}" for k in sorted(self.lines)[:n])

    def text(self) -> str:
        if not self.lines:
            return self.raw or ""
        return "\n".join(f"{n:6d}\u2192{self.lines[n]}" for n in sorted(self.lines))

    def content(self, n: int | None = None) -> str:
        """The file's text as the log showed it (its first ``n`` lines: None, all), without the Read tool's
        line numbers (what its size check counts)."""
        if not self.lines:
            return "\n".join((self.raw or "").split("\n")[:n]) if n is not None else self.raw or ""
        return "\n".join(self.lines[k] for k in sorted(self.lines)[:n])


@dataclass
class ReattachTracker:
    """Files read or edited, skills invoked (with their bodies), the latest todo list and plan, as
    the conversation goes (main context only: the caller skips sub-agent spans)."""

    reads: ReadTracker = field(default_factory=ReadTracker)
    files: dict[str, FileView] = field(default_factory=dict)
    todo: Any = None
    plan: str | None = None
    _skill_pending: str | None = None   # a Skill result came: its body is the next meta message
    _pending: dict[str, tuple[str, str, dict]] = field(default_factory=dict)   # tool_use id -> (tool, path, input)
    _n: int = 0
    in_state: set[str] = field(default_factory=set)   # the files in Claude Code's readFileState: those a compaction chooses from
    whole: set[str] = field(default_factory=set)      # read whole or written since the last compaction (what a resume rebuilds from)

    def new_launch(self, rebuilds: bool) -> None:
        """A resumed launch, a new process: Claude Code's readFileState is process memory. Before 2.0.59
        the REPL began it empty but for the todo file; from 2.0.59 it rebuilds it from the conversation's
        full Reads and Writes (``rebuilds``; :data:`ReattachCaps.resume_rebuilds`). What the log showed of
        every file is kept either way: the file on disk is still that, and a later read brings it back."""
        self.in_state = set(self.whole) if rebuilds else set()

    def compacted(self, reattached: set[str]) -> None:
        """After a compaction: the compact routine cleared readFileState and re-read the files it
        re-attached (a path reference is not read), so those are the files the next one can choose from."""
        self.in_state = {p for p in self.in_state if p in reattached}
        self.whole = set()   # the conversation a resume rebuilds from begins at the summary

    def _view(self, path: str) -> FileView:
        v = self.files.get(path)
        if v is None:
            v = self.files[path] = FileView()
        return v

    def on_assistant(self, message: Message) -> None:
        self.reads.on_assistant(message)
        for b in message.blocks:
            if b.type != "tool_use":
                continue
            inp = b.input if isinstance(b.input, dict) else {}
            if b.name in TODO_TOOLS and "todos" in inp:
                self.todo = inp["todos"]
            elif b.name in PLAN_TOOLS and isinstance(plan := inp.get("plan", b.meta.get(LOGGED_ONLY, {}).get("plan")), str):
                self.plan = plan   # Claude Code 2.0.54+ logs the plan file's content there, unsent (trace.ToolUseContent.logged_only)
            elif b.name in self.reads.read_tools + EDIT_TOOLS + WRITE_TOOLS and isinstance(inp.get("file_path"), str):
                self._pending[b.id or ""] = (b.name, inp["file_path"], dict(inp))

    def on_results(self, message: Message, index: int) -> None:
        pending = [self.reads._pending.get(b.id) for b in message.blocks if b.type == "tool_result"]
        self.reads.on_results(message, index)
        skills = [key for kind, key in filter(None, pending) if kind == "skill"]
        self._skill_pending = skills[-1] if skills else None
        for b in message.blocks:
            if b.type != "tool_result" or b.id not in self._pending:
                continue
            tool, path, inp = self._pending.pop(b.id)
            if b.is_error:
                continue
            self.file_event(tool, path, inp, b.text, b.token_factor)

    def file_event(self, tool: str, path: str, inp: dict, result: str = "", token_factor: float = 1.0) -> None:
        """A Read (its result, with the size factor the log measured for it), an Edit or a Write of
        ``path`` that succeeded."""
        v = self._view(path)
        self._n += 1
        v.accessed = self._n
        self.in_state.add(path)
        partial = tool not in WRITE_TOOLS and ("offset" in inp or "limit" in inp)
        if tool not in EDIT_TOOLS and not partial:   # a Write or a whole Read: what a resume rebuilds
            self.whole.add(path)
        if tool in WRITE_TOOLS:
            v.write(str(inp.get("content", "")))
            v.modified = self._n
        elif tool in EDIT_TOOLS:
            for e in edits_of(tool, inp):
                v.edit(e["old_string"], e["new_string"], bool(e.get("replace_all")))
            v.modified = self._n
        else:
            v.read(result, partial=partial)
            v.token_factor = token_factor

    def on_user(self, message: Message) -> None:
        if self._skill_pending and message.meta.get("meta_record"):
            name = self._skill_pending
            self.reads.skills.pop(name, None)
            self.reads.skills[name] = message.text   # the skill's body, what the model read
        self._skill_pending = None
        path = message.meta.get("read_file")
        if isinstance(path, str):   # a file the agent attached itself (an @-mention): Claude Code tracks it as read
            self.file_event("Read", path, {}, message.text, message.blocks[0].token_factor if message.blocks else 1.0)

    def recent_files(self, order: str = "modified") -> list[tuple[str, FileView]]:
        """Most recent first: modified in the session (by last Edit/Write), then only read (by
        last read); ``order="read"``: by last access whatever it was."""
        if order == "read":
            key = lambda kv: kv[1].accessed  # noqa: E731
        else:
            key = lambda kv: (kv[1].modified is not None, kv[1].modified or kv[1].accessed)  # noqa: E731
        return sorted(((p, v) for p, v in self.files.items() if v.known() and p in self.in_state), key=key, reverse=True)


def _clip(text: str, max_chars: int) -> str:
    return text if len(text) <= max_chars else text[:max_chars] + "\n[... truncated]"


def reattachments(tracker: ReattachTracker, caps: ReattachCaps = ReattachCaps(),
                  count: Callable[[str], int] | None = None) -> list[Message]:
    """The meta user messages Claude Code adds after the summary, in its order: files, plan,
    skills, todo list (each message's ``reattached`` meta says which, a file's ``path`` which file).
    Sizes are budgeted in estimated tokens (``caps.chars_per_token``). The tracker then holds only the
    files re-attached whole or in part (:meth:`ReattachTracker.compacted`)."""
    out: list[Message] = []
    budget = caps.total_tokens * caps.chars_per_token
    used = 0.0
    for path, view in tracker.recent_files(caps.order)[:caps.max_files]:
        over = caps.over(view.content(), count)
        if over and caps.over_cap == "reference":   # docs: a path reference without its content
            out.append(Message.user(f"<system-reminder>\n{REFERENCE.format(path=path)}\n</system-reminder>",
                                    origin="reattach", reattached="file_reference", meta_record=True))
            continue
        if over and (caps.over_cap == "none" or caps.over(view.content(caps.head_lines), count)):
            continue   # "head": the bundles re-read the first head_lines lines under the same check; over it too, nothing
        text = view.head(caps.head_lines) if over else view.text()
        if used + len(text) > budget:   # the bundles: a file that does not fit is skipped, the next one tried
            continue
        used += len(text)
        out.append(Message("user", (Block("text", read_attachment(path, text), token_factor=view.token_factor),),
                           {"origin": "reattach", "reattached": "file", "path": path, "meta_record": True}))
    if tracker.plan:
        out.append(Message.user(f"<system-reminder>\nA plan exists for this session:\n{tracker.plan}\n</system-reminder>",
                                origin="reattach", reattached="plan", meta_record=True))
    left = int(caps.skills_total_tokens * caps.chars_per_token)
    each = int(caps.skill_tokens * caps.chars_per_token)
    skills = []
    for name, body in reversed(tracker.reads.skills.items()):   # most recent first: the oldest are dropped
        if left <= 0:
            break
        kept = _clip(body, min(each, left))
        left -= len(kept)
        skills.append(f"### Skill: {name}\n{kept}")
    if skills:
        out.append(Message.user("<system-reminder>\nThe following skills were invoked in this session:\n\n"
                                + "\n\n".join(skills) + "\n</system-reminder>", origin="reattach", reattached="skills",
                                meta_record=True))
    tracker.compacted({m.meta["path"] for m in out if m.meta.get("reattached") == "file"})
    if tracker.todo:
        out.append(Message.user("<system-reminder>\nYour todo list:\n" + json.dumps(tracker.todo, ensure_ascii=False)
                                + "\n</system-reminder>", origin="reattach", reattached="todo", meta_record=True))
    return out
