"""cline: Cline's current auto-compaction (the Cline SDK that the 4.x extension runs).

Source: cline/cline **v4.1.12**, ``sdk/packages/core/src/extensions/context/compaction.ts``
(``createContextCompactionPrepareTurn``, ``resolveAutoRequestTargetTokens``), ``compaction-shared.ts``
(``COMPACTION_TRIGGER_RATIO``, ``CONTEXT_WINDOW_INPUT_RATIO``, ``DEFAULT_TARGET_RATIO``,
``DEFAULT_PRESERVE_RECENT_TOKENS``, ``DEFAULT_SUMMARY_MAX_OUTPUT_TOKENS``, ``TOOL_RESULT_CHAR_LIMIT``,
``findCutIndex``, ``buildSummaryMessage``), ``agentic-compaction.ts`` (``runAgenticCompaction``),
``basic-compaction.ts``, ``sdk/packages/shared/src/llms/tokens.ts`` (``CHARS_PER_TOKEN`` 3) and
``apps/vscode/src/sdk/sdk-compaction.ts`` (compaction enabled):

* the usable input is the model's input limit, or 0.9 × the context window when only the window is
  known; before each request, compact when the request's estimated input (its JSON characters / 3:
  Cline counts characters, not the last usage) reaches 0.9 × that;
* the target: half of the usable input once the conversation has 5 user–assistant pairs (and the
  model's output limit is under the input limit), else 0.7 × the trigger;
* the **agentic** strategy keeps the newest messages up to ``min(20,000, target)`` tokens (never
  cutting before the latest typed user prompt, nor between a tool call and its results), and a
  separate summariser call (its own system prompt: "Summarize the provided coding session into a
  concise continuation note with detailed next steps.", the conversation serialised as text, tool
  results cut to 2,000 characters, the previous summary folded in) writes a summary of at most
  4,096 tokens; it replaces the older messages as a "Context summary:" user message;
* a request the provider rejects for the context window is compacted by the deterministic
  **basic** strategy (no LLM call: recovery must not depend on another request) and retried once.
  The basic strategy here keeps the typed user prompts and the recent tail and puts a notice of the
  dropped tool work between them (Cline's version also keeps its last 3 assistant texts and file
  paths in that notice).

The older Cline context manager (drop half the messages over window − 40k) is ``sliding_window``.
"""

from __future__ import annotations

from collections import Counter

from ctxsim.harness.llm.services import SUMMARY, CallSpec
from ctxsim.harness.model.conversation import History, Message, Request, SystemPrompt, ToolSet
from ctxsim.strategies.base import CallInfo, Rejection
from ctxsim.strategies.gemini_cli import message_json_chars
from ctxsim.strategies.templates import (
    PeerConfig,
    ThresholdCompactor,
    chars_to_tokens,
    is_plain_user,
    prompt_chars,
    transcript_text,
)
from pydantic import Field

CONTEXT_WINDOW_INPUT_RATIO = 0.9  # compaction-shared.ts
COMPACTION_TRIGGER_RATIO = 0.9  # compaction-shared.ts
DEFAULT_TARGET_RATIO = 0.7  # compaction-shared.ts
LONG_CONVERSATION_TARGET_RATIO = 0.5  # compaction.ts (5+ user/assistant pairs)
DEFAULT_PRESERVE_RECENT_TOKENS = 20_000  # compaction-shared.ts
SUMMARY_MAX_OUTPUT_TOKENS = 4_096  # DEFAULT_SUMMARY_MAX_OUTPUT_TOKENS
TOOL_RESULT_CHAR_LIMIT = 2_000  # compaction-shared.ts
CHARS_PER_TOKEN = 3.0  # shared/src/llms/tokens.ts
SUMMARIZER_SYSTEM = "Summarize the provided coding session into a concise continuation note with detailed next steps."
_JSON_CHARS = object()  # key of the memoised fold of message JSON lengths


def _json_step(total: int, m: Message) -> int:
    return total + message_json_chars(m)


def safe_cut(messages: list[Message], preserve_tokens: int, cpt: float) -> int:
    """``findCutIndex``: walk back until ``preserve_tokens`` are kept, no later than the latest typed
    user prompt, then back to a safe boundary (an assistant message or a typed user message)."""
    total, cut = 0, len(messages)
    for i in range(len(messages) - 1, -1, -1):
        total += chars_to_tokens(message_json_chars(messages[i]), cpt)
        cut = i
        if total >= preserve_tokens:
            break
    if cut <= 0:
        return 0
    last_turn = max((i for i, m in enumerate(messages) if is_plain_user(m)), default=0)
    if last_turn > 0:
        cut = min(cut, last_turn)
    while cut > 0 and not (messages[cut].role == "assistant" or is_plain_user(messages[cut])):
        cut -= 1
    return cut


class ClineConfig(PeerConfig):
    chars_per_token: float = Field(CHARS_PER_TOKEN, gt=0, le=20, description="characters (of each message's "
                                   "JSON) per estimated token (Cline: 3)")
    max_input_tokens: int | None = Field(None, ge=1, le=100_000_000, description="the model's input limit; "
                                         "None: 0.9 × the window")
    trigger_ratio: float = Field(COMPACTION_TRIGGER_RATIO, gt=0, le=1, description="compact at this share of the usable input")
    preserve_recent_tokens: int = Field(DEFAULT_PRESERVE_RECENT_TOKENS, ge=0, le=10_000_000,
                                        description="newest tokens kept verbatim (capped by the target)")
    summary_max_tokens: int = Field(SUMMARY_MAX_OUTPUT_TOKENS, ge=256, le=200_000, description="summary output bound")
    tool_result_chars: int = Field(TOOL_RESULT_CHAR_LIMIT, ge=0, le=10_000_000,
                                   description="characters of a tool result in the summariser's input")


def usable_input(config: ClineConfig, window: int) -> float:
    """The model's input limit, or 0.9 × the window when only the window is known (compaction-shared.ts)."""
    return min(config.max_input_tokens, window) if config.max_input_tokens else window * CONTEXT_WINDOW_INPUT_RATIO


class Cline(ThresholdCompactor):
    name = "cline"
    summary = "Cline SDK: at 0.9 × usable input summarise all but the newest 20k tokens (4k summary); basic on overflow"
    on_rejection = ("the deterministic basic compaction, then one retry (Cline SDK compaction.ts overflowRecovery)")
    Config = ClineConfig

    @staticmethod
    def check_params(window: int) -> dict:
        return {"preserve_recent_tokens": int(DEFAULT_PRESERVE_RECENT_TOKENS * window / 200_000)}

    @classmethod
    def compaction_tail(cls, config: ClineConfig, window: int, max_output_tokens: int) -> tuple:
        """``findCutIndex``: the newest ``preserve_recent_tokens`` (at ``chars_per_token`` characters of each
        message's JSON) stay verbatim, more where the cut moves back to the latest typed prompt or a safe boundary;
        capped by the request's target, which is declared only where it leaves the preserve whole (the target is
        at least half the smaller of its two readings of the usable input less the request's overhead: the
        preserve within half of it)."""
        usable = usable_input(config, window)
        target = min(usable * LONG_CONVERSATION_TARGET_RATIO, usable * config.trigger_ratio * DEFAULT_TARGET_RATIO)
        if config.preserve_recent_tokens * 2 > target:
            return ()
        return ((config.preserve_recent_tokens * config.chars_per_token, None, "json_chars"),)

    @classmethod
    def compacts_above(cls, config: ClineConfig, window: int, max_output_tokens: int) -> int | None:
        """``createContextCompactionPrepareTurn``: compact when the request's estimate (its JSON characters / 3)
        reaches ``trigger_ratio`` of the usable input."""
        return int(usable_input(config, window) * config.trigger_ratio)

    @classmethod
    def summarises_before_latest_prompt(cls, config: ClineConfig) -> bool:
        """``findCutIndex`` never cuts past the latest typed user prompt (one that opens the history apart) nor into the
        preserved tokens: with only the previous summary before both the fold is empty and no summary is asked for
        (the request goes over the trigger)."""
        return True

    @classmethod
    def estimates_whole(cls, config: ClineConfig) -> tuple[float, str]:
        """Cline sizes the whole request, every time: ``JSON.stringify`` of the system prompt, tools and messages over
        ``chars_per_token`` (3), no usage anchor (:meth:`estimate`)."""
        return config.chars_per_token, "json_chars"

    @classmethod
    def estimates_from_usage(cls, config) -> None:
        return None   # whole, never anchored (estimates_whole)

    def usable(self) -> float:
        return usable_input(self.config, self.env.window)

    def estimate(self) -> int | None:
        h = self.history
        chars = prompt_chars(self.env.system, self.env.tools) + h.fold_through(len(h) - 1, _JSON_CHARS, 0, _json_step)
        return self.env.system.opaque_tokens + chars_to_tokens(chars, self.config.chars_per_token)

    def trigger(self) -> float:
        return self.usable() * self.config.trigger_ratio

    def target_messages(self) -> int:
        """``resolveAutoRequestTargetTokens`` less the request's overhead (system prompt, tools)."""
        usable, trigger = self.usable(), self.trigger()
        pairs, pending = 0, False
        for m in self.history:
            if m.role == "user":
                pending = True
            elif pending:
                pairs, pending = pairs + 1, False
        target = (int(usable * LONG_CONVERSATION_TARGET_RATIO)
                  if pairs >= 5 and self.env.max_output_tokens < usable else int(trigger * DEFAULT_TARGET_RATIO))
        target = max(1, min(target, int(usable), max(1, int(trigger) - 1)))
        overhead = self.env.system.opaque_tokens + chars_to_tokens(prompt_chars(self.env.system, self.env.tools),
                                                                   self.config.chars_per_token)
        return max(1, target - overhead)

    def should_compact(self, call: CallInfo) -> bool:
        return (self.estimate() or 0) >= self.trigger()

    def compact(self, call: CallInfo) -> bool | None:
        c = self.config
        msgs = list(self.history)
        if len(msgs) < 2:
            return None
        cut = safe_cut(msgs, min(c.preserve_recent_tokens, self.target_messages()), c.chars_per_token)
        if cut <= 0 or cut >= len(msgs):
            return None
        head = msgs[:cut]
        prev = next((i for i in range(len(head) - 1, -1, -1) if head[i].meta.get("origin") == "summary"), -1)
        previous = head[prev].text if prev >= 0 else None
        fold = head[prev + 1:]
        if not fold:
            return None
        request = ((f"Previous summary:\n{previous}\n\n" if previous else "")
                   + f"Conversation to fold into the summary:\n{transcript_text(fold, c.tool_result_chars)}")
        req = Request(SystemPrompt.of(SUMMARIZER_SYSTEM), ToolSet(), History([Message.user(request)]))
        res = self.side_call(req, CallSpec(kind=SUMMARY, max_output_tokens=c.summary_max_tokens))
        if res is None or not res.text.strip():
            return False
        self.set_history(History([Message.user(f"Context summary:\n\n{res.text.strip()}", origin="summary"), *msgs[cut:]]))
        return True

    def basic(self) -> bool:
        """The deterministic recovery (``runBasicCompaction``): every typed user prompt, a notice of the
        dropped tool work, and the newest messages after the latest prompt that fit the target
        (starting on an assistant message). The target of a recovery is ``resolveManualMessageTargetTokens``:
        half the messages' tokens, at most the trigger less the request overhead."""
        c = self.config
        msgs = list(self.history)
        overhead = self.env.system.opaque_tokens + chars_to_tokens(prompt_chars(self.env.system, self.env.tools),
                                                                   c.chars_per_token)
        sizes = [chars_to_tokens(message_json_chars(m), c.chars_per_token) for m in msgs]
        target = max(1, min(int(self.trigger()) - overhead, sum(sizes) // 2))
        typed = [i for i, m in enumerate(msgs) if is_plain_user(m) or m.meta.get("origin") == "summary"]
        if not typed:
            return False
        total = sum(sizes[i] for i in typed)
        start, acc = len(msgs), 0
        for i in range(len(msgs) - 1, typed[-1], -1):
            if total + acc + sizes[i] > target:
                break
            acc += sizes[i]
            start = i
        while start < len(msgs) and msgs[start].role != "assistant":
            start += 1
        dropped = [m for i, m in enumerate(msgs[:start]) if i not in set(typed)]
        if not dropped:
            return False  # nothing to drop: the request would not get smaller
        tools = Counter(b.name for m in dropped for b in m.blocks if b.type == "tool_use")
        activity = ", ".join(f"{name} ×{n}" for name, n in sorted(tools.items())) or "none"
        notice = Message.user(f"<SYSTEM_NOTICE>\nEarlier context was compacted. Tool calls dropped: {activity}\n"
                              "</SYSTEM_NOTICE>", origin="notice")
        self.set_history(History([*(msgs[i] for i in typed if i < start), notice, *msgs[start:]]))
        self.counters.extra["basic_compactions"] += 1
        return True

    def on_rejected(self, rejection: Rejection, call: CallInfo) -> bool:
        if "overflow" not in rejection.reasons or rejection.attempt > 1:
            return False
        return self._counted(self.basic())
