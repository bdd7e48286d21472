"""Deliberately broken strategies: each breaks one invariant the way real strategies have, and the
kit must catch it with a shrunk counterexample (test_mutants.py). Beside each, the correct
version, which the kit must pass, so a catch is not the kit failing everything."""

from __future__ import annotations

from pathlib import Path

from ctxsim.harness.model.conversation import Block, Breakpoint, History, Message, Request, Usage
from ctxsim.strategies.base import CallInfo, Strategy, StrategyConfig
from pydantic import Field


class _Base(Strategy):
    """Append-only with two breakpoints (system, last message), and resumes repaired (N-TRANS-5)
    so the mutants differ from correct only where they are meant to."""

    def on_session_start(self, session: str, resume: bool, now: float) -> None:
        super().on_session_start(session, resume, now)
        if resume and self.history and self.history[-1].role == "assistant" and self.history[-1].tool_use_ids():
            ids = self.history[-1].tool_use_ids()
            self.history = self.history.append(Message("user", tuple(
                Block.tool_result(i, "interrupted", is_error=True) for i in ids)))

    def breakpoints(self, history: History):
        return (Breakpoint("system"), Breakpoint(len(history) - 1)) if len(history) else ()


# --- a truncator that splits pairs ------------------------------------------------------------------

class KeepLastConfig(StrategyConfig):
    keep: int = Field(3, ge=1, description="messages kept")


class PairSplitter(_Base):
    """Keeps the last ``keep`` messages, cutting anywhere: the first kept message can be a
    tool_result whose tool_use was dropped. (As its twin, a kept part that starts with the model's
    message gets a user notice first: the one difference is the pair-safe cut.)"""

    name = ""  # not registered
    Config = KeepLastConfig

    def build_request(self, call: CallInfo) -> Request:
        msgs = list(self.history)
        if len(msgs) > self.config.keep:
            start = len(msgs) - self.config.keep
            head = [Message.user("[earlier messages dropped]")] if msgs[start].role == "assistant" else []
            self.history = History([*head, *msgs[start:]])
            self.rewrote = True
        return super().build_request(call)


class PairSafeTruncator(_Base):
    """The same, but the cut moves back until the kept part starts at a message that answers no
    call (N-COMP-7's rule), and a kept part that starts with the model's message gets a user
    notice first (the first message is the user's)."""

    name = ""
    Config = KeepLastConfig

    def build_request(self, call: CallInfo) -> Request:
        msgs = list(self.history)
        if len(msgs) > self.config.keep:
            start = len(msgs) - self.config.keep
            while start > 0 and msgs[start].has_tool_result:
                start -= 1
            if start > 0:
                head = [Message.user("[earlier messages dropped]")] if msgs[start].role == "assistant" else []
                self.history = History([*head, *msgs[start:]])
                self.rewrote = True
        return super().build_request(call)


# --- one that edits an old message without declaring it ----------------------------------------------

class SilentEditor(_Base):
    """Stamps the call number into the first message on every call (a 'current time' or
    'turn' line injected at the top), without declaring a rewrite: every cached prefix breaks."""

    name = ""

    def build_request(self, call: CallInfo) -> Request:
        if self.history:
            first = self.history[0]
            stamped = Message(first.role, (*first.blocks[:1], Block.text_block(f"(call {call.index})")), first.meta)
            self.history = self.history.replace_at(0, stamped)
        return super().build_request(call)


class DeclaredEditor(SilentEditor):
    """The same edit, declared: a known cost, not a bug."""

    def build_request(self, call: CallInfo) -> Request:
        req = super().build_request(call)
        return Request(req.system, req.tools, req.messages, req.breakpoints, req.kind, req.estimated_tokens,
                       rewrite=True)


# --- one that lets a request overflow while claiming to manage the window -----------------------------

class Overflower(_Base):
    """Append-only that claims manages_window."""

    name = ""
    manages_window = True


# --- one that re-spills a read-back ---------------------------------------------------------------------

class SpillConfig(StrategyConfig):
    threshold: int = Field(2_000, ge=1, description="results longer than this are spilled")


class Respiller(_Base):
    """Spills every result over ``threshold`` characters to tool-results/<id>.txt with a
    placeholder naming the file — read-backs of those files included (no N-SPILL-3 exemption)."""

    name = ""
    Config = SpillConfig
    exempt_readbacks = False

    def __init__(self, config, env) -> None:
        super().__init__(config, env)
        self.readbacks: set[str] = set()

    def on_response(self, message: Message, usage: Usage | None) -> None:
        for b in message.blocks:
            if b.type == "tool_use" and "tool-results/" in str(dict(b.input or {})):
                self.readbacks.add(b.id or "")
        super().on_response(message, usage)

    def on_tool_results(self, message: Message) -> None:
        blocks = []
        for b in message.blocks:
            if len(b.text) > self.config.threshold and not (self.exempt_readbacks and b.id in self.readbacks):
                path = Path(self.env.session_dir) / "tool-results" / f"{b.id}.txt"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(b.text, encoding="utf-8")
                b = b.with_text(f"<persisted-output>{len(b.text)} characters saved to {path}</persisted-output>")
            blocks.append(b)
        super().on_tool_results(Message("user", tuple(blocks), message.meta))


class Spiller(Respiller):
    """The same with read-backs exempt (N-SPILL-3)."""

    exempt_readbacks = True


class Tolerant(_Base):
    """Twin of Raiser: the same append-only strategy, which takes error results as they come."""

    name = ""


# --- one that raises -----------------------------------------------------------------------------------

class Raiser(_Base):
    """Raises on an error result (a strategy that assumed tools never fail)."""

    name = ""

    def on_tool_results(self, message: Message) -> None:
        if any(b.is_error for b in message.blocks):
            raise KeyError("exit_code")
        super().on_tool_results(message)
