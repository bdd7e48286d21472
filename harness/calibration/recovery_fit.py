"""Real recovery as ground truth: what the recorded agent re-acquired after its compactions, and the
recovery probability of ``ctxsim.harness.retention.recovery`` fitted to it (``ctxsim calibrate-recovery``).

Observed, per recorded compaction and per kind (``read``: a file read again; ``rerun``: the same
command, search or fetch run again; :func:`ctxsim.harness.retention.recovery.key_of`):

* ``uses``: the acquisitions (tool uses with a key) in the ``WINDOW_CALLS`` main calls from the first
  call after the compaction;
* ``repeats``: those that repeat an earlier acquisition of the session;
* ``background``: the session's repeat rate outside every post-compaction window (repeats / uses),
  times ``uses``: what the agent re-reads anyway;
* ``excess`` = repeats − background: the recorded agent's own recovery.

Predicted: ``p[kind] × lost[kind]``, where ``lost`` is what the closed loop would re-acquire for the
recorded agent: the distinct sources (:class:`ctxsim.harness.retention.recovery.Source`, by the key of their re-run)
of the needs at risk across this compaction (fact last seen before it, needed within the window)
whose fact the recorded summary does not hold verbatim — the needs the simulated agent recovers.

The fit is the pooled ratio ``p[kind] = Σ excess / Σ lost`` over the compactions, bounded to [0, 1];
the leave-one-session-out check predicts each session's compactions with ``p`` fitted on the other
sessions. ``WINDOW_CALLS`` = 30 is the window the issue measured the excess in (13.4% of tool uses
re-reads in the 30 calls after a compaction against 3.8% elsewhere; assumed, a parameter). A window
ends at the next compaction: the calls after two close compactions count once, for the later one
(issue 43: overlapping windows were counted twice). A compaction seen in several logs (a conversation
copied under several session ids) counts once (harness/calibration/logs.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ctxsim.harness.model import trace as tr
from ctxsim.harness.retention.needs import Needs
from ctxsim.harness.retention.probes import _main_context
from ctxsim.harness.retention.recovery import FORMAT, KINDS, VERSION, key_of, reacquisitions, sources

WINDOW_CALLS = 30


@dataclass
class Compaction:
    """One recorded compaction: what was observed and what the model predicts."""

    source: str
    trigger: str
    call: int                                  # main calls before it
    session: str = ""                          # the session it belongs to (grouping of leave-one-session-out)
    window: int = 0                            # calls counted after it (WINDOW_CALLS, or to the next compaction)
    uses: dict[str, int] = field(default_factory=dict)
    repeats: dict[str, int] = field(default_factory=dict)
    background: dict[str, float] = field(default_factory=dict)
    excess: dict[str, float] = field(default_factory=dict)
    lost: dict[str, int] = field(default_factory=dict)
    at_risk: int = 0
    in_summary: int = 0


def observe(trace: tr.Trace, needs: Needs, name: str, window: int = WINDOW_CALLS, session: str = "",
            only: set[int] | None = None) -> list[Compaction]:
    """The recorded compactions of ``trace`` with their observed and model-side counts; ``only``: the
    indices of the compactions to report (the others are copies counted elsewhere)."""
    main = _main_context(trace.events)
    comps: list[tuple[int, int, tr.CompactEvent]] = []   # (event index, calls before, event)
    call = 0
    for i, ev in enumerate(trace.events):
        if not main[i]:
            continue
        if tr.is_call(ev):
            call += 1
        elif isinstance(ev, tr.CompactEvent):
            comps.append((i, call, ev))
    if not comps:
        return []
    srcs = sources(trace)
    uses_by_call: dict[int, list[tuple[str, bool]]] = {}   # call -> (kind, is a repeat)
    repeat_ids = {r.tool_use_id for r in reacquisitions(trace, ())}
    call = -1
    for i, ev in enumerate(trace.events):
        if not (main[i] and tr.is_call(ev)):
            continue
        call += 1
        for c in ev.tool_uses():
            if key_of(c.name, c.input) is None or c.id not in srcs:
                continue
            uses_by_call.setdefault(call, []).append((srcs[c.id].kind, c.id in repeat_ids))
    ends = [min(at + window, comps[j + 1][1]) if j + 1 < len(comps) else at + window
            for j, (_, at, _) in enumerate(comps)]   # a window stops at the next compaction
    in_window = {k for (_, at, _), end in zip(comps, ends, strict=True) for k in range(at, end)}
    facts = trace.facts()
    held_before, user_after = _around(trace, main, facts, [i for i, _, _ in comps], window)
    bg = {}
    for kind in KINDS:
        outside = [rep for c, us in uses_by_call.items() if c not in in_window for k, rep in us if k == kind]
        bg[kind] = (sum(outside) / len(outside)) if outside else 0.0
    out = []
    for j, ((idx, at, ev), end) in enumerate(zip(comps, ends, strict=True)):
        if only is not None and j not in only:
            continue
        comp = Compaction(name, ev.trigger, at, session or name, end - at)
        for kind in KINDS:
            us = [rep for c in range(at, end) for k, rep in uses_by_call.get(c, []) if k == kind]
            comp.uses[kind] = len(us)
            comp.repeats[kind] = int(sum(us))
            comp.background[kind] = round(bg[kind] * len(us), 4)
            comp.excess[kind] = round(comp.repeats[kind] - bg[kind] * len(us), 4)
        summary = ev.summary or ""
        lost: dict[str, set] = {k: set() for k in KINDS}
        done: set[str] = set()
        for nd in sorted(needs.by_key.values(), key=lambda n: n.call):
            if not at <= nd.call < end or nd.fact in done:
                continue
            held = held_before[idx].get(nd.fact)
            if held is None:      # not seen in a tool result before the compaction
                continue
            done.add(nd.fact)
            comp.at_risk += 1
            text = facts[nd.fact].text
            if text in summary or any(text in u for u in user_after[idx]):
                comp.in_summary += 1   # the summary (or a re-attached file) holds it
                continue
            src = srcs.get(held)
            if src is not None:
                lost[src.kind].add(key_of(*src.step()) or src.tool_use_id)
        comp.lost = {k: len(v) for k, v in lost.items()}
        out.append(comp)
    return out


def _around(trace: tr.Trace, main: list[bool], facts: dict, at: list[int], window: int
            ) -> tuple[dict[int, dict[str, str]], dict[int, list[str]]]:
    """Per compaction (event index): the tool_use id of the last main tool result before it that
    held each fact, and the texts of the user messages in its window (re-attached files, typed text)."""
    from ctxsim.harness.model.textmatch import matcher

    match = matcher({fid: f.text for fid, f in facts.items()})
    last: dict[str, str] = {}
    held: dict[int, dict[str, str]] = {}
    users: dict[int, list[str]] = {i: [] for i in at}
    calls_after: dict[int, int] = {i: 0 for i in at}
    for i, ev in enumerate(trace.events):
        if i in users:
            held[i] = dict(last)
        if not main[i]:
            continue
        for j in users:
            if j < i and calls_after[j] < window:
                if isinstance(ev, tr.UserEvent):
                    users[j].append(ev.text)
                elif tr.is_call(ev):
                    calls_after[j] += 1
        if isinstance(ev, tr.ToolResultEvent):
            for fid in match.present(ev.content):
                last[fid] = ev.tool_use_id
    return held, users


def fit(comps: Sequence[Compaction]) -> dict[str, float]:
    """``p[kind] = Σ excess / Σ lost``, bounded to [0, 1] (1.0 where nothing was lost)."""
    out = {}
    for kind in KINDS:
        lost = sum(c.lost[kind] for c in comps)
        ex = sum(c.excess[kind] for c in comps)
        out[kind] = round(min(1.0, max(0.0, ex / lost)), 4) if lost else 1.0
    return out


def leave_one_out(comps: Sequence[Compaction]) -> dict[str, Any]:
    """Each compaction predicted with ``p`` fitted on the other sessions' (leave one session out: a
    session's compactions share its agent, task and habits): per compaction and kind (predicted,
    observed excess, error), and pooled over compactions (predicted, observed, their ratio)."""
    rows = []
    pooled = {k: {"predicted": 0.0, "observed": 0.0} for k in (*KINDS, "all")}
    by_session: dict[str, dict[str, float]] = {}
    for c in comps:
        key = c.session or c.source
        if key not in by_session:
            others = [x for x in comps if (x.session or x.source) != key]
            by_session[key] = fit(others) if others else fit(comps)
    for c in comps:
        p = by_session[c.session or c.source]
        row: dict[str, Any] = {"source": c.source, "p": p}
        for kind in KINDS:
            pred = p[kind] * c.lost[kind]
            row[kind] = {"predicted": round(pred, 4), "observed": c.excess[kind], "error": round(pred - c.excess[kind], 4)}
            for k in (kind, "all"):
                pooled[k]["predicted"] += pred
                pooled[k]["observed"] += c.excess[kind]
        rows.append(row)
    for v in pooled.values():
        v["predicted"] = round(v["predicted"], 4)
        v["observed"] = round(v["observed"], 4)
        v["ratio"] = round(v["predicted"] / v["observed"], 4) if v["observed"] > 0 else None
        v["abs_error"] = round(abs(v["predicted"] - v["observed"]), 4)
    return {"per_compaction": rows, "pooled": pooled, "sessions": len(by_session),
            "mean_abs_error": {k: round(sum(abs(r[k]["error"]) for r in rows) / max(1, len(rows)), 4) for k in KINDS}}


def in_sample(comps: Sequence[Compaction], p: dict[str, float]) -> dict[str, Any]:
    out = {}
    for kind in KINDS:
        pred = sum(p[kind] * c.lost[kind] for c in comps)
        obs = sum(c.excess[kind] for c in comps)
        out[kind] = {"predicted": round(pred, 4), "observed": round(obs, 4),
                     "ratio": round(pred / obs, 4) if obs > 0 else None}
    return out


def data_file(comps: Sequence[Compaction], sources_: list[dict[str, Any]], command: str,
              window: int = WINDOW_CALLS) -> dict[str, Any]:
    """The package data file (harness/data/recovery.json) with its provenance."""
    p = fit(comps)
    return {"format": FORMAT, "version": VERSION,
            "source": {"command": command, "logs": sources_, "window_calls": window,
                       "compactions": len(comps), "sessions": len({c.session or c.source for c in comps}),
                       "windows": "each ends at the next compaction; a compaction copied in several logs counts once",
                       "code": "harness/calibration/recovery_fit.py: observe, fit, leave_one_out",
                       "observed": "excess re-acquisitions after each compaction: repeats of an earlier read / "
                                   "command in the window, minus the session's background repeat rate outside "
                                   "every post-compaction window",
                       "predicted": "p[kind] x distinct sources of the needs at risk across the compaction whose "
                                    "fact the recorded summary does not hold (harness/retention/needs.py, harness/retention/recovery.py)"},
            "probability": p,
            "compactions": [asdict(c) for c in comps],
            "fit": in_sample(comps, p),
            "leave_one_out": leave_one_out(comps)}
