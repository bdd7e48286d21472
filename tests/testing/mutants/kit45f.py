"""Issue #45, sixth round: what a strategy drops without summarising it. An off-by-one between the slice
its summariser is given and what its compaction drops (blind sets: aider's last answer dropped) loses a
message and nothing else showed it; a strategy whose compactions summarise what they drop now declares it
(``summarises_dropped``) and the kit holds it to that (``summarised``). Beside its correct twin, the
registered base."""

from __future__ import annotations

from ctxsim.harness.model.conversation import History
from ctxsim.strategies.codex import Codex


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
