"""One-spot bugs in peer strategies (strategies/*), each a subclass that changes one thing; the twin
is the peer itself."""

from __future__ import annotations

from contextlib import contextmanager

from ctxsim.harness.model.conversation import Block, Message
from ctxsim.strategies import codex as codex_module
from ctxsim.strategies import sliding_window as sliding_module
from ctxsim.strategies.codex import Codex
from ctxsim.strategies.context_editing import ContextEditing
from ctxsim.strategies.observation_masking import ObservationMasking
from ctxsim.strategies.sliding_window import SlidingWindow


@contextmanager
def _swapped(module, name: str, fn):
    """Swap one function of a peer's module for the duration of one call (one strategy runs at a
    time in this process)."""
    real = getattr(module, name)
    setattr(module, name, fn)
    try:
        yield real
    finally:
        setattr(module, name, real)


class MaskingUndeclared(ObservationMasking):
    """The masking step rewrites old observations but the declaration is lost ('the history
    setter already handles the cache')."""

    def prepare(self, call):
        super().prepare(call)
        self.rewrote = False


class ClearingLosesIsError(ContextEditing):
    """A cleared result is rebuilt without its ``is_error`` flag (in the request's edited view, the
    default ``per_request`` mode)."""

    def _clear_in_view(self, ids):
        freed = super()._clear_in_view(ids)
        view = self._view
        for i, m in enumerate(view):
            if m.role == "user" and any(b.meta.get("cleared") and b.is_error for b in m.blocks):
                blocks = tuple(Block.tool_result(b.id or "", b.text, False, cleared=True)
                               if b.meta.get("cleared") else b for b in m.blocks)
                view = view.replace_at(i, Message(m.role, blocks, m.meta))
        self._view = view
        return freed


class SlidingIntoResults(SlidingWindow):
    """The first kept message after the dropped range goes in as it is (Cline's
    ``ensureToolResultsFollowToolUse`` left out): it can start with the tool_result of a tool_use
    that was dropped, and the first answer's tool uses lose their results."""

    def compact(self, call, *args, **kw):
        def repair_first_kept(first_answer, kept):
            return kept

        with _swapped(sliding_module, "repair_first_kept", repair_first_kept):
            return super().compact(call, *args, **kw)


class CodexTrimsIntoResults(Codex):
    """Codex's drop-oldest retry of a too-long compaction call removes exactly one item, leaving
    the results of a dropped call at the front of the summary request."""

    def _summarise(self):
        def tail_start(messages, i, direction="forward"):
            return max(0, min(i, len(messages)))

        with _swapped(codex_module, "tail_start", tail_start):
            return super()._summarise()
