"""aider: Aider's chat-history summarisation.

Source: Aider-AI/aider **v0.86** (``aider/history.py``: ``ChatSummary.summarize_real``,
``summarize_all``; ``aider/models.py``: ``max_chat_history_tokens``; ``aider/prompts.py``:
``summarize``, ``summary_prefix``; ``aider/coders/base_coder.py``: ``summarize_start`` /
``summarize_end``, ``move_back_cur_messages``, ``check_tokens``, the ``ContextWindowExceededError``
handler; ``aider/coders/chat_chunks.py``: ``add_cache_control_headers``):

* the messages of finished exchanges (``done_messages``) have a budget of
  ``min(max(max_input / 16, 1024), 8192)`` tokens; when an exchange ends and they are over it, they
  are summarised (in a background thread, ready by the next exchange): the newest messages under
  half the budget stay, the head (ending on an assistant message) is summarised by a separate call
  (Aider's own system prompt, the messages as ``# USER`` / ``# ASSISTANT`` text, no tools), as a user
  message "I spoke to you previously about a number of things. …" followed by "Ok."; if summary
  and tail are still over the budget it recurses (depth ≤ 3; 4 messages or fewer are summarised
  whole);
* the current exchange (``cur_messages``, here everything since the last typed user message) is
  sent verbatim;
* **no cache markers by default**: ``aider/args.py`` at v0.86.2 (253f0368) declares ``--cache-prompts``
  with ``default=False`` ("Enable caching of prompts (default: False)"), and ``base_coder.py`` sets
  ``add_cache_headers`` only when it is on and the model supports cache control;
  ``cache_prompts=True`` (``--cache-prompts``; this module's default before 2026-12) puts them on the
  system prompt and on the chat files, which come after the finished exchanges
  (``chat_chunks.add_cache_control_headers``): the prefix through the last finished message is
  cached, the current exchange is not;
* a request over the model's input limit is not retried: the exchange ends (``check_tokens`` asks
  whether to go on; ``ContextWindowExceededError`` ends it).

Aider has no tool loop: its exchanges are short. Replayed on a tool-loop trace, an exchange is all
the calls between two user messages, kept whole and uncached, so a long one can outgrow the window
(that is where Aider would stop). The repo map and chat files are the trace's system prompt and tool
results; the weak model that summarises is priced as the run's model unless ``summary_model`` names
one (Aider's model settings pair Sonnet with a Haiku).
"""

from __future__ import annotations

from ctxsim.harness.llm.services import SUMMARY, CallSpec
from ctxsim.harness.model.conversation import (
    Block,
    Breakpoint,
    History,
    Message,
    Request,
    SystemPrompt,
    ToolSet,
)
from ctxsim.strategies.base import CallInfo, Rejection
from ctxsim.strategies.templates import PeerConfig, ThresholdCompactor, is_plain_user, last_plain_user
from pydantic import Field

CACHE_PROMPTS = False  # aider/args.py @ v0.86.2 (253f0368): --cache-prompts default=False
MIN_SPLIT = 4  # history.py summarize_real min_split
MAX_DEPTH = 3  # history.py: depth > 3 → summarize_all
INPUT_RESERVE = 512  # history.py: model max input − 512 for the head sent to the summariser
SUMMARY_PREFIX = "I spoke to you previously about a number of things.\n"  # prompts.py summary_prefix
SUMMARIZE_SYSTEM = """\
*Briefly* summarize this partial conversation about programming. Include less detail about older \
parts and more detail about the most recent messages. Start a new paragraph every time the topic \
changes! The summary *MUST* include the function names, libraries, packages and filenames being \
discussed. Phrase it with the USER in first person, telling the ASSISTANT about the conversation; \
start with "I asked you..."."""  # prompts.py summarize, condensed


def history_budget(max_input: int) -> int:
    """``models.py``: ``min(max(max_input_tokens / 16, 1024), 8192)``."""
    return int(min(max(max_input / 16, 1024), 8192))


def budget_of(config: AiderConfig, window: int) -> int:
    """The finished exchanges' budget: ``max_chat_history_tokens``, else :func:`history_budget` of the window."""
    return config.max_chat_history_tokens or history_budget(window)


class AiderConfig(PeerConfig):
    max_chat_history_tokens: int | None = Field(None, ge=1, le=10_000_000, description="budget of the finished "
                                                "exchanges; None: min(max(window / 16, 1024), 8192)")
    summary_model: str | None = Field(None, description="the weak model that summarises; None: the run's model")
    summary_max_tokens: int = Field(4_096, ge=256, le=200_000, description="output bound of a summary call (assumed)")
    cache_prompts: bool = Field(CACHE_PROMPTS, description="Aider's --cache-prompts: cache markers on the system "
                                "prompt and the finished exchanges (v0.86.2 args.py default: False; True was this "
                                "module's default before 2026-12)")


class Aider(ThresholdCompactor):
    name = "aider"
    summary = "Aider: finished exchanges summarised past min(max(window/16, 1k), 8k) tokens; the current one kept whole"
    on_rejection = "the exchange ends: no retry (aider base_coder.py check_tokens / ContextWindowExceededError)"
    Config = AiderConfig

    @classmethod
    def call_models(cls, config) -> dict[str, str]:
        return {"summary": config.summary_model or ""}   # the weak model, when one is named

    @classmethod
    def compaction_tail(cls, config, window: int, max_output_tokens: int) -> tuple:
        """``summarize_real`` keeps the newest finished messages while they stay under half the budget (then moves the
        split back to end the head on an assistant message): a bound its walk stays under, not a floor
        (:meth:`compaction_tail_walked`), in the characters its estimate counts them by."""
        # sized as it sizes them (tokens_of: the characters over chars_per_token, rounded up per message), in characters
        return ((float(budget_of(config, window) // 2) * config.chars_per_token, None, "chars"),)

    @classmethod
    def compaction_tail_walked(cls, config) -> bool:
        return True

    @classmethod
    def compacts_above(cls, config, window: int, max_output_tokens: int) -> int | None:
        """The finished exchanges are summarised once they pass the budget (:meth:`compacts_above_finished`)."""
        return budget_of(config, window)

    @classmethod
    def compacts_above_finished(cls, config) -> bool:
        return True

    @classmethod
    def compacts_only_at_turns(cls, config) -> bool:
        """``summarize_start`` runs when an exchange ends: the summary is asked for as the next user turn begins."""
        return True

    def __init__(self, config, env) -> None:
        super().__init__(config, env)
        self.exchange_ended = False

    def budget(self) -> int:
        return budget_of(self.config, self.env.window)

    def on_user(self, message: Message) -> None:
        super().on_user(message)
        if is_plain_user(message):
            self.exchange_ended = True

    @classmethod
    def cache_marks(cls, config) -> tuple[str, ...]:
        # the system prompt; the other marker closes the last finished exchange, not a fixed place
        return ("system",) if config.cache_prompts else ()

    def breakpoints(self, history: History) -> tuple[Breakpoint, ...]:
        if not self.config.cache_prompts:
            return ()
        done = last_plain_user(list(history))
        return (Breakpoint("system"),) + ((Breakpoint(done - 1),) if done > 0 else ())

    def should_compact(self, call: CallInfo) -> bool:
        ended, self.exchange_ended = self.exchange_ended, False
        return ended

    def compact(self, call: CallInfo) -> bool | None:
        msgs = list(self.history)
        cur = last_plain_user(msgs)
        done = msgs[:cur] if cur > 0 else []
        if not done or self.tokens_of(done) <= self.budget():
            return None
        new = self.summarize(done)
        if new is None:
            return False
        if new[-1].role != "assistant":
            new.append(Message("assistant", (Block.text_block("Ok."),), {"origin": "summary_ack"}))
        self.set_history(History([*new, *msgs[cur:]]))
        return True

    def summarize(self, messages: list[Message], depth: int = 0) -> list[Message] | None:
        """``summarize_real`` (None: a summary call failed)."""
        budget = self.budget()
        sized = [self.tokens_of([m]) for m in messages]
        if sum(sized) <= budget and depth == 0:
            return messages
        if len(messages) <= MIN_SPLIT or depth > MAX_DEPTH:
            return self.summarize_all(messages)
        split = self.split_at(messages, sized, budget)
        if split <= MIN_SPLIT:
            return self.summarize_all(messages)
        head, total = [], 0
        for tok, m in zip(sized[:split], messages[:split], strict=True):
            total += tok
            if total > self.env.window - INPUT_RESERVE:
                break
            head.append(m)
        summary = self.summarize_all(head)
        if summary is None:
            return None
        tail = messages[split:]
        if self.tokens_of(summary) + self.tokens_of(tail) < budget:
            return summary + tail
        return self.summarize(summary + tail, depth + 1)

    def split_at(self, messages: list[Message], sized: list[int], budget: int) -> int:
        """Where the kept tail starts: the newest messages while under half the budget, then back until the head ends on
        an assistant message (and, with tool calls, the tail starts on no result)."""
        tail_tokens, split = 0, len(messages)
        for i in range(len(messages) - 1, -1, -1):
            if tail_tokens + sized[i] < budget // 2:
                tail_tokens += sized[i]
                split = i
            else:
                break
        while split > 1 and (messages[split - 1].role != "assistant"
                             or (split < len(messages) and messages[split].has_tool_result)):
            split -= 1
        return split

    def summarize_all(self, messages: list[Message]) -> list[Message] | None:
        content = "".join(f"# {m.role.upper()}\n{m.text}\n" for m in messages)
        req = Request(SystemPrompt.of(SUMMARIZE_SYSTEM), ToolSet(), History([Message.user(content)]),
                      model=self.config.summary_model)
        res = self.side_call(req, CallSpec(kind=SUMMARY, max_output_tokens=self.config.summary_max_tokens))
        if res is None:
            return None
        self.counters.extra["summary_calls"] += 1
        return [Message.user(SUMMARY_PREFIX + res.text, origin="summary")]

    def on_rejected(self, rejection: Rejection, call: CallInfo) -> bool:
        return False
