"""The report sections that answer "which setting should we ship?" (harness/sweep/tuning.py): the tuning
answer per strategy, how the tuned strategy compares with its peers, what the grid failed to
measure, and the sensitivity of each swept parameter per window."""

from __future__ import annotations

import math
from typing import Any

from ctxsim.harness.report import formatting as fmt
from ctxsim.harness.report import grid_checks
from ctxsim.harness.report.content import Bullets, Context, Para, Section, Table
from ctxsim.harness.sweep import tuning


def _nan(x: float) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def money(v: float) -> str:
    """Dollars with the sign before the symbol (−$3.00, not $-3.00)."""
    return fmt.MISSING if _nan(v) else ("-" if v < 0 else "") + fmt.money(abs(v))


def money_ci(v: tuple[float, float, float]) -> str:
    d, lo, hi = v
    if _nan(d):
        return fmt.MISSING
    return money(d) + ("" if _nan(lo) else f" [{money(lo)}, {money(hi)}]")


def pct_ci(v: tuple[float, float, float]) -> str:
    d, lo, hi = v
    if _nan(d):
        return fmt.MISSING
    return f"{d:.1%}" + ("" if _nan(lo) else f" [{lo:.1%}, {hi:.1%}]")


def ret_ci(r: tuning.Retention) -> str:
    if _nan(r.est):
        return fmt.MISSING
    return f"{r.est:.3f}" + ("" if _nan(r.lo) else f" [{r.lo:.3f}, {r.hi:.3f}]")


def diff_ci(v: tuple[float, float, float]) -> str:
    d, lo, hi = v
    if _nan(d):
        return fmt.MISSING
    return f"{d:+.3f}" + ("" if _nan(lo) else f" [{lo:+.3f}, {hi:+.3f}]")


def verdict(v: tuple[float, float, float]) -> str:
    """How a retention difference (this − reference) reads."""
    d, lo, hi = v
    if _nan(lo):
        return "no interval" if not _nan(d) else fmt.MISSING
    from ctxsim.harness.sweep.sessions import Interval, direction

    return {0: "within noise", 1: "better", -1: "worse"}[direction(Interval(d, lo, hi))]


def setting_name(s: tuning.Setting) -> str:
    """The changed parameters only (the strategy is the section's), or "default"."""
    if not s.changed:
        return "default"
    return ", ".join(f"{k}={fmt.value(v)}" for k, v in sorted(s.changed.items()))


def swept_values(a: tuning.Answer, s: tuning.Setting) -> str:
    """Every parameter the grid sweeps, at its value in ``s`` (the default's value beside a change)."""
    out = []
    for p in a.swept:
        v, d = s.params.get(p), a.default.params.get(p)
        out.append(f"{p}={fmt.value(v)}" + (f" (default {fmt.value(d)})" if repr(v) != repr(d) else ""))
    return ", ".join(out)


def _where(a: tuning.Answer) -> str:
    return f"window {a.window:,}, {a.group}"


NO_BETTER = "no setting improves on the default"


def _lead(a: tuning.Answer) -> str:
    """One sentence a reviewer can act on."""
    head = f"**{a.label} at {_where(a)}**: "
    if not a.default.completed:
        return head + "no setting can be recommended: " + (a.note or "the default failed a session") + "."
    c, b = a.cheapest, a.best_retention
    default = f"{fmt.money(a.default.cost)} per session, retention {ret_ci(a.default.retention)}"
    if c is None and b is None:
        out = head + (f"keep the default ({swept_values(a, a.default)}; {default}): {NO_BETTER} (no other setting is "
                      "cheaper with retention within noise of the default's, none keeps more at no more cost)")
    elif c is None:
        out = head + (f"{NO_BETTER} on cost (no cheaper setting keeps retention within noise of the default's: "
                      f"{default})")
    else:
        out = head + (f"ship `{setting_name(c.setting)}` ({swept_values(a, c.setting)}): {fmt.money(c.setting.cost)} per session against "
                      f"{fmt.money(a.default.cost)} at the default, a saving of {money_ci(c.saving)} "
                      f"({pct_ci(c.saving_pct)}); retention {ret_ci(c.setting.retention)} against "
                      f"{ret_ci(a.default.retention)}, difference {diff_ci(c.retention_diff)} ({verdict(c.retention_diff)})")
    if b is not None and (c is None or b.setting is not c.setting):
        out += (f". For the best retention at no more cost: `{setting_name(b.setting)}` ({swept_values(a, b.setting)}), retention "
                f"{ret_ci(b.setting.retention)} ({diff_ci(b.retention_diff)}, {verdict(b.retention_diff)}), "
                f"saving {money_ci(b.saving)} ({pct_ci(b.saving_pct)})")
    elif b is None and c is not None:
        out += ". No setting keeps more than the default at no more cost"
    return out + "." + (f" Note: {a.note}." if a.note else "")


def _row(a: tuning.Answer, p: tuning.Pick | None) -> list[str]:
    """Six columns, so the table fits a 960-px page without scrolling."""
    base = [f"{fmt.count(a.window)} ({a.group})", f"{fmt.money(a.default.cost)}; {ret_ci(a.default.retention)}"]
    if p is None:
        return base + [NO_BETTER if a.default.completed else "none (the default failed)", fmt.MISSING, fmt.MISSING,
                       fmt.MISSING]
    return base + [setting_name(p.setting), f"{fmt.money(p.setting.cost)}; {ret_ci(p.setting.retention)}",
                   f"{money_ci(p.saving)}; {pct_ci(p.saving_pct)}", f"{diff_ci(p.retention_diff)} {verdict(p.retention_diff)}"]


HEAD = ["window (traces)", "default: cost; retention", "setting", "its cost; retention", "saving per session; %",
        "retention − default"]
ALIGN = ["l"] * 6  # left: .num cells do not wrap, and these hold intervals


def section_tuning(ctx: Context) -> Section | None:
    if not ctx.answers:
        return None
    content: list[Any] = [Para(
        "For each strategy the sweep varies, per window and population of sessions: the **cheapest setting that holds "
        "against the default across sessions** (its saving's interval over sessions above 0, cheaper on most "
        "sessions, retention not worse beyond noise), and the **setting with the best retention at no more than the "
        f"default's cost**, with the saving against the default. Retention: {ctx.retention_method}. Cost: "
        f"`{ctx.cost_column}`, the mean per session. Intervals (95%) are a bootstrap over sessions, differences paired "
        "by session; on one session there is no interval over sessions, and the interval given is that of its own "
        "needs. Only settings that completed every run are candidates.")]
    for label in dict.fromkeys(a.label for a in ctx.answers):
        mine = [a for a in ctx.answers if a.label == label]
        swept = sorted({p for a in mine for p in a.swept})
        content.append(Para(f"**{label}**, swept: {', '.join(f'`{p}`' for p in swept)}. Cheapest setting that keeps "
                            "retention:"))
        content.append(Table(HEAD, [_row(a, a.cheapest) for a in mine], ALIGN))
        content.append(Para(f"**{label}**: best retention at no more than the default's cost:"))
        content.append(Table(HEAD, [_row(a, a.best_retention) for a in mine], ALIGN))
    return Section("Tuning: which setting to ship", content)


def section_peers(ctx: Context) -> Section | None:
    if not ctx.answers:
        return None
    content: list[Any] = [Para(
        "Each tuned setting (the cheapest that keeps retention, above) against every other strategy in the sweep, at "
        "the same window on the same sessions. A peer that failed a session is listed last; its cost is its spend "
        "until it failed and is not compared.")]
    for a in ctx.answers:
        tuned = a.cheapest.setting if a.cheapest else a.default
        rows, failed = [], []
        for r in tuning.peers(a, ctx.sets):
            bad = not r.peer.completed
            rows.append([r.peer.config, "**failed**" if bad else "yes", fmt.money(r.peer.cost),
                         fmt.MISSING if bad else money_ci(r.cost_diff), ret_ci(r.peer.retention),
                         f"{diff_ci(r.retention_diff)} {verdict(r.retention_diff)}"])
            failed.append(bad)
        if not rows:
            continue
        content.append(Para(f"**{a.label} `{setting_name(tuned)}` at {_where(a)}**: {fmt.money(tuned.cost)} per "
                            f"session, retention {ret_ci(tuned.retention)}."))
        content.append(Table(["peer", "completed", "cost", "peer − tuned cost", "retention", "peer − tuned retention"],
                             rows, ["l", "l", "r", "r", "r", "r"], failed))
    return Section("The tuned strategy against its peers", content) if len(content) > 1 else None


def section_grid_checks(ctx: Context) -> Section | None:
    if not ctx.answers:
        return None
    if ctx.grid_warnings:
        return Section("What this grid did not measure", [
            Para(f"{len(ctx.grid_warnings)} part(s) of the grid measured nothing; their rows are in every table, but "
                 "they say nothing about the parameter named:"), Bullets(ctx.grid_warnings)])
    return Section("What this grid did not measure", [Para(
        "Nothing: every swept parameter changed the results at every window, and every swept strategy compacted at "
        "every window.")])


def sensitivity_rows(ctx: Context, window: int) -> list[list[str]]:
    """Per swept strategy and parameter at ``window``: each value with the other swept parameters at
    their defaults (one at a time; the mean over the others when the grid lacks the default)."""
    rows = []
    for a in (x for x in ctx.answers if x.window == window):
        for p in a.swept:
            others = [q for q in a.swept if q != p]
            base = a.default.params
            slice_ = [s for s in a.settings if all(repr(s.params.get(q)) == repr(base.get(q)) for q in others)]
            one_at_a_time = len({repr(s.params.get(p)) for s in slice_}) > 1
            pool = slice_ if one_at_a_time else a.settings
            vals: dict[str, list[tuning.Setting]] = {}
            for s in pool:
                vals.setdefault(repr(s.params.get(p)), []).append(s)
            ordered = sorted(vals.values(), key=lambda g: (str(type(g[0].params.get(p))), g[0].params.get(p)))
            cells = []
            for g in ordered:
                v = g[0].params.get(p)
                done = [s for s in g if s.completed]
                cost = sum(s.cost for s in done) / len(done) if done else math.nan
                ret = done[0].retention if len(done) == 1 else tuning.Retention(
                    sum(s.retention.est for s in done) / len(done) if done else math.nan, math.nan, math.nan)
                rec = [s.recovery for s in done if not _nan(s.recovery)]
                cells.append((v, cost, ret, sum(rec) / len(rec) if rec else math.nan, len(g) - len(done)))
            costs = [c for _, c, _, _, _ in cells if not _nan(c)]
            rets = [r.est for _, _, r, _, _ in cells if not _nan(r.est)]
            per = "; ".join(f"{fmt.value(v)}{' (default)' if repr(v) == repr(base.get(p)) else ''}: {fmt.money(c)}, "
                            f"{ret_ci(r)}" + (f", recovery {fmt.money(rc)}" if not _nan(rc) else "")
                            + (f" ({bad} failed)" if bad else "") for v, c, r, rc, bad in cells)
            rows.append([a.label, a.group, f"`{p}`", "one at a time" if one_at_a_time else "mean over the others", per,
                         fmt.money(max(costs) - min(costs)) if costs else fmt.MISSING,
                         f"{max(rets) - min(rets):.3f}" if rets else fmt.MISSING])
    return rows


def section_sensitivity(ctx: Context) -> Section | None:
    if not ctx.answers:
        return None
    content: list[Any] = [Para(
        "Per window (never averaged over windows): each swept parameter's values, with the other swept parameters at "
        "their defaults, and for each value the cost per session, retention (interval) and the recovery cost "
        "(reading lost needs back), over the runs that completed; then the spread (max − min) of cost and retention.")]
    for w in ctx.windows:
        rows = sensitivity_rows(ctx, w)
        if rows:
            content.append(Para(f"**Window {w:,}**"))
            content.append(Table(["strategy", "traces", "parameter", "slice", "value: cost, retention [95%]",
                                  "cost spread", "retention spread"], rows, ["l", "l", "l", "l", "l", "r", "r"]))
    return Section("Sensitivity per window", content) if len(content) > 1 else None


def warnings_for(sets: list[tuning.Setting]) -> list[str]:
    return grid_checks.warnings(sets)


def terminal_lines(runs, probes=None) -> tuple[list[str], list[str]]:
    """(the report's opening, one line per part of the grid that measured nothing) for the terminal
    (``ctxsim sweep`` / ``ctxsim report``): the same sentences as the report, Markdown marks removed."""
    from ctxsim.harness.report import opening

    sets = tuning.settings(runs, probes or {})
    return opening.terminal(sets, tuning.answers(sets)), [w.replace("`", "") for w in warnings_for(sets)]


def noise_pairs(ctx: Context) -> dict[int, list[tuple[str, str]]]:
    """Per window, the pairs worth a "within noise" statement (harness/report/needs_sections.py: neighbours
    on the cost–retention front, then each strategy against the reference), by configuration name."""
    from ctxsim.harness.report import needs_sections

    return needs_sections.config_pairs(ctx)


def section_ledger(ctx: Context) -> Section | None:
    """The compaction ledger's numbers on the grid's own axis, per window, with retention."""
    led = ctx.grid_ledger
    if led is None or led.empty:
        return None
    content: list[Any] = [Para(
        f"N-WIN-3, read from the sweep's own runs: for each value of `{tuning.LEDGER_AXIS}` in the grid (the other swept "
        "parameters at their defaults), what the summary calls cost against what the main calls cost carrying the "
        "text, per session, and the retention that buys.")]
    for (label, w, group), g in led.groupby(["label", "window", "group"], sort=False):
        rows = [[fmt.value(float(r[tuning.LEDGER_AXIS])) + (" (default)" if r["default"] else ""), fmt.money(r["summary_cost_usd"]),
                 fmt.money(r["main_cost_usd"]), fmt.money(r["total_cost_usd"]), fmt.share(r["compactions"], 1),
                 ret_ci(tuning.Retention(r["retention"], r["retention_lo"], r["retention_hi"])),
                 "yes" if r["completed"] else "**failed**"] for _, r in g.iterrows()]
        ok = g[g["completed"]]
        best = ok.loc[ok["total_cost_usd"].idxmin()] if len(ok) else None
        content.append(Para(f"**{label}, window {w:,}, {group}**" + (
            f": cheapest total at `{tuning.LEDGER_AXIS}` = {fmt.value(float(best[tuning.LEDGER_AXIS]))} "
            f"({fmt.money(best['total_cost_usd'])}, retention {best['retention']:.3f})." if best is not None else ".")))
        content.append(Table([tuning.LEDGER_AXIS, "summary calls", "main calls", "total", "compactions", "retention",
                              "completed"], rows, ["r", "r", "r", "r", "r", "r", "l"], [not r["completed"] for _, r in g.iterrows()]))
    return Section("Compaction ledger on the grid", content)
