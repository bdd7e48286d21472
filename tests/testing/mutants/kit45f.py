"""Issue #45, sixth round: what a strategy drops without summarising it. An off-by-one between the slice
its summariser is given and what its compaction drops (blind sets: aider's last answer dropped) loses a
message and nothing else showed it; a strategy whose compactions summarise what they drop now declares it
(``summarises_dropped``) and the kit holds it to that (``summarised``). And blind set 19's: a protection
budget of the newest tool output counted in characters where it is in tokens (``keeps_recent_tool_chars``);
and blind sets 19 and 20's (written apart): Codex's previous handoff kept among the user messages
(``keeps_user_messages``). Each beside its correct twin, the registered base."""

from __future__ import annotations

from ctxsim.harness.model.conversation import History, Message
from ctxsim.strategies.codex import Codex
from ctxsim.strategies.opencode import OpenCode

from tests.testing.mutants.kit45e import _seen_as


class CodexSummarySkipsFirstExchange(Codex):
    """The summariser is given the history from its third message on (an index meant to skip a previous
    summary and its acknowledgement, applied to every compaction, moved on to a pair-safe start), but the
    compaction replaces all of it: the first exchange is summarised by nothing."""

    name = "codex_summary_skips_first_exchange"

    def _summarise(self):
        full = self.history
        msgs = list(full)
        k = 2
        while k < len(msgs) and msgs[k].has_tool_result:
            k += 1
        if k < len(msgs):
            self.history = History(msgs[k:])
        try:
            return super()._summarise()
        finally:
            self.history = full


class OpenCodeProtectInCharacters(OpenCode):
    """The prune walk's running total kept in characters against ``prune_protect_tokens`` (a token budget):
    a quarter of the tool output it promises to protect stays whole, the rest is pruned."""

    name = "opencode_protect_in_characters"

    def prune(self) -> int:
        c = _seen_as(self, prune_protect_tokens=max(1, self.config.prune_protect_tokens // 4))
        try:
            return super().prune()
        finally:
            self.__dict__["config"] = c


class CodexKeepsOldHandoff(Codex):
    """The user messages kept after a compaction are taken as every user message without tool results, the
    previous handoff summary among them: from the second compaction on it is re-sent as if the user had
    typed it, beside the new one."""

    name = "codex_keeps_old_handoff"

    def set_history(self, history):
        msgs = list(history)
        if msgs and msgs[-1].meta.get("origin") == "summary":
            old = [m for m in self.history if m.meta.get("origin") == "summary"]
            msgs[-1:-1] = [Message.user(m.text) for m in old]
        super().set_history(History(msgs))
