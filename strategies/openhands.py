"""openhands: OpenHands' LLMSummarizingCondenser with the production defaults.

Source: All-Hands-AI/OpenHands, ``openhands/memory/condenser/impl/llm_summarizing_condenser.py``
(``LLMSummarizingCondenser``, a ``RollingCondenser``) and ``openhands/core/config/condenser_config.py``
(read 2025): class defaults ``max_size`` 100, ``keep_first`` 1; the production default pipeline
uses ``keep_first`` 4, ``max_size`` 120 (peers.md).

* when the view holds more than ``max_size`` events it is condensed: the first ``keep_first``
  events stay, then one summary event, then the newest ``max_size // 2 − keep_first − 1`` events;
  everything between (minus an earlier summary, whose text is fed back as the previous summary) is
  forgotten and summarised;
* the summariser is a separate, single-message call: its own prompt, the previous summary and each
  forgotten event as text, each event cut to ``max_event_length`` = 10,000 characters in the middle;
  prompt caching is off for it;
* the agent's own requests carry the usual Anthropic markers (system + last message).

An OpenHands event is one action or one observation; in the Messages API form one agent step is one
assistant message (the action) and one tool-result message (the observation), so here one event
is one message. The cut moves so that no ``tool_use`` loses its result (OpenHands filters unmatched
pairs out of the view; here they are never made).
"""

from __future__ import annotations

from pydantic import Field, model_validator

from harness.conversation import History, Message, Request, SystemPrompt, ToolSet
from harness.llm import SUMMARY, CallSpec
from strategies.base import CallInfo
from strategies.templates import PeerConfig, ThresholdCompactor, head_end, tail_start

MAX_SIZE = 120  # production default pipeline: LLMSummarizingCondenser(max_size=120)
KEEP_FIRST = 4  # production default pipeline: keep_first=4
MAX_EVENT_LENGTH = 10_000  # LLMSummarizingCondenser.max_event_length
SUMMARY_SECTIONS = ("USER_CONTEXT", "TASK_TRACKING", "COMPLETED", "PENDING", "CURRENT_STATE",
                    "CODE_STATE", "TESTS", "CHANGES", "DEPS", "VERSION_CONTROL_STATUS")

SUMMARY_PROMPT = """\
You keep the running state of a coding agent whose older events are being forgotten. Merge the \
previous summary with the forgotten events below into a new summary with these sections: {sections}. \
Keep the user's goals and requirements, what is done and what is pending, file paths and code \
state, test results and errors, and any version-control state. Be brief: under 1,000 words.

<PREVIOUS SUMMARY>
{previous}
</PREVIOUS SUMMARY>

{events}"""


def middle_cut(text: str, limit: int) -> str:
    """OpenHands ``truncate_content``: keep both ends of an over-long event."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n<response clipped><NOTE>Due to the max output limit, only part of this content has been shown to you.</NOTE>\n{text[len(text) - half:]}"


def halving_cut(messages: list[Message], keep_first: int, max_size: int, summary_slot: bool,
                head_len: int | None = None) -> tuple[int, int]:
    """Where a rolling condenser cuts: ``(head, tail_start)`` — keep ``messages[:head]`` and
    ``messages[tail_start:]``, forget (or summarise) the rest. ``head_len`` is the head fixed at the
    first condensation (an earlier summary follows it and is not counted as forgotten).

    Tail size = ``max_size // 2 − keep_first`` (− 1 for the summary's slot); both ends move to
    pair-safe boundaries (the head shrinks, the tail shrinks) so the result never grows past target."""
    n = len(messages)
    head = head_end(messages, min(keep_first, n)) if head_len is None else head_len
    from_tail = max_size // 2 - keep_first - (1 if summary_slot else 0)
    start = max(head, n - max(from_tail, 0))
    start = tail_start(messages, start, "forward")
    return head, start


class HalvingConfig(PeerConfig):
    """What OpenHands' rolling condensers share: the view size that triggers, the head kept."""

    max_size: int = Field(MAX_SIZE, ge=4, le=1_000_000, description="condense when the view holds more "
                          "events than this (production 120; class default 100)")
    keep_first: int = Field(KEEP_FIRST, ge=0, le=1_000_000, description="first events always kept "
                            "(production 4; class default 1)")

    @model_validator(mode="after")
    def _half(self):
        if self.keep_first >= self.max_size // 2:
            raise ValueError(f"keep_first ({self.keep_first}) must be less than half of max_size ({self.max_size})")
        return self


class Halving(ThresholdCompactor):
    """Template of the rolling condensers: over ``max_size`` events, cut to head + newest half
    (:func:`halving_cut`); subclasses say what replaces the middle. Not registered (no name)."""

    check_params = {"max_size": 24, "keep_first": 4}  # the property kit's sessions are ~30 steps long

    def __init__(self, config, env) -> None:
        super().__init__(config, env)
        self.head_len: int | None = None  # fixed at the first condensation

    def on_session_start(self, session: str, resume: bool, now: float) -> None:
        super().on_session_start(session, resume, now)
        if not resume:
            self.head_len = None

    def should_compact(self, call: CallInfo) -> bool:
        return len(self.history) > self.config.max_size


class OpenHandsConfig(HalvingConfig):
    max_event_length: int = Field(MAX_EVENT_LENGTH, ge=100, le=10_000_000, description="characters of one "
                                  "event in the summariser's input (middle-cut)")
    summary_max_tokens: int = Field(4_096, ge=256, le=200_000, description="output bound of the summary call")


class OpenHands(Halving):
    name = "openhands"
    summary = "OpenHands LLMSummarizingCondenser: over 120 events keep first 4 + newest half, summarise the rest"
    Config = OpenHandsConfig

    def _previous(self) -> Message | None:
        h = self.history
        if self.head_len is not None and self.head_len < len(h) and h[self.head_len].meta.get("origin") == "summary":
            return h[self.head_len]
        return None

    def compact(self, call: CallInfo) -> bool | None:
        c = self.config
        msgs = list(self.history)
        head, start = halving_cut(msgs, c.keep_first, c.max_size, True, self.head_len)
        previous = self._previous()
        forgotten = [m for m in msgs[head:start] if m is not previous]
        if not forgotten:
            return None
        events = "\n\n".join(f"<EVENT id={i}>\n{middle_cut(m.text, c.max_event_length)}\n</EVENT>"
                             for i, m in enumerate(forgotten, start=head))
        prompt = SUMMARY_PROMPT.format(sections=", ".join(SUMMARY_SECTIONS),
                                       previous=previous.text if previous else "No events summarized",
                                       events=events)
        req = Request(SystemPrompt(), ToolSet(), History([Message.user(prompt)]))
        res = self.side_call(req, CallSpec(kind=SUMMARY, sections=SUMMARY_SECTIONS,
                                           max_output_tokens=c.summary_max_tokens))
        if res is None:
            return False
        summary = Message.user(res.text, origin="summary")
        self.head_len = head
        self.set_history(History([*msgs[:head], summary, *msgs[start:]]))
        self.counters.extra["events_forgotten"] += len(forgotten)
        return True
