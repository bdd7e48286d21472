"""One-spot bugs in the guide's example strategy (docs/examples/keep_recent.py), each a subclass
that changes one hook, and the correct twins where the twin is not KeepRecent itself."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from ctxsim.harness.llm.services import SUMMARY, CallSpec, SideCallFailed
from ctxsim.harness.model.conversation import Block, Breakpoint, History, Message, Request, SystemPrompt
from ctxsim.strategies.base import CallInfo

EXAMPLE = Path(__file__).resolve().parents[3] / "docs" / "examples" / "keep_recent.py"


def _load():
    if "keep_recent" in sys.modules and hasattr(sys.modules["keep_recent"], "KeepRecent"):
        return sys.modules["keep_recent"]
    spec = importlib.util.spec_from_file_location("keep_recent", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules["keep_recent"] = module
    spec.loader.exec_module(module)
    return module


kr = _load()
KeepRecent = kr.KeepRecent


# --- the Messages API's rules -----------------------------------------------------------------------

class BreakpointPastEnd(KeepRecent):
    """The last marker one past the end ('after the last message'): it names no block."""

    def build_request(self, call: CallInfo) -> Request:
        req = super().build_request(call)
        n = len(req.messages)
        return replace(req, breakpoints=(Breakpoint("system"), Breakpoint(n))) if n else req


class EmptyNoteBlock(KeepRecent):
    """A note of how many results were truncated, added after the results: an empty text block
    when none was."""

    def note(self, cut: int) -> Block | None:
        return Block.text_block(f"[{cut} result(s) truncated to fit]" if cut else "")

    def on_tool_results(self, message: Message) -> None:
        super().on_tool_results(message)
        last = self.history[-1]
        note = self.note(sum(1 for b in last.blocks if b.text.endswith("characters truncated]")))
        if note is not None:
            self.history = self.history.replace_at(len(self.history) - 1,
                                                   Message(last.role, (*last.blocks, note), last.meta))


class NoteOnlyWhenCut(EmptyNoteBlock):
    """Twin: the note only when something was cut."""

    def note(self, cut: int) -> Block | None:
        return Block.text_block(f"[{cut} result(s) truncated to fit]") if cut else None


class TruncationLosesIsError(KeepRecent):
    """The truncated result is rebuilt from its id and text: ``is_error`` is lost."""

    def on_tool_results(self, message: Message) -> None:
        limit = self.config.max_result_chars // max(1, len(message.blocks))
        blocks = tuple(Block.tool_result(b.id or "", kr.truncate(b.text, limit)) if len(b.text) > limit else b
                       for b in message.blocks)
        self.history = self.history.append(Message("user", blocks, message.meta))


class ThinkingStripped(KeepRecent):
    """Thinking dropped from every answer as it enters history ('the model never re-reads it'),
    the open tool loop's included."""

    def on_response(self, message: Message, usage) -> None:
        blocks = tuple(b for b in message.blocks if b.type != "thinking")
        super().on_response(Message(message.role, blocks, message.meta) if blocks else message, usage)


class ThinkingStrippedWhenClosed(KeepRecent):
    """Twin: thinking dropped at a cut (a declared rewrite) from every answer but the last, the
    only one the API wants it back on (the open tool loop's)."""

    def cut(self, target: int) -> None:
        super().cut(target)
        if not self.rewrote:
            return
        msgs = list(self.history)
        last = max((i for i, m in enumerate(msgs) if m.role == "assistant"), default=-1)
        out = []
        for i, m in enumerate(msgs):
            if i != last and m.role == "assistant" and any(b.type == "thinking" for b in m.blocks):
                blocks = tuple(b for b in m.blocks if b.type != "thinking")
                m = Message(m.role, blocks, m.meta) if blocks else m
            out.append(m)
        self.history = History(out)


class ConclusionInjected(KeepRecent):
    """A sub-agent's conclusion added to the parent's history when its span ends, while the
    parent's Task call still waits for its result."""

    def on_subtask_end(self, id: str, conclusion: str) -> None:
        super().on_subtask_end(id, conclusion)
        self.history = self.history.append(Message.user(f"[sub-agent {id} finished] {conclusion}", origin="subagent"))


class ConclusionAfterResults(KeepRecent):
    """Twin: the conclusion noted after the Task results, in the same user turn."""

    def __init__(self, config, env) -> None:
        super().__init__(config, env)
        self.notes: list[str] = []

    def on_subtask_end(self, id: str, conclusion: str) -> None:
        super().on_subtask_end(id, conclusion)
        self.notes.append(f"[sub-agent {id} finished] {conclusion}")

    def on_tool_results(self, message: Message) -> None:
        if self.notes and not self.in_isolated_subtask:
            notes, self.notes = self.notes, []
            message = Message(message.role, (*message.blocks, *(Block.text_block(n) for n in notes)), message.meta)
        super().on_tool_results(message)


# --- inputs, determinism, the clock -----------------------------------------------------------------

class PathNormaliser(KeepRecent):
    """Relative paths of the model's tool calls made absolute in place: the trace's own dicts."""

    def on_response(self, message: Message, usage) -> None:
        for b in message.blocks:
            p = (b.input or {}).get("file_path") if b.type == "tool_use" else None
            if isinstance(p, str) and not p.startswith("/"):
                b.input["file_path"] = "/repo/" + p  # type: ignore[index]
        super().on_response(message, usage)


class PathNormaliserCopy(KeepRecent):
    """Twin: the normalised call is a new block with a new input dict."""

    def on_response(self, message: Message, usage) -> None:
        blocks = []
        for b in message.blocks:
            p = (b.input or {}).get("file_path") if b.type == "tool_use" else None
            if isinstance(p, str) and not p.startswith("/"):
                b = Block.tool_use(b.id or "", b.name or "", {**b.input, "file_path": "/repo/" + p})
            blocks.append(b)
        super().on_response(Message(message.role, tuple(blocks), message.meta), usage)


def _day(now: float) -> str:
    return datetime.fromtimestamp(now, UTC).date().isoformat()


class DateInSystemPrompt(KeepRecent):
    """Today's date (from the session clock) in the system prompt: the cached prefix changes at
    midnight, undeclared."""

    def build_request(self, call: CallInfo) -> Request:
        req = super().build_request(call)
        system = SystemPrompt((*req.system.blocks, Block.text_block(f"Today's date: {_day(call.now)}")),
                              req.system.opaque_tokens)
        return replace(req, system=system)


class DateReminder(KeepRecent):
    """Twin: the date in a reminder after the last message of each request (never in history)."""

    def build_request(self, call: CallInfo) -> Request:
        req = super().build_request(call)
        note = Message.user(f"<system-reminder>Today's date: {_day(call.now)}</system-reminder>", origin="reminder")
        return replace(req, messages=History([*req.messages, note]))


# --- caching ------------------------------------------------------------------------------------------

class RewriteFlagStuck(KeepRecent):
    """The rewrite flag set at the first cut and never reset: every later request declares a cache
    break it did not make."""

    stuck = False

    def build_request(self, call: CallInfo) -> Request:
        req = super().build_request(call)
        self.stuck = self.stuck or req.rewrite
        return replace(req, rewrite=self.stuck)


# --- resume, estimate, crash --------------------------------------------------------------------------

class ForgetsResumeRepair(KeepRecent):
    """on_session_start rewritten without the base's N-TRANS-5 repair."""

    def on_session_start(self, session: str, resume: bool, now: float) -> None:
        if not resume:
            self.history = History()


class EstimateInCharacters(KeepRecent):
    """The estimate forgets to divide by characters per token."""

    def tokens(self, messages) -> int:
        return sum(m.chars + 40 for m in messages)


class FirstLineTitle(KeepRecent):
    """Each result's first line kept as its title: an empty result has none."""

    def title(self, text: str) -> str:
        return text.splitlines()[0]

    def on_tool_results(self, message: Message) -> None:
        blocks = tuple(b.with_text(b.text, title=self.title(b.text)[:80]) for b in message.blocks)
        super().on_tool_results(Message(message.role, blocks, message.meta))


class FirstLineTitleGuarded(FirstLineTitle):
    """Twin: no title for an empty result."""

    def title(self, text: str) -> str:
        return (text.splitlines() or [""])[0]


# --- path back: a summary that summarises -------------------------------------------------------------

SPILL_DIR = "spill"


class SummarisingKeepRecent(KeepRecent):
    """Twin: large results go to files (a placeholder names the file; read-backs of those files stay
    inline), and a cut replaces what it drops with a summary made by a side call over it, so it
    promises a path back."""

    keeps_path_back = True

    def on_tool_results(self, message: Message) -> None:
        limit = self.config.max_result_chars // max(1, len(message.blocks))
        blocks = []
        for b in message.blocks:
            if len(b.text) > limit and not self.is_readback(b.id):
                path = Path(self.env.session_dir) / SPILL_DIR / f"{b.id}.txt"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(b.text, encoding="utf-8", errors="surrogatepass")
                b = b.with_text(f"[{len(b.text):,} characters saved to {path}; read that file for them]")
            blocks.append(b)
        self.history = self.history.append(Message("user", tuple(blocks), message.meta))

    def is_readback(self, tool_use_id) -> bool:
        for m in reversed(list(self.history)[-2:]):
            for b in m.blocks:
                if b.type == "tool_use" and b.id == tool_use_id:
                    return f"{SPILL_DIR}/" in str(dict(b.input or {}))
        return False

    def summary(self, dropped: list[Message]) -> Message | None:
        spec = CallSpec(kind=SUMMARY, instructions="Summarise the conversation above so work can continue.",
                        max_output_tokens=max(100, self.env.window // 20))
        try:
            res = self.env.services.call(Request(self.env.system, self.env.tools, History(dropped)), spec)
        except SideCallFailed:
            return None
        return Message.user(f"Summary of the earlier conversation:\n{res.text}", origin="summary")

    def cut(self, target: int) -> None:
        msgs = list(self.history)
        points = kr.cut_points(msgs)
        if not points:
            return
        start = next((i for i in points if self.tokens(msgs[i:]) <= target), points[-1])
        summary = self.summary(msgs[:start])
        if summary is None:
            return
        self.history = History([summary, *msgs[start:]])
        self.rewrote = True


class NoticeCalledSummary(SummarisingKeepRecent):
    """The cut's notice tagged as a summary, with no summary made: what it dropped has no path back."""

    def summary(self, dropped: list[Message]) -> Message | None:
        return Message.user(kr.NOTICE.format(n=len(dropped)), origin="summary")


# --- the reaction to a refused request (on_rejected) ------------------------------------------------

class GivesUpOnOverflow(KeepRecent):
    """No reaction to a prompt-too-long (the base's default): an overflow its estimate did not
    foresee ends the session, though it claims to manage the window."""

    def on_rejected(self, rejection, call) -> bool:
        return False


class RetriesUnchanged(KeepRecent):
    """'Retry on any error': the same request sent again until the attempts run out."""

    def on_rejected(self, rejection, call) -> bool:
        return True


class DropsToolOutput(KeepRecent):
    """Retries with the newest tool output removed (Goose's reaction) by dropping the results
    message itself: the calls it answered are left without results."""

    def on_rejected(self, rejection, call) -> bool:
        if "overflow" not in rejection.reasons or not len(self.history) or not self.history[-1].has_tool_result:
            return super().on_rejected(rejection, call)
        self.history = self.history.truncate(len(self.history) - 1)
        self.rewrote = True
        return True


class BlanksToolOutput(DropsToolOutput):
    """Twin: the newest results replaced by a short note, each kept with its id and flag."""

    def on_rejected(self, rejection, call) -> bool:
        if "overflow" not in rejection.reasons or not len(self.history) or not self.history[-1].has_tool_result:
            return KeepRecent.on_rejected(self, rejection, call)
        last = self.history[-1]
        blocks = tuple(b.with_text("[output removed: the request was too long]") if b.type == "tool_result" else b
                       for b in last.blocks)
        if all(a.text == b.text for a, b in zip(blocks, last.blocks)):
            return KeepRecent.on_rejected(self, rejection, call)
        self.history = self.history.replace_at(len(self.history) - 1, Message(last.role, blocks, last.meta))
        self.rewrote = True
        return True


# --- files -----------------------------------------------------------------------------------------

class CutLogInTemp(KeepRecent):
    """Each cut noted in a log file at a fixed path in the system's temporary directory, with plain
    ``open`` (not the files layer that refuses a path outside the run): every run (a sweep's parallel
    ones) appends to the same file, which outlives them all."""

    def cut(self, target: int) -> None:
        import tempfile

        super().cut(target)
        if self.rewrote:
            with open(Path(tempfile.gettempdir()) / "ctxsim-mutant-cuts.log", "w") as f:
                f.write(f"cut to {target} tokens\n")
