"""Context the recorded agent dropped with no record of it: the log's context falls between two
calls of one conversation by more than what came in, the cache breaks there, and no compaction,
``microcompact_boundary`` or thinking strip explains it.

The development population shows it in 39 sessions (45 drops: issue 41's baseline, §3g-2), mostly
Claude Code 1.0.x-2.1.13, mid tool loop: a context of 140-178k falls by a median 27k and the read
falls back to the system prefix. It is what Claude Code's microcompact does (old tool results'
content cleared) before 2.1.14 wrote ``microcompact_boundary`` records for it. The replay that keeps
everything reads a larger context than the log and, near the window, passes it.

So the drop is re-enacted: the oldest tool results of the conversation (since its last compaction,
none that came in at this very step) are cleared, as many as bring what they held closest to the
tokens the log lost, less what earlier drops since the last compaction cleared beyond theirs, so the
replay's context follows the log's (``meta.cleared_at_call`` on each, ``meta.cleared_by = "inferred"``;
the ``recorded`` strategy sends them as a placeholder from that call on). *Which* results Claude Code cleared the log does not
say: oldest first is assumed (the rule microcompact states for its records: the most recent are
kept). The size is the log's own measure, as harness/fidelity/measured.py sizes the steps that grew.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ctxsim.harness.fidelity.recorded import RecordedCall, continues
from ctxsim.harness.model.closest import nearest_prefix
from ctxsim.harness.model.trace import (
    AssistantEvent,
    CompactEvent,
    SubtaskEnd,
    SubtaskStart,
    ThinkingContent,
    ToolResultEvent,
    Trace,
    UserEvent,
    is_call,
    with_events,
)
from ctxsim.harness.replay.events import TOKEN_FACTOR
from ctxsim.strategies.recorded import strips_for

DROP_MIN_TOKENS = 3_000   # assumed (a parameter of :func:`find_drops`): below it a fall is tokenizer noise
DROP_MIN_SHARE = 0.10     # assumed: and at least this share of the previous context


@dataclass(frozen=True)
class Drop:
    call: int                    # the log's call (0-based over its model calls) whose context fell
    lost: int                    # recorded tokens the context lost beyond what came in
    cleared: tuple[str, ...]     # tool_use ids of the results cleared for it, oldest first
    cleared_tokens: int          # what they held, at the fitted scale


def _main_walk(trace: Trace) -> tuple[list[tuple[int, ToolResultEvent, int]], dict[int, tuple[int, int, tuple[str, ...]]]]:
    """One walk of the events: (event index, result, main compactions before it) of the main
    conversation's tool results, and for each model call (0-based over all of them, sub-agents' too)
    (its event's index, the main conversation's compactions before it, the thinking the main
    conversation's answers showed in the turn its last user message ended: counted only where a
    model strips it). A sub-agent's compaction is its own: it neither starts a new main
    conversation nor hides the main one's results."""
    results, at_call = [], {}
    depth = compactions = k = 0
    thinking: list[str] = []          # of the open turn
    ended: tuple[str, ...] = ()       # of the turn the last user message ended
    answered = False                  # an answer came since the last user message
    for i, e in enumerate(trace.events):
        if is_call(e):
            at_call[k] = (i, compactions, ended)
            k += 1
        if isinstance(e, SubtaskStart) and e.isolated:
            depth += 1
        elif isinstance(e, SubtaskEnd) and depth:
            depth -= 1
        elif depth:
            continue
        elif isinstance(e, CompactEvent):
            compactions += 1
            thinking, ended = [], ()
        elif isinstance(e, ToolResultEvent):
            results.append((i, e, compactions))
        elif isinstance(e, UserEvent) and not e.meta.get("meta_record") and not e.meta.get("hidden"):
            if answered:
                ended, thinking, answered = tuple(thinking), [], False
        elif isinstance(e, AssistantEvent):
            thinking += [c.thinking for c in e.content if isinstance(c, ThinkingContent)]
            answered = True
    return results, at_call


def find_drops(trace: Trace, calls: list[RecordedCall], base: dict[int, int], scale: float,
               count: Any, min_tokens: int = DROP_MIN_TOKENS, min_share: float = DROP_MIN_SHARE) -> list[Drop]:
    """The unrecorded drops of the main conversation and the results that re-enact each. ``base``:
    each call's visible content in cl100k tokens (measured.raw_contexts); ``count``: the tokenizer's
    text count. ``trace`` carries this calibration's measured sizes (measured.apply first): a
    result's size is what the log measured it at, not an earlier calibration's."""
    results, at_call = _main_walk(trace)
    strips = strips_for(trace.header.recorded)
    cleared: set[str] = {r.tool_use_id for _, r, _ in results if "cleared_at_call" in r.meta}
    out = []
    carry, carry_comp = 0.0, 0   # tokens cleared beyond what the log lost, since the last main compaction
    for c in calls:
        p = calls[c.prev_in_thread] if c.prev_in_thread is not None else None
        if c.thread != "main" or not continues(c, p):
            continue
        at, comp, thought = at_call[c.index]
        expected = p.context + scale * (base[c.index] - base[p.index])   # ``base`` strips what the replay strips
        lost = int(expected - c.context)
        if c.new_turn and strips(c.model):
            # the API dropped the previous turn's thinking, which ``base`` already left out at its
            # visible size; Claude 4 models return a summary of their full thinking (Anthropic's
            # extended-thinking docs, "summarized thinking"), so as much again is allowed for before
            # a loss counts as the agent's
            lost -= int(scale * sum(count(t) for t in thought))
        if lost < max(min_tokens, min_share * p.context):
            continue
        if c.usage.cache_read + max(256, 0.01 * p.context) >= p.context:
            continue   # the whole previous context was read: its prefix did not change
        if comp != carry_comp:
            carry, carry_comp = 0.0, comp
        came_in = set(c.added)
        sizes = [(r.tool_use_id, scale * count(r.content) * float(r.meta.get(TOKEN_FACTOR) or 1.0))
                 for i, r, rc in results if i <= at and rc == comp and r.tool_use_id not in cleared and i not in came_in]
        take, got = nearest_prefix(sizes, lost - carry)
        carry += got - lost
        if not take:
            continue
        cleared.update(take)
        out.append(Drop(c.index, lost, tuple(take), int(got)))
    return out


def apply(trace: Trace, drops: list[Drop]) -> Trace:
    """``trace`` with each drop's results marked cleared at its call (``meta.cleared_at_call``,
    ``meta.cleared_by = "inferred"``); earlier inferred marks are taken off first."""
    at = {tid: d.call for d in drops for tid in d.cleared}
    events = list(trace.events)
    changed = False
    for i, e in enumerate(events):
        if not isinstance(e, ToolResultEvent):
            continue
        meta = e.meta
        if meta.get("cleared_by") == "inferred" and e.tool_use_id not in at:
            meta = {k: v for k, v in meta.items() if k not in ("cleared_at_call", "cleared_by")}
        if e.tool_use_id in at and "cleared_at_call" not in meta:
            meta = {**meta, "cleared_at_call": at[e.tool_use_id], "cleared_by": "inferred"}
        if meta is not e.meta:
            events[i] = e.model_copy(update={"meta": meta})
            changed = True
    return with_events(trace, events) if changed else trace


def evidence(drops: list[Drop]) -> str:
    if not drops:
        return ""
    return (f"{len(drops)} context drop(s) with no record in the log (calls {', '.join(str(d.call) for d in drops[:12])}"
            f"{'...' if len(drops) > 12 else ''}; {sum(d.lost for d in drops):,} tokens lost): re-enacted by clearing "
            f"{sum(len(d.cleared) for d in drops)} of the oldest tool results (harness/fidelity/drops.py; which ones is "
            "assumed, oldest first)")


__all__ = ["DROP_MIN_SHARE", "DROP_MIN_TOKENS", "Drop", "apply", "evidence", "find_drops"]
