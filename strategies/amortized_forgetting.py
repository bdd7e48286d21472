"""amortized_forgetting: OpenHands' rolling halving without a summary.

Source: All-Hands-AI/OpenHands, ``openhands/memory/condenser/impl/amortized_forgetting_condenser.py``
(``AmortizedForgettingCondenser``, read 2025): when the view holds more than ``max_size`` events,
keep the first ``keep_first`` and the newest ``max_size // 2 − keep_first``, forget the rest with
nothing in their place. The class defaults are ``max_size`` 100 and ``keep_first`` 0; the defaults
here are the production pipeline's values for the summarising condenser (120 and 4) so that
``openhands`` and this strategy differ only by the summary.

One event is one message (see ``strategies/openhands.py``); the cut is pair-safe (the same
:func:`strategies.openhands.halving_cut`). No side call, so cutting never fails.
"""

from __future__ import annotations

from harness.conversation import History
from strategies.base import CallInfo
from strategies.openhands import Halving, HalvingConfig, halving_cut


class AmortizedForgetting(Halving):
    name = "amortized_forgetting"
    summary = "OpenHands AmortizedForgettingCondenser: over max_size events keep first + newest half, no summary"
    Config = HalvingConfig

    def compact(self, call: CallInfo) -> bool | None:
        c = self.config
        msgs = list(self.history)
        head, start = halving_cut(msgs, c.keep_first, c.max_size, False, self.head_len)
        if start <= head:
            return None
        self.head_len = head
        removed = msgs[head:start]
        est = self.estimate()
        known = self.anchor.anchor is not None and est is not None
        self.set_history(History([*msgs[:head], *msgs[start:]]),
                         estimate=est - self.tokens_of(removed) if known else None)
        self.counters.extra["events_forgotten"] += len(removed)
        return True
