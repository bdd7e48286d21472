"""The log's side of fidelity: its model calls in order, each tied to its context thread, what
the API billed for them, and the engine rows that replay them (harness/fidelity/compare.py compares
the two; harness/fidelity/measured.py sizes the steps between them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd
from ctxsim.harness.llm.services import SUBAGENT
from ctxsim.harness.model.conversation import Usage
from ctxsim.harness.model.trace import (
    ROUTE,
    TOOLS_LOADED,
    AssistantEvent,
    CompactEvent,
    RecordedUsage,
    SessionStart,
    SubtaskEnd,
    SubtaskStart,
    TextContent,
    ThinkingContent,
    ToolResultEvent,
    Trace,
    UserEvent,
    is_call,
)
from ctxsim.harness.provider import Provider
from ctxsim.strategies.recorded import EFFORT_SET, MCP_COMMAND, budget_thinking, load_rekeys

# user messages a miss right after is reported beside: what the log shows came in just before the
# cache was lost (a <task-notification> is no cause by itself; /mcp, /effort and a resume are,
# strategies/recorded.py). An interrupted turn raises the odds without deciding them: in the development
# population 50 of the 252 new turns after "[Request interrupted by user]" with no resume fell back (20%),
# against 10% of the others
INTERRUPTED = "[Request interrupted by user"   # Claude Code's record of an interruption (streaming or a tool use)
NOTED_BEFORE = (("<task-notification>", "<task-notification>"), (MCP_COMMAND, "/mcp"), (EFFORT_SET, "/effort"),
                (INTERRUPTED, "an interrupted turn"))
RESUMED = "/resume"   # the trigger of the main context's first call after a resumed launch (a session_start with resume)
# the trigger of the main context's first call after the first tool a tool search loaded, on a model where
# that changes the prefix (strategies/recorded.py TOOL_LOAD_REKEYS)
TOOL_LOAD = "a tool search's first load"
# triggers after which the log's client sent a changed prefix (the replay re-enacts each: strategies/recorded.py)
CHANGES_PREFIX = ("/mcp", "/effort", RESUMED, TOOL_LOAD)

@dataclass
class RecordedCall:
    """One model call of the log, with what fidelity needs to compare it."""

    index: int                    # 0-based position among the trace's assistant events
    t: float
    model: str | None
    usage: RecordedUsage | None
    thread: str                   # "main" or the sub-agent span id
    after_compact: bool           # first call of its thread after a compaction
    new_chars: int                # characters that entered this thread's context since its previous call
    prev_in_thread: int | None    # index of the previous call of the same thread
    tools: tuple[str, ...] = ()   # the tools this call used (what ran between it and the next call)
    trigger: str | None = None    # a noted user message since the previous call (NOTED_BEFORE), named
    new_turn: bool = False        # a user message (not tool results, not a meta record) came since the previous call
    added: tuple[int, ...] = ()   # trace indices of the tool results and user messages this thread took in since its previous call
    thinking_switch: bool = False  # a new turn that switched thinking on a model sent a budget (recorded.thinking_switch)
    after_thinking: bool = False  # a new turn after answers that showed thinking (what a model that strips it drops)
    # a new turn after a turn whose answers before its last call showed thinking: the requests the
    # cache holds carry it, so an API that drops the previous turns' thinking changes a cached prefix
    thought_in_prefix: bool = False
    withheld_thinking: bool = False  # this call's answer holds thinking whose text the log withheld (2.1.x: empty)
    event: int = -1               # its position in trace.events
    route: str | None = None      # who served it where the log's calls went by several routes (trace.ROUTE)

    @property
    def context(self) -> int:
        return self.usage.context_tokens if self.usage else 0

    @property
    def cached(self) -> int:
        """What this call left in the cache for the next to read: what it read and wrote, where it wrote
        (explicit breakpoints: its input past the last one stays uncached); its whole context where it
        wrote nothing (an automatic cache keeps every prompt). The development population (issue 41):
        after a main-context call that sent over 200 tokens uncached (185 calls, Claude Code 1.0.98-2.1.143),
        the next call read exactly that call's read + write in 96% of them, its whole context in none."""
        if self.usage is None:
            return 0
        written = self.usage.cache_write_5m + self.usage.cache_write_1h
        return self.usage.cache_read + written if written else self.usage.context_tokens


def recorded_calls(trace: Trace, model: str | None = None) -> list[RecordedCall]:
    """The trace's calls in order, each tied to its context thread (main or a sub-agent span);
    ``model`` replaces every call's recorded model."""
    out: list[RecordedCall] = []
    spans: list[str] = []
    chars: dict[str, int] = {"main": 0}
    last: dict[str, int] = {}
    compacted: set[str] = set()
    triggers: dict[str, str] = {}
    turns: set[str] = set()
    added: dict[str, list[int]] = {}
    thinking: dict[str, bool] = {}        # thread -> the thinking of its last turn (user meta.thinking)
    switched: set[str] = set()
    thought: dict[str, bool] = {}         # thread -> its answers since its last new turn showed thinking
    thought_before: dict[str, bool] = {}  # thread -> ... the answers before its latest one did
    loaded = False                        # a tool search loaded a tool in the main context
    for i, ev in enumerate(trace.events):
        thread = spans[-1] if spans else "main"
        if isinstance(ev, SubtaskStart):
            if ev.isolated:
                spans.append(ev.id)
                chars[ev.id] = 0
        elif isinstance(ev, SubtaskEnd):
            if spans and spans[-1] == ev.id:
                spans.pop()
        elif isinstance(ev, UserEvent):
            chars[thread] = chars.get(thread, 0) + len(ev.text)
            added.setdefault(thread, []).append(i)
            if not ev.meta.get("meta_record") and not ev.meta.get("hidden"):
                turns.add(thread)
                now = ev.meta.get("thinking")
                if isinstance(now, bool):
                    if thread in thinking and thinking[thread] != now:
                        switched.add(thread)
                    thinking[thread] = now
            hit = next((name for mark, name in NOTED_BEFORE if mark in ev.text), None)
            if hit and triggers.get(thread) not in (RESUMED, TOOL_LOAD):   # a cause decides, whatever came with it
                triggers[thread] = hit
        elif isinstance(ev, SessionStart):
            if ev.resume and not spans:
                triggers["main"] = RESUMED
        elif isinstance(ev, ToolResultEvent):
            chars[thread] = chars.get(thread, 0) + len(ev.content)
            added.setdefault(thread, []).append(i)
            if not spans and not loaded and ev.meta.get(TOOLS_LOADED):
                loaded = True
                if triggers.get("main") != RESUMED:
                    triggers["main"] = TOOL_LOAD
        elif isinstance(ev, CompactEvent):
            compacted.add(thread)
            thought.pop(thread, None)
            thought_before.pop(thread, None)
            added.pop(thread, None)
            chars[thread] = len(ev.summary or "")
        elif isinstance(ev, AssistantEvent) and ev.copied:   # history a resumed conversation starts from
            chars[thread] = chars.get(thread, 0) + _answer_chars(ev)
        elif isinstance(ev, AssistantEvent):
            names = tuple(c.name for c in ev.tool_uses()) + tuple(
                "web_search_call" for c in ev.content if isinstance(c, TextContent) and c.text.startswith("[web_search_call]"))
            m = model or ev.model
            trigger = triggers.pop(thread, None)
            if trigger == TOOL_LOAD and not load_rekeys(m):
                trigger = None   # a load changes no prefix on this model
            out.append(RecordedCall(len(out), ev.t, m, ev.usage, thread, thread in compacted,
                                    chars.get(thread, 0), last.get(thread), names, trigger,
                                    thread in turns, tuple(added.pop(thread, ())),
                                    thinking_switch=thread in switched and budget_thinking(m),
                                    after_thinking=thread in turns and thought.get(thread, False),
                                    thought_in_prefix=thread in turns and thought_before.get(thread, False),
                                    withheld_thinking=any(isinstance(c, ThinkingContent) and not c.thinking
                                                          for c in ev.content),
                                    event=i, route=ev.meta.get(ROUTE)))
            if thread in turns:
                thought[thread] = False
            thought_before[thread] = thought.get(thread, False)
            if any(isinstance(c, ThinkingContent) for c in ev.content):
                thought[thread] = True
            turns.discard(thread)
            switched.discard(thread)
            compacted.discard(thread)
            last[thread] = len(out) - 1
            chars[thread] = _answer_chars(ev)
    return out


def _answer_chars(ev: AssistantEvent) -> int:
    return sum(len(c.text) if isinstance(c, TextContent) else len(c.thinking) if isinstance(c, ThinkingContent)
               else len(c.name) + len(str(c.input)) for c in ev.content)


def other_cache(c: Any, prev: Any) -> bool:
    """Whether call ``c`` reads another cache than the one ``prev`` wrote to: another model's, or
    another route's (``RecordedCall.route``: Vertex and Anthropic's API cache apart)."""
    return c.model != prev.model or getattr(c, "route", None) != getattr(prev, "route", None)


def continues(c: RecordedCall, prev: RecordedCall | None) -> bool:
    """Same context, grown by appending: the pairs the scale is fitted on and deltas are taken on."""
    return (prev is not None and not c.after_compact and c.model == prev.model
            and c.usage is not None and prev.usage is not None)


def usage_of(u: RecordedUsage) -> Usage:
    return Usage(u.input, u.cache_write_5m, u.cache_write_1h, u.cache_read, u.output)


def billed_events(trace: Trace) -> list[AssistantEvent | CompactEvent]:
    """The events of the calls the log billed: model calls and recorded compaction calls with usage (a
    copy of an earlier session's call, ``AssistantEvent.copied``, was billed there)."""
    return [e for e in trace.events if (is_call(e) or isinstance(e, CompactEvent)) and e.usage is not None]


def copied_events(trace: Trace) -> list[AssistantEvent]:
    """The copies of an earlier session's calls that carry usage (``AssistantEvent.copied``): billed in the
    session that made them, never here."""
    return [e for e in trace.events if isinstance(e, AssistantEvent) and e.copied and e.usage is not None]


def recorded_usages(trace: Trace, model: str | None = None) -> list[tuple[RecordedUsage, str | None]]:
    """Every call the log billed (:func:`billed_events`) with its usage and its model (``model`` for
    all, if given; else the call's, else the trace's)."""
    default = model or trace.header.model
    return [(e.usage, model or _call_model(e) or default) for e in billed_events(trace)]


def _call_model(e: AssistantEvent | CompactEvent) -> str | None:
    return e.model if isinstance(e, AssistantEvent) else e.meta.get("call_model")


def recorded_cost(trace: Trace, models_file: str | None = None) -> float:
    """What the API billed for the log, each call priced on its own model (the ccusage figure)."""
    return sum(c.cost_usd for c in priced_calls(trace, models_file))


@dataclass(frozen=True)
class BilledCall:
    """One call the log billed: its API request id (None: a compaction call, or a log without
    one), its usage and its cost on its own model."""

    request_id: str | None
    usage: RecordedUsage
    cost_usd: float
    copied_from: str | None = None   # a copy's: the thread a fork copied it from (a Codex thread id), where known


def priced_calls(trace: Trace, models_file: str | None = None, *, copied: bool = False) -> list[BilledCall]:
    """:func:`recorded_usages` with each call's request id and cost (their sum: :func:`recorded_cost`);
    ``copied``: the copies of an earlier session's calls instead (``AssistantEvent.copied``, billed there),
    priced the same way."""
    provider = Provider(trace.header.model, models_file=models_file)
    events = copied_events(trace) if copied else billed_events(trace)
    return [BilledCall(e.request_id if isinstance(e, AssistantEvent) else None, e.usage,
                       provider.price(usage_of(e.usage), provider.spec_for(_call_model(e) or trace.header.model)),
                       e.meta.get("copied_from") if copied and isinstance(e.meta.get("copied_from"), str) else None)
            for e in events]


def sim_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The engine rows of the recorded calls (main and sub-agent), in trace order."""
    return df[df["kind"].isin(["main", SUBAGENT])].reset_index(drop=True)


def thread_starts(calls: list[RecordedCall]) -> dict[str, RecordedCall]:
    """The first call with usage of each context thread (main, each sub-agent span)."""
    out: dict[str, RecordedCall] = {}
    for c in calls:
        if c.usage is not None:
            out.setdefault(c.thread, c)
    return out


def billed_calls(trace: Trace) -> int:
    """The API calls the log billed: its model calls with usage and its recorded compaction calls
    (what ``ctxsim import``'s table, the recorded cost and ``ctxsim fidelity`` all count)."""
    return len(recorded_usages(trace))


def billed_rows(df: pd.DataFrame, calls: list[RecordedCall], trace: Trace) -> pd.Series:
    """Which engine rows of a ``recorded`` replay stand for a call the log billed: the model calls
    that carry recorded usage, and the summary calls of the compactions whose call the log holds
    (Claude Code 1.0.x and a compaction with no ``agent-acompact`` file made a call the log does not
    show: its simulated price is reported apart, never compared with nothing)."""
    from ctxsim.harness.llm.services import SUMMARY

    with_usage = iter([c.usage is not None for c in calls])
    compacts = iter([e.usage is not None for e in trace.events if isinstance(e, CompactEvent) and not e.meta.get("no_call")])
    out = []
    for kind in df["kind"]:
        if kind in ("main", SUBAGENT):
            out.append(next(with_usage, False))
        elif kind == SUMMARY:
            out.append(next(compacts, False))
        else:
            out.append(False)
    return pd.Series(out, index=df.index, dtype=bool)


class FidelityGap(ValueError):
    """The replay of a log does not line up with its recorded calls (bad input: exit 2)."""


class NoUsage(ValueError):
    """The trace records no per-call usage: there is no bill to compare a replay with (exit 2)."""


class ReplayOverflow(FidelityGap):
    """The replay sent a request over the window where the log's call went through: said with the
    call, the two sizes and the window (``call``: the log's call, 0-based over its model calls)."""

    def __init__(self, message: str, call: int | None) -> None:
        super().__init__(message)
        self.call = call
