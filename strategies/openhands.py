"""openhands: OpenHands' LLMSummarizingCondenser, as the V1 SDK's default agent runs it.

Source: OpenHands/software-agent-sdk **v1.43.1** (``openhands-sdk/openhands/sdk/context/condenser/
llm_summarizing_condenser.py``: ``LLMSummarizingCondenser``, ``default_condenser``;
``condenser/base.py``: ``RollingCondenser.condense``, ``hard_context_reset``; ``context/view/``:
manipulation indices, batch atomicity; ``agent/agent.py``: the ``LLMContextWindowExceedError``
handler; ``openhands-tools/openhands/tools/preset/default.py``):

* the default agent condenses at ``max_size`` 80 events keeping the first ``keep_first`` 4 (the
  class defaults are 240 and 2, which the OpenHands app uses, plus a token trigger);
* **an event is one action or one observation**: an assistant turn with k parallel tool calls is k
  action events (one event when it calls no tool), its results are k observation events, a user
  message is one event, and the system prompt is the first event of the view;
* reasons to condense: the view holds more than ``max_size`` events (soft: skipped when no range can
  be forgotten), or its tokens exceed the token limit (hard), or a condensation request (hard). The
  token limit is ``min(max_tokens, the agent model's input limit)`` (``_effective_max_tokens``,
  ``llm_summarizing_condenser.py`` L96-115 at v1.43.1: "Takes the stricter (i.e. smaller) of the
  condenser's configured ``max_tokens`` and the agent LLM's effective input limit"; the model's
  limit is the window here, ``LLM.effective_max_input_tokens``), so a ``max_tokens`` above the
  window changes nothing. The tail kept is ``max_size // 2 − keep_first − 1``
  events, the suffix that brings the tokens under half the limit, or ``len(view) // 2 − keep_first −
  1`` events, whichever is strictest; the forgotten range runs from the first cut point at or after
  ``keep_first`` to the first at or after ``len − tail`` (cut points never split an assistant turn
  from its observations), and must be at least 10% of the view (``minimum_progress``);
* the summariser is a separate call with its own prompt (no system prompt, no tools, no cache
  markers), fed every forgotten event as text (the previous summary is one of them), uncut; the
  summary is inserted where the forgotten range began. A hard requirement with nothing to forget
  is a hard context reset: everything is summarised;
* a request the API rejects as too long becomes a condensation request, then the call is retried;
* **a failed summary on a hard requirement** (tokens or a condensation request): ``condense()``
  (``condenser/base.py`` ``RollingCondenser.condense`` at v1.43.1, ddac5569) catches the
  ``NoCondensationAvailableException`` that a failed summary call raises and falls back to
  ``hard_context_reset`` (``llm_summarizing_condenser.py``): every event summarised, up to
  ``hard_context_reset_max_retries`` = 5 attempts, the first whole, each later one with every event
  middle-cut (``maybe_truncate``) to ``hard_context_reset_context_scaling`` = 0.8 × the previous
  limit, starting from the longest event (0.8, 0.64, 0.512, 0.4096 of it); all five failing, the
  compaction fails. On a soft requirement (events only) a failed summary keeps the view.
  ``failed_summary="keep"`` is this module's reading before 2026-12 (a failed summary keeps the
  history, hard or not).

``release="v0"`` is the V0 reading this module had before 2026-12 (All-Hands-AI/OpenHands
``openhands/memory/condenser/impl/llm_summarizing_condenser.py`` and the production pipeline:
``max_size`` 120, ``keep_first`` 4): one event per *message*, no token trigger, the head fixed at the
first condensation, the previous summary passed separately, every event cut to 10,000 characters in
the middle in the summariser's input. It is also the template (:class:`Halving`) of
``amortized_forgetting``.
"""

from __future__ import annotations

from bisect import bisect_left
from itertools import accumulate
from typing import Literal

from ctxsim.harness.llm.services import SUMMARY, CallSpec
from ctxsim.harness.model.conversation import History, Message, Request, SystemPrompt, ToolSet
from ctxsim.strategies.base import CallInfo, Rejection
from ctxsim.strategies.templates import (
    PeerConfig,
    ThresholdCompactor,
    head_end,
    tail_start,
    transcript_text,
)
from pydantic import Field, model_validator

MAX_SIZE = 120  # V0 production default pipeline: LLMSummarizingCondenser(max_size=120)
KEEP_FIRST = 4  # V0 production default pipeline: keep_first=4
MAX_EVENT_LENGTH = 10_000  # V0 LLMSummarizingCondenser.max_event_length
V1_MAX_SIZE = 80  # software-agent-sdk llm_summarizing_condenser.py _DEFAULT_MAX_SIZE (default agent)
V1_KEEP_FIRST = 4  # _DEFAULT_KEEP_FIRST
MINIMUM_PROGRESS = 0.1  # LLMSummarizingCondenser.minimum_progress
HARD_RESET_MAX_RETRIES = 5  # v1.43.1 LLMSummarizingCondenser.hard_context_reset_max_retries
HARD_RESET_SCALING = 0.8  # v1.43.1 LLMSummarizingCondenser.hard_context_reset_context_scaling
TRUNCATE_NOTICE = ("<response clipped><NOTE>Due to the max output limit, only part of the full "
                   "response has been shown to you.</NOTE>")  # v1.43.1 sdk/utils/truncate.py DEFAULT_TRUNCATE_NOTICE
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


class _HeadPerHistory:
    """``head_len`` (the head fixed at the first condensation) belongs to one history: an isolated
    sub-agent's calls are sent from a fresh history, so its own head starts unset and the parent's
    comes back with the parent's history (the parent's head applied to a sub-agent's history cut a
    tool_use from its result: found by the kit, issue #45)."""

    head_len: int | None

    def on_subtask_start(self, id: str, description: str, isolated: bool) -> None:
        super().on_subtask_start(id, description, isolated)  # type: ignore[misc]
        self._heads = [*getattr(self, "_heads", []), (isolated, self.head_len)]
        if isolated:
            self.head_len = None

    def on_subtask_end(self, id: str, conclusion: str) -> None:
        super().on_subtask_end(id, conclusion)  # type: ignore[misc]
        heads = getattr(self, "_heads", [])
        if heads:
            isolated, head = heads.pop()
            if isolated:
                self.head_len = head


class Halving(_HeadPerHistory, ThresholdCompactor):
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


class OpenHandsConfig(PeerConfig):
    release: Literal["v1", "v0"] = Field("v1", description="v1: the SDK's default agent (events, token "
                                         "trigger); v0: this module's reading before 2026-12 (messages, 120/4)")
    max_size: int | None = Field(None, ge=4, le=1_000_000, description="condense when the view holds more "
                                 "events than this; None: the release's (v1 80, v0 120)")
    keep_first: int = Field(V1_KEEP_FIRST, ge=0, le=1_000_000, description="first events always kept (4)")
    max_tokens: int | None = Field(None, ge=1, le=100_000_000, description="v1 token trigger, capped at the "
                                   "agent model's input limit (the window: v1.43.1 _effective_max_tokens takes the "
                                   "smaller); None: that limit")
    max_event_length: int | None = Field(None, ge=100, le=10_000_000, description="characters of one event "
                                         "in the summariser's input (middle-cut); None: the release's "
                                         "(v1 whole, v0 10,000)")
    summary_max_tokens: int = Field(4_096, ge=256, le=200_000, description="output bound of the summary call")
    failed_summary: Literal["hard_reset", "keep"] = Field(
        "hard_reset", description="v1, a hard requirement whose summary call fails: hard_reset: summarise every "
        "event, up to hard_reset_max_retries tries shrinking each event (software-agent-sdk v1.43.1 condense()); "
        "keep: the history stays (this module's reading before 2026-12)")
    hard_reset_max_retries: int = Field(HARD_RESET_MAX_RETRIES, ge=1, le=100,
                                        description="attempts of a hard context reset (v1.43.1: 5)")
    hard_reset_scaling: float = Field(HARD_RESET_SCALING, gt=0, lt=1, description="each failed hard-reset attempt "
                                      "cuts every event to this share of the previous limit (v1.43.1: 0.8)")

    def size(self) -> int:
        return self.max_size if self.max_size is not None else (V1_MAX_SIZE if self.release == "v1" else MAX_SIZE)

    def event_length(self) -> int | None:
        if self.max_event_length is not None:
            return self.max_event_length
        return None if self.release == "v1" else MAX_EVENT_LENGTH

    @model_validator(mode="after")
    def _half(self):
        if self.keep_first >= self.size() // 2 - (1 if self.release == "v1" else 0):
            raise ValueError(f"keep_first ({self.keep_first}) must be less than max_size // 2 ({self.size() // 2}) "
                             "to leave room for condensation")
        return self


def maybe_truncate(content: str, limit: int | None) -> str:
    """software-agent-sdk v1.43.1 ``utils/truncate.py`` ``maybe_truncate`` (no file saved): keep the
    head (the larger half) and the tail of ``limit − len(notice)`` characters around the notice."""
    if not limit or len(content) <= limit or limit < 0:
        return content
    if len(TRUNCATE_NOTICE) >= limit:
        return TRUNCATE_NOTICE[:limit]
    available = limit - len(TRUNCATE_NOTICE)
    head = available // 2 + available % 2
    tail = available - head
    return content[:head] + TRUNCATE_NOTICE + (content[-tail:] if tail > 0 else "")


def events_of(m: Message) -> int:
    """Events one message stands for in OpenHands V1: an action per tool call (one event for a turn
    without calls), an observation per result, one event otherwise."""
    if m.role == "assistant":
        return max(1, sum(1 for b in m.blocks if b.type == "tool_use"))
    if m.has_tool_result:
        return sum(1 for b in m.blocks if b.type == "tool_result")
    return 1


class OpenHands(_HeadPerHistory, ThresholdCompactor):
    name = "openhands"

    @classmethod
    def summarises_dropped(cls, config) -> bool:
        # its compactions summarise what they drop (the kit's ``summarised``)
        return True
    @classmethod
    def compaction_tail(cls, config, window: int, max_output_tokens: int) -> tuple:
        """V1, on the events requirement: the tail starts at the first cut point (a message that is not a result) at or
        after ``len − (max_size // 2 − keep_first − 1)`` events: at most that many events, and the turn before it would
        carry it past them; past the window the tokens decide (:meth:`compaction_tail_under_window`), and a token limit
        under it (``max_tokens``) may cut further: no least then. V0 counts messages: not declared."""
        if config.release != "v1":
            return ()
        tail = config.size() // 2 - config.keep_first - 1
        least = tail if config.max_tokens is None or config.max_tokens >= window else 0
        return ((least, tail, "events"),)

    @classmethod
    def compaction_tail_under_window(cls, config) -> bool:
        """Past the token limit (the window) the tail is the suffix that brings the view under half of it."""
        return True

    @classmethod
    def compacts_above_events(cls, config) -> int | None:
        """V1: a view of more than ``max_size`` events condenses (``should_condense``); the soft requirement is skipped
        only when no range of at least a tenth of the view can be forgotten, which the tail of ``max_size // 2 −
        keep_first − 1`` events always leaves. V0 counts messages: not declared."""
        return config.size() if config.release == "v1" else None

    summary = "OpenHands V1 condenser: over 80 events (one per action/observation) keep first 4 + newest half, summarise the rest"
    on_rejection = ("a condensation request (half the view summarised; a hard reset if nothing can go), then "
                    "the call is retried (OpenHands SDK agent.py LLMContextWindowExceedError)")
    Config = OpenHandsConfig

    @staticmethod
    def check_params(window: int) -> dict:
        return {"max_size": 24, "keep_first": 4}  # the property kit's sessions are ~30 steps long

    def __init__(self, config, env) -> None:
        super().__init__(config, env)
        self.head_len: int | None = None  # v0: fixed at the first condensation
        self._request = False  # v1: a condensation request is pending (a rejected call)

    def on_session_start(self, session: str, resume: bool, now: float) -> None:
        super().on_session_start(session, resume, now)
        if not resume:
            self.head_len = None

    @property
    def v1(self) -> bool:
        return self.config.release == "v1"

    # --- v1: events --------------------------------------------------------------------------------
    def _starts(self) -> list[int]:
        """Event offset at which each message starts (the system prompt is event 0), and the view's
        length last."""
        return [1, *(1 + x for x in accumulate(events_of(m) for m in self.history))]

    def _limit(self) -> int:
        """``_effective_max_tokens`` (v1.43.1 L96-115): the smaller of ``max_tokens`` and the agent
        model's input limit (the window)."""
        m = self.config.max_tokens
        return self.env.window if m is None else min(m, self.env.window)

    def _reasons(self, starts: list[int]) -> set[str]:
        out = set()
        if self._request:
            out.add("request")
        if (self.estimate() or 0) > self._limit():
            out.add("tokens")
        if starts[-1] > self.config.size():
            out.add("events")
        return out

    def should_compact(self, call: CallInfo) -> bool:
        if not self.v1:
            return len(self.history) > self.config.size()
        return bool(self._reasons(self._starts()))

    def _forgotten(self, starts: list[int], reasons: set[str]) -> tuple[int, int]:
        """Messages ``[start, end)`` to forget."""
        c = self.config
        msgs = self.history
        n_events = starts[-1]
        tails = []
        if "request" in reasons:
            tails.append(n_events // 2 - c.keep_first - 1)
        if "events" in reasons:
            tails.append(c.size() // 2 - c.keep_first - 1)
        # cut points: message starts that are not results (an assistant turn keeps its observations)
        cuts = [i for i in range(len(msgs)) if not msgs[i].has_tool_result] + [len(msgs)]
        cut_at = [starts[i] for i in cuts]

        def next_cut(event: int) -> int:
            k = bisect_left(cut_at, event)
            return cuts[k] if k < len(cuts) else len(msgs)

        start = next_cut(c.keep_first)
        if "tokens" in reasons:
            reduce = (self.estimate() or 0) - self._limit() // 2
            j, gone = start, 0
            while j < len(msgs) and gone < reduce:
                gone += self.tokens_of([msgs[j]])
                j += 1
            tails.append(n_events - starts[j])
        end = next_cut(n_events - max(min(tails), 0))
        return start, max(start, end)

    def _v1_compact(self) -> bool | None:
        msgs = list(self.history)
        starts = self._starts()
        reasons = self._reasons(starts)
        if not reasons:
            return None
        start, end = self._forgotten(starts, reasons)
        forgotten = msgs[start:end]
        hard = bool(reasons & {"tokens", "request"})
        if not forgotten or (starts[end] - starts[start]) < starts[-1] * MINIMUM_PROGRESS:
            if not hard:
                return None  # soft: wait until a range can go
            res = None  # no range: straight to the hard context reset
        else:
            res = self._summarise(forgotten)
            if res is None and (not hard or self.config.failed_summary == "keep"):
                return False  # soft (or the older reading): the view stays
        if res is None:  # condense(): HARD and no condensation available → hard_context_reset
            start, end, forgotten = 0, len(msgs), msgs
            self.counters.extra["hard_context_resets"] += 1
            res = self._hard_reset(msgs)
            if res is None:
                return False
        self._request = False
        summary = Message.user(res, origin="summary")
        new = History([*msgs[:start], summary, *msgs[end:]])
        # the density the usage measured carries over (known finding #18: subtracting the forgotten
        # events at 4 characters per token ran 60-80% high on dense text)
        self.set_history(new, estimate=self.rebased_estimate(new))
        self.counters.extra["events_forgotten"] += sum(events_of(m) for m in forgotten)
        return True

    def _hard_reset(self, msgs: list[Message]) -> str | None:
        """``hard_context_reset`` (v1.43.1): summarise every event; after a failure cut every event to
        ``hard_reset_scaling`` × the limit (first: × the longest event), up to ``hard_reset_max_retries``
        attempts in all. With ``failed_summary="keep"`` one attempt, whole (the older reading)."""
        c = self.config
        tries = c.hard_reset_max_retries if c.failed_summary == "hard_reset" else 1
        limit: int | None = c.event_length()
        for _ in range(tries):
            res = self._summarise(msgs, cut=limit)
            if res is not None:
                return res
            if limit is None:
                limit = max(len(transcript_text([m])) for m in msgs)
            limit = int(limit * c.hard_reset_scaling)
            self.counters.extra["hard_reset_failed_attempts"] += 1
        return None

    def _summarise(self, forgotten: list[Message], previous: Message | None = None, *,
                   cut: int | None = None) -> str | None:
        c = self.config
        limit = c.event_length()
        if self.v1:
            events = "\n\n".join(f"<EVENT>\n{maybe_truncate(transcript_text([m], limit), cut)}\n</EVENT>"
                                   for m in forgotten)
            prompt = SUMMARY_PROMPT_V1.format(sections=", ".join(SUMMARY_SECTIONS), events=events)
        else:
            events = "\n\n".join(f"<EVENT id={i}>\n{middle_cut(m.text, limit or MAX_EVENT_LENGTH)}\n</EVENT>"
                                   for i, m in enumerate(forgotten, start=self.head_len or 0))
            prompt = SUMMARY_PROMPT.format(sections=", ".join(SUMMARY_SECTIONS),
                                           previous=previous.text if previous else "No events summarized",
                                           events=events)
        req = Request(SystemPrompt(), ToolSet(), History([Message.user(prompt)]))
        res = self.side_call(req, CallSpec(kind=SUMMARY, sections=SUMMARY_SECTIONS,
                                           max_output_tokens=c.summary_max_tokens))
        return None if res is None else res.text

    # --- v0: messages (the older reading) ----------------------------------------------------------
    def _previous(self) -> Message | None:
        h = self.history
        if self.head_len is not None and self.head_len < len(h) and h[self.head_len].meta.get("origin") == "summary":
            return h[self.head_len]
        return None

    def compact(self, call: CallInfo) -> bool | None:
        if self.v1:
            return self._v1_compact()
        c = self.config
        msgs = list(self.history)
        size = len(msgs) if self._request else c.size()  # a request halves the view
        head, start = halving_cut(msgs, c.keep_first, size, True, self.head_len)
        previous = self._previous()
        forgotten = [m for m in msgs[head:start] if m is not previous]
        if not forgotten:
            return None
        self.head_len = head
        text = self._summarise(forgotten, previous)
        if text is None:
            return False
        summary = Message.user(text, origin="summary")
        self.set_history(History([*msgs[:head], summary, *msgs[start:]]))
        self.counters.extra["events_forgotten"] += len(forgotten)
        return True

    def on_rejected(self, rejection: Rejection, call: CallInfo) -> bool:
        """A condensation request: condense now (v1: half the view, a hard reset if nothing can go;
        v0: the view halved)."""
        self._request = True
        try:
            return self.compact_now(call)
        finally:
            self._request = False


SUMMARY_PROMPT_V1 = """\
You are maintaining a context-aware state summary for an interactive agent. You are given the events \
being forgotten (they may include an earlier summary). Track, concisely: {sections}. Preserve task ids \
and statuses, the user's requirements, file paths and code state, test results and errors, and any \
version-control state.

{events}"""
