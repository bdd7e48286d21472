"""gemini_cli: Google gemini-cli's chat compression (state snapshot + verification).

Source: google-gemini/gemini-cli, ``packages/core/src/services/chatCompressionService.ts``
(``findCompressSplitPoint``, ``truncateHistoryToBudget``, ``ChatCompressionService.compress``),
``packages/core/src/utils/fileUtils.ts`` (``formatTruncatedToolOutput``,
``saveTruncatedToolOutput``), ``packages/core/src/core/prompts.ts`` (the compression prompt) and
``core/client.ts`` (``tryCompressChat``, ``hasFailedCompressionAttempt``), read 2025-12:

* trigger: the last prompt's token count ≥ 0.5 × the model's token limit (0.7 before Oct 2025);
* before splitting, tool responses are walked newest first against a 50,000-token budget; older
  ones that are still over the truncation threshold are saved to a file and truncated;
* split: keep the newest 30% of history by characters (JSON length of each message); the split may
  only fall on a user message that is not a function response (else the last such point before);
* two LLM calls, each with the compression prompt as system instruction and the part to compress
  as the conversation (no main system prompt, so no shared cache): a ``<state_snapshot>`` (overall
  goal, active constraints, key knowledge, artifact trail, file system state, recent actions, task
  state), then a "probe" that re-checks it and returns the final snapshot;
* new history: the snapshot as a user message, the model's "Got it. Thanks for the additional
  context!", then the kept 30%; rejected if the new token count is larger than the old one;
* after a failure the client sets ``hasFailedCompressionAttempt`` and later automatic attempts
  only truncate (no LLM call); kept for the session here;
* any tool output over 40,000 characters is saved whole to a file and the model sees the first 20%
  and the last 80% of 40,000 characters with the file's path (``tool-outputs/`` under the run's
  session directory: a real file).

Token figures are gemini-cli's estimate: characters / 4, anchored on the last reported usage.
The probe's answer replaces the snapshot only when it contains a ``<state_snapshot>`` (a model that
answers anything else has not produced one). The prompts are this project's own wording.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import Field

from harness.conversation import Block, History, Message, Request, SystemPrompt, ToolSet
from harness.llm import SUMMARY, VERIFY, CallSpec
from strategies.base import CallInfo
from strategies.templates import PeerConfig, ThresholdCompactor, chars_to_tokens

COMPRESSION_THRESHOLD = 0.5  # chatCompressionService.ts DEFAULT_COMPRESSION_TOKEN_THRESHOLD
PRESERVE_FRACTION = 0.3  # COMPRESSION_PRESERVE_THRESHOLD
FUNCTION_RESPONSE_TOKEN_BUDGET = 50_000  # COMPRESSION_FUNCTION_RESPONSE_TOKEN_BUDGET
TRUNCATE_THRESHOLD_CHARS = 40_000  # config truncateToolOutputThreshold default
HEAD_SHARE = 0.2  # formatTruncatedToolOutput: first 20%, last 80%
SAFE_BUFFER_TOKENS = 20_000  # compress(): summariser gets the truncated history above limit − this
ACK = "Got it. Thanks for the additional context!"
SNAPSHOT_SECTIONS = ("overall_goal", "active_constraints", "key_knowledge", "artifact_trail",
                     "file_system_state", "recent_actions", "task_state")

COMPRESSION_SYSTEM = """\
You compress the history of a coding agent's session into a state snapshot that will replace it. \
The agent will only see the snapshot and the most recent turns, so keep every goal, constraint, \
decision, file path, command and error that still matters, and nothing that does not. \
Reply with a single <state_snapshot> XML element holding these children: {sections}."""
NEW_SNAPSHOT = "Generate a new <state_snapshot> from the history above. Think first, then write it."
MERGE_SNAPSHOT = ("A previous <state_snapshot> is in the history. Carry every still-relevant item of it into "
                  "the new one, updated with what happened since. Think first, then write it.")
PROBE = ("Check the <state_snapshot> you just wrote against the history: is any file path, tool result, "
         "technical detail or user constraint missing or vague? If so, write a final, corrected "
         "<state_snapshot>; otherwise repeat the same <state_snapshot> exactly.")


def format_truncated(content: str, output_file: str, max_chars: int, head_share: float = HEAD_SHARE) -> str:
    """``formatTruncatedToolOutput``: head 20% and tail 80% of ``max_chars`` around a marker."""
    if len(content) <= max_chars:
        return content
    head_chars = int(max_chars * head_share)
    tail_chars = max_chars - head_chars
    omitted = len(content) - head_chars - tail_chars
    return (f"Output too large. Showing first {head_chars:,} and last {tail_chars:,} characters. "
            f"For full output see: {output_file}\n{content[:head_chars]}\n\n"
            f"... [{omitted:,} characters omitted] ...\n\n{content[len(content) - tail_chars:]}")


def message_json_chars(m: Message) -> int:
    """The length gemini-cli measures a message by (``JSON.stringify(content).length``)."""
    return len(json.dumps(m.to_api(), ensure_ascii=False))


def compress_split_point(messages: list[Message], fraction: float) -> int:
    """``findCompressSplitPoint``: index of the oldest message to keep (``len`` = compress all)."""
    if not 0 < fraction < 1:
        raise ValueError("fraction must be between 0 and 1")
    counts = [message_json_chars(m) for m in messages]
    target = sum(counts) * fraction
    last_split, cum = 0, 0
    for i, m in enumerate(messages):
        if m.role == "user" and not m.has_tool_result:
            if cum >= target:
                return i
            last_split = i
        cum += counts[i]
    if messages and messages[-1].role == "assistant" and not messages[-1].has_tool_use:
        return len(messages)
    return last_split


class GeminiCliConfig(PeerConfig):
    threshold: float = Field(COMPRESSION_THRESHOLD, gt=0, le=1, description="compress when the last prompt "
                             "reaches this share of the token limit (0.5; 0.7 before Oct 2025)")
    preserve_fraction: float = Field(PRESERVE_FRACTION, gt=0, lt=1, description="newest share of history "
                                     "(by characters) kept verbatim")
    function_response_token_budget: int = Field(FUNCTION_RESPONSE_TOKEN_BUDGET, ge=0, le=10_000_000,
                                                 description="newest tool responses kept whole up to this")
    truncate_threshold_chars: int = Field(TRUNCATE_THRESHOLD_CHARS, ge=100, le=100_000_000,
                                          description="a tool output over this is saved to a file and cut")
    summary_max_tokens: int = Field(16_000, ge=256, le=200_000, description="output bound of each call")
    verify: bool = Field(True, description="make the second (probe) call")


class GeminiCli(ThresholdCompactor):
    name = "gemini_cli"
    summary = "gemini-cli: at 50% keep newest 30% by chars, <state_snapshot> + verify call; truncation after a failure"
    Config = GeminiCliConfig

    def __init__(self, config, env) -> None:
        super().__init__(config, env)
        self.has_failed = False
        self.truncation_id = 0

    def on_session_start(self, session: str, resume: bool, now: float) -> None:
        super().on_session_start(session, resume, now)
        if not resume:
            self.has_failed = False

    # --- tool outputs ----------------------------------------------------------------------------
    def _save(self, content: str, tool_use_id: str) -> str | None:
        self.truncation_id += 1
        d = Path(self.env.session_dir) / "tool-outputs"
        path = d / f"{_safe(tool_use_id)}_{self.truncation_id}.txt"
        try:
            d.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")
        except OSError:
            self.counters.extra["save_failed"] += 1
            return None
        self.counters.spills += 1
        return str(path)

    def on_tool_results(self, message: Message) -> None:
        limit = self.config.truncate_threshold_chars
        blocks = []
        for b in message.blocks:
            if b.type == "tool_result" and len(b.text) > limit:
                path = self._save(b.text, b.id or "result")
                if path is not None:
                    b = Block.tool_result(b.id or "", format_truncated(b.text, path, limit), b.is_error, saved=path)
            blocks.append(b)
        super().on_tool_results(Message(message.role, tuple(blocks), message.meta))

    def truncate_to_budget(self, messages: list[Message]) -> list[Message]:
        """``truncateHistoryToBudget``: newest tool responses whole up to the budget; older ones over
        the truncation threshold saved and cut (one file per truncation, as gemini-cli does)."""
        c = self.config
        used = 0
        out: list[Message] = []
        for m in reversed(messages):
            if not m.has_tool_result:
                out.append(m)
                continue
            blocks = []
            changed = False
            for b in reversed(m.blocks):
                if b.type != "tool_result":
                    blocks.append(b)
                    continue
                tok = chars_to_tokens(len(b.text), c.chars_per_token)
                if (used + tok > c.function_response_token_budget and len(b.text) > c.truncate_threshold_chars
                        and not b.meta.get("saved")):
                    path = self._save(b.text, b.id or "result")
                    if path is not None:
                        b = Block.tool_result(b.id or "", format_truncated(b.text, path, c.truncate_threshold_chars),
                                              b.is_error, saved=path)
                        changed = True
                used += chars_to_tokens(len(b.text), c.chars_per_token)
                blocks.append(b)
            out.append(Message(m.role, tuple(reversed(blocks)), m.meta) if changed else m)
        out.reverse()
        return out

    # --- compression -----------------------------------------------------------------------------
    def should_compact(self, call: CallInfo) -> bool:
        last = self.anchor.last_input
        if last is None:
            return False  # no prompt sent yet: gemini-cli's last prompt token count is 0
        return last >= self.config.threshold * self.env.window

    def _tokens(self, messages: list[Message]) -> int:
        return self.env.system.opaque_tokens + chars_to_tokens(
            sum(len(b.payload) for b in self.env.system.blocks) + sum(len(t.payload) for t in self.env.tools.tools)
            + sum(m.chars for m in messages), self.config.chars_per_token)

    def compact(self, call: CallInfo) -> bool | None:
        """True: compressed (or truncated, after a failure); False: a failed compression (an LLM
        call failed, an empty or an inflated snapshot); None: nothing to do (no LLM call made)."""
        c = self.config
        original = self.anchor.last_input or 0
        msgs = list(self.history)
        truncated = self.truncate_to_budget(msgs)
        if self.has_failed:
            # truncation only, no LLM call
            self.counters.extra["truncation_fallbacks"] += 1
            if any(a is not b for a, b in zip(truncated, msgs, strict=True)) and self._tokens(truncated) < original:
                self.set_history(History(truncated))
                return True
            return None
        split = compress_split_point(truncated, 1 - c.preserve_fraction)
        if split == 0:
            self.counters.extra["compress_noop"] += 1
            return None
        original_part = msgs[:split]
        for_summary = (original_part if self._tokens(original_part) < self.env.window - SAFE_BUFFER_TOKENS
                       else truncated[:split])
        previous = any("<state_snapshot>" in m.text for m in for_summary)
        system = SystemPrompt.of(COMPRESSION_SYSTEM.format(sections=", ".join(SNAPSHOT_SECTIONS)))
        req = Request(system, ToolSet(), History(for_summary))
        res = self.side_call(req, CallSpec(kind=SUMMARY, instructions=MERGE_SNAPSHOT if previous else NEW_SNAPSHOT,
                                           sections=SNAPSHOT_SECTIONS, max_output_tokens=c.summary_max_tokens))
        if res is None:
            self.has_failed = True
            return False
        snapshot = _as_snapshot(res.text)
        if c.verify:
            probe_req = Request(system, ToolSet(), History([*for_summary, Message("assistant", (Block.text_block(snapshot),))]))
            probe = self.side_call(probe_req, CallSpec(kind=VERIFY, instructions=PROBE, sections=SNAPSHOT_SECTIONS,
                                                       max_output_tokens=c.summary_max_tokens))
            if probe is None:
                self.has_failed = True
                return False
            if "<state_snapshot>" in probe.text:
                snapshot = probe.text.strip()
        if not snapshot.strip():
            self.has_failed = True
            return False
        new = [Message.user(snapshot, origin="summary"), Message("assistant", (Block.text_block(ACK),), {"origin": "summary_ack"}),
               *truncated[split:]]
        new_tokens = self._tokens(new)
        if new_tokens > original:
            self.counters.extra["rejected_inflated"] += 1
            self.has_failed = True
            return False
        self.set_history(History(new))
        return True


def _as_snapshot(text: str) -> str:
    t = text.strip()
    return t if "<state_snapshot>" in t else f"<state_snapshot>\n{t}\n</state_snapshot>"


def _safe(part: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in part)
