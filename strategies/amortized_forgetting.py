"""amortized_forgetting: OpenHands' rolling halving without a summary.

Source: All-Hands-AI/OpenHands, ``openhands/memory/condenser/impl/amortized_forgetting_condenser.py``
(``AmortizedForgettingCondenser``, read 2025): when the view holds more than ``max_size`` events,
keep the first ``keep_first`` and the newest ``max_size // 2 − keep_first``, forget the rest with
nothing in their place. The class defaults are ``max_size`` 100 and ``keep_first`` 0; the defaults
here are the production pipeline's values for the summarising condenser (120 and 4) so that
``openhands`` and this strategy differ only by the summary.

One event is one message (see ``strategies/openhands.py``); the cut is pair-safe (the same
:func:`ctxsim.strategies.openhands.halving_cut`). No side call, so cutting never fails.

When the API rejects a request as too long, OpenHands asks the condenser to condense now: the
agent controller turns a context-window error into a ``CondensationRequestAction`` when
``enable_history_truncation`` is on (its default, ``openhands/core/config/agent_config.py``), and
``AmortizedForgettingCondenser.should_condense`` honours an unhandled request "only if possible"
(``_can_condense``: something would be forgotten), OpenHands/OpenHands @ 2796526. Here: a forced
halving and the call is sent again; when nothing is left to forget, OpenHands would loop on the
error until its stuck detector ends the session — the run gives up at once. Other rejections
(pairing, breakpoints) are not something condensing repairs: it gives up.
"""

from __future__ import annotations

from ctxsim.harness.model.conversation import History
from ctxsim.strategies.base import CallInfo, Rejection
from ctxsim.strategies.openhands import Halving, HalvingConfig, halving_cut
from ctxsim.strategies.templates import UsageAnchor


class AmortizedForgetting(Halving):
    name = "amortized_forgetting"
    summary = "OpenHands AmortizedForgettingCondenser: over max_size events keep first + newest half, no summary"
    Config = HalvingConfig
    on_rejection = ("prompt too long: forced halving and the call is sent again, until nothing is left to forget "
                    "(OpenHands: context-window error -> CondensationRequest, enable_history_truncation default on); "
                    "other rejections end the session")

    @classmethod
    def compaction_tail(cls, config: HalvingConfig, window: int, max_output_tokens: int) -> tuple:
        """``halving_cut``: the newest ``max_size // 2 − keep_first`` events (one a message), one fewer where the cut
        moves forward off a message of results; after the kept first events, with nothing in place of the rest."""
        keep = max(0, config.max_size // 2 - config.keep_first)
        return ((max(0, keep - 1), keep, "messages"),)

    def on_rejected(self, rejection: Rejection, call: CallInfo) -> bool:
        return "overflow" in rejection.reasons and self.compact_now(call)

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
        new = History([*msgs[:head], *msgs[start:]])
        # the anchored estimate scaled by the new request's share of the old one, both from characters, as
        # openhands does (known finding #18): subtracting the forgotten events at chars_per_token from an
        # anchor that counted them at their real density ran 62% high on ~2.9 chars/token output (kit #29)
        self.set_history(new, estimate=round(est * self._chars(new) / max(1, self._chars(msgs))) if known else None)
        self.counters.extra["events_forgotten"] += len(removed)
        return True

    def _chars(self, msgs) -> int:
        """The request's tokens from characters alone (system, tools and these messages)."""
        return UsageAnchor(self.config.chars_per_token).estimate(list(msgs), self.env.system, self.env.tools)
