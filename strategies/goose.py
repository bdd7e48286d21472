"""goose: Block's goose agent: auto-compaction of the whole conversation by the fast model.

Source: block/goose (2026 files) ``crates/goose/src/context_mgmt/mod.rs`` (``compact_messages``,
``check_if_compaction_needed``, ``do_compact``, ``filter_tool_responses``,
``DEFAULT_COMPACTION_THRESHOLD``), ``crates/goose/src/agents/agent.rs`` (``reply``: the check when a
reply starts; ``reply_internal``: the ``ContextLengthExceeded`` recovery) and
``crates/goose/src/providers/anthropic.rs`` (``ANTHROPIC_DEFAULT_FAST_MODEL``):

* when a reply starts (a user message), compact if the session's tokens (the last usage) are over
  0.8 × the context limit (``GOOSE_AUTO_COMPACT_THRESHOLD``);
* the whole agent-visible conversation is summarised by the provider's fast model
  (``complete_fast``; claude-haiku-4-5 on Anthropic): the conversation as text in the summariser's
  system prompt, one short user message, no tools: nothing is read from the main loop's cache. If
  that request is itself too long it is retried with 10%, 20%, 50%, then 100% of the tool responses
  removed from the middle out;
* the new conversation is the summary (a user message), an assistant message telling the model its
  context was compacted and to go on (calling tools if it was in a tool loop), and a fresh copy of
  the most recent message the user typed;
* inside a reply there is no threshold check: a request the API rejects as too long is compacted
  the same way and sent again; a second rejection in the same reply ends it ("Unable to continue:
  Context limit still exceeded after compaction").
"""

from __future__ import annotations

import math

from ctxsim.harness.llm.services import SUMMARY, CallSpec, SideCallFailed
from ctxsim.harness.model.conversation import Block, History, Message, Request, SystemPrompt, ToolSet
from ctxsim.strategies.base import CallInfo, Rejection
from ctxsim.strategies.templates import PeerConfig, ThresholdCompactor, is_plain_user, transcript_text
from pydantic import Field

THRESHOLD = 0.8  # context_mgmt/mod.rs DEFAULT_COMPACTION_THRESHOLD
REMOVAL_PERCENTAGES = (0, 10, 20, 50, 100)  # do_compact: tool responses removed, middle out
FAST_MODEL = "claude-haiku-4-5"  # providers/anthropic.rs ANTHROPIC_DEFAULT_FAST_MODEL
MAX_RECOVERIES = 1  # agent.rs: compaction_attempts >= 2 → "Unable to continue"
CONVERSATION_CONTINUATION = ("Your context was compacted. The previous message contains a summary of the conversation "
                             "so far. Do not mention that you read a summary or that conversation summarization "
                             "occurred. Just continue the conversation naturally based on the summarized context.")
TOOL_LOOP_CONTINUATION = ("Your context was compacted. The previous message contains a summary of the conversation "
                          "so far. Do not mention that you read a summary or that conversation summarization "
                          "occurred. Continue calling tools as necessary to complete the task.")
SUMMARIZE_ASK = "Please summarize the conversation history provided in the system prompt."
COMPACTION_SYSTEM = """\
You summarise a conversation between a user and a coding agent so the agent can continue it from \
the summary alone: the user's intent, technical concepts, files and their changes, errors and \
fixes, problem solving, the user's messages, pending tasks, the current work and the next step.

{messages}"""  # this project's wording of compaction.md's purpose


def remove_tool_responses(messages: list[Message], percent: int) -> list[Message]:
    """``filter_tool_responses``: drop ``percent``% (at least one) of the messages holding tool
    responses, alternately left and right of the middle one."""
    if percent == 0:
        return messages
    idx = [i for i, m in enumerate(messages) if m.has_tool_result]
    if not idx:
        return messages
    n = max(1, len(idx) * percent // 100)
    mid = len(idx) // 2
    drop = set()
    for k in range(n):
        off = k // 2
        if k % 2 == 0 and mid > off:
            drop.add(idx[mid - off - 1])
        elif k % 2 == 1 and mid + off < len(idx):
            drop.add(idx[mid + off])
    return [m for i, m in enumerate(messages) if i not in drop]


class GooseConfig(PeerConfig):
    threshold: float = Field(THRESHOLD, gt=0, lt=1, description="compact when a reply starts over this share "
                             "of the context limit (GOOSE_AUTO_COMPACT_THRESHOLD)")
    summary_model: str | None = Field(FAST_MODEL, description="the fast model that summarises (Anthropic: "
                                      "claude-haiku-4-5); None: the run's model")
    summary_max_tokens: int = Field(8_192, ge=256, le=200_000, description="output bound of the summary call (assumed)")


class Goose(ThresholdCompactor):
    name = "goose"

    @classmethod
    def summarises_dropped(cls, config) -> bool:
        # its compactions summarise what they drop (the kit's ``summarised``)
        return True
    keeps_latest_request = True   # do_compact: "a fresh copy of the most recent message the user typed"
    summary = "goose: when a reply starts over 80% of the window, the fast model summarises the whole conversation"
    on_rejection = ("compacts (tool responses removed 0/10/20/50/100% if the summary is too long) and sends again; a "
                    "second rejection in the same reply ends it (goose agent.rs ContextLengthExceeded)")
    Config = GooseConfig

    @classmethod
    def call_models(cls, config) -> dict[str, str]:
        return {"summary": config.summary_model or ""}   # the fast model on Anthropic (providers/anthropic.rs)

    @classmethod
    def compacts_at_turns(cls, config, window: int, max_output_tokens: int) -> int | None:
        # should_compact: a reply that starts with the last call's tokens (input and output) over the threshold
        return int(window * config.threshold)

    @classmethod
    def compacts_on_usage(cls, config, window: int, max_output_tokens: int) -> int:
        """should_compact: the last call's tokens (input and output) over ``threshold`` of the window, as a reply starts
        (``compacts_only_at_turns``): the least whole number past it."""
        return math.floor(window * config.threshold) + 1

    @classmethod
    def compacts_only_at_turns(cls, config) -> bool:
        # the threshold is checked as a reply starts (should_compact below, reply_started) and on a
        # context-length error (on_rejected): never between the tool calls of a reply
        return True

    def __init__(self, config, env) -> None:
        super().__init__(config, env)
        self.reply_started = False
        self.recoveries = 0  # compactions on a rejected request in this reply

    def on_user(self, message: Message) -> None:
        super().on_user(message)
        if is_plain_user(message):
            self.reply_started, self.recoveries = True, 0

    def should_compact(self, call: CallInfo) -> bool:
        started, self.reply_started = self.reply_started, False
        last = self.anchor.anchor  # input + output of the last reported call: the session's tokens
        return started and last is not None and last / self.env.window > self.config.threshold

    def compact(self, call: CallInfo) -> bool | None:
        c = self.config
        msgs = list(self.history)
        if not msgs:
            return None
        model = c.summary_model if self.env.provider == "anthropic" else None
        for percent in REMOVAL_PERCENTAGES:
            text = transcript_text(remove_tool_responses(msgs, percent))
            req = Request(SystemPrompt.of(COMPACTION_SYSTEM.format(messages=text)), ToolSet(),
                          History([Message.user(SUMMARIZE_ASK)]), model=model)
            try:
                res = self.env.services.call(req, CallSpec(kind=SUMMARY, max_output_tokens=c.summary_max_tokens))
                break
            except SideCallFailed as e:  # too long: remove more tool responses; anything else: give up
                self.counters.extra[f"summary_failed_{e.reason}"] += 1
                if e.reason != "prompt_too_long":
                    return False
        else:
            return False
        last_user = next((m for m in reversed(msgs) if is_plain_user(m)), None)
        in_loop = not (msgs and is_plain_user(msgs[-1]))
        new = [Message.user(res.text, origin="summary"),
               Message("assistant", (Block.text_block(TOOL_LOOP_CONTINUATION if in_loop else CONVERSATION_CONTINUATION),),
                       {"origin": "summary_ack"})]
        if last_user is not None:
            new.append(Message.user(last_user.text))
        else:
            new.append(Message.user("Continue.", origin="continuation"))  # assumed: the API needs a user turn last
        self.set_history(History(new))
        return True

    def on_rejected(self, rejection: Rejection, call: CallInfo) -> bool:
        if "overflow" not in rejection.reasons or self.recoveries >= MAX_RECOVERIES:
            return False
        self.recoveries += 1
        return self.compact_now(call)
