"""Issue #45, seventh round: a strategy that does less than its configuration says. Blind sets 21 and 22,
written apart, both measured context_editing's trigger on the prompt an earlier clearing left instead of the
whole prompt the API is sent: once cleared below the trigger it stops clearing the newer results, in episodes
where the API clears each request (``clears_above``). Each beside its correct twin, the registered base."""

from __future__ import annotations

from ctxsim.strategies.context_editing import ContextEditing


class ContextEditingTriggerOnView(ContextEditing):
    """The trigger is read from the view's characters (what the last clearing left) where the server measures
    the whole prompt: after a clearing the prompt falls under the trigger, and the results that come after go
    whole until it grows back."""

    name = "context_editing_trigger_on_view"

    def _clear_thinking(self) -> int:
        n = super()._clear_thinking()
        # the trigger subtracts _thinking_chars from the whole history's characters: made to leave the view's
        self._whole_thinking = self._thinking_chars
        self._thinking_chars = self._hist_chars - self._view_chars
        return n

    def _per_request(self):
        try:
            return super()._per_request()
        finally:
            self._thinking_chars = getattr(self, "_whole_thinking", self._thinking_chars)
