"""roo_code: Roo Code's context management: condense to a fresh start, else hide half the messages.

Source: RooCodeInc/Roo-Code **v3.52.1**: ``src/core/context-management/index.ts`` (``manageContext``,
``truncateConversation``, ``TOKEN_BUFFER_PERCENTAGE``), ``src/core/condense/index.ts``
(``summarizeConversation``, ``getMessagesSinceLastSummary``, ``SUMMARY_PROMPT``), ``src/core/task/
Task.ts`` (``attemptApiRequest``, ``handleContextWindowExceededError``,
``FORCED_CONTEXT_REDUCTION_PERCENT``, ``MAX_CONTEXT_WINDOW_RETRIES``), ``src/core/webview/
ClineProvider.ts`` (``autoCondenseContext`` true, ``autoCondenseContextPercent`` 100) and
``packages/types/src/providers/anthropic.ts`` (``ANTHROPIC_DEFAULT_MAX_TOKENS`` 8,192):

* before each request the context is the last request's tokens plus the newest message's;
  allowed = 0.9 × window − the model's max tokens (8,192 by default);
* it condenses when the context reaches ``autoCondenseContextPercent`` (100) of the window or
  passes the allowed size: one call with Roo's own summary system prompt (not the agent's) on the
  messages since the last summary, their tool calls and results as text, and the condense
  instructions last; the summary ("## Conversation Summary …", with the first message's command
  blocks) becomes the **only** message sent from then on ("fresh start": the condensed messages are
  kept but hidden);
* if condensing fails (the call errs, the summary is empty, or it was condensed a moment ago) and
  the context is over the allowed size, half of the visible messages after the first (an even
  number) are hidden behind a "[Sliding window truncation: N messages hidden to reduce context]"
  marker;
* a request the API rejects for the context window is handled by ``manageContext`` at 75% (it
  condenses, or truncates) and retried, up to 3 times.

Not modelled: the folded file context (tree-sitter signatures of the files Roo read) and the
environment details a summary also carries; the hidden range moves forward when it would leave a
tool result without its call (Roo's own transcript has no such pair; the Messages API needs it).
"""

from __future__ import annotations

from ctxsim.harness.llm.services import SUMMARY, CallSpec
from ctxsim.harness.model.conversation import History, Message, Request, SystemPrompt, ToolSet
from ctxsim.strategies.base import CallInfo, Rejection, check_room
from ctxsim.strategies.templates import PeerConfig, ThresholdCompactor, tail_start, transcript_text
from pydantic import Field

TOKEN_BUFFER_PERCENTAGE = 0.1  # context-management/index.ts
DEFAULT_MAX_TOKENS = 8_192  # ANTHROPIC_DEFAULT_MAX_TOKENS
AUTO_CONDENSE_PERCENT = 100  # ClineProvider.ts autoCondenseContextPercent default
FORCED_PERCENT = 75  # Task.ts FORCED_CONTEXT_REDUCTION_PERCENT
MAX_CONTEXT_WINDOW_RETRIES = 3  # Task.ts
SUMMARY_SYSTEM = ("You are a helpful AI assistant tasked with summarizing conversations.")  # condense/index.ts SUMMARY_PROMPT (opening)
CONDENSE = """\
Summarize the conversation so far so that the work can continue from the summary alone: the \
previous conversation, the current work, key technical concepts, relevant files and code, problem \
solving, and pending tasks with the next steps (quote the latest instructions verbatim)."""  # the shape of supportPrompt CONDENSE


def allowed_tokens(window: int, max_tokens: int) -> float:
    """context-management/index.ts: ``contextWindow * (1 - TOKEN_BUFFER_PERCENTAGE) - maxTokens``."""
    return window * (1 - TOKEN_BUFFER_PERCENTAGE) - max_tokens


def hidden_count(visible: int, frac: float = 0.5) -> int:
    """``truncateConversation``: ``floor((visible − 1) × frac)`` rounded down to even."""
    raw = int((visible - 1) * frac)
    return raw - raw % 2


class RooCodeConfig(PeerConfig):
    auto_condense_percent: int = Field(AUTO_CONDENSE_PERCENT, ge=5, le=100, description="condense when the "
                                       "context reaches this percentage of the window (autoCondenseContextPercent)")
    auto_condense: bool = Field(True, description="condense (off: only the sliding-window truncation)")
    max_tokens: int = Field(DEFAULT_MAX_TOKENS, ge=0, le=1_000_000, description="the model's max tokens, "
                            "kept free below 0.9 × the window")
    summary_max_tokens: int = Field(8_192, ge=256, le=200_000, description="output bound of the condense call (assumed)")


class RooCode(ThresholdCompactor):
    name = "roo_code"
    summary = "Roo Code 3.52: at 0.9 × window − 8k condense to a summary-only fresh start; else hide half the messages"
    on_rejection = ("condenses (or truncates) at 75% and retries, up to 3 times (Roo Code Task.ts "
                    "handleContextWindowExceededError)")
    Config = RooCodeConfig

    def __init__(self, config, env) -> None:
        super().__init__(config, env)
        self.percent = config.auto_condense_percent
        check_room(self.name, env.window, int(self.allowed()), {"max_tokens": config.max_tokens})

    @classmethod
    def compacts_above(cls, config, window: int, max_output_tokens: int) -> int | None:
        """manageContext condenses once the context (the last request's tokens plus the newest message's) reaches
        ``autoCondenseContextPercent`` of the window or passes the allowed size (0.9 x window - max tokens)."""
        if not config.auto_condense:
            return None
        return int(min(window * config.auto_condense_percent / 100, allowed_tokens(window, config.max_tokens)))

    def allowed(self) -> float:
        return allowed_tokens(self.env.window, self.config.max_tokens)

    def should_compact(self, call: CallInfo) -> bool:
        if self.anchor.anchor is None:
            return False  # no request yet (manageContext runs from the second request on)
        prev = self.estimate() or 0
        return (self.config.auto_condense and 100 * prev / self.env.window >= self.percent) or prev > self.allowed()

    def compact(self, call: CallInfo) -> bool | None:
        prev = self.estimate() or 0
        if self.config.auto_condense and 100 * prev / self.env.window >= self.percent or prev > self.allowed():
            done = self._condense() if self.config.auto_condense else False
            if done:
                return True
        if prev > self.allowed():
            return self._truncate()
        return False if self.config.auto_condense else None

    def _condense(self) -> bool:
        msgs = list(self.history)
        last = max((i for i, m in enumerate(msgs) if m.meta.get("origin") == "summary"), default=0)
        since = msgs[last:]
        if len(since) <= 1 or (since[0].meta.get("origin") == "summary" and len(since) <= 2):
            self.counters.extra["condense_refused"] += 1  # "not enough messages" / "condensed recently"
            return False
        req = Request(SystemPrompt.of(SUMMARY_SYSTEM), ToolSet(), History([Message.user(transcript_text(since))]))
        res = self.side_call(req, CallSpec(kind=SUMMARY, instructions=CONDENSE, max_output_tokens=self.config.summary_max_tokens))
        if res is None or not res.text.strip():
            return False
        self.set_history(History([Message.user(f"## Conversation Summary\n{res.text.strip()}", origin="summary")]))
        return True

    def _truncate(self) -> bool | None:
        msgs = list(self.history)
        n = hidden_count(len(msgs))
        if n <= 0:
            return None
        end = tail_start(msgs, 1 + n, "forward")
        marker = Message.user(f"[Sliding window truncation: {end - 1} messages hidden to reduce context]",
                              origin="truncation_notice")
        kept = msgs[end:]
        new = [msgs[0], marker, *kept] if kept else [msgs[0], marker]
        # re-based as a share of the anchored estimate (templates.rebased_estimate): the hidden messages
        # taken away at chars_per_token from a usage that counted them at their true density left the
        # estimate 73% high after a truncation of dense output (issue #45; openhands' known finding #18)
        self.set_history(History(new), estimate=self.rebased_estimate(new))
        self.counters.extra["messages_hidden"] += end - 1
        self.counters.extra["truncations"] += 1
        return True

    def on_rejected(self, rejection: Rejection, call: CallInfo) -> bool:
        if "overflow" not in rejection.reasons or rejection.attempt > MAX_CONTEXT_WINDOW_RETRIES:
            return False
        self.percent = FORCED_PERCENT
        try:
            return self.compact_now(call)
        finally:
            self.percent = self.config.auto_condense_percent
