"""The tuning answer of a sweep: for each strategy whose parameters a sweep varies, at each window
and on each population of sessions (:func:`trace_group`: a synthetic preset's sessions, a folder of
real logs), which setting to ship. Everything is at the session level (harness/sweep/sessions.py).

Two answers, both against the strategy's **default** setting (its registered defaults, which the
grid should hold; when it does not, the grid point with the fewest changes stands in and the report
says so):

* **cheapest that holds**: the cheapest setting that completed every run, costs less than the
  default and, over two sessions or more, holds against it across sessions (``sessions.holds``: its
  saving's interval over sessions above 0, cheaper on most sessions, retention not worse beyond
  noise); on one session, cheaper with retention not worse beyond noise (the report then names no
  setting to ship: one session shows nothing about the others);
* **best retention at no more cost**: among the settings that completed every run, cost no more
  than the default and keep more than it, the one with the best retention.

A setting that measured the same as the default (:func:`measures_same`: every run's cost, the
retention and the compactions identical) is never an answer: it only says its knob was not reached.
When nothing is left, the answer is None and the report says no setting improves on the default.

A session's figure is the mean over its runs (seeds). Retention is the *needs at risk* figure when
the results carry it (``needs_at_risk.*``): needs kept (verbatim, in a summary or behind a pointer)
over needs at risk, each need once whatever the seeds, pooled over sessions, with a bootstrap over
sessions; on one session, Wilson's interval on its needs, and a difference by Newcombe's paired
interval (harness/retention/needs.py, ``newcombe_paired``) when both sides have per-need outcomes,
else his unpaired hybrid (harness/retention/proportions.py). Results written before that figure
existed fall back to ``retention.score`` (harness/sweep/uncertainty.py); :func:`retention_method`
says which, and the report prints it.

Cost is ``cost_with_recovery_usd`` when present (the session's bill plus what reading lost needs
back would cost), else ``cost_usd``. A saving is paired by session, its interval a bootstrap over
sessions; on one session it has none.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from ctxsim.harness.retention import proportions
from ctxsim.harness.retention.needs import KEPT
from ctxsim.harness.sweep import analysis, sessions, uncertainty

N = "needs_at_risk.n"
KEPT_PARTS = tuple(f"needs_at_risk.{w}" for w in KEPT)
COST_RECOVERY = "cost_with_recovery_usd"
RECOVERY = "recovery.cost_usd"
N_BOOT = uncertainty.N_BOOT      # resamples of a saving's interval (assumed, as for retention)
BOOT_SEED = uncertainty.BOOT_SEED
COST_TOL = 1e-9                  # "no more than the default's cost": equal up to float noise (assumed)


def has_needs(df: pd.DataFrame) -> bool:
    """The results carry the needs-at-risk figure (every part of it, on some run)."""
    return all(c in df and df[c].notna().any() for c in (N, *KEPT_PARTS))


def cost_column(df: pd.DataFrame) -> str:
    return COST_RECOVERY if COST_RECOVERY in df and df[COST_RECOVERY].notna().any() else analysis.COST


def retention_method(df: pd.DataFrame) -> str:
    if has_needs(df):
        return ("needs at risk kept (verbatim, in a summary or behind a pointer), each need once whatever the seeds, pooled "
                "over sessions; on one session, Wilson's interval on its needs and Newcombe's for a difference")
    return ("these results have no needs-at-risk figure (written by an older ctxsim): retention is `retention.score`, "
            f"with a {uncertainty.METHOD}")


def trace_group(row: Mapping[str, Any]) -> str:
    """The kind of session a run replays: its preset's name for a synthetic one (a population's
    sessions share it), "real <format> logs" for an imported one (a folder of a user's sessions is
    one population), else its file name without a ``-seedN`` suffix."""
    preset = row.get("provenance.trace.preset")
    if isinstance(preset, str) and preset:
        return preset
    if row.get("provenance.trace.kind") == "imported":
        fmt_ = row.get("provenance.trace.format")
        return f"real {fmt_} logs" if isinstance(fmt_, str) and fmt_ else "real logs"
    stem = Path(str(row.get("trace", "trace"))).name.removesuffix(".jsonl")
    return re.sub(r"-seed\d+$", "", stem)


@dataclass
class Retention:
    est: float
    lo: float
    hi: float
    k: float = math.nan      # needs kept, each need once (a session's: the mean over its seeds), summed over sessions
    n: float = math.nan      # needs at risk, each once, summed over sessions
    seeds: int = 1           # runs per session (each need counted once whatever it is)
    sessions: int = 0        # sessions with needs at risk (>= 2: the interval is a bootstrap over sessions)


@dataclass
class Setting:
    """One configuration at one window on one trace group, over its runs."""

    label: str
    strategy: str
    config: str
    window: int
    group: str
    params: dict[str, Any]
    changed: dict[str, Any]
    completed: bool
    runs: int
    cost: float
    recovery: float
    compactions: float
    retention: Retention
    cost_by_run: dict[tuple[str, int], float] = field(default_factory=dict)  # (trace, seed) -> cost
    outcomes: dict[tuple[str, int, str, str], bool] = field(default_factory=dict)  # (trace, seed, probe, fact) -> kept
    blocks: list[uncertainty.Block] = field(default_factory=list)              # fallback: per-probe scores
    keys: list[str] = field(default_factory=list)                              # its runs' keys
    by_session: dict[str, float] = field(default_factory=dict)                 # session -> cost (mean over seeds)
    needs: dict[str, sessions.Needs] = field(default_factory=dict)             # session -> its needs at risk
    traits: dict[str, dict[str, Any]] = field(default_factory=dict)            # session -> what it is like
    names: dict[str, str] = field(default_factory=dict)                        # session -> its trace's file name

    @property
    def n_sessions(self) -> int:
        return len(self.by_session)


def _seed(r: Mapping[str, Any]) -> int:
    s = r.get("seed", 0)
    return 0 if s is None or (isinstance(s, float) and math.isnan(s)) else int(s)


ALL_TRACES = "all traces"


def settings(runs: pd.DataFrame, probes: Mapping[str, pd.DataFrame] | None = None,
             by_group: bool = True) -> list[Setting]:
    """Every configuration × window × trace group of ``runs`` (successful runs, as the report has
    them: with ``completed`` and ``config``); ``by_group=False``: every configuration × window over
    all its traces (group :data:`ALL_TRACES`), as the report's summary and recommendation pool them."""
    runs = analysis.with_outcome(analysis.ok_runs(runs))
    if "config" not in runs:
        runs = runs.assign(config=[analysis.config_name(r) for _, r in runs.iterrows()])
    runs = runs.assign(_group=[trace_group(r) for _, r in runs.iterrows()] if by_group else ALL_TRACES)
    cost = cost_column(runs)
    needs = has_needs(runs)
    keys = [c for c in analysis.config_columns(runs) if runs[c].notna().any()] + ["_group"]
    keyed = runs.assign(**{k: runs[k].astype(object).where(runs[k].notna(), "–") for k in keys})
    out = []
    for _, g in keyed.groupby(keys, dropna=False, sort=False):
        g = runs.loc[g.index]
        first = g.iloc[0]
        done = bool(g["completed"].all())
        outcomes: dict[tuple[str, int, str, str], bool] = {}
        per = _per_session(g, cost, needs)
        if needs:
            seeds = _seeds_per_trace(g)
            k = float(sum(v.kept for v in per[1].values()))
            n = float(sum(v.n for v in per[1].values()))
            with_needs = sum(1 for v in per[1].values() if v.n > 0)
            if with_needs >= 2:   # an interval over sessions (needs are clustered in sessions)
                iv = sessions.kept_interval(per[1])
                est, lo, hi = iv.est, iv.lo, iv.hi
            else:                 # one session: the interval of its own needs
                est, lo, hi = proportions.wilson(k, n)
            ret = Retention(est, lo, hi, k, n, seeds, with_needs)
            blocks: list[uncertainty.Block] = []
            outcomes = _outcomes(g, probes or {})
        else:
            blocks = _blocks(g, probes or {})
            if blocks:
                est, lo, hi = uncertainty.interval(blocks)
            else:
                est = float(g[analysis.RETENTION].mean()) if analysis.RETENTION in g else math.nan
                lo = hi = math.nan
            ret = Retention(est, lo, hi)
        comp = "compactions.attempted" if "compactions.attempted" in g else "compactions.succeeded"
        out.append(Setting(
            label=str(first["label"]), strategy=str(first.get("strategy", first["label"])), config=str(first["config"]),
            window=int(first["window"]) if "window" in g and not pd.isna(first["window"]) else 0,
            group=str(first["_group"]), params=analysis.config_params(first.to_dict()),
            changed=analysis.changed_params(first), completed=done, runs=len(g),
            cost=float(g[cost].mean()), recovery=float(g[RECOVERY].mean()) if RECOVERY in g else math.nan,
            compactions=float(g[comp].mean()) if comp in g else math.nan, retention=ret,
            cost_by_run={(str(r.get("trace_hash", r.get("trace", ""))), _seed(r)): float(r[cost]) for _, r in g.iterrows()},
            outcomes=outcomes, blocks=blocks, keys=[str(k) for k in g["key"]] if "key" in g else [],
            by_session=per[0], needs=per[1], traits=per[2], names=per[3]))
    return out


def _num(r: Mapping[str, Any], c: str) -> float:
    v = r.get(c)
    return 0.0 if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def _per_session(g: pd.DataFrame, cost: str, needs: bool) -> tuple[dict[str, float], dict[str, sessions.Needs],
                                                                     dict[str, dict[str, Any]], dict[str, str]]:
    """Per session (trace) of one configuration: its cost and needs at risk, the mean over its runs
    (seeds; a need counted once), what the session is like, and its file name."""
    costs: dict[str, list[float]] = {}
    per: dict[str, list[Mapping[str, Any]]] = {}
    for _, r in g.iterrows():
        t = _trace_key(r)
        costs.setdefault(t, []).append(float(r[cost]))
        per.setdefault(t, []).append(r)
    by = {t: float(np.mean(v)) for t, v in costs.items()}
    need: dict[str, sessions.Needs] = {}
    traits: dict[str, dict[str, Any]] = {}
    names: dict[str, str] = {}
    for t, rs in per.items():
        m = len(rs)
        if needs:
            need[t] = sessions.Needs(
                n=int(round(_num(rs[0], N))), kept=sum(sum(_num(r, c) for c in KEPT_PARTS) for r in rs) / m,
                goal_n=int(round(_num(rs[0], "needs_at_risk.goal.n"))),
                goal_kept=sum(_num(r, "needs_at_risk.goal.kept") for r in rs) / m,
                constraints_n=int(round(_num(rs[0], "needs_at_risk.constraints.n"))),
                constraints_kept=sum(_num(r, "needs_at_risk.constraints.kept") for r in rs) / m)
        r0 = rs[0]
        traits[t] = {k: v for k, v in (
            ("calls", _num(r0, "calls") or None), ("user turns", _num(r0, "turns") or None),
            ("compactions", float(np.mean([_num(r, "compactions.succeeded") for r in rs]))),
            ("needs at risk", float(need[t].n) if t in need else None),
            ("source", "real" if r0.get("provenance.trace.kind") == "imported" else
             "synthetic" if r0.get("provenance.trace.kind") == "synthetic" else None)) if v is not None}
        names[t] = Path(str(r0.get("trace", t))).name.removesuffix(".jsonl")
    return by, need, traits, names


def _trace_key(r: Mapping[str, Any]) -> str:
    return str(r.get("trace_hash", r.get("trace", "")))


def _seeds_per_trace(g: pd.DataFrame) -> int:
    """The runs per trace (seeds) of one configuration: the divisor of the effective sample."""
    return max(1, int(g.apply(_trace_key, axis=1).value_counts().max())) if len(g) else 1


def _outcomes(g: pd.DataFrame, probes: Mapping[str, pd.DataFrame]) -> dict[tuple[str, int, str, str], bool]:
    """Per need at risk of each run (trace, seed, probe, fact): kept (verbatim, in a summary or behind a pointer, not put
    back by the closed loop), as harness/retention/needs.py counts it; empty unless every run has its probe
    table with ``at_risk``."""
    from ctxsim.harness.retention.needs import WHERE

    out: dict[tuple[str, int, str, str], bool] = {}
    if "key" not in g or not probes:
        return out
    for _, r in g.iterrows():
        pr = probes.get(str(r["key"]))
        if pr is None or "at_risk" not in pr:
            return {}
        sub = pr[pr["at_risk"].astype(bool)]
        back = sub["restored"].astype(bool) if "restored" in sub else pd.Series(False, index=sub.index)
        for p, f, w, b in zip(sub["probe"], sub["fact"], sub["where"], back, strict=True):
            out[(_trace_key(r), _seed(r), str(p), str(f))] = WHERE.get(w, "lost") in KEPT and not b
    return out


def _blocks(g: pd.DataFrame, probes: Mapping[str, pd.DataFrame]) -> list[uncertainty.Block]:
    from ctxsim.harness.retention.scoring import RetentionParams

    if "key" not in g:
        return []
    w = RetentionParams().category_weights
    out = []
    th = "trace_hash" if "trace_hash" in g else "trace"
    for trace, tg in (g.groupby(th, sort=True) if th in g else [("", g)]):
        tg = tg[tg["key"].isin(probes)]
        if tg.empty:
            continue
        tg = tg.sort_values("seed") if "seed" in tg else tg
        b = uncertainty.probe_block([probes[k] for k in tg["key"]], [_seed(r) for _, r in tg.iterrows()], w,
                                    str(trace))
        if b.scores.size:
            out.append(b)
    return out


# --- comparing two settings ---------------------------------------------------------------------------

def comparison(a: Setting, b: Setting) -> sessions.Comparison | None:
    """``a`` against ``b`` paired by session, when they share at least two sessions (else None: one
    session gives no interval over sessions)."""
    if len(set(a.by_session) & set(b.by_session)) < 2:
        return None
    return sessions.compare(a.by_session, b.by_session, a.needs, b.needs)


def retention_difference(a: Setting, b: Setting) -> tuple[float, float, float]:
    """(a − b, low, high) of retention: over two or more shared sessions, the pooled difference with
    a bootstrap over sessions (paired by session); on one session, paired on the needs both were
    scored on when both have per-need outcomes, else unpaired."""
    c = comparison(a, b)
    if c is not None and c.needs > 0:
        return c.retention.est, c.retention.lo, c.retention.hi
    if a.outcomes and b.outcomes:
        both = [k for k in a.outcomes if k in b.outcomes]
        if both:
            from ctxsim.harness.retention.needs import newcombe_paired

            per = {(k[0], k[1]) for k in both}
            seeds = max(1, round(len(per) / max(1, len({k[0] for k in both}))))
            cnt = [0, 0, 0, 0]
            for k in both:
                ka, kb = a.outcomes[k], b.outcomes[k]
                cnt[0 if ka and kb else 1 if ka else 2 if kb else 3] += 1
            return newcombe_paired(*(c / seeds for c in cnt))
    if not math.isnan(a.retention.n) and not math.isnan(b.retention.n):
        return proportions.newcombe(a.retention.k, a.retention.n, b.retention.k, b.retention.n)
    if a.blocks and b.blocks and len(a.blocks) == len(b.blocks):
        return uncertainty.difference(a.blocks, b.blocks)
    return a.retention.est - b.retention.est, math.nan, math.nan


def not_worse(diff: tuple[float, float, float]) -> bool:
    """Not worse beyond noise: the estimate of (setting − default) is 0 or above, or its interval
    reaches above 0 (one that only touches 0 from below is a loss)."""
    d, _, hi = diff
    return bool(d >= 0) or (not math.isnan(hi) and hi > 0)


def saving(default: Setting, s: Setting, n_boot: int = N_BOOT, seed: int = BOOT_SEED) -> tuple[float, float, float]:
    """(default's cost − s's cost, low, high) in dollars per session: the mean over the sessions
    both ran (each the mean over its seeds), with a percentile bootstrap over those sessions; on one
    session the difference and no interval (its seeds are not other sessions)."""
    common = sorted(set(default.by_session) & set(s.by_session))
    if not common:
        return default.cost - s.cost, math.nan, math.nan
    d = [default.by_session[k] - s.by_session[k] for k in common]
    iv = sessions.mean_interval(d, n_boot, seed)
    return iv.est, iv.lo, iv.hi


# --- the answer ---------------------------------------------------------------------------------------

@dataclass
class Pick:
    setting: Setting
    saving: tuple[float, float, float]            # $ per session, default − this
    saving_pct: tuple[float, float, float]        # Σ(default − this) / Σ default over sessions
    retention_diff: tuple[float, float, float]    # this − default
    comparison: sessions.Comparison | None = None  # paired by session (None: one session)


@dataclass
class Answer:
    label: str
    window: int
    group: str
    default: Setting
    default_in_grid: bool
    swept: list[str]                              # parameters the grid varies for this strategy
    cheapest: Pick | None                         # cheapest setting not worse than the default (None: none improves)
    best_retention: Pick | None                   # best retention at no more than the default's cost (None: none)
    settings: list[Setting]
    note: str = ""


def _pick(default: Setting, s: Setting) -> Pick:
    sv = saving(default, s)
    c = comparison(s, default)
    if c is not None:
        pct = (c.saving.est, c.saving.lo, c.saving.hi)
    else:
        pct = tuple(x / default.cost if default.cost else math.nan for x in sv)
    return Pick(s, sv, pct, retention_difference(s, default), c)  # type: ignore[arg-type]


def keeps_up(s: Setting, default: Setting) -> bool:
    """``s`` is cheaper than the default and keeps retention: over two or more sessions, it holds
    across them (harness/sweep/sessions.py ``holds``: the saving's interval over sessions above 0, cheaper
    on most sessions, retention not worse beyond noise); on one session, cheaper with retention not
    worse beyond noise."""
    if s.cost >= default.cost - COST_TOL:
        return False
    c = comparison(s, default)
    if c is not None:
        return sessions.holds(c)
    return not_worse(retention_difference(s, default))


def _is_default(s: Setting) -> bool:
    return not s.changed


def answers(sets: list[Setting]) -> list[Answer]:
    """One :class:`Answer` per strategy label, window and trace group where the sweep varies it."""
    by: dict[tuple[str, int, str], list[Setting]] = {}
    for s in sets:
        by.setdefault((s.label, s.window, s.group), []).append(s)
    out = []
    for (label, window, group), ss in by.items():
        if len(ss) < 2:
            continue
        swept = sorted({k for s in ss for k in s.params if len({_hashable(x.params.get(k)) for x in ss}) > 1})
        defaults = [s for s in ss if _is_default(s)]
        default = defaults[0] if defaults else min(ss, key=lambda s: (len(s.changed), s.config))
        note = "" if defaults else (f"the grid does not hold {label}'s default setting: {default.config} (the grid point "
                                    "with the fewest changes) stands in for it")
        # a candidate differs from the default in what it measured: a setting whose runs gave the
        # default's results (a knob the sessions never reach) answers nothing, whatever its name
        ok = [s for s in ss if s.completed and s is not default and not measures_same(s, default)]
        cheapest = best = None
        if default.completed:
            keep = [s for s in ok if keeps_up(s, default)]
            if keep:
                cheapest = _pick(default, min(keep, key=lambda s: (s.cost, -_nan0(s.retention.est))))
            afford = [s for s in ok if s.cost <= default.cost + COST_TOL and not math.isnan(s.retention.est)
                      and s.retention.est > _nan0(default.retention.est)]
            if afford:
                best = _pick(default, max(afford, key=lambda s: (s.retention.est, -s.cost)))
        else:
            note = (note + "; " if note else "") + f"{default.config} itself failed a session here: nothing is compared with it"
        out.append(Answer(label, window, group, default, bool(defaults), swept, cheapest, best, ss, note))
    return sorted(out, key=lambda a: (a.label, a.window, a.group))


SAME = 1e-9  # two settings measure the same when every run's cost, retention and compactions agree this closely (assumed)


def _close(x: float, y: float) -> bool:
    return (math.isnan(x) and math.isnan(y)) or abs(x - y) <= SAME * max(1.0, abs(x))


def measures_same(a: Setting, b: Setting) -> bool:
    """``a`` and ``b`` gave the same results: the same runs (trace, seed) at the same cost each, the
    same retention (needs kept of needs at risk, or the same score), the same compactions and the
    same outcome. Such a setting is no answer to "which setting to ship": it changed nothing here."""
    if a.completed != b.completed or set(a.cost_by_run) != set(b.cost_by_run):
        return False
    if not all(_close(a.cost_by_run[k], b.cost_by_run[k]) for k in a.cost_by_run):
        return False
    ra, rb = a.retention, b.retention
    return all(_close(x, y) for x, y in ((a.cost, b.cost), (ra.est, rb.est), (ra.k, rb.k), (ra.n, rb.n),
                                         (a.compactions, b.compactions)))


def _nan0(x: float) -> float:
    return -1.0 if math.isnan(x) else x


def _hashable(v: Any) -> Any:
    return repr(v)


@dataclass
class PeerRow:
    peer: Setting
    cost_diff: tuple[float, float, float]          # peer − tuned, $
    retention_diff: tuple[float, float, float]     # peer − tuned


def peers(answer: Answer, sets: list[Setting]) -> list[PeerRow]:
    """Every other strategy at the same window and trace group (each of its settings), against the
    tuned setting (the cheapest that keeps retention, else the default)."""
    tuned = answer.cheapest.setting if answer.cheapest else answer.default
    rows = []
    for s in sets:
        if s.label == answer.label or s.window != answer.window or s.group != answer.group:
            continue
        sv = saving(s, tuned)  # peer − tuned
        rows.append(PeerRow(s, sv, retention_difference(s, tuned)))
    return sorted(rows, key=lambda r: (not r.peer.completed, r.peer.cost))


def cost_interval(s: Setting, n_boot: int = N_BOOT, seed: int = BOOT_SEED) -> tuple[float, float]:
    """95% percentile-bootstrap interval over sessions of a setting's mean cost per session (a point
    with one session)."""
    c = np.array(list(s.by_session.values()), dtype=float)
    if len(c) < 2 or np.ptp(c) == 0:
        return (float(c.mean()), float(c.mean())) if len(c) else (math.nan, math.nan)
    iv = sessions.mean_interval(c, n_boot, seed)
    return iv.lo, iv.hi


def front(sets: list[Setting]) -> list[Setting]:
    """The settings (that completed every run) no other beats on both lower cost and higher
    retention, by cost."""
    ok = sorted((s for s in sets if s.completed and not math.isnan(s.retention.est)),
                key=lambda s: (s.cost, -s.retention.est, len(s.changed)))  # a tie: the default, not its twin
    out, best = [], -math.inf
    for s in ok:
        if s.retention.est > best:
            out.append(s)
            best = s.retention.est
    return out


def short_name(s: Setting) -> str:
    """A point's label in a figure: the strategy and its changed parameters, values in k."""
    def v(x: Any) -> str:
        if isinstance(x, (int, float)) and not isinstance(x, bool) and abs(x) >= 1000 and float(x) % 1000 == 0:
            return f"{int(x) // 1000}k"
        return str(x).lower() if isinstance(x, bool) else str(x)
    abbrev = {"soft_margin": "soft", "tail_min_tokens": "tail≥", "tail_max_tokens": "tail≤"}
    ch = ", ".join(f"{abbrev.get(k, k)} {v(x)}" for k, x in sorted(s.changed.items()))
    return f"{s.label} ({ch})" if ch else s.label


LEDGER_AXIS = "soft_margin"  # N-COMP-2: the knob the compaction ledger (N-WIN-3) is read against


def ledger(answers: list[Answer], calls: Mapping[str, pd.DataFrame], axis: str = LEDGER_AXIS) -> pd.DataFrame:
    """N-WIN-3 on the grid's own axis: for each swept strategy whose grid varies ``axis``, per window
    and value (the other swept parameters at their defaults), the cost of the summary calls against
    the cost of the main calls (carrying the text), per session, from the sweep's own per-call rows;
    with retention and whether every run completed. Empty when no run's calls were saved."""
    rows = []
    for a in answers:
        if axis not in a.swept:
            continue
        base = a.default.params
        for s in a.settings:
            if any(repr(s.params.get(q)) != repr(base.get(q)) for q in a.swept if q != axis):
                continue
            have = [calls[k] for k in s.keys if k in calls]
            if not have:
                continue
            summ = float(np.mean([c.loc[c["kind"] == "summary", "cost_usd"].sum() for c in have]))
            main = float(np.mean([c.loc[c["kind"] != "summary", "cost_usd"].sum() for c in have]))
            rows.append({"label": a.label, "window": a.window, "group": a.group, axis: s.params.get(axis),
                         "summary_cost_usd": summ, "main_cost_usd": main, "total_cost_usd": summ + main,
                         "compactions": s.compactions, "retention": s.retention.est, "retention_lo": s.retention.lo,
                         "retention_hi": s.retention.hi, "completed": s.completed, "default": not s.changed})
    df = pd.DataFrame(rows)
    return df.sort_values(["label", "window", "group", axis]).reset_index(drop=True) if len(df) else df
