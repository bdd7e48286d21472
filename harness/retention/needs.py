"""Needs at risk: the retention headline that tells a strategy that keeps from one that cuts blind.

A *need* is one (probe, fact) pair of a trace: the call the probe precedes needs that fact. Which
needs are at risk is a property of the trace and of the window, never of a strategy, so every
strategy replayed on one trace at one window is scored on the same needs and the figures compare.

Distance
    ``distance_tokens``: the trace's tokens between the end of the content event where the fact was
    last seen (its text in a user message, a tool result or the agent's own text and tool inputs, in
    the main context) and the call that needs it. Tokens are the provider's true count of each
    event's text (``ctxsim.harness.retention.probes.seen_text``), the same for every strategy.

Turnover points
    Points where the window had to be emptied, whatever the strategy:

    * a compaction the recorded agent did (a ``compact`` event of an imported log);
    * a new session (``session_start`` that is not a resume): the context starts empty;
    * after the content event at which the context accumulated since the previous turnover point
      (the fixed prefix, then each main-context event's tokens) passes the window's compaction
      threshold, ``window − reserve_tokens``.

    ``reserve_tokens`` defaults to 33,000: Claude Code auto-compacts at effective window − 13,000 with
    effective window = window − 20,000 (reported, peers.md; the bundled logs compact at preTokens
    167,094 / 167,731 / 170,251 on 200k), and NovaCode's soft trigger is the same line (N-COMP-1,
    N-COMP-2: window − 20,000 − 13,000). It is a parameter (:class:`NeedsParams`).

At risk
    A need is **at risk** when a turnover point lies between where its fact was last seen and the
    call that needs it: only a summary, a pointer, a memory (or a tail the strategy kept across the
    cut) can carry it there. Everything else is last seen after the latest turnover, and every
    strategy that respects the window keeps it.

Headline (:func:`headline`): per run, the at-risk needs by where the strategy had them at the probe
— ``verbatim`` (in the window), ``summary``, ``pointer`` (a file path the request names holds the fact,
and the model **followed it and the read-back was billed**), ``lost`` (nothing carried it: a pointer
the model did not follow — counted again in ``unfollowed`` — and a probe the run never reached count
lost) — with ``kept = (verbatim + summary + pointer) / n`` and its Wilson 95% interval (:data:`KEPT`).
Each need has one outcome: a lost one may then be recovered (a billed re-read) or, when only the user
gave it, violated and restated by the closed loop (harness/retention/recovery.py), and is never also
counted kept (issue 43: an unfollowed pointer used to count kept while the loop billed its violation);
``goal`` and
``constraints`` are the at-risk needs of those categories (``constraints``: constraint and
preference facts, what the user set). The attention × position score of
``ctxsim.harness.retention.scoring`` is a second figure; it never enters this one.

Pooled across seeds (:func:`pooled`): counts are summed over seeds and sessions (``n`` is
needs × seeds), but a seed replays the same needs, so the interval is Wilson's on the *effective*
sample, each need counted once (k / seeds of n / seeds): pooling seeds does not narrow it. Two
strategies differ beyond noise when the 95% interval of the difference of their kept shares excludes
0. The needs are the same for both, so the difference is paired: per need (and seed) both keep it,
only one does, or neither, and the interval is Newcombe's score interval for paired proportions
(Stat Med 1998, 17:2635, method 10), on each need once (:func:`newcombe_paired`). Without per-need
outcomes (two pooled objects only) it falls back to the unpaired hybrid interval (Newcombe 1998,
Stat Med 17:873, method 10), which is wider.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxsim.harness.model import trace as tr
from ctxsim.harness.retention.probes import _main_context, seen_text
from pydantic import BaseModel, ConfigDict, Field

Z95 = 1.959963984540054  # the normal quantile of a 95% two-sided interval
RESERVE_TOKENS = 33_000  # window − 20,000 − 13,000: Claude Code auto-compact (reported, peers.md); N-COMP-1/2
DISTANCE_BINS = (10_000, 50_000, 100_000)  # strata of the distance figure (assumed: round numbers)
USER_GIVEN = ("goal", "constraint", "preference", "feedback")  # categories only the user can give
CONSTRAINT_LIKE = ("constraint", "preference")  # the headline's "constraints" line


class NeedsParams(BaseModel):
    """Where the window turns over (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    reserve_tokens: int = Field(RESERVE_TOKENS, ge=0, le=10_000_000, description=(
        "a turnover point is where the context accumulated since the previous one passes window − this "
        "(Claude Code auto-compact: window − 20,000 − 13,000, reported, peers.md; NovaCode N-COMP-1/2)"))


@dataclass(frozen=True)
class Need:
    probe: str
    fact: str
    category: str
    distance_tokens: int   # trace tokens from the end of the event where the fact was last seen to the call
    at_risk: bool          # a turnover point lies in between
    last_seen: int         # event index where the fact was last seen (-1: never before the call)
    source: str | None     # tool_use id of the last tool result that held the fact before the call
    from_user: bool        # the fact entered through a user message (only the user can give it again)
    call: int = -1         # the main call (0-based) that needs it


@dataclass(frozen=True)
class Needs:
    """The needs of one trace at one window: by (probe, fact), and the turnover points (event
    indices after which the window turns over)."""

    by_key: Mapping[tuple[str, str], Need]
    turnovers: tuple[int, ...]
    threshold: int

    def get(self, probe: str, fact: str) -> Need | None:
        return self.by_key.get((probe, fact))


def classify(trace: tr.Trace, count: Callable[[str], int], window: int, prefix_tokens: int = 0,
             params: NeedsParams | None = None) -> Needs:
    """The needs of ``trace`` and whether each is at risk at ``window`` (a pure function of its
    arguments). ``count``: true tokens of a text; ``prefix_tokens``: the system prompt and tools,
    present from the start of each context."""
    from ctxsim.harness.model.textmatch import matcher

    p = params or NeedsParams()
    threshold = max(1, window - p.reserve_tokens)
    events = trace.events
    main = _main_context(events)
    facts = {e.id: e for e in events if isinstance(e, tr.FactEvent)}
    match = matcher({fid: f.text for fid, f in facts.items()}) if facts else None
    turnovers: list[int] = []
    acc = prefix_tokens
    pos = 0                                      # trace tokens of main content events so far
    last: dict[str, tuple[int, int, int]] = {}   # fact -> (event index, position after it, turnovers before it)
    tool_before: dict[str, str] = {}             # fact -> tool_use id of the last tool result holding it
    entered_by_user: dict[str, bool] = {}
    last_content: Any = None
    pending: list[tr.ProbeEvent] = []
    out: dict[tuple[str, str], Need] = {}
    calls = 0

    def turn(i: int) -> None:
        nonlocal acc
        turnovers.append(i)
        acc = prefix_tokens

    for i, ev in enumerate(events):
        if isinstance(ev, tr.FactEvent):
            entered_by_user.setdefault(ev.id, isinstance(last_content, tr.UserEvent))
            continue
        if isinstance(ev, tr.ProbeEvent):
            pending.append(ev)
            continue
        if not main[i]:
            continue
        if isinstance(ev, tr.CompactEvent) or (isinstance(ev, tr.SessionStart) and not ev.resume):
            if isinstance(ev, tr.SessionStart) and not pos:
                continue  # the first session's start empties nothing
            turn(i)
            if isinstance(ev, tr.CompactEvent) and ev.summary:
                acc += count(ev.summary)
            continue
        if not isinstance(ev, tr.CONTENT_EVENTS):
            continue
        if tr.is_call(ev) and pending:
            for pr in pending:
                for fid in pr.needs:
                    f = facts.get(fid)
                    if f is None:
                        continue
                    seen = last.get(fid)
                    at, after, t_seen = seen if seen is not None else (-1, 0, len(turnovers))
                    risk = seen is not None and t_seen < len(turnovers)
                    src = tool_before.get(fid)
                    out[(pr.id, fid)] = Need(pr.id, fid, f.category, pos - after if seen is not None else 0,
                                             risk, at, src, entered_by_user.get(fid, False), calls)
            pending = []
        if tr.is_call(ev):
            calls += 1
        text = seen_text(ev)
        n = count(text) if text else 0
        pos += n
        acc += n
        last_content = ev
        if match is not None and text:
            for fid in match.present(text):
                last[fid] = (i, pos, len(turnovers))
                if isinstance(ev, tr.ToolResultEvent):
                    tool_before[fid] = ev.tool_use_id
        if acc > threshold:
            turn(i)
    return Needs(out, tuple(turnovers), threshold)


def for_run(trace: tr.Trace, provider: Any, params: NeedsParams | None = None) -> Needs:
    """:func:`classify` with the run's provider (its true counts and window), computed once per
    trace, window and token scale (kept in the trace's memo: every strategy of a compare shares it)."""
    p = params or NeedsParams()
    key = ("needs", provider.window, provider.token_scale, p.reserve_tokens)
    got = trace.memo.get(key)
    if got is None:
        h = trace.header
        tools = "\n".join(f"{t.name}\n{t.description}\n{json.dumps(t.input_schema)}" for t in h.tools)
        prefix = h.prefix_tokens + provider.count_text(h.system) + (provider.count_text(tools) if tools else 0)
        got = trace.memo[key] = classify(trace, provider.count_text, provider.window, prefix, p)
    return got


# --- intervals -------------------------------------------------------------------------------------

def wilson(k: float, n: float, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a proportion k / n (n may be fractional: an effective sample)."""
    if n <= 0:
        return (0.0, 1.0)
    ph = k / n
    den = 1 + z * z / n
    centre = (ph + z * z / (2 * n)) / den
    half = z / den * math.sqrt(max(0.0, ph * (1 - ph) / n + z * z / (4 * n * n)))
    return (max(0.0, centre - half), min(1.0, centre + half))


def newcombe_paired(a: float, b: float, c: float, d: float, z: float = Z95) -> tuple[float, float, float]:
    """(p1 − p2, low, high) on paired outcomes: ``a`` needs both keep, ``b`` only the first, ``c`` only
    the second, ``d`` neither. Newcombe's score interval for paired proportions (Stat Med 1998,
    17:2635, method 10): the two Wilson intervals combined with the correlation φ of the pairs
    (continuity-corrected when ad > bc; 0 when a margin is empty)."""
    n = a + b + c + d
    if n <= 0:
        return (float("nan"), float("nan"), float("nan"))
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = wilson(a + b, n, z)
    l2, u2 = wilson(a + c, n, z)
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    if margins <= 0:
        phi = 0.0
    else:
        num = a * d - b * c
        phi = (max(num - n / 2, 0.0) if num > 0 else num) / math.sqrt(margins)
    dd = p1 - p2
    lo = dd - math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    hi = dd + math.sqrt(max(0.0, (p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2))
    return (dd, lo, hi)


def paired_counts(runs_a: Sequence[Any], runs_b: Sequence[Any]) -> tuple[float, float, float, float, int]:
    """(a, b, c, d, seeds) of two configurations' runs on the needs at risk they share, matched by
    (trace, seed, probe, fact) from the runs' probe tables (``RunResult.probes`` with ``at_risk``);
    each count divided by the number of seeds matched (each need once)."""
    def kept(runs):
        out = {}
        for r in runs:
            pr = r.probes
            if "at_risk" not in pr:
                continue
            sub = pr[pr["at_risk"]]
            back = sub["restored"] if "restored" in sub else [False] * len(sub)
            for p, f, w, b in zip(sub["probe"], sub["fact"], sub["where"], back, strict=True):
                out[(r.trace_hash, r.seed, p, f)] = WHERE.get(w, "lost") in KEPT and not b
        return out

    ka, kb = kept(runs_a), kept(runs_b)
    both = [k for k in ka if k in kb]
    seeds = len({(k[0], k[1]) for k in both}) // max(1, len({k[0] for k in both})) or 1
    cnt = [0, 0, 0, 0]
    for k in both:
        cnt[(0 if kb[k] else 1) if ka[k] else (2 if kb[k] else 3)] += 1
    return (cnt[0] / seeds, cnt[1] / seeds, cnt[2] / seeds, cnt[3] / seeds, seeds)


def newcombe(k1: float, n1: float, k2: float, n2: float, z: float = Z95) -> tuple[float, float, float]:
    """(p1 − p2, low, high): Newcombe's hybrid score interval (1998, method 10)."""
    if n1 <= 0 or n2 <= 0:
        return (float("nan"), float("nan"), float("nan"))
    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = wilson(k1, n1, z)
    l2, u2 = wilson(k2, n2, z)
    d = p1 - p2
    return (d, d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2))


# --- per run -------------------------------------------------------------------------------------------

WHERE = {"window": "verbatim", "summary": "summary", "recoverable": "pointer", "unfollowed": "lost", "lost": "lost",
         "not_reached": "lost"}
# what carried a need at risk across a turnover (issue 26: "only a summary, a pointer or a memory can carry
# those needs across"): in the window, in a summary, or behind a pointer the request names (a spilled
# result, a memory or transcript file) that the model followed, its read-back billed (the probe row's
# where "recoverable"). A pointer it did not follow ("unfollowed") carried nothing: lost (issue 43).
KEPT = ("verbatim", "summary", "pointer")
PARTS = ("verbatim", "summary", "pointer", "lost")   # the split every report of the headline shows


def split_text(o: Mapping[str, Any]) -> str:
    """The split of a ``needs_at_risk`` object as every report gives it: verbatim, summary, pointer
    followed (read back and billed), lost (of which behind a pointer not followed)."""
    un = int(o.get("unfollowed") or 0)
    return (f"verbatim {o['verbatim']}, summary {o['summary']}, pointer followed {o['pointer']}, lost {o['lost']}"
            + (f" ({un} behind a pointer not followed)" if un else ""))


def kept_count(o: Mapping[str, Any]) -> int:
    """The needs of a ``needs_at_risk`` object (or its flat ``needs_at_risk.*`` parts) that were kept."""
    return sum(int(o[w]) for w in KEPT)


def restored_by_loop(row: Mapping[str, Any], restored: Mapping[str, int] | None) -> bool:
    """Whether the closed loop (harness/retention/recovery.py: a recovery re-read, a user's restatement) put the
    row's fact back at a call before the row's: then what the strategy holds of it there is the loop's
    doing, not the strategy's, and the headline counts it lost (``restored`` says how many)."""
    return bool(restored) and row["fact"] in restored and restored[row["fact"]] < row.get("call", -1)


def headline(rows: Iterable[Mapping[str, Any]], needs: Needs, restored: Mapping[str, int] | None = None) -> dict[str, Any]:
    """The ``needs_at_risk`` object of ``run --json`` from a run's probe rows (probe, fact, where,
    call); ``restored``: fact -> the main call at which the closed loop put it back
    (:func:`restored_by_loop`)."""
    counts = {"verbatim": 0, "summary": 0, "pointer": 0, "lost": 0}
    goal = [0, 0]
    cons = [0, 0]
    back = unfollowed = 0
    for r in rows:
        nd = needs.get(r["probe"], r["fact"])
        if nd is None or not nd.at_risk:
            continue
        w = WHERE.get(r["where"], "lost")
        if w != "lost" and restored_by_loop(r, restored):
            w = "lost"
            back += 1
        unfollowed += r["where"] == "unfollowed"
        counts[w] += 1
        kept = w in KEPT
        if nd.category == "goal":
            goal[0] += 1
            goal[1] += kept
        elif nd.category in CONSTRAINT_LIKE:
            cons[0] += 1
            cons[1] += kept
    out = _object(counts, goal, cons, 1)
    out["restored"] = back
    out["unfollowed"] = unfollowed
    return out


def _object(counts: Mapping[str, int], goal: Sequence[int], cons: Sequence[int], seeds: int) -> dict[str, Any]:
    n = sum(counts.values())
    k = sum(counts[w] for w in KEPT)
    lo, hi = wilson(k / seeds, n / seeds) if n else (None, None)
    return {"n": n, **{w: int(counts[w]) for w in ("verbatim", "summary", "pointer", "lost")},
            "kept": (k / n) if n else None, "kept_ci": [lo, hi],
            "goal": {"n": int(goal[0]), "kept": int(goal[1])}, "constraints": {"n": int(cons[0]), "kept": int(cons[1])}}


def by_distance(rows: Iterable[Mapping[str, Any]], needs: Needs, bins: Sequence[int] = DISTANCE_BINS) -> dict[str, Any]:
    """Every need (at risk or not) by its distance: ``{"<10k": {"n", "kept"}, ...}``; the second
    figure beside the headline, where the strata show how far back a strategy still holds facts."""
    labels = [f"<{bins[0] // 1000}k", *(f"{a // 1000}k-{b // 1000}k" for a, b in zip(bins, bins[1:])),
              f">={bins[-1] // 1000}k"]
    out = {lab: {"n": 0, "kept": 0} for lab in labels}
    for r in rows:
        nd = needs.get(r["probe"], r["fact"])
        if nd is None:
            continue
        b = sum(nd.distance_tokens >= x for x in bins)
        out[labels[b]]["n"] += 1
        out[labels[b]]["kept"] += WHERE.get(r["where"], "lost") in KEPT
    return out


def pooled(objects: Sequence[Mapping[str, Any]], seeds: int) -> dict[str, Any]:
    """Several runs' ``needs_at_risk`` summed (seeds × sessions); the interval on the effective
    sample (each need once: divided by ``seeds``)."""
    counts = {w: sum(int(o.get(w) or 0) for o in objects) for w in ("verbatim", "summary", "pointer", "lost")}
    goal = [sum(o["goal"]["n"] for o in objects), sum(o["goal"]["kept"] for o in objects)]
    cons = [sum(o["constraints"]["n"] for o in objects), sum(o["constraints"]["kept"] for o in objects)]
    out = _object(counts, goal, cons, max(1, seeds))
    out["restored"] = sum(int(o.get("restored") or 0) for o in objects)
    out["unfollowed"] = sum(int(o.get("unfollowed") or 0) for o in objects)
    out["seeds"] = seeds
    return out


def kept_counts(o: Mapping[str, Any], seeds: int) -> tuple[float, float]:
    """(kept, n) of a pooled object on the effective sample."""
    n = o["n"]
    return (kept_count(o) / max(1, seeds), n / max(1, seeds))


def noise_lines(pooled_by: Mapping[str, Mapping[str, Any]], seeds: int,
                runs: Mapping[str, Sequence[Any]] | None = None) -> list[str]:
    """Markdown bullets: each configuration's at-risk k/n with its interval, ranked, and whether each
    neighbour pair differs beyond noise: the interval of the difference excludes 0 — paired
    (:func:`newcombe_paired`, the same needs in both) when ``runs`` (name -> its RunResults) give the
    per-need outcomes, else Newcombe's unpaired hybrid interval (wider)."""
    rows = {k: v for k, v in pooled_by.items() if v.get("n")}
    if not rows:
        return ["Needs at risk: none on these traces (no fact is needed across a turnover point)."]
    names = sorted(rows, key=lambda k: -(rows[k]["kept"] or 0.0))
    lines = [f"Needs at risk (fact last seen before a turnover point; pooled over sessions × {seeds} seed"
             f"{'s' if seeds != 1 else ''}; Wilson 95%, each need once):", ""]
    for k in names:
        o = rows[k]
        lo, hi = o["kept_ci"]
        lines.append(f"- `{k}`: kept {kept_count(o)}/{o['n']} = {o['kept']:.3f} [{lo:.3f}, {hi:.3f}] "
                     f"({split_text(o)}); "
                     f"goal {o['goal']['kept']}/{o['goal']['n']}, constraints {o['constraints']['kept']}/"
                     f"{o['constraints']['n']}")
    lines.append("")
    for a, b in zip(names, names[1:]):
        if runs is not None and a in runs and b in runs:
            pa, pb, pc, pd_, _ = paired_counts(runs[a], runs[b])
            d, how = newcombe_paired(pa, pb, pc, pd_), f"paired, {pb:.1f} vs {pc:.1f} discordant needs per seed"
        else:
            d, how = difference(rows[a], rows[b], seeds), "unpaired"
        verdict = "within noise of" if d[1] <= 0 <= d[2] else "above" if d[0] > 0 else "below"
        lines.append(f"- `{a}` is {verdict} `{b}` on needs at risk: difference {d[0]:+.3f} [{d[1]:+.3f}, {d[2]:+.3f}] "
                     f"(Newcombe, {how})")
    return lines


def difference(a: Mapping[str, Any], b: Mapping[str, Any], seeds: int) -> tuple[float, float, float]:
    """(kept a − kept b, low, high) of two pooled objects, Newcombe's interval."""
    ka, na = kept_counts(a, seeds)
    kb, nb = kept_counts(b, seeds)
    return newcombe(ka, na, kb, nb)


def run_lines(m: Mapping[str, Any]) -> list[str]:
    """The headline under ``ctxsim run``'s table: needs at risk, recovery, cost including recovery."""
    o = m.get("needs_at_risk")
    if not o:
        return []
    out = []
    if o["n"]:
        lo, hi = o["kept_ci"]
        out.append(f"needs at risk: kept {kept_count(o)}/{o['n']} = {o['kept']:.3f} [{lo:.3f}, {hi:.3f}] "
                   f"({split_text(o)}); "
                   f"goal {o['goal']['kept']}/{o['goal']['n']}, constraints {o['constraints']['kept']}/{o['constraints']['n']}")
    else:
        out.append("needs at risk: none on this trace at this window")
    r = m.get("recovery")
    if r:
        out.append(f"recovery: {r['calls']} calls, {r['tokens']:,} tokens, ${r['cost_usd']:.3f}; {r['violated']} violated"
                   + (f" ({r['restated']} restated by the user, ${r['restate_cost_usd']:.3f})" if r.get("restated") else "")
                   + "; "
                   f"cost including recovery ${m.get('cost_with_recovery_usd', m['cost_usd']):.3f}"
                   + (f" (credit ${r['credit_usd']:.3f} for {r['recorded_unneeded']} recorded re-reads not needed)"
                      if r.get("recorded_unneeded") else ""))
    return out


def compare_lines(groups: Mapping[tuple[int, str], Sequence[Any]]) -> list[str]:
    """The needs-at-risk section of ``ctxsim compare``: per trace and, with several traces, pooled
    over them; ``groups``: (trace number, strategy) -> its runs (one per seed). Each line gives k/n,
    the interval, recovery $ and the cost including recovery (means over seeds, summed over traces)."""
    by_trace: dict[int, dict[str, list[Any]]] = {}
    for (ti, name), runs in groups.items():
        by_trace.setdefault(ti, {})[name] = [r for r in runs if "needs_at_risk" in r.metrics]
    out: list[str] = []
    seeds = max((len(r) for per in by_trace.values() for r in per.values()), default=1)
    scopes = [(f"{str(next(iter(per.values()))[0].trace).rsplit('/', 1)[-1]}", {ti: per})
              for ti, per in by_trace.items() if any(per.values())]
    if len(scopes) > 1:
        scopes.append((f"all {len(scopes)} traces pooled", by_trace))
    for label, part in scopes:
        names = list(dict.fromkeys(n for per in part.values() for n in per))
        pooled_by, money, by_name = {}, {}, {}
        for n in names:
            runs = [r for per in part.values() for r in per.get(n, [])]
            if not runs:
                continue
            by_name[n] = runs
            pooled_by[n] = pooled([r.metrics["needs_at_risk"] for r in runs], seeds)
            k = max(1, seeds)
            rec = [r.metrics.get("recovery", {}) for r in runs]
            money[n] = (sum(x.get("cost_usd", 0.0) for x in rec) / k,
                        sum(r.metrics.get("cost_with_recovery_usd", r.metrics["cost_usd"]) for r in runs) / k,
                        sum(r.metrics["cost_usd"] - x.get("cost_usd", 0.0) - x.get("restate_cost_usd", 0.0)
                            for r, x in zip(runs, rec, strict=True)) / k,
                        sum(x.get("restate_cost_usd", 0.0) for x in rec) / k,
                        sum(x.get("credit_usd", 0.0) for x in rec) / k,
                        sum(x.get("violated", 0) for x in rec) / k)
        out += ["", f"{label}:", *noise_lines(pooled_by, seeds, by_name)]
        if money:
            out += ["", "Cost of forgetting (mean over seeds): cost without recovery and restatement calls + recovery $ "
                    "+ restatements $ (violated goal/constraints the user restates) − credit $ (recorded re-reads "
                    "the strategy did not need) = cost including recovery (harness/retention/recovery.py):"]
            for n in sorted(money, key=lambda x: money[x][1]):
                rec, total, base, again, credit, violated = money[n]
                out.append(f"- `{n}`: ${base:.3f} + recovery ${rec:.3f} + restatements ${again:.3f} "
                           f"({violated:.1f} violated) − credit ${credit:.3f} = ${total:.3f}")
            out += break_even_lines({n: (m[1], m[5]) for n, m in money.items()},
                                    {n: _mean_main_call_usd(r) for n, r in by_name.items()}, pooled_by)
    return out


REFERENCE = "novacode"
# the stated range of the work a violation wastes (recovery.RecoveryParams.wasted_calls): from 0 (noticed at
# once) to the rest of the user turn, measured from each call on the development population (22,501 calls)
WASTED_RANGE = "0 (noticed at once, the default) to the rest of the turn: median 10 calls, p90 52 (real logs)"


def _mean_main_call_usd(runs: Sequence[Any]) -> float:
    costs = [c for r in runs if len(r.calls) for c in r.calls.loc[r.calls["kind"] == "main", "cost_usd"]]
    return float(sum(costs) / len(costs)) if costs else 0.0


def break_even(cheap: tuple[float, float], dear: tuple[float, float], call_usd: float) -> float | None:
    """Calls of work each extra violated goal/constraint would have to waste for the cheaper
    strategy (``(cost including recovery, violations)``) to cost as much as the dearer one; None
    when it violates no more than the dearer one or a call costs nothing.

    The closed loop bills a violation as the least it costs (one call made without the fact, the
    user's restatement, the call again: harness/retention/recovery.py); how much work an agent does against a
    forgotten goal before anyone notices is not in any log here. This is the threshold a reader can
    hold against their own experience: below it the cheaper strategy stays cheaper."""
    extra = cheap[1] - dear[1]
    if extra <= 0 or call_usd <= 0:
        return None
    return max(0.0, dear[0] - cheap[0]) / (extra * call_usd)


def break_even_lines(money: Mapping[str, tuple[float, float]], call_usd: Mapping[str, float],
                     pooled_by: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Against the reference (``novacode`` when compared, else the strategy that keeps the most needs
    at risk): each cheaper strategy that violates more, and the calls per violation that would
    reverse the order (:func:`break_even`)."""
    if len(money) < 2:
        return []
    ref = REFERENCE if REFERENCE in money else max(money, key=lambda n: (pooled_by.get(n, {}).get("kept") or 0.0, -money[n][0]))
    lines = []
    for n in sorted(money, key=lambda x: money[x][0]):
        if n == ref or money[n][0] >= money[ref][0]:
            continue
        k = break_even(money[n], money[ref], call_usd.get(n, 0.0))
        if k is None:
            continue
        lines.append(f"- `{n}` stays cheaper than `{ref}` unless each of its {money[n][1] - money[ref][1]:.1f} extra "
                     f"violated goals/constraints per run wastes {k:.1f} or more calls of work (its mean call "
                     f"${call_usd[n]:.4f}; the closed loop bills one)")
    if lines:
        lines = ["", "When forgetting would change the order (the closed loop bills a violated goal or constraint the "
                 "least it costs; harness/retention/needs.py break_even). The work wasted until a violation is "
                 f"noticed is the recovery parameter wasted_calls: {WASTED_RANGE}:", *lines]
    return lines
