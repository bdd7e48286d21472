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

from pydantic import Field, model_validator

from harness.conversation import History
from strategies.base import CallInfo
from strategies.openhands import KEEP_FIRST, MAX_SIZE, halving_cut
from strategies.templates import PeerConfig, ThresholdCompactor


class AmortizedForgettingConfig(PeerConfig):
    max_size: int = Field(MAX_SIZE, ge=2, le=1_000_000, description="forget when the view holds more events than this")
    keep_first: int = Field(KEEP_FIRST, ge=0, le=1_000_000, description="first events always kept")

    @model_validator(mode="after")
    def _half(self):
        if self.keep_first >= self.max_size // 2:
            raise ValueError(f"keep_first ({self.keep_first}) must be less than half of max_size ({self.max_size})")
        return self


class AmortizedForgetting(ThresholdCompactor):
    name = "amortized_forgetting"
    summary = "OpenHands AmortizedForgettingCondenser: over max_size events keep first + newest half, no summary"
    Config = AmortizedForgettingConfig
    check_params = {"max_size": 24, "keep_first": 4}  # the property kit's sessions are ~30 steps long

    def __init__(self, config, env) -> None:
        super().__init__(config, env)
        self.head_len: int | None = None

    def on_session_start(self, session: str, resume: bool, now: float) -> None:
        super().on_session_start(session, resume, now)
        if not resume:
            self.head_len = None

    def should_compact(self, call: CallInfo) -> bool:
        return len(self.history) > self.config.max_size

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
