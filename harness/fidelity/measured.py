"""Sizes the log measured: the recorded context's growth between two calls of one context is the
size, in the recorded model's own tokenizer, of what came in between. Where that growth is clean,
the tool results and user messages that came in carry their measured size into every replay.

Why: the fitted token scale is one ratio for all text, and text differs. codemie 624a4a58's
scale is 1.2775 (its first 30% of calls), yet its large steps grow at 1.06–1.15 recorded tokens
per cl100k token (an 86k-character Markdown plan at 1.06), while short steps carry ~20–60 tokens
of framing per block that cl100k does not see. One ratio priced every later request 12% high and
the replay 7.9% above the bill. The per-step ratios of every bundled Claude Code log show the same
spread (``python -m ctxsim.harness.fidelity.measured TRACE`` prints them).

What is measured, per call ``c`` that continues its thread's previous call ``p`` (same model, no
compaction between, both with usage):

* ``payload``: the cl100k tokens of the text of the tool results and user messages ``c``'s thread
  took in since ``p`` (the parts that have text in the log);
* ``fixed``: the rest of the replay's growth (``p``'s own blocks, framing), left at the scale;
* ``measured = (R_c − R_p) − scale·fixed`` recorded tokens for that text, so each of those events
  gets ``token_factor = measured / (scale·payload)``.

A step is used only when ``payload`` is at least :data:`MIN_PAYLOAD_TOKENS` and the factor lies
within :data:`FACTOR_RANGE`. Otherwise the text stays at the scale, and when the step grew by more
than the scale explains (above the floors fidelity's hidden deltas use) the excess is content the
log has no text for: it goes back on the step's last event as opaque tokens (``meta.hidden_tokens``).
It recurs: on spotter 258c7280 it follows Edit and Write calls, which the log shows ran
PostToolUse hooks (245 ``hook_progress`` records for PostToolUse:Edit over its 35 Edits) whose ``additionalContext``
Claude Code adds to the conversation (code.claude.com/docs/en/hooks, PostToolUse), with no text
in the transcript. Where the log shows such a hook ran for a tool use (the importer marks its
result ``meta.post_hook``), the floor is :data:`HOOK_MIN_TOKENS` instead: on 258c7280 and
ae4a77f8 that took the median context error from 2.07% and 2.44% to 0.43% and 0.81%. A step that
shrank is left alone. The factor
travels with the event (``meta.token_factor``), so a counterfactual strategy that sends the same
text pays what the recorded model counted for it; text a strategy writes itself is counted at
the scale.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
from ctxsim.harness.fidelity.recorded import (
    FidelityGap,
    RecordedCall,
    continues,
    recorded_calls,
    sim_rows,
    thread_starts,
)
from ctxsim.harness.model.trace import (
    AssistantEvent,
    RecordedSetting,
    ToolResultEvent,
    Trace,
    UserEvent,
    with_events,
    with_header,
)
from ctxsim.harness.provider.tokenizer import REQUEST_OVERHEAD
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.harness.replay.events import HIDDEN_TOKENS, TOKEN_FACTOR
from ctxsim.strategies.recorded import Recorded

if TYPE_CHECKING:
    from ctxsim.harness.provider.tokenizer import Tokenizer

# assumed (a parameter of :func:`steps`): below this many cl100k tokens of text a step's ratio is
# dominated by framing and the previous call's own blocks (the split between them is the scale's)
MIN_PAYLOAD_TOKENS = 500
# assumed (a parameter of :func:`steps`): outside this range a step is not a size but something
# else (hidden content several times the text, or text that left the context): the text stays at
# the scale and the excess is hidden content
FACTOR_RANGE = (0.5, 2.0)
# hidden content must exceed both floors (fidelity's hidden deltas use the same): the fitted
# scale's own error on a large tool result (10% of what was added) is tokenizer noise
HIDDEN_MIN_TOKENS = 200
HIDDEN_FRACTION = 0.10
# assumed (a parameter of :func:`steps`): the floor after a tool use the log shows a PostToolUse hook
# ran for (``meta.post_hook``, from its ``hook_progress`` records): there the excess has a known
# source, the hook's additionalContext, so a smaller one is taken as content rather than noise
HOOK_MIN_TOKENS = 50


@dataclass(frozen=True)
class Step:
    call: int            # the call whose growth measured the events
    events: tuple[int, ...]
    payload: int         # cl100k tokens of their text
    residual: int        # recorded tokens beyond what the scale makes of the step's content
    factor: float | None  # None: not used (why: ``reason``)
    reason: str = ""
    hidden: int = 0      # cl100k tokens of content the log has no text for, sized by the growth (on the last event)
    thinking: int = 0    # cl100k tokens of the previous answer's withheld thinking, sized by the growth (on that answer)
    answer: int = -1     # trace.events index of that answer


def steps(trace: Trace, calls: list[RecordedCall], base: dict[int, int], scale: float, tok: Tokenizer,
          min_payload: int = MIN_PAYLOAD_TOKENS, factor_range: tuple[float, float] = FACTOR_RANGE,
          hook_floor: int = HOOK_MIN_TOKENS) -> list[Step]:
    """Every step that took in text, with its measured factor, or why it is not used and the
    content it measured beyond the text (``hidden``)."""
    out = []
    for c in calls:
        prev = calls[c.prev_in_thread] if c.prev_in_thread is not None else None
        if not continues(c, prev) or not (c.added or prev.withheld_thinking):   # usage on both, same model, no compaction between
            continue
        raw = base[c.index] - base[prev.index]
        residual = (c.context - prev.context) - scale * raw
        payload = sum(tok.count(_text(trace.events[i])) for i in c.added)
        if prev.withheld_thinking and residual > 0:
            # the previous answer's thinking has no text in the log: what the step grew beyond its
            # visible content at the scale is that thinking (the text that came in stays at the scale).
            # A step that grew less than its visible content kept no thinking (a Codex rollout's
            # reasoning): its text is sized as any step's
            out.append(Step(c.index, c.added, payload, int(round(residual)), None, "after withheld thinking", 0,
                            max(0, int(round(residual / scale))), prev.event))
            continue
        factor = (residual + scale * payload) / (scale * payload) if payload else math.inf
        lo, hi = factor_range
        if payload >= min_payload and lo <= factor <= hi:
            out.append(Step(c.index, c.added, payload, int(round(residual)), round(factor, 4)))
            continue
        why = f"under {min_payload} tokens of text" if payload < min_payload else f"factor {factor:.2f} outside [{lo}, {hi}]"
        hooked = any(trace.events[i].meta.get("post_hook") for i in c.added)
        floor = max(hook_floor if hooked else HIDDEN_MIN_TOKENS, HIDDEN_FRACTION * scale * abs(raw))
        hidden = int(round(residual / scale)) if residual > floor else 0
        out.append(Step(c.index, c.added, payload, int(round(residual)), None, why, hidden))
    return out


def resent_startup(calls: list[RecordedCall], base: dict[int, int], scale: float, startup: int,
                   main_prefix: Callable[[RecordedCall], int]) -> tuple[int | None, str]:
    """How much of the first turn's hidden startup content (``startup`` recorded tokens) the agent
    re-sent after the log's compactions, and the evidence.

    The first main call after a compaction holds the opaque prefix, the summary and what the agent
    re-attached; all but the re-sent startup content is in the replay's own request (``base``), so
    ``startup + (R − prefix − scale·base)`` is what it re-sent (clamped to [0, startup]; the median
    over the compactions). Claude Code's docs say CLAUDE.md, rules and auto memory are re-injected
    but the skill listing is not (code.claude.com/docs/en/context-window, "What survives
    compaction"); the bundled logs re-send 757 of 5,403 (codemie 624a4a58), 1,641 of 4,403 (spotter
    258c7280) and 2,044 of 4,497 (spotter ae4a77f8) tokens. None: no compaction to measure it on."""
    got = []
    for c in calls:
        if c.after_compact and c.thread == "main" and c.usage is not None:
            residual = c.context - main_prefix(c) - scale * base[c.index]
            got.append((c.index, int(round(min(startup, max(0.0, startup + residual))))))
    if not startup or not got:
        return None, ""
    values = sorted(v for _, v in got)
    mid = values[len(values) // 2]
    return mid, (f"re-sent after a compaction: {mid:,} of the {startup:,} startup tokens (median of "
                 + ", ".join(f"call {i}: {v:,}" for i, v in got)
                 + "; the first call after each compaction, less its prefix, summary and re-attached files)")


def _text(ev) -> str:
    return ev.content if isinstance(ev, ToolResultEvent) else ev.text if isinstance(ev, UserEvent) else ""


def apply(trace: Trace, measured: list[Step]) -> Trace:
    """``trace`` with each used step's factor on its events (``meta.token_factor``); the events of
    unused steps lose any factor an earlier calibration left."""
    factors = {i: s.factor for s in measured for i in s.events}
    hidden = {s.events[-1]: s.hidden for s in measured if s.hidden and s.events}
    hidden.update({s.answer: s.thinking for s in measured if s.thinking})
    events = list(trace.events)
    changed = False
    for i, ev in enumerate(events):
        if isinstance(ev, AssistantEvent):
            h = hidden.get(i)
            if h != ev.meta.get(HIDDEN_TOKENS):
                meta = {k: v for k, v in ev.meta.items() if k != HIDDEN_TOKENS}
                if h:
                    meta[HIDDEN_TOKENS] = h
                events[i] = ev.model_copy(update={"meta": meta})
                changed = True
            continue
        if not isinstance(ev, (ToolResultEvent, UserEvent)):
            continue
        f, h = factors.get(i), hidden.get(i)
        if f == ev.meta.get(TOKEN_FACTOR) and h == ev.meta.get(HIDDEN_TOKENS):
            continue
        meta = {k: v for k, v in ev.meta.items() if k not in (TOKEN_FACTOR, HIDDEN_TOKENS)}
        if f is not None:
            meta[TOKEN_FACTOR] = f
        if h:
            meta[HIDDEN_TOKENS] = h
        events[i] = ev.model_copy(update={"meta": meta})
        changed = True
    if not changed:
        return trace
    return with_events(trace, events)


def evidence(measured: list[Step]) -> str:
    used = [s for s in measured if s.factor is not None]
    if not measured:
        return "no growth step took in text"
    tokens = sum(s.payload for s in used)
    fs = sorted(s.factor for s in used)
    spread = f"; factors {fs[0]:.2f}–{fs[-1]:.2f}, median {fs[len(fs) // 2]:.2f}" if fs else ""
    hidden = [s for s in measured if s.hidden]
    thought = [s for s in measured if s.reason == "after withheld thinking"]
    return (f"{len(used)} of {len(measured)} growth steps sized by the log ({tokens:,} cl100k tokens of text, "
            f"{sum(len(s.events) for s in used)} events){spread}; the rest at the scale "
            f"(under {MIN_PAYLOAD_TOKENS} tokens of text, or a factor outside {list(FACTOR_RANGE)}); "
            f"{len(hidden)} steps grew by content the log has no text for: "
            f"{sum(s.hidden for s in hidden):,} cl100k tokens put back on their last event"
            + (f"; {len(thought)} steps after an answer whose thinking the log withheld: "
               f"{sum(s.thinking for s in thought):,} cl100k tokens of thinking put back on those answers" if thought else ""))


def summary(trace: Trace) -> dict:
    """What the trace's events carry: how many are sized, and the hidden tokens put back."""
    sized = hidden = 0
    for ev in trace.events:
        meta = getattr(ev, "meta", None) or {}
        sized += TOKEN_FACTOR in meta
        hidden += int(meta.get(HIDDEN_TOKENS, 0))
    rec = trace.header.recorded
    return {"events": sized, "hidden_tokens": hidden, "evidence": rec.measured_sizes_evidence if rec else ""}


def raw_contexts(trace: Trace, calls: list[RecordedCall] | None = None, seed: int = 0,
                 model: str | None = None, models_file: str | None = None) -> dict[int, int]:
    """Each call's visible content in cl100k tokens (request framing left out): the recorded
    strategy replayed at scale 1 with no opaque prefix. What the scale is fitted on."""
    calls = calls if calls is not None else recorded_calls(trace, model)
    from ctxsim.harness.fidelity import drops, reattached

    # the text's cl100k size, whatever an earlier calibration measured, cleared or followed
    trace = reattached.apply(drops.apply(apply(trace, []), []), {})
    rec = trace.header.recorded or RecordedSetting()
    zero_rec = rec.model_copy(update={"token_scale": None, "warm_prefix_tokens": 0, "model_prefix_tokens": {},
                                      "startup_tokens": 0,
                                      "subagent_prefix_tokens": {k: 0 for k in thread_starts(calls) if k != "main"}})
    zero = with_header(trace, trace.header.model_copy(update={"prefix_tokens": 0, "recorded": zero_rec}))
    # the largest window a trace may name: raw sizes are measured, not refused (a log whose content
    # counts over its model's window in cl100k, e.g. 64,000-character tool results, stopped the
    # replay at its first refused call)
    from ctxsim.harness.model.trace import MAX_TOKENS

    run = replay(zero, Recorded, {}, RunConfig(model=model, token_scale=1.0, seed=seed, window=MAX_TOKENS,
                                               models_file=Path(models_file) if models_file else None))
    rows = sim_rows(run.calls)
    if len(rows) != len(calls):   # reported, never asserted (issue 31): the replay's own words say why
        errors = [str(e) for e in run.calls.get("error", pd.Series(dtype=str)).fillna("") if e]
        raise FidelityGap(f"{trace.header.name}: the replay of the recorded agent made {len(rows)} calls for the "
                          f"log's {len(calls)}" + (f" (first refusal: {errors[0][:160]})" if errors else "")
                          + "; its token scale cannot be fitted call by call")
    return {c.index: int(rows.loc[c.index, "context_tokens"]) - REQUEST_OVERHEAD for c in calls}


def main(argv: list[str] | None = None) -> int:
    """Print each growth step of a trace: ``python -m ctxsim.harness.fidelity.measured TRACE``."""
    from ctxsim.harness.model import trace as tr
    from ctxsim.harness.provider.tokenizer import get_tokenizer

    for path in (argv if argv is not None else sys.argv[1:]):
        t = tr.load(path)
        calls = recorded_calls(t)
        base = raw_contexts(t, calls)
        scale = (t.header.recorded.token_scale if t.header.recorded else None) or 1.0
        print(f"{path}: scale {scale}")
        for s in steps(t, calls, base, scale, get_tokenizer()):
            print(f"  call {s.call:4d}  text {s.payload:7,d}  residual {s.residual:7,d}  "
                  + (f"factor {s.factor:.3f}" if s.factor is not None else f"not used: {s.reason}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
