"""The report's figures: one function per figure, each taking the report's context
(:class:`ctxsim.harness.report.content.Context`) and returning a :class:`Figure` (its PNG under ``figures/``,
its title and a one-line reading computed from the data) or None when the data has nothing to show.

Every figure puts configurations in report order (those that completed by cost, then those that
failed), draws a failed one hatched grey with its label in red, and every reading speaks only of
the configurations that completed when it compares, naming those that failed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib
from ctxsim.harness.report.content import Context, Figure

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

# readable at 1280 px: a 12-inch figure at 100 dpi is shown at about its own size (issue 28)
plt.rcParams.update({"font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "legend.fontsize": 9,
                     "xtick.labelsize": 9, "ytick.labelsize": 9})

from ctxsim.harness.report import formatting as fmt  # noqa: E402
from ctxsim.harness.sweep import analysis  # noqa: E402

TOKEN_KINDS = [("tokens.input_uncached", "uncached input"), ("tokens.cache_write", "cache write"),
               ("tokens.cache_read", "cache read"), ("tokens.output", "output")]
CATEGORIES = ("goal", "constraint", "decision", "error", "file", "preference", "feedback")
SUMMARY_RESERVE, SOFT_MARGIN, HARD_MARGIN = 20_000, 13_000, 3_000  # N-COMP-1..3 (the lines drawn)
OK_COLOR, FAILED_COLOR, FAILED_EDGE = "#4477aa", "#dddddd", "#aa3377"
RET = analysis.RETENTION


def name(row: Any, *, window: bool = False) -> str:
    """A configuration's name, marked when it failed."""
    n = str(row["config"])
    if window:
        n += f" @ {int(row['window']):,}"
    bad = fmt.failed_at(row)
    return f"{n} [{bad.split(' (')[0].upper()}]" if bad else n


def _failed_names(d: pd.DataFrame, limit: int = 30) -> str:
    bad = d[~d["completed"]]
    items = [f"{r['config']} ({fmt.failed_at(r).split(' (')[0]})" for _, r in bad.iterrows()]
    return ", ".join(items[:limit]) + (f" and {len(items) - limit} more" if len(items) > limit else "")


def _failed_note(d: pd.DataFrame) -> str:
    n = int((~d["completed"]).sum())
    if not n:
        return ""
    return (f" {n} failed ({_failed_names(d)}): hatched grey, listed last, their numbers cover only the calls "
            f"before the failure and are not compared.")


def layout(fig) -> None:
    """Everything inside the image: tight layout, room left for a suptitle."""
    fig.tight_layout(rect=(0, 0, 1, 0.96) if fig._suptitle is not None else None)


def _save(fig, out: Path, name_: str) -> str:
    path = out / "figures" / name_
    path.parent.mkdir(parents=True, exist_ok=True)
    layout(fig)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return f"figures/{name_}"


def _bars(ax, y, values, done, height=0.8, left=None, **kw):
    colors = [OK_COLOR if d else FAILED_COLOR for d in done]
    bars = ax.barh(y, values, height, left=left, color=kw.pop("color", colors), **kw)
    for b, d in zip(bars, done):
        if not d:
            b.set_hatch("//")
            b.set_edgecolor(FAILED_EDGE)
    return bars


def _ylabels(ax, labels: list[str], done: list[bool]) -> None:
    ax.set_yticks(np.arange(len(labels)), labels, fontsize=9)
    for t, d in zip(ax.get_yticklabels(), done):
        if not d:
            t.set_color(FAILED_EDGE)
    ax.invert_yaxis()  # report order, top to bottom


# --- figures -------------------------------------------------------------------------------------------

def fig_cost(ctx: Context) -> Figure:
    """Completed configurations on their own axes; failed ones (spend until the failure) on a panel
    below with its own scale, so a long failed run never squashes the ones that completed."""
    p = ctx.primary
    ok, bad = p[p["completed"]], p[~p["completed"]]
    parts = [d for d in (ok, bad) if len(d)]
    fig, axes = plt.subplots(len(parts), 2, figsize=(12, 0.34 * len(p) + 1.2 + 1.0 * len(parts)), squeeze=False,
                             gridspec_kw={"height_ratios": [max(len(d), 1) + 1.5 for d in parts]})
    for (a, b), d in zip(axes, parts):
        done = d["completed"].tolist()
        y = np.arange(len(d))
        _bars(a, y, d["cost_usd"].to_numpy(), done)
        _ylabels(a, [name(r) for _, r in d.iterrows()], done)
        b.set_yticks(y, [""] * len(d))
        b.invert_yaxis()
        failed_part = not done[0]
        a.set_xlabel("spend until the failure (USD; own scale)" if failed_part else "cost per session (USD)")
        a.set_title(f"Failed: spend until it failed (window {ctx.window:,})" if failed_part
                    else f"Cost per session (window {ctx.window:,})", fontsize=11)
        left = np.zeros(len(d))
        for col, kind in TOKEN_KINDS:
            if col in d:
                v = d[col].fillna(0).to_numpy() / 1e6
                b.barh(y, v, 0.8, left=left, label=kind)
                left += v
        b.set_xlabel("tokens per session (millions)")
        b.set_title("Tokens by kind" + (" (until the failure)" if failed_part else ""), fontsize=11)
        if b.get_legend_handles_labels()[0]:
            b.legend(loc="lower right", fontsize=9)
    f = _save(fig, ctx.out, "01-cost.png")
    ok = p[p["completed"]]
    if len(ok) >= 2:
        lo, hi = ok.iloc[0], ok.iloc[-1]
        reading = (f"Of the configurations that completed, {lo['config']} is cheapest at {fmt.money(lo['cost_usd'])} "
                   f"per session and {hi['config']} costs {fmt.money(hi['cost_usd'])} "
                   f"({hi['cost_usd'] / max(lo['cost_usd'], 1e-12):.1f}×).")
    elif len(ok) == 1:
        reading = f"Only {ok.iloc[0]['config']} completed, at {fmt.money(ok.iloc[0]['cost_usd'])} per session."
    else:
        reading = "No configuration completed a session at this window: there is no cost to compare."
    return Figure(f, "Cost per session and tokens by kind", reading + _failed_note(p))


def _context_series(c: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per main call: the request the API answered (or the last one it refused) and the rejected
    attempts."""
    main = c[c["kind"].isin(["main", "readback"])]
    if "call" not in main:
        main = main.assign(call=np.arange(len(main)), attempt=1)
    last = main.groupby("call", sort=True).tail(1)
    return last, main[main["rejected"]]


def fig_sawtooth(ctx: Context) -> Figure | None:
    """Small multiples, one panel per configuration on one trace (the longest) at the smallest window."""
    have = ctx.runs[ctx.runs["key"].isin(ctx.calls) & (ctx.runs["window"] == ctx.window)]
    if have.empty:
        return None
    if "trace" in have:
        have = have[have["trace"] == have.groupby("trace")["calls"].max().idxmax()]
    order = {c: i for i, c in enumerate(ctx.primary["config"])}
    runs = have.drop_duplicates("config").assign(_o=lambda d: d["config"].map(order)).sort_values("_o")
    window = ctx.window
    n = len(runs)
    cols = min(3, n)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.4 * cols, 2.6 * rows + 1.2), sharex=True, sharey=True,
                             squeeze=False)
    top = 1.25 * window / 1e3
    failed = []
    for ax, (_, r) in zip(axes.flat, runs.iterrows()):
        last, rejected = _context_series(ctx.calls[r["key"]])
        x, yv = last["call"].to_numpy(), (last["context_tokens"] / 1e3).clip(upper=top).to_numpy()
        ax.plot(x, yv, lw=0.9, color=OK_COLOR if r["completed"] else FAILED_EDGE)
        comp = last[last["compaction"]]
        if len(comp):
            ax.scatter(comp["call"], (comp["context_tokens"] / 1e3).clip(upper=top), marker="v", s=12,
                       color="#cc6677", zorder=3)
        if len(rejected):
            ax.scatter(rejected["call"], (rejected["context_tokens"] / 1e3).clip(upper=top), marker="x", s=18,
                       color="k", zorder=4)
        ax.axhline(window / 1e3, color="k", lw=1)
        for y_line, color in trigger_lines(r, window):   # this configuration's own lines, if it has them
            ax.axhline(y_line / 1e3, color=color, ls="--", lw=0.7)
        short = panel_name(r)
        peak = last["context_tokens"].max() if len(last) else float("nan")
        title = f"{short} (peak {int(peak) / 1e3:,.0f}k)" if peak == peak else f"{short} (no call answered)"
        if not r["completed"]:
            failed.append(r)
            title = f"{short}: FAILED at call {fmt.count(r['failed_at_call'])}"
        ax.set_title(_wrap(title, 44), fontsize=9, color="k" if r["completed"] else FAILED_EDGE)
        ax.set_ylim(0, top * 1.02)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("main model call", fontsize=10)
    for ax in axes[:, 0]:
        ax.set_ylabel("context (k tokens)", fontsize=10)
    trace = Path(str(runs["trace"].iloc[0])).name if "trace" in runs else ""
    fig.suptitle(f"Context per call on {trace}, window {window:,}: black line = window, dashed = each NovaCode "
                 f"setting's own soft (orange) and hard (red) lines\n(N-COMP-1..3), ▼ = history rewritten, "
                 f"× = request rejected", fontsize=11)
    f = _save(fig, ctx.out, "02-context-per-call.png")
    rej = runs[(runs.get("rejected_requests", pd.Series(0, index=runs.index)) > 0) & runs["completed"]]
    on = f"On {trace} (the longest session), " if trace else ""   # one session drawn: the others may differ
    if failed:
        where = ", ".join(f"{r['config']} at call {fmt.count(r['failed_at_call'])}" for r in failed)
        reading = f"{on}{len(failed)} of {n} configurations fail at a request over the window and stop there ({where}); "
    else:
        reading = f"{on}every configuration completes under the {window:,}-token window; "
    reading += (f"{len(rej)} recovered from a rejected request by reacting and sending again ({', '.join(rej['config'])})."
                if len(rej) else "the rest stay below it by compacting, clearing or dropping.")
    return Figure(f, "Context tokens per call (the sawtooth)", reading)


def trigger_lines(row: Any, window: int) -> list[tuple[float, str]]:
    """The soft and hard compaction lines of a NovaCode configuration, from its own parameters
    (N-COMP-1..3: window − summary_reserve − soft_margin / hard_margin); none for another strategy."""
    if str(row.get("strategy", row.get("label"))) != "novacode":
        return []

    def param(name: str, default: int) -> float:
        v = row.get(f"param.{name}")
        return default if v is None or (isinstance(v, float) and np.isnan(v)) else float(v)
    eff = window - param("summary_reserve", SUMMARY_RESERVE)
    return [(eff - param("soft_margin", SOFT_MARGIN), "orange"), (eff - param("hard_margin", HARD_MARGIN), "r")]


def panel_name(row: Any) -> str:
    """A configuration as a small panel can hold it: the strategy and its changed parameters, values in k."""
    from ctxsim.harness.sweep import analysis as an

    changed = an.changed_params(row)
    if not changed:
        return str(row["label"])

    def v(x: Any) -> str:
        if isinstance(x, (int, float)) and not isinstance(x, bool) and abs(x) >= 1000 and float(x) % 1000 == 0:
            return f"{int(x) // 1000}k"
        return str(x).lower() if isinstance(x, bool) else str(x)
    abbrev = {"soft_margin": "soft", "tail_min_tokens": "tail≥", "tail_max_tokens": "tail≤"}
    return f"{row['label']} ({', '.join(f'{abbrev.get(k, k)} {v(x)}' for k, x in sorted(changed.items()))})"


def _wrap(text: str, width: int) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width)) if len(text) > width else text


def fig_cache(ctx: Context) -> Figure:
    p = ctx.primary
    fig, ax = plt.subplots(figsize=(9, 0.3 * len(p) + 1.6))
    _bars(ax, np.arange(len(p)), p["cache_hit_rate"].to_numpy() * 100, p["completed"].tolist())
    _ylabels(ax, [name(r) for _, r in p.iterrows()], p["completed"].tolist())
    ax.set_xlabel("cache hit rate (% of input tokens read from cache)")
    ax.set_xlim(0, 100)
    ax.set_title(f"Prompt-cache hit rate (window {ctx.window:,}), in report order", fontsize=10)
    ok = p[p["completed"]].sort_values("cache_hit_rate")
    reading = (f"Of the configurations that completed, {ok.iloc[-1]['config']} reads the most of its input from "
               f"cache ({fmt.percent(ok.iloc[-1]['cache_hit_rate'])}) and {ok.iloc[0]['config']} the least "
               f"({fmt.percent(ok.iloc[0]['cache_hit_rate'])})." if len(ok) else
               "No configuration completed at this window.")
    return Figure(_save(fig, ctx.out, "03-cache-hit-rate.png"), "Cache hit rate", reading + _failed_note(p))


def fig_latency(ctx: Context) -> Figure:
    p = ctx.primary
    done = p["completed"].tolist()
    y = np.arange(len(p))
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 0.32 * len(p) + 1.8), sharey=True)
    a.barh(y - 0.2, p["latency_s.p50"].to_numpy(), 0.4, label="p50", color="#66ccee")
    _bars(a, y + 0.2, p["latency_s.p95"].to_numpy(), done, height=0.4, label="p95")
    _ylabels(a, [name(r) for _, r in p.iterrows()], done)
    a.set_xlabel("latency per main call (s)")
    a.set_title(f"Latency per call (window {ctx.window:,})", fontsize=10)
    a.legend(fontsize=9)
    block = p["latency_s.compaction_blocking"].fillna(0) / 60
    _bars(b, y, block.to_numpy(), done)
    b.set_xlabel("time blocked in compaction per session (minutes)")
    b.set_title("Blocking compaction time", fontsize=10)
    ok = p[p["completed"]]
    if len(ok):
        reading = f"Of the configurations that completed, p95 latency ranges {fmt.seconds(ok['latency_s.p95'].min())}–{fmt.seconds(ok['latency_s.p95'].max())} s; "
        ob = ok["latency_s.compaction_blocking"].fillna(0)
        reading += (f"{ok.loc[ob.idxmax(), 'config']} blocks the session longest in compaction "
                    f"({ob.max() / 60:.1f} min per session)." if ob.max() > 0 else "none blocked the session on compaction.")
    else:
        reading = "No configuration completed at this window."
    return Figure(_save(fig, ctx.out, "04-latency.png"), "Latency and compaction blocking", reading + _failed_note(p))


def fig_retention(ctx: Context) -> Figure | None:
    p = ctx.primary
    cols = [c for c in (f"retention.by_category.{k}" for k in CATEGORIES) if c in ctx.runs and ctx.runs[c].notna().any()]
    if not cols:
        return None
    means = ctx.runs[ctx.runs["window"] == ctx.window].groupby("config")[cols].mean().reindex(p["config"])
    fig, ax = plt.subplots(figsize=(12, 5.5))
    width = 0.8 / len(cols)
    x = np.arange(len(p))
    for i, c in enumerate(cols):
        ax.bar(x + i * width - 0.4 + width / 2, means[c].to_numpy(), width, label=c.rsplit(".", 1)[-1])
    ax.set_xticks(x, [name(r) for _, r in p.iterrows()], rotation=35, ha="right", fontsize=9)
    for t, d in zip(ax.get_xticklabels(), p["completed"]):
        if not d:
            t.set_color(FAILED_EDGE)
    ax.set_ylabel("retention (0 lost, 1 kept verbatim)")
    ax.set_title(f"Retention by fact category (window {ctx.window:,}); probes after a failure score 0", fontsize=10)
    ax.set_ylim(0, 1.12)
    ax.legend(ncol=len(cols), fontsize=9, loc="upper center")
    ok = p[p["completed"]].dropna(subset=["retention.goal"]) if "retention.goal" in p else p.iloc[0:0]
    ok = ok.sort_values("retention.goal")
    reading = (f"Of the configurations that completed, goal retention is highest for {ok.iloc[-1]['config']} "
               f"({fmt.share(ok.iloc[-1]['retention.goal'], 2)}) and lowest for {ok.iloc[0]['config']} "
               f"({fmt.share(ok.iloc[0]['retention.goal'], 2)})." if len(ok) else "No completed configuration has goal probes.")
    if (~p["completed"]).any():
        reading += f" Failed ({_failed_names(p)}): every probe after the failure scores 0."
    return Figure(_save(fig, ctx.out, "05-retention.png"), "Retention by fact category and goal retention", reading)


def window_sessions(runs: pd.DataFrame) -> dict[int, set[str]]:
    """The sessions (trace content hashes) run at each window."""
    th = "trace_hash" if "trace_hash" in runs else "trace"
    if th not in runs or "window" not in runs:
        return {}
    return {int(w): set(g[th].astype(str)) for w, g in runs.groupby("window")}


def paired_window_ratio(runs: pd.DataFrame, config: str, lo: int, hi: int, sessions_: set[str]) -> float:
    """A configuration's cost at ``hi`` over its cost at ``lo`` on the same sessions (the mean over
    those sessions of each window's cost, a ratio of means)."""
    th = "trace_hash" if "trace_hash" in runs else "trace"
    d = runs[(runs["config"] == config) & runs[th].astype(str).isin(sessions_)]
    a = d[d["window"] == lo]["cost_usd"].mean()
    b = d[d["window"] == hi]["cost_usd"].mean()
    return float(b / a) if a and a == a and b == b else float("nan")


def fig_windows(ctx: Context) -> Figure:
    """Cost and retention per window. A ratio between windows is the window's effect only on the
    same sessions: it is given on the sessions run at both windows, and when the windows ran
    different sessions (a 1M window needs longer ones) the figure says so and gives none."""
    wins = ctx.windows
    order = list(dict.fromkeys(ctx.cfgs["config"]))
    by = {(r["config"], int(r["window"])): r for _, r in ctx.cfgs.iterrows()}
    per = window_sessions(ctx.runs)
    same = len(wins) >= 2 and all(per.get(w) == per.get(wins[0]) for w in wins)
    shared = set.intersection(*(per.get(w, set()) for w in wins)) if len(wins) >= 2 and per else set()
    ret_col = "needs kept" if tuning_has_needs(ctx) else RET
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 0.36 * len(order) + 2.2), sharey=True)
    y = np.arange(len(order))
    h = 0.8 / max(len(wins), 1)
    for i, w in enumerate(wins):
        rows = [by.get((c, w)) for c in order]
        cost = [r["cost_usd"] if r is not None else np.nan for r in rows]
        ret = [_kept_share(ctx, c, w) if ret_col == "needs kept" else (r[RET] if r is not None and RET in r else np.nan)
               for c, r in zip(order, rows)]
        done = [bool(r["completed"]) if r is not None else True for r in rows]
        col = plt.get_cmap("tab10")(i)
        n_s = len(per.get(w, ()))
        label = f"{w:,} ({n_s} session{'s' if n_s != 1 else ''})" if per else f"{w:,}"
        _bars(a, y + i * h - 0.4 + h / 2, cost, done, height=h, color=[col if d else FAILED_COLOR for d in done],
              label=label)
        _bars(b, y + i * h - 0.4 + h / 2, ret, done, height=h, color=[col if d else FAILED_COLOR for d in done],
              label=label)
    a.set_yticks(y, order, fontsize=9)
    a.invert_yaxis()
    a.set_xscale("log")
    a.set_xlabel("cost per session (USD, log scale; hatched = failed, spend until then)")
    b.set_xlabel("needs at risk kept" if ret_col == "needs kept" else "retention score")
    sessions_note = "on the same sessions" if same else "each window on its own sessions"
    a.set_title("Cost per session", fontsize=10)
    b.set_title("Needs at risk kept" if ret_col == "needs kept" else "Retention score", fontsize=10)
    fig.suptitle(f"By window, {sessions_note}", fontsize=11)
    a.legend(title="window (tokens)", fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=len(wins))
    f = _save(fig, ctx.out, "07-windows.png")
    title = "Each window on its own sessions" if not same and not shared else "200k against 1M"
    if len(wins) < 2:
        return Figure(f, title, f"Only one window ({wins[0]:,}) in these runs: sweep windows = "
                      "[200000, 1000000] to compare.")
    lo, hi = wins[0], wins[-1]
    if not shared:
        groups = {w: sorted({tuning_group(r) for _, r in ctx.runs[ctx.runs["window"] == w].iterrows()}) for w in (lo, hi)}
        return Figure(f, title, (
            f"The windows ran different sessions ({lo:,}: {', '.join(groups[lo])}; {hi:,}: {', '.join(groups[hi])}): a "
            "session long enough to reach a 1M window is not one that reaches 200k, so the bars differ by session as "
            "much as by window, and no ratio between the windows is given. Compare configurations within a window."))
    both, only_hi, neither = [], [], []
    for c in order:
        rl, rh = by.get((c, lo)), by.get((c, hi))
        if rl is None or rh is None:
            continue
        if rl["completed"] and rh["completed"]:
            both.append((c, paired_window_ratio(ctx.runs, c, lo, hi, shared)))
        elif rh["completed"]:
            only_hi.append(c)
        elif not rl["completed"]:
            neither.append(c)
    both = [(c, r) for c, r in both if r == r]
    on = f"on the {len(shared)} session{'s' if len(shared) != 1 else ''} run at both"
    if both:
        ratios = sorted(r for _, r in both)
        reading = (f"For the {len(both)} configurations that completed at both windows, {on}, moving from {lo:,} to "
                   f"{hi:,} tokens changes cost by {ratios[0]:.2f}–{ratios[-1]:.2f}× (mechanisms stay, parameters move: "
                   "N-WIN-1).")
    else:
        reading = f"No configuration completed at both {lo:,} and {hi:,} {on}: there is no cost change to state."
    if not same:
        reading += " Other sessions ran at one window only: they are in the bars, not in the ratio."
    if only_hi:
        reading += (f" {len(only_hi)} complete only at {hi:,} ({', '.join(only_hi)}): "
                    f"at {lo:,} they fail, so their ratio is not given.")
    if neither:
        reading += f" {len(neither)} fail at both ({', '.join(neither)})."
    return Figure(f, title, reading)


def tuning_has_needs(ctx: Context) -> bool:
    from ctxsim.harness.sweep import tuning

    return tuning.has_needs(ctx.runs) and bool(ctx.pooled)


def tuning_group(row: Any) -> str:
    from ctxsim.harness.sweep import tuning

    return tuning.trace_group(row)


def _kept_share(ctx: Context, config: str, window: int) -> float:
    for s in ctx.pooled:
        if s.config == config and s.window == window:
            return s.retention.est
    return float("nan")


def fig_ledger(ctx: Context) -> Figure | None:
    led = ctx.ledger
    if led is None or led.empty:
        return None
    done = led["completed"] if "completed" in led else pd.Series(True, index=led.index)
    fig, ax = plt.subplots(figsize=(9, 4.6))
    x = led["trigger_tokens"] / 1e3
    ax.plot(x, led["summary_cost_usd"], "o-", label="summary calls")
    ax.plot(x, led["main_cost_usd"], "s-", label="main calls (carrying the text)")
    ax.plot(x, led["total_cost_usd"], "k^-", label="total")
    if (~done).any():
        ax.scatter(x[~done], led.loc[~done, "total_cost_usd"], s=160, marker="x", color=FAILED_EDGE, zorder=4,
                   label="session failed (spend until then)")
    ax.set_xlabel("soft compaction trigger (thousand tokens)")
    ax.set_ylabel("cost per session (USD)")
    ax.set_title("The compaction ledger (N-WIN-3): summary cost against carrying cost", fontsize=10)
    ax.legend(fontsize=9)
    ok = led[done]
    if len(ok):
        best = ok.loc[ok["total_cost_usd"].idxmin()]
        reading = (f"On this trace the cheapest trigger that completes is {fmt.count(best['trigger_tokens'])} tokens "
                   f"({fmt.money(best['total_cost_usd'])}, {fmt.count(best['compactions'])} compactions).")
    else:
        reading = "NovaCode failed at every trigger point tried on this trace."
    if (~done).any():
        reading += f" Triggers at {', '.join(fmt.count(t) for t in led.loc[~done, 'trigger_tokens'])} tokens fail."
    return Figure(_save(fig, ctx.out, "08-compaction-ledger.png"), "Compaction ledger", reading)
