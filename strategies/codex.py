"""codex: OpenAI Codex CLI's auto-compaction with a handoff summary.

Source: openai/codex, ``codex-rs/core/src/compact.rs`` (``run_compact_task_inner``,
``collect_user_messages``, ``build_compacted_history``, ``COMPACT_USER_MESSAGE_MAX_TOKENS``),
``codex-rs/core/templates/compact/prompt.md`` and ``summary_prefix.md``, ``codex.rs`` (the
auto-compact limit) and ``truncate.rs`` (read 2025-11):

* trigger: the conversation's token total reaches ``model_auto_compact_token_limit``, by default
  90% of the context window (gpt-5 family: 272,000 → 244,800);
* the compaction call is the conversation itself plus the compaction prompt as a last user message
  (one LLM call); if it is rejected as too long, the oldest history item is removed and the call
  retried ("trim from the beginning to preserve cache"); other errors are retried up to
  ``stream_max_retries`` (5) times, then the compaction fails and history stays as it was;
* the new history is the initial context (instructions, AGENTS.md, environment — here the system
  prompt, which is never dropped), then the newest real user messages up to 20,000 tokens
  (``approx_token_count``: 4 bytes per token; the oldest one that does not fit whole is cut to
  the remaining budget), then one user message holding the summary behind a handoff prefix;
* every tool output reaches the model cut to 10 KiB / 256 lines (``strategies.truncate``).

The summary prompt and prefix here are this project's own wording of the same structure (a handoff
note: progress and decisions, context and constraints, next steps, critical references).
Codex talks to the Responses API, whose prefix caching is automatic; priced as Anthropic the
strategy places the markers an Anthropic client would (system + last message).
"""

from __future__ import annotations

from pydantic import Field

from harness.conversation import Block, History, Message, Request
from harness.llm import SUMMARY, CallSpec, SideCallFailed
from strategies.base import CallInfo
from strategies.templates import PeerConfig, ThresholdCompactor, chars_to_tokens, is_plain_user, tail_start
from strategies.truncate import MAX_BYTES, MAX_LINES, truncate_head_tail

AUTO_COMPACT_FRACTION = 0.9  # codex.rs: auto compact limit defaults to 90% of the context window
USER_MESSAGE_MAX_TOKENS = 20_000  # compact.rs COMPACT_USER_MESSAGE_MAX_TOKENS
STREAM_MAX_RETRIES = 5  # model_provider_info.rs DEFAULT_STREAM_MAX_RETRIES
SUMMARY_SECTIONS = ("Progress and key decisions", "Context, constraints and user preferences",
                    "Remaining work and next steps", "Critical data and references")

COMPACT_PROMPT = """\
You are creating a context checkpoint. Write a handoff summary that another model will use to resume \
this task without the conversation above. Cover, concisely and in a structured form:
- the progress made so far and the key decisions taken;
- the context that matters: constraints, user preferences, important facts;
- what remains to be done, as clear next steps;
- any data, examples or references (file paths, commands, identifiers) needed to continue.
Sections: {sections}."""

SUMMARY_PREFIX = ("Another language model started this task and wrote the handoff summary below. Use it, "
                  "together with the user messages above, to continue the work without redoing it:")


def middle_truncate(text: str, max_tokens: int, chars_per_token: float) -> str:
    """Codex ``truncate_text`` with a token budget: keep the start and the end, mark the middle."""
    budget = int(max_tokens * chars_per_token)
    if len(text) <= budget:
        return text
    removed = chars_to_tokens(len(text) - budget, chars_per_token)
    half = budget // 2
    return f"{text[:half]}…{removed} tokens truncated…{text[len(text) - (budget - half):]}"


def select_user_messages(texts: list[str], max_tokens: int, chars_per_token: float) -> list[str]:
    """``build_compacted_history_with_limit``: newest first until the budget is used; the message
    that does not fit whole is cut to what is left and ends the walk; then back in order."""
    out: list[str] = []
    remaining = max_tokens
    for t in reversed(texts):
        if remaining <= 0:
            break
        tok = chars_to_tokens(len(t.encode("utf-8", "surrogatepass")), chars_per_token)
        if tok <= remaining:
            out.append(t)
            remaining -= tok
        else:
            out.append(middle_truncate(t, remaining, chars_per_token))
            break
    out.reverse()
    return out


class CodexConfig(PeerConfig):
    auto_compact_token_limit: int | None = Field(None, ge=1, le=100_000_000, description="compact when "
                                                 "the total reaches this; None: auto_compact_fraction × window")
    auto_compact_fraction: float = Field(AUTO_COMPACT_FRACTION, gt=0, le=1, description="default limit as a "
                                         "share of the window (Codex: 0.9)")
    user_message_max_tokens: int = Field(USER_MESSAGE_MAX_TOKENS, ge=0, le=10_000_000,
                                         description="newest user messages kept after compaction (Codex: 20,000)")
    max_retries: int = Field(STREAM_MAX_RETRIES, ge=0, le=100, description="retries of a failed compaction "
                             "call (not counting the drop-oldest retries after a too-long rejection)")
    summary_max_tokens: int = Field(16_000, ge=256, le=200_000, description="output bound of the summary call")
    truncate_tool_output: bool = Field(True, description="cut tool outputs to max_bytes / max_lines (Codex)")
    max_bytes: int = Field(MAX_BYTES, ge=256, le=10_000_000, description="tool output bytes to the model (10 KiB)")
    max_lines: int = Field(MAX_LINES, ge=2, le=1_000_000, description="tool output lines to the model (256)")


class Codex(ThresholdCompactor):
    name = "codex"
    summary = "Codex CLI: compact at 90% of the window; newest user messages ≤ 20k tokens + handoff summary"
    Config = CodexConfig

    def limit(self) -> int:
        c = self.config
        return c.auto_compact_token_limit or int(self.env.window * c.auto_compact_fraction)

    def on_tool_results(self, message: Message) -> None:
        c = self.config
        if c.truncate_tool_output:
            blocks = []
            for b in message.blocks:
                if b.type == "tool_result":
                    cut = truncate_head_tail(b.text, c.max_bytes, c.max_lines, c.max_lines // 2,
                                             c.max_lines - c.max_lines // 2)
                    if cut != b.text:
                        self.counters.extra["truncated_results"] += 1
                        b = Block.tool_result(b.id or "", cut, b.is_error, truncated=True)
                blocks.append(b)
            message = Message(message.role, tuple(blocks), message.meta)
        super().on_tool_results(message)

    def should_compact(self, call: CallInfo) -> bool:
        return (self.estimate() or 0) >= self.limit()

    def _summarise(self) -> str | None:
        c = self.config
        msgs = list(self.history)
        prompt = COMPACT_PROMPT.format(sections="; ".join(SUMMARY_SECTIONS))
        retries = 0
        while True:
            req = Request(self.env.system, self.env.tools, History(msgs), self.breakpoints(History(msgs)))
            try:
                res = self.env.services.call(req, CallSpec(kind=SUMMARY, instructions=prompt,
                                                           sections=SUMMARY_SECTIONS,
                                                           max_output_tokens=c.summary_max_tokens))
                return res.text
            except SideCallFailed as e:
                self.counters.extra[f"summary_failed_{e.reason}"] += 1
                if e.reason == "prompt_too_long" and len(msgs) > 1:
                    # remove the oldest item (and any results it leaves without their call)
                    msgs = msgs[tail_start(msgs, 1, "forward"):]
                    self.counters.extra["trimmed_before_compact"] += 1
                    if not msgs:
                        return None
                    continue
                if retries < c.max_retries and e.reason != "prompt_too_long":
                    retries += 1
                    continue
                return None

    def compact(self, call: CallInfo) -> bool:
        c = self.config
        summary = self._summarise()
        if summary is None:
            return False
        users = [m.text for m in self.history if is_plain_user(m)]
        kept = select_user_messages(users, c.user_message_max_tokens, c.chars_per_token)
        new = [Message.user(t) for t in kept]
        new.append(Message.user(f"{SUMMARY_PREFIX}\n{summary or '(no summary available)'}", origin="summary"))
        self.set_history(History(new))
        return True
