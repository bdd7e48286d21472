"""The report's headline retention: *needs at risk* (issue 26, harness/retention/needs.py), per configuration
with its Wilson interval, the recommendation made on it, and "within noise" said only for the pairs
that matter (issue 28, item 3): neighbours on the cost–retention front, and each strategy against the
reference (a swept strategy's default, else the recommendation, else the cheapest configuration that
completed).

Everything here reads :class:`ctxsim.harness.sweep.tuning.Setting` pooled over a configuration's traces
(``tuning.settings(..., by_group=False)``): counts summed over seeds and sessions, the interval on the
effective sample (each need once), a difference by Newcombe's paired interval on the needs both were
scored on. Results without the needs-at-risk figure (an older ctxsim) fall back to ``retention.score``
as before, and the report says so.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
from ctxsim.harness.report import formatting as fmt
from ctxsim.harness.report.content import Bullets, Context, Para, Section, Table
from ctxsim.harness.retention.needs import KEPT
from ctxsim.harness.sweep import analysis, tuning

PARTS = ("verbatim", "summary", "pointer", "lost")
LABELS = ("verbatim", "summary", "pointer followed", "lost")   # needs.WHERE: a pointer counts only when followed


def pooled(ctx: Context) -> list[tuning.Setting]:
    """Every configuration × window over all its traces."""
    return tuning.settings(ctx.runs, ctx.probes, by_group=False)


def _row(ctx: Context, s: tuning.Setting) -> dict[str, Any] | None:
    hit = ctx.cfgs[(ctx.cfgs["config"] == s.config) & (ctx.cfgs["window"] == s.window)]
    return None if hit.empty else {k: (v.item() if hasattr(v, "item") else v) for k, v in hit.iloc[0].items()}


def best_setting(pooled: list[tuning.Setting], target: float) -> tuning.Setting | None:
    """The cheapest pooled setting that completed every run with needs at risk kept ≥ ``target``."""
    ok = [s for s in pooled if s.completed and not math.isnan(s.retention.est) and s.retention.est >= target]
    return min(ok, key=lambda s: (s.cost, -s.retention.est, s.window)) if ok else None


def recommend(ctx: Context) -> tuple[dict[str, Any] | None, tuning.Setting | None]:
    """The cheapest configuration that completed every run with needs at risk kept ≥ the target (its
    summary row and its pooled setting); without the needs figure, :func:`analysis.recommend` on
    ``retention.score``."""
    if not tuning.has_needs(ctx.runs):
        return analysis.recommend(ctx.cfgs, ctx.target), None
    best = best_setting(ctx.pooled, ctx.target)
    return (None, None) if best is None else (_row(ctx, best), best)


def no_recommendation_reason(ctx: Context) -> str:
    if not tuning.has_needs(ctx.runs):
        return analysis.no_recommendation_reason(ctx.cfgs, ctx.target)
    return _reason(ctx.pooled, ctx.target)


def _reason(pooled: list[tuning.Setting], target: float) -> str:
    done = [s for s in pooled if s.completed]
    if not done:
        return f"none of the {len(pooled)} configurations completed every session (each failed on a rejected request)"
    scored = [s for s in done if not math.isnan(s.retention.est)]
    if not scored:
        return "no need was at risk on these traces at these windows (no fact is needed across a turnover point)"
    best = max(scored, key=lambda s: s.retention.est)
    return (f"none of the {len(done)} configurations that completed every session keeps needs at risk ≥ {target:g}; "
            f"the best is {best.config} at window {best.window:,} with {_kept(best)} (lower the target with --target, "
            "or look at the cost–retention front)")


def terminal_line(runs: pd.DataFrame, target: float) -> str:
    """``ctxsim sweep``'s one-line recommendation, on the same figure as the report's."""
    runs = analysis.with_outcome(analysis.ok_runs(runs))
    if not tuning.has_needs(runs):
        cfgs = analysis.by_config(runs)
        rec = analysis.recommend(cfgs, target)
        if rec is None:
            return f"no recommendation: {analysis.no_recommendation_reason(cfgs, target)}"
        return (f"recommended: {rec['config']} at window {fmt.count(rec['window'])}, {fmt.money(rec['cost_usd'])} "
                f"per session, retention {fmt.share(rec[analysis.RETENTION])}")
    pooled_ = tuning.settings(runs, by_group=False)
    best = best_setting(pooled_, target)
    if best is None:
        return f"no recommendation: {_reason(pooled_, target)}"
    return (f"recommended: {best.config} at window {best.window:,}, {fmt.money(best.cost)} per session, needs at risk "
            f"kept {_kept(best).removesuffix(' kept')}")


def count(x: float) -> str:
    """A count of needs kept: whole, or to one decimal when it is a mean over seeds."""
    return f"{x:.0f}" if abs(x - round(x)) < 1e-9 else f"{x:.1f}"


def _kept(s: tuning.Setting) -> str:
    """Needs kept of needs at risk, each need once (never multiplied by seeds), on how many sessions,
    with the interval (over sessions when there are several)."""
    r = s.retention
    if math.isnan(r.est):
        return fmt.MISSING
    ci = "" if math.isnan(r.lo) else f" [{r.lo:.3f}, {r.hi:.3f}]"
    if math.isnan(r.n):
        return f"{r.est:.3f}{ci} of needs at risk kept"
    n_s = s.n_sessions
    on = f" on {n_s} session{'s' if n_s != 1 else ''}" if n_s else ""
    return f"{count(r.k)}/{count(r.n)}{on} = {r.est:.3f}{ci} kept"


def reference(ctx: Context, window: int) -> tuning.Setting | None:
    """Whom every strategy is compared with at ``window``: the swept strategy's default, else the
    recommendation, else the cheapest configuration that completed."""
    here = [s for s in ctx.pooled if s.window == window]
    by_config = {s.config: s for s in here}
    for a in ctx.answers:
        if a.window == window and a.default.config in by_config:
            return by_config[a.default.config]
    if ctx.rec_setting is not None and ctx.rec_setting.window == window:
        return ctx.rec_setting
    done = sorted((s for s in here if s.completed), key=lambda s: s.cost)
    return done[0] if done else (here[0] if here else None)


def pairs(ctx: Context, window: int) -> list[tuple[tuning.Setting, tuning.Setting]]:
    """The pairs that matter at ``window``: neighbours on the front (by cost), then each other strategy
    (its cheapest configuration that completed, else its first) against the reference; each pair once."""
    here = [s for s in ctx.pooled if s.window == window]
    fr = tuning.front(here)
    out = list(zip(fr, fr[1:]))
    ref = reference(ctx, window)
    if ref is None:
        return out
    seen = {frozenset((a.config, b.config)) for a, b in out}
    for label in dict.fromkeys(s.label for s in here):
        if label == ref.label:
            continue
        mine = sorted(here, key=lambda s: (not s.completed, s.cost))
        other = next(s for s in mine if s.label == label)
        if frozenset((other.config, ref.config)) not in seen:
            seen.add(frozenset((other.config, ref.config)))
            out.append((other, ref))
    return out


def config_pairs(ctx: Context) -> dict[int, list[tuple[str, str]]]:
    """:func:`pairs` by configuration name, per window (for the attention-model section)."""
    return {w: [(a.config, b.config) for a, b in pairs(ctx, w)] for w in ctx.windows}


def verdict(d: tuple[float, float, float]) -> str:
    x, lo, hi = d
    if math.isnan(x):
        return "not comparable"
    if math.isnan(lo):
        return "no interval"
    from ctxsim.harness.sweep.sessions import Interval, direction

    return {0: "within noise of", 1: "above", -1: "below"}[direction(Interval(x, lo, hi))]


def pair_line(a: tuning.Setting, b: tuning.Setting) -> str:
    d = tuning.retention_difference(a, b)
    c = tuning.comparison(a, b)
    if c is not None and c.needs:
        how = f"paired by session, bootstrap over {c.n} sessions; {c.needs} needs at risk"
    else:
        how = "Newcombe, " + ("paired on the same needs" if a.outcomes and b.outcomes else "unpaired") + ", one session"
    ci = "" if math.isnan(d[1]) else f" [{d[1]:+.3f}, {d[2]:+.3f}]"
    failed = " (failed a session)" if not a.completed else ""
    return (f"`{a.config}`{failed} is {verdict(d)} `{b.config}`: difference {d[0]:+.3f}{ci} "
            f"({fmt.money(a.cost)} against {fmt.money(b.cost)}; {how})")


def _parts(ctx: Context, s: tuning.Setting) -> list[str]:
    """k/n, where the needs were (verbatim, summary, pointer, lost), goal and constraints kept: each
    need once (a session's counts are the mean over its seeds), summed over sessions."""
    g = ctx.runs[ctx.runs["key"].isin(s.keys)] if "key" in ctx.runs and s.keys else ctx.runs.iloc[0:0]
    th = "trace_hash" if "trace_hash" in g else "trace"

    def tot(c: str) -> float:
        if c not in g or not len(g):
            return 0.0
        return float(g[c].fillna(0).groupby(g[th]).mean().sum()) if th in g else float(g[c].fillna(0).mean())
    n = tot("needs_at_risk.n")
    goal, cons = (tot("needs_at_risk.goal.kept"), tot("needs_at_risk.goal.n")), (
        tot("needs_at_risk.constraints.kept"), tot("needs_at_risk.constraints.n"))
    return ([f"{count(sum(tot('needs_at_risk.' + w) for w in KEPT))}/{count(n)}"]
            + [count(tot(f"needs_at_risk.{p}")) for p in PARTS]
            + [f"{count(goal[0])}/{count(goal[1])}", f"{count(cons[0])}/{count(cons[1])}"])


def section_needs(ctx: Context) -> Section | None:
    """Per window: each configuration's needs at risk (k of n over its runs; the interval on each need
    once), where they were (verbatim, summary, pointer, lost), goal and constraints; then the pairs
    that matter, each within noise or not."""
    if not tuning.has_needs(ctx.runs) or not ctx.pooled:
        return None
    content: list[Any] = [Para(
        "The headline retention (issue 26): a need is at risk when its fact was last seen before a point where the "
        "window had to be emptied; only a summary, a pointer or a memory carries it across. Per configuration, over its "
        "runs (sessions × seeds): the needs at risk kept (verbatim in the window, in a summary, or behind a pointer the model "
        "followed, its read-back billed; an unfollowed pointer is lost) of n, with the "
        "Wilson 95% interval on each need once (seeds replay the same needs); a difference by Newcombe's interval, "
        f"paired on the same needs when the per-probe tables are there. Cost: `{ctx.cost_column}`.")]
    for w in ctx.windows:
        here = sorted((s for s in ctx.pooled if s.window == w), key=lambda s: (not s.completed, s.cost))
        if not any(s.retention.n for s in here if not math.isnan(s.retention.n)):
            content.append(Para(f"**Window {w:,}**: no need was at risk (no fact is needed across a turnover point)."))
            continue
        rows = [[s.config, "yes" if s.completed else "**failed**", fmt.money(s.cost), _kept(s).removesuffix(" kept"),
                 *_parts(ctx, s)[1:]] for s in here]
        content.append(Para(f"**Window {w:,}**"))
        content.append(Table(["configuration", "completed", "cost", "needs kept [95%]", *LABELS, "goal kept",
                              "constraints kept"], rows, ["l", "l", "r", "l", "r", "r", "r", "r", "r", "r"],
                             [not s.completed for s in here]))
        content += _break_even(ctx, here)
        pr = pairs(ctx, w)
        ref = reference(ctx, w)
        n_all = len(here) * (len(here) - 1) // 2
        if pr:
            content.append(Para(f"The {len(pr)} pairs that matter (neighbours on the cost–retention front, then each "
                                f"strategy against the reference `{ref.config if ref else '–'}`); the other "
                                f"{n_all - len(pr)} pairs are not compared:"))
            content.append(Bullets([pair_line(a, b) for a, b in pr]))
    return Section("Retention: needs at risk, and the pairs that matter", content)


def _break_even(ctx: Context, here: list[tuning.Setting]) -> list[Any]:
    """Issue 43: how many wasted calls per violated goal/constraint would change the cost order
    (harness/retention/needs.py break_even_lines, as ``ctxsim compare`` prints it), from each completed
    configuration's cost, violations per run and mean cost of a call."""
    from ctxsim.harness.retention.needs import break_even_lines

    money, call_usd = {}, {}
    for s in here:
        g = ctx.runs[ctx.runs["key"].isin(s.keys)] if "key" in ctx.runs and s.keys else ctx.runs.iloc[0:0]
        if not s.completed or g.empty or "recovery.violated" not in g or "calls" not in g:
            continue
        money[s.config] = (s.cost, float(g["recovery.violated"].fillna(0).mean()))
        calls = g["calls"].where(g["calls"] > 0)
        call_usd[s.config] = float((g[analysis.COST] / calls).mean()) if calls.notna().any() else 0.0
    got = break_even_lines(money, call_usd, {s.config: {"kept": s.retention.est} for s in here})
    return [Para(got[1]), Bullets([x.removeprefix("- ") for x in got[2:]])] if got else []


def goal_and_constraints(s: tuning.Setting, other: tuning.Setting | None = None) -> str:
    """The goal and the user's constraints at risk that ``s`` keeps (beside ``other``'s), said in full
    where it loses any: a sentence, "" when there are none at risk."""
    parts = []
    for what, word in (("goal", "the goal"), ("constraints", "the user's constraints")):
        k = sum(getattr(v, f"{what}_kept") for v in s.needs.values())
        n = sum(getattr(v, f"{what}_n") for v in s.needs.values())
        if not n:
            continue
        text = f"{word} {count(k)}/{n}"
        if other is not None:
            ko = sum(getattr(v, f"{what}_kept") for v in other.needs.values())
            text += f" (`{other.config}`: {count(ko)}/{n})"
        parts.append(text)
    if not parts:
        return ""
    loses = any(sum(getattr(v, f"{w}_kept") for v in s.needs.values()) < sum(getattr(v, f"{w}_n") for v in s.needs.values())
                for w in ("goal", "constraints"))
    return ("**It loses some of what the user said**: it keeps " if loses else "It keeps ") + " and ".join(parts) + "."


def rec_lines(ctx: Context) -> list[Any]:
    """What the recommendation section adds on the headline figure: its needs at risk with the
    interval, and how it stands against the reference and the best-keeping configuration at its
    window (within noise or not)."""
    s = ctx.rec_setting
    if s is None:
        return []
    out = [f"Needs at risk kept: {_kept(s)}, against the target {ctx.target:g}"
           + (f"; cost including recovery (`{ctx.cost_column}`) {fmt.money(s.cost)} per session, the figure the "
              "front and the pairs use (the table's cost per session is the bill alone)." if ctx.cost_column != analysis.COST
              else ".")]
    here = [x for x in ctx.pooled if x.window == s.window and x.completed and x is not s]
    best = max((x for x in here if not math.isnan(x.retention.est) and x.retention.est > s.retention.est),
               key=lambda x: x.retention.est, default=None)
    what = goal_and_constraints(s, best)
    if what:   # what the headline share hides: a configuration can meet the target and lose every constraint
        out.append(what)
    ref = reference(ctx, s.window)
    for other, why in ((ref, "the reference"), (best, "the configuration that keeps the most")):
        if other is not None and other.config != s.config and not (other is best and ref is not None
                                                                     and best.config == ref.config):
            out.append(f"Against {why}: {pair_line(s, other)}.")
    if best is None:
        out.append("No configuration that completed every run keeps more needs at risk at this window.")
    return [Bullets(out)]
