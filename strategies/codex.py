"""codex: OpenAI Codex CLI's auto-compaction with a handoff summary, and its tool-output cut.

Source: openai/codex ``codex-rs`` (2026 files): ``core/src/compact.rs`` (``run_compact_task_inner``,
``collect_user_messages``, ``build_compacted_history``, ``COMPACT_USER_MESSAGE_MAX_TOKENS``,
``should_use_remote_compact_task``), ``core/src/compact_remote.rs``
(``run_remote_compact_task_inner_impl``), ``core/src/context_manager/history.rs``
(``process_item``: the truncation policy × 1.2), ``utils/output-truncation/src/lib.rs``
(``truncate_text``, ``truncate_middle_with_token_budget``), the models' ``truncation_policy``
(``{"mode": "tokens", "limit": 10000}`` for the gpt-5.x family) and ``templates/compact/prompt.md``,
``summary_prefix.md``:

* trigger: the conversation's token total reaches the auto-compact limit, 90% of the context window
  (gpt-5 family: 272,000 → 244,800); a configured ``model_auto_compact_token_limit`` can only lower it
  (``protocol/src/openai_models.rs`` ``ModelInfo::auto_compact_token_limit``:
  ``config_limit.map_or(context_limit, |limit| std::cmp::min(limit, context_limit))``, since PR #11516
  "Clamp auto-compact limit to context window", codex 0.100.0; before it the configured limit replaced
  the default: ``auto_compact_clamp=False``). The window Codex reports as usable
  (``TurnContext::model_context_window``, ``core/src/session/turn_context.rs`` @ 014742db) is
  ``effective_context_window_percent`` (95, ``openai_models.rs`` ``default_effective_context_window_percent``)
  of it: in the default ``Total`` scope of ``core/src/session/context_window.rs`` @ 11237ebb
  (``context_window_token_status``) it is only the context-remaining figure, never a trigger; in the
  ``BodyAfterPrefix`` scope (``auto_compact_scope="body_after_prefix"``) the configured limit, unclamped,
  counts the tokens after the first request's input and the usable window is a hard cap beside it;
* every tool output is recorded cut to its truncation budget: 10,000 tokens × 1.2 = 12,000 tokens
  (≈ 48 KB at 4 bytes per token), the middle removed around ``…N tokens truncated…``; there is no line
  cap any more;
* the local compaction request (``Prompt { input, ..Default::default() }``) is the conversation plus
  the compaction prompt as a last user message, **sent without tools**: its prefix is not the main
  loop's, so it reads nothing from the cache (here: priced as Anthropic, the empty tools array
  differs at the first level and the whole request is written). If it is rejected as too long the
  oldest history item is removed and the call retried ("trim from the beginning"; here the items up
  to the next user message go with it, as the Messages API refuses a request that starts with the
  assistant); other errors are retried up to ``stream_max_retries`` (5) times, then the compaction fails and history stays;
* the new history is the initial context (instructions, AGENTS.md, environment — here the system
  prompt, which is never dropped), then the newest real user messages up to 20,000 tokens (4 bytes
  per token; the oldest one that does not fit whole is cut to the remaining budget), then one user
  message holding the summary behind the prefix of ``templates/compact/summary_prefix.md`` @ 928a707f
  ("You are resuming an in-progress task after context compaction. ...", verbatim;
  ``compact.rs``: ``format!("{SUMMARY_PREFIX}\n{summary_suffix}")``, the file's own newline before it);
* on OpenAI models Codex compacts on the server instead (``compaction="remote"``: the Responses API
  ``/responses/compact`` on the whole history, again with no tools; it returns the replacement
  history, with an opaque encrypted compaction item). What the server returns is not public: here it
  is the local shape, the user messages (20,000 tokens) and one item of the summary's size (assumed).
  ``compaction="auto"`` (the default) picks remote when the run's provider is OpenAI;
* a request the API rejects as too long errors the turn (``CodexErr::ContextWindowExceeded``).

The older reading, kept as labelled values: ``tool_output="bytes_lines"`` (the 2025 rule: 10 KiB and
256 lines, head and tail lines, ``ctxsim.strategies.truncate``) and ``compaction_tools=True`` (the compaction
call sent with the agent's tools and cache markers, reading the main loop's cached prefix).

The summary prompt follows ``templates/compact/prompt.md`` at commit 928a707f6a5e (the newest version
stored here): a handoff for "the single active task (the most recent user request that is still in
progress)", in five items (Active task; Progress so far; Next steps (active task only); Key context /
constraints / preferences (still relevant only); Completed tasks (optional, brief)), reworded.
``summary_prompt="handoff_2025"`` keeps the 2025 four-item prompt (progress and decisions, context
and constraints, next steps, critical references; no goal item) and the prefix this module had with
it (a rewording of ``summary_prefix.md`` @ 50a53333, "Another language model started to solve this
problem..."), this module's before 2026-12.
Codex talks to the Responses API, whose prefix caching is automatic; priced as Anthropic the
strategy places the markers an Anthropic client would (system + last message).
"""

from __future__ import annotations

from typing import Literal

from ctxsim.harness.llm.services import SUMMARY, CallSpec, SideCallFailed
from ctxsim.harness.model.conversation import Block, History, Message, Request, ToolSet
from ctxsim.strategies.base import CallInfo, Rejection
from ctxsim.strategies.templates import (
    PeerConfig,
    ThresholdCompactor,
    chars_to_tokens,
    is_plain_user,
    tail_start,
)
from ctxsim.strategies.truncate import MAX_BYTES, MAX_LINES, truncate_head_tail
from pydantic import Field

AUTO_COMPACT_FRACTION = 0.9  # codex.rs: auto compact limit defaults to 90% of the context window
USER_MESSAGE_MAX_TOKENS = 20_000  # compact.rs COMPACT_USER_MESSAGE_MAX_TOKENS
STREAM_MAX_RETRIES = 5  # model_provider_info.rs DEFAULT_STREAM_MAX_RETRIES
TOOL_OUTPUT_TOKENS = 12_000  # models truncation_policy {"mode": "tokens", "limit": 10000} × 1.2 (history.rs process_item)
# templates/compact/prompt.md @ openai/codex 928a707f6a5ed63d89f1575f794aa7135be2f5c9 (the newest
# version stored for this project, read 2026-12): the handoff starts with the active task.
SUMMARY_SECTIONS = ("Active task (the most recent user request still in progress)", "Progress so far",
                    "Next steps (active task only)", "Key context / constraints / preferences (still relevant only)",
                    "Completed tasks (optional, brief)")
COMPACT_PROMPT = """\
You are performing a context checkpoint compaction. Write a handoff summary so that another model can \
continue the single active task: the most recent user request that is still in progress.
Rules: focus only on the active task and do not reopen earlier, completed tasks; propose no audits or \
re-checks the user did not ask for; if earlier tasks exist, note them as completed in one short bullet.
Sections: {sections}.
Be concise and structured, so the next model can continue without broad backtracking."""

# the older reading (``summary_prompt="handoff_2025"``): the 2025 file's four items, no task item
SUMMARY_SECTIONS_2025 = ("Progress and key decisions", "Context, constraints and user preferences",
                         "Remaining work and next steps", "Critical data and references")
COMPACT_PROMPT_2025 = """\
You are creating a context checkpoint. Write a handoff summary that another model will use to resume \
this task without the conversation above. Cover, concisely and in a structured form:
- the progress made so far and the key decisions taken;
- the context that matters: constraints, user preferences, important facts;
- what remains to be done, as clear next steps;
- any data, examples or references (file paths, commands, identifiers) needed to continue.
Sections: {sections}."""

# templates/compact/summary_prefix.md @ openai/codex 928a707f6a5ed63d89f1575f794aa7135be2f5c9, verbatim
# (419 characters with its newline; compact.rs puts "\n" and the summary after it)
SUMMARY_PREFIX = ("You are resuming an in-progress task after context compaction. Another language model produced "
                  "a handoff summary. Treat the summary as authoritative for what is already done. Continue from "
                  "the \"Next steps\" for the active task; do not re-open completed tasks or audit prior work unless "
                  "the user explicitly asked. You also have access to the state of the tools that were used by that "
                  "language model. Here is the summary:\n")
# the older reading's prefix (summary_prompt="handoff_2025"): this module's rewording of the file @ 50a53333
SUMMARY_PREFIX_2025 = ("Another language model started this task and wrote the handoff summary below. Use it, "
                       "together with the user messages above, to continue the work without redoing it:")
EFFECTIVE_CONTEXT_WINDOW_PERCENT = 95  # openai_models.rs default_effective_context_window_percent


def summary_message_text(prefix: str, summary: str) -> str:
    """compact.rs ``format!("{SUMMARY_PREFIX}\n{summary_suffix}")``; an empty summary is
    ``(no summary available)`` (``build_compacted_history_with_limit``)."""
    return f"{prefix}\n{summary or '(no summary available)'}"


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


def user_first(messages: list[Message], i: int) -> int:
    """The first index ``>= i`` where a trimmed request can start: a user message, and no results
    left without their call (``len(messages)``: none)."""
    i = tail_start(messages, i, "forward")
    while i < len(messages) and messages[i].role != "user":
        i = tail_start(messages, i + 1, "forward")
    return i


class CodexConfig(PeerConfig):
    auto_compact_token_limit: int | None = Field(None, ge=1, le=100_000_000, description="Codex's "
                                                 "model_auto_compact_token_limit: it can only lower the default "
                                                 "(auto_compact_fraction × window); None: the default")
    auto_compact_fraction: float = Field(AUTO_COMPACT_FRACTION, gt=0, le=1, description="default limit as a "
                                         "share of the window (Codex: 0.9)")
    auto_compact_clamp: bool = Field(True, description="a configured limit is min(limit, the default) (codex "
                                     "0.100.0+, PR #11516); off: it replaces the default (before 0.100.0)")
    auto_compact_scope: Literal["total", "body_after_prefix"] = Field(
        "total", description="model_auto_compact_token_limit_scope: total (default): every context token "
        "counts; body_after_prefix: tokens after the first request's input count against the configured "
        "limit (unclamped), and the usable window caps the total")
    effective_context_window_percent: int = Field(EFFECTIVE_CONTEXT_WINDOW_PERCENT, ge=1, le=100,
                                                  description="share of the window Codex treats as usable "
                                                  "(model catalog; 95)")
    user_message_max_tokens: int = Field(USER_MESSAGE_MAX_TOKENS, ge=0, le=10_000_000,
                                         description="newest user messages kept after compaction (Codex: 20,000)")
    max_retries: int = Field(STREAM_MAX_RETRIES, ge=0, le=100, description="retries of a failed compaction "
                             "call (not counting the drop-oldest retries after a too-long rejection)")
    summary_max_tokens: int = Field(16_000, ge=256, le=200_000, description="output bound of the summary call")
    truncate_tool_output: bool = Field(True, description="cut tool outputs as Codex records them")
    tool_output: Literal["tokens", "bytes_lines"] = Field("tokens", description="tokens: a middle cut to "
                                                          "tool_output_tokens (current); bytes_lines: 10 KiB / "
                                                          "256 lines (the 2025 rule)")
    tool_output_tokens: int = Field(TOOL_OUTPUT_TOKENS, ge=16, le=10_000_000,
                                    description="tool output tokens to the model (10,000 × 1.2)")
    max_bytes: int = Field(MAX_BYTES, ge=256, le=10_000_000, description="bytes_lines: tool output bytes (10 KiB)")
    max_lines: int = Field(MAX_LINES, ge=2, le=1_000_000, description="bytes_lines: tool output lines (256)")
    compaction: Literal["auto", "local", "remote"] = Field("auto", description="local summary call, server-side "
                                                            "compaction (remote), or auto: remote on OpenAI")
    compaction_tools: bool = Field(False, description="send the compaction call with the agent's tools and "
                                   "cache markers (an older reading: it then reads the cached prefix)")
    summary_prompt: Literal["active_task", "handoff_2025"] = Field(
        "active_task", description="active_task: templates/compact/prompt.md and summary_prefix.md @ 928a707 "
        "(Active task first; 'You are resuming an in-progress task...'); handoff_2025: the four-item 2025 prompt "
        "with no task item and the older prefix (this module's before 2026-12)")

    def prompt_and_sections(self) -> tuple[str, tuple[str, ...]]:
        if self.summary_prompt == "handoff_2025":
            return COMPACT_PROMPT_2025, SUMMARY_SECTIONS_2025
        return COMPACT_PROMPT, SUMMARY_SECTIONS


def auto_compact_limit(c: CodexConfig, window: int) -> int:
    """``ModelInfo::auto_compact_token_limit``: 90% of the window, a configured limit only below it
    (``auto_compact_clamp``; the configured limit alone before codex 0.100.0)."""
    default = int(window * c.auto_compact_fraction)
    if c.auto_compact_token_limit is None:
        return default
    return min(c.auto_compact_token_limit, default) if c.auto_compact_clamp else c.auto_compact_token_limit


def model_context_window(c: CodexConfig, window: int) -> int:
    """``TurnContext::model_context_window``: ``context_window * effective_context_window_percent / 100``
    (integer division, as ``saturating_mul(..) / 100``)."""
    return window * c.effective_context_window_percent // 100


class Codex(ThresholdCompactor):
    name = "codex"

    @classmethod
    def summarises_dropped(cls, config) -> bool:
        # its compactions summarise what they drop (the kit's ``summarised``)
        return True
    keeps_latest_request = True   # build_compacted_history: the newest user messages (20,000 tokens), then the handoff
    keeps_user_messages = True    # collect_user_messages: the user's own messages, the handoff summary apart
    keeps_newest_user_messages = True   # select_user_messages: newest first within the budget, then in order
    summary = "Codex CLI: tool output cut to 12k tokens; compact at 90% (no tools); user messages ≤ 20k + handoff"
    on_rejection = "the turn errors (codex-rs CodexErr::ContextWindowExceeded)"
    Config = CodexConfig

    @property
    def remote(self) -> bool:
        c = self.config.compaction
        return c == "remote" or (c == "auto" and self.env.provider == "openai")

    def __init__(self, config, env) -> None:
        super().__init__(config, env)
        self.prefill: int | None = None  # body_after_prefix: the first request's input since the last reset

    def on_session_start(self, session: str, resume: bool, now: float) -> None:
        super().on_session_start(session, resume, now)
        if not resume:
            self.prefill = None

    def limit(self) -> int:
        return auto_compact_limit(self.config, self.env.window)

    def usable_window(self) -> int:
        return model_context_window(self.config, self.env.window)

    @classmethod
    def check_params(cls, window: int) -> dict[str, int]:
        """For the property kit's small window: the user messages a compaction keeps (20,000 tokens, for windows of
        200k and more) scaled by window / 200k, so that the budget binds there as it does on a long session.
        Read from ``cls.Config``: a subclass is scaled alike."""
        default = cls.Config.model_fields["user_message_max_tokens"].default
        return {"user_message_max_tokens": max(1, int(default * window / 200_000))}

    @classmethod
    def result_limits(cls, config) -> tuple[tuple[int, str], ...]:
        # on_tool_results: a middle cut to tool_output_tokens at chars_per_token, or the 2025 10 KiB / 256 lines
        if not config.truncate_tool_output:
            return ()
        if config.tool_output == "tokens":
            return ((int(config.tool_output_tokens * config.chars_per_token), "chars"),)
        return ((config.max_bytes, "bytes"), (config.max_lines, "lines"))

    @classmethod
    def cut_keeps_head(cls, config) -> tuple[tuple[int, str], ...]:
        # middle_truncate keeps half its budget from the start; truncate_head_tail half the bytes and half the lines
        if not config.truncate_tool_output:
            return ()
        if config.tool_output == "tokens":
            return ((int(config.tool_output_tokens * config.chars_per_token) // 2, "chars"),)
        return ((config.max_bytes // 2, "bytes"), (config.max_lines // 2, "lines"))

    @classmethod
    def compacts_above(cls, config, window: int, max_output_tokens: int) -> int | None:
        # the total scope compacts at the limit; body_after_prefix at the usable window at the latest
        return auto_compact_limit(config, window) if config.auto_compact_scope == "total" else model_context_window(config, window)

    def on_tool_results(self, message: Message) -> None:
        c = self.config
        if c.truncate_tool_output:
            blocks = []
            for b in message.blocks:
                if b.type == "tool_result":
                    cut = (middle_truncate(b.text, c.tool_output_tokens, c.chars_per_token) if c.tool_output == "tokens"
                           else truncate_head_tail(b.text, c.max_bytes, c.max_lines, c.max_lines // 2,
                                                   c.max_lines - c.max_lines // 2))
                    if cut != b.text:
                        self.counters.extra["truncated_results"] += 1
                        b = Block.tool_result(b.id or "", cut, b.is_error, truncated=True)
                blocks.append(b)
            message = Message(message.role, tuple(blocks), message.meta)
        super().on_tool_results(message)

    def should_compact(self, call: CallInfo) -> bool:
        total = self.estimate() or 0
        if self.config.auto_compact_scope == "total":
            return total >= self.limit()
        # BodyAfterPrefix: the configured limit (unclamped) against what came after the prefill baseline,
        # or the total at the usable window (context_window.rs context_window_token_status)
        if self.prefill is None:
            self.prefill = total
        c = self.config
        scope_limit = c.auto_compact_token_limit or int(self.env.window * c.auto_compact_fraction)
        return total - self.prefill >= scope_limit or total >= self.usable_window()

    def _summarise(self) -> str | None:
        c = self.config
        msgs = list(self.history)
        template, sections = c.prompt_and_sections()
        prompt = template.format(sections="; ".join(sections))
        retries = 0
        with_tools = c.compaction_tools and not self.remote
        while True:
            h = History(msgs)
            req = (Request(self.env.system, self.env.tools, h, self.breakpoints(h)) if with_tools
                   else Request(self.env.system, ToolSet(), h))
            try:
                res = self.env.services.call(req, CallSpec(kind=SUMMARY, instructions="" if self.remote else prompt,
                                                           sections=sections,
                                                           max_output_tokens=c.summary_max_tokens))
                return res.text
            except SideCallFailed as e:
                self.counters.extra[f"summary_failed_{e.reason}"] += 1
                if e.reason == "prompt_too_long" and len(msgs) > 1:
                    # remove the oldest item (and any results it leaves without their call), then
                    # the items up to the next user message: the Messages API refuses a request
                    # that starts with the assistant (codex trims Responses items, where it may)
                    msgs = msgs[user_first(msgs, 1):]
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
        if self.remote:  # the server's opaque compaction item, sized as the summary (assumed)
            new.append(Message.user(summary or "(no summary available)", origin="summary", opaque=True))
        else:
            prefix = SUMMARY_PREFIX_2025 if c.summary_prompt == "handoff_2025" else SUMMARY_PREFIX
            new.append(Message.user(summary_message_text(prefix, summary), origin="summary"))
        self.set_history(History(new))
        self.prefill = None  # the next request's input is the new baseline (body_after_prefix)
        if self.remote:
            self.counters.extra["remote_compactions"] += 1
        return True

    def on_rejected(self, rejection: Rejection, call: CallInfo) -> bool:
        return False
