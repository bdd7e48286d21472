"""cut_no_summary: NovaCode's triggers and verbatim tail, with the prefix dropped and no summary.

Source: the seed (``spec/novacode.md`` N-COMP-13, section 8): "cutting history at the boundary with
no summary is cheapest but loses what the tail cannot rebuild (task goal, earlier conclusions); it
is a competing strategy, not NovaCode". Everything but the summary is NovaCode's, imported from
``strategies/novacode`` so the two cannot drift apart:

* the estimate: the last reported usage plus 3.5 characters per token for what came after
  (N-COMP-5, ``accounting.TokenLedger``);
* the triggers: soft at window − 20,000 − 13,000, hard at window − 20,000 − 3,000 (N-COMP-1…3);
  with no side call there is nothing to fail, so no circuit breaker and both lines act alike;
* the tail: at least 10,000 tokens and 5 messages, at most 40,000 tokens, moved so no pair is split
  (N-COMP-6, N-COMP-7); give up below 2,000 tokens of prefix (N-COMP-8);
* the cache breakpoints: tools, system, last user message (N-CACHE-1).

The product is the verbatim tail alone, after a one-line notice (a user message, so the request
still opens with the user role; it says that something was removed, not what).

``manages_window`` is not claimed: like NovaCode's tail, the cut keeps history under the lines, but
with no spill layer a single tool result larger than the window still overflows.

When the API rejects a request as too long (the estimate ran low: 3.5 characters per token is an
estimator, not the truth), it cuts at once and sends the call again, as Claude Code, NovaCode's
closest real relative, compacts reactively on prompt-too-long and errors the turn when that fails
(reported; peers.md "Verified against current sources"). When no cut is possible (N-COMP-8: too
little prefix; or the tail alone is over the window) it gives up; other rejections end the session.
"""

from __future__ import annotations

from ctxsim.harness.model.conversation import History, Message, Usage
from ctxsim.strategies.base import CallInfo, Rejection, Strategy, StrategyConfig, check_room
from ctxsim.strategies.novacode import caching
from ctxsim.strategies.novacode import compaction as rules
from ctxsim.strategies.novacode.accounting import CHARS_PER_TOKEN, TokenLedger, message_tokens
from ctxsim.strategies.templates import answer_dangling
from pydantic import Field

NOTICE = "[Earlier conversation was removed to free context. No summary was kept.]"


class CutNoSummaryConfig(StrategyConfig):
    summary_reserve_tokens: int = Field(rules.SUMMARY_RESERVE_TOKENS, ge=0, le=1_000_000,
                                        description="effective window = window − this (N-COMP-1)")
    soft_margin_tokens: int = Field(rules.SOFT_MARGIN_TOKENS, ge=0, le=1_000_000,
                                    description="cut at effective window − this (N-COMP-2)")
    tail_min_tokens: int = Field(rules.TAIL_MIN_TOKENS, ge=0, le=1_000_000, description="tail holds at least this (N-COMP-6)")
    tail_min_messages: int = Field(rules.TAIL_MIN_MESSAGES, ge=0, le=10_000, description="... and this many messages (N-COMP-6)")
    tail_max_tokens: int = Field(rules.TAIL_MAX_TOKENS, ge=1, le=10_000_000, description="tail never above this (N-COMP-6)")
    min_prefix_tokens: int = Field(rules.MIN_COMPRESSIBLE_TOKENS, ge=0, le=1_000_000,
                                   description="do not cut a prefix smaller than this (N-COMP-8)")
    chars_per_token: float = Field(CHARS_PER_TOKEN, gt=0, le=20, description="estimate for messages after "
                                   "the usage anchor (N-COMP-5)")


class CutNoSummary(Strategy):
    name = "cut_no_summary"
    summary = "NovaCode's triggers and tail, prefix dropped with no summary (N-COMP-13)"
    Config = CutNoSummaryConfig
    on_rejection = ("prompt too long: cut at once (no summary) and send again; no cut possible: the session ends "
                    "(as Claude Code compacts reactively, reported; peers.md)")

    @classmethod
    def check_params(cls, window: int) -> dict:
        """For the property kit's small windows: NovaCode's absolute numbers scaled by window / 200k
        (read from ``cls.Config``, so a subclass is scaled alike)."""
        f = window / 200_000
        names = ("summary_reserve_tokens", "soft_margin_tokens", "tail_min_tokens", "tail_max_tokens", "min_prefix_tokens")
        return {n: max(1, int(cls.Config.model_fields[n].default * f)) for n in names}

    @classmethod
    def compaction_tail(cls, config: CutNoSummaryConfig, window: int, max_output_tokens: int) -> tuple:
        """N-COMP-6, as NovaCode's: at least ``tail_min_tokens`` and ``tail_min_messages``, never more than
        ``tail_max_tokens`` (the cap wins), after the notice of the cut; sized at the strategy's own estimate."""
        return ((config.tail_min_tokens, config.tail_max_tokens, "tokens"), (config.tail_min_messages, None, "messages"))

    @classmethod
    def compaction_tail_shortest(cls, config: CutNoSummaryConfig) -> bool:
        """The walk stops as soon as both minimums hold (N-COMP-6, N-COMP-7)."""
        return True

    def __init__(self, config: CutNoSummaryConfig, env) -> None:
        super().__init__(config, env)
        self.ledger = TokenLedger(config.chars_per_token)
        self.lines = rules.thresholds(env.window, config.summary_reserve_tokens, config.soft_margin_tokens)
        check_room(self.name, env.window, min(self.lines.effective, self.lines.hard),
                   {"summary_reserve_tokens": config.summary_reserve_tokens,
                    "soft_margin_tokens": config.soft_margin_tokens})

    def on_session_start(self, session: str, resume: bool, now: float) -> None:
        super().on_session_start(session, resume, now)
        if not resume:
            self.ledger.clear()

    def on_subtask_start(self, id: str, description: str, isolated: bool) -> None:
        super().on_subtask_start(id, description, isolated)
        if isolated:
            self.ledger.clear()

    def on_subtask_end(self, id: str, conclusion: str) -> None:
        isolated = self.in_isolated_subtask
        super().on_subtask_end(id, conclusion)
        if isolated:
            self.ledger.clear()

    def on_response(self, message: Message, usage: Usage | None) -> None:
        super().on_response(message, usage)
        self.ledger.record(usage, len(self.history))

    def estimate(self) -> int | None:
        return self.ledger.estimate(self.history, system=self.env.system, tools=self.env.tools)

    @classmethod
    def estimates_from_usage(cls, config: CutNoSummaryConfig) -> float:
        """The last usage plus what came after the answer at ``chars_per_token`` (NovaCode's N-COMP-5 anchor)."""
        return config.chars_per_token

    @classmethod
    def cache_marks(cls, config) -> tuple[str, ...]:
        return ("tools", "system", "last_user")   # NovaCode's three (N-CACHE-1)

    def breakpoints(self, history: History):
        return caching.breakpoints(history, tools=len(self.env.tools) > 0,
                                   system=bool(self.env.system.blocks) or self.env.system.opaque_tokens > 0)

    def on_user(self, message: Message) -> None:
        self.history, n = answer_dangling(self.history)
        self.counters.extra["synthetic_results"] += n
        super().on_user(message)

    def build_request(self, call: CallInfo):
        self.history, n = answer_dangling(self.history)
        self.counters.extra["synthetic_results"] += n
        if rules.trigger(self.estimate() or 0, self.lines) != "none":
            self._cut()
        return super().build_request(call)

    def on_rejected(self, rejection: Rejection, call: CallInfo) -> bool:
        return "overflow" in rejection.reasons and self._cut()

    def _cut(self) -> bool:
        """Drop the prefix before a pair-safe tail; False when N-COMP-8 says it is not worth it."""
        c = self.config
        msgs = list(self.history)
        tokens = [message_tokens(m, c.chars_per_token) for m in msgs]
        choice = rules.select_tail(tokens, [m.has_tool_result for m in msgs], c.tail_min_tokens,
                                   c.tail_min_messages, c.tail_max_tokens)
        if not rules.worth_compacting(choice, c.min_prefix_tokens) or choice.boundary == 0:
            self.counters.extra["cut_skipped_small_prefix"] += 1  # N-COMP-8: not worth a cache break
            return False
        self.counters.compactions_attempted += 1
        tail = msgs[choice.boundary:]
        self.history = History([Message.user(NOTICE, origin="placeholder"), *tail])
        self.rewrote = True
        self.ledger.clear()
        self.counters.compactions_succeeded += 1
        self.counters.extra["messages_dropped"] += choice.boundary
        return True
