"""anthropic_compaction: the Messages API's server-side compaction, ``compact_20260112``.

Source: Anthropic documentation, "Compaction" (platform.claude.com/docs/en/build-with-claude/
compaction, beta header ``compact-2026-01-12``, read 2026-12) and the SDK types (the
``context_management`` capability ``compact_20260112``; ``usage.iterations``):

* the client keeps its conversation and sends it as usual with
  ``context_management: {edits: [{type: "compact_20260112"}]}``; once the request's input tokens
  pass ``trigger`` (default 150,000; the API refuses less than 50,000) the server first summarises
  the conversation (an extra sampling step, billed: it is an entry of ``usage.iterations``, not of
  the top-level counts), then answers from the compacted context: the summary as a ``compaction``
  block at the start of its response;
* the client appends the whole response, compaction block included, and on later requests the API
  ignores everything before that block: the conversation goes on from the summary;
* ``instructions`` replaces the default summarisation prompt; ``pause_after_compaction`` returns
  after the compaction block (stop reason ``compaction``) so the client can adjust the messages
  before it continues: here it re-sends its newest ``preserve_recent_messages`` (a client choice the
  docs leave open; 0 by default).

Modelled as a strategy standing for the server: the trigger is the usual estimate (the last reported
input plus 4 characters per token for what came since; the server counts exactly); the
summarisation step is a side call on the request as sent (same tools, system prompt and cache
markers, so it reads the cached prefix like any request with that prefix: **assumed**, the docs do
not say how the iteration is cached) with the instructions appended; its output bound is assumed
(16,000 tokens). The compaction block is carried as a user message (the Messages form ctxsim sends
must start with the user). A request the API still rejects ends the bare client's turn: no recovery
is documented.
"""

from __future__ import annotations

from ctxsim.harness.llm.services import SUMMARY, CallSpec
from ctxsim.harness.model.conversation import History, Message, Request
from ctxsim.strategies.base import CallInfo, Rejection
from ctxsim.strategies.templates import PeerConfig, ThresholdCompactor, tail_start
from pydantic import Field, model_validator

TRIGGER_INPUT_TOKENS = 150_000  # docs: trigger default 150,000 input tokens
MIN_TRIGGER_TOKENS = 50_000  # docs: minimum trigger 50,000 (the property kit's small windows go under it)
SUMMARY_MAX_TOKENS = 16_000  # assumed: the docs give no bound for the compaction block
DEFAULT_INSTRUCTIONS = """\
You have written a partial transcript for the task above. Write a summary of it that lets you \
continue the work in a new context where this transcript is no longer available: the task and its \
state, what was done and learned, decisions and constraints, and the next steps. Wrap it in \
<summary></summary>."""  # this project's wording of the docs' default prompt's purpose


class AnthropicCompactionConfig(PeerConfig):
    trigger_input_tokens: int = Field(TRIGGER_INPUT_TOKENS, ge=1, le=100_000_000, description="compact when the "
                                      "request's input passes this (the API's minimum is 50,000)")
    instructions: str | None = Field(None, max_length=100_000, description="replaces the default "
                                     "summarisation prompt; None: the default")
    pause_after_compaction: bool = Field(False, description="the API returns after the compaction block and "
                                         "the client re-sends its newest messages before continuing")
    preserve_recent_messages: int = Field(0, ge=0, le=10_000, description="with pause_after_compaction: newest "
                                          "messages the client re-sends after the block")
    summary_max_tokens: int = Field(SUMMARY_MAX_TOKENS, ge=256, le=200_000, description="output bound of "
                                    "the compaction step (assumed)")

    @model_validator(mode="after")
    def _pause(self):
        if self.preserve_recent_messages and not self.pause_after_compaction:
            raise ValueError("preserve_recent_messages needs pause_after_compaction=true")
        return self


class AnthropicCompaction(ThresholdCompactor):
    name = "anthropic_compaction"

    @classmethod
    def summarises_dropped(cls, config) -> bool:
        # its compactions summarise what they drop (the kit's ``summarised``)
        return True
    summary = "Anthropic server compaction compact_20260112: past 150k input the API summarises and goes on from the summary"
    on_rejection = "none: the API's 400 ends the bare client's turn (server compaction; no recovery documented)"
    Config = AnthropicCompactionConfig

    @staticmethod
    def check_params(window: int) -> dict:
        """The trigger at the same share of a 200k window (under the API's minimum in small windows)."""
        return {"trigger_input_tokens": max(1, TRIGGER_INPUT_TOKENS * window // 200_000)}

    @classmethod
    def compacts_above(cls, config, window: int, max_output_tokens: int) -> int | None:
        return config.trigger_input_tokens   # docs: once the input passes trigger, the server summarises

    def should_compact(self, call: CallInfo) -> bool:
        return (self.estimate() or 0) > self.config.trigger_input_tokens

    def compact(self, call: CallInfo) -> bool | None:
        c = self.config
        h = self.history
        if not len(h):
            return None
        res = self.side_call(Request(self.env.system, self.env.tools, h, self.breakpoints(h)),
                             CallSpec(kind=SUMMARY, instructions=c.instructions or DEFAULT_INSTRUCTIONS,
                                      max_output_tokens=c.summary_max_tokens))
        if res is None:
            return False  # the request fails with the compaction step: nothing changes client-side
        kept: list[Message] = []
        if c.pause_after_compaction and c.preserve_recent_messages:
            msgs = list(h)
            kept = msgs[tail_start(msgs, len(msgs) - c.preserve_recent_messages, "forward"):]
        self.set_history(History([Message.user(res.text, origin="summary", compaction_block=True), *kept]))
        return True

    def on_rejected(self, rejection: Rejection, call: CallInfo) -> bool:
        return False
