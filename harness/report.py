"""Reports for design reviews: ``report.md`` with PNG figures and a self-contained ``index.html``
(figures embedded), from a sweep's results or from a set of runs (``ctxsim compare --report``).

Every figure has a title, axis labels with units and a one-line reading computed from the data.
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from harness import analysis, uncertainty  # noqa: E402
from harness.sweep import flatten  # noqa: E402

TOKEN_KINDS = [("tokens.input_uncached", "uncached input"), ("tokens.cache_write", "cache write"),
               ("tokens.cache_read", "cache read"), ("tokens.output", "output")]
CATEGORIES = ("goal", "constraint", "decision", "error", "file", "preference", "feedback")
SUMMARY_RESERVE, SOFT_MARGIN, HARD_MARGIN = 20_000, 13_000, 3_000  # N-COMP-1..3 (the lines drawn)


@dataclass
class Figure:
    file: str
    title: str
    reading: str


def rows_from_results(results: Sequence[Any]) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """RunResults (from ``compare``) -> the same flat rows a sweep writes, and their call tables."""
    rows, calls = [], {}
    for i, r in enumerate(results):
        m = dict(r.metrics)
        params = m.pop("params", {})
        key = f"run{i}"
        row = {"key": key, "label": r.strategy, "strategy": r.strategy, "error": ""}
        row.update({f"param.{k}": (json.dumps(v) if isinstance(v, (list, dict)) else v) for k, v in params.items()})
        row.update({k: v for k, v in flatten(m).items() if k not in row})
        rows.append(row)
        calls[key] = r.calls
    return pd.DataFrame(rows), calls


def _label_order(df: pd.DataFrame) -> list[str]:
    return list(df.groupby("label")["cost_usd"].mean().sort_values().index)


def _save(fig, out: Path, name: str) -> str:
    path = out / "figures" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout(rect=(0, 0, 1, 0.97) if fig._suptitle is not None else None)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return f"figures/{name}"


def _money(x: float) -> str:
    return f"${x:,.2f}" if x >= 0.1 else f"${x:,.4f}"


# --- the figures ------------------------------------------------------------------------------------

def fig_cost(df: pd.DataFrame, out: Path) -> Figure:
    order = _label_order(df)
    g = df.groupby("label")
    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 4.8))
    cost = g["cost_usd"].mean().reindex(order)
    over = g["overflows"].mean().reindex(order)
    # a rejected request is not billed: a strategy that overflows looks cheap; say so on the bar
    a.barh(order, cost.to_numpy(), color=["#cc6677" if o > 0 else "#4477aa" for o in over])
    for y, (c, o) in enumerate(zip(cost, over)):
        if o > 0:
            a.text(c, y, f" {o:,.0f} requests rejected", va="center", fontsize=7, color="#882255")
    a.set_xlabel("cost per session (USD, mean over runs)")
    a.set_title(f"Cost per session by strategy (window {int(df['window'].iloc[0]):,})")
    left = np.zeros(len(order))
    for col, name in TOKEN_KINDS:
        if col not in df:
            continue
        v = g[col].mean().reindex(order).to_numpy() / 1e6
        b.barh(order, v, left=left, label=name)
        left += v
    b.set_xlabel("tokens per session (millions)")
    b.set_title("Tokens by kind")
    b.legend(loc="lower right", fontsize=8)
    f = _save(fig, out, "01-cost.png")
    valid = cost[over == 0]
    if len(valid):
        reading = (f"of the strategies with no rejected request, {valid.index[0]} is cheapest at "
                   f"{_money(valid.iloc[0])} per session and {valid.index[-1]} costs {_money(valid.iloc[-1])} "
                   f"({valid.iloc[-1] / max(valid.iloc[0], 1e-12):.1f}x); red bars overflowed (rejected calls are not billed).")
    else:
        reading = "every strategy overflowed here: rejected calls are not billed, so costs understate the session."
    return Figure(f, "Cost per session and tokens by kind", reading)


def _pick_trace_runs(df: pd.DataFrame, calls: dict[str, pd.DataFrame]) -> tuple[pd.DataFrame, int]:
    have = df[df["key"].isin(calls)]
    if have.empty:
        return have, 0
    window = int(have["window"].min())
    have = have[have["window"] == window]
    trace = have.groupby("trace")["calls"].max().idxmax() if "trace" in have else None
    if trace is not None:
        have = have[have["trace"] == trace]
    return have.drop_duplicates("label"), window


def fig_sawtooth(df: pd.DataFrame, calls: dict[str, pd.DataFrame], out: Path) -> Figure | None:
    """Small multiples, one panel per strategy on one trace: 18 lines on one axis are unreadable."""
    runs, window = _pick_trace_runs(df, calls)
    if runs.empty:
        return None
    runs = runs.sort_values("label")
    n = len(runs)
    cols = min(3, n)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 2.6 * rows + 0.8), sharex=True, sharey=True,
                             squeeze=False)
    eff = window - SUMMARY_RESERVE
    top = 1.25 * window / 1e3
    over = []
    for ax, (_, r) in zip(axes.flat, runs.iterrows()):
        c = calls[r["key"]]
        main = c[c["kind"].isin(["main", "readback"])].reset_index(drop=True)
        y = main["context_tokens"] / 1e3
        ax.plot(np.arange(len(main)), y.clip(upper=top), lw=0.9, color="#4477aa")
        comp = main.index[main["compaction"]]
        if len(comp):
            ax.scatter(comp, y[comp].clip(upper=top), marker="v", s=14, color="#cc6677", zorder=3)
        rej = main.index[main["overflow"]]
        if len(rej):
            ax.scatter(rej, np.full(len(rej), top * 0.98), marker="|", s=10, color="k")
        ax.axhline(window / 1e3, color="k", lw=1)
        ax.axhline((eff - HARD_MARGIN) / 1e3, color="r", ls="--", lw=0.8)
        ax.axhline((eff - SOFT_MARGIN) / 1e3, color="orange", ls="--", lw=0.8)
        peak = int(main["context_tokens"].max())
        ax.set_title(f"{r['label']} (peak {peak / 1e3:,.0f}k)", fontsize=9)
        if peak > window:
            over.append(r["label"])
        ax.set_ylim(0, top * 1.02)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("main model call (index)")
    for ax in axes[:, 0]:
        ax.set_ylabel("context (k tokens)")
    trace = Path(str(runs["trace"].iloc[0])).name if "trace" in runs else ""
    fig.suptitle(f"Context per call on {trace}, window {window:,}: black = window, dashed = NovaCode soft/hard "
                 f"lines (N-COMP-2/3), ▼ = history rewritten, | = request rejected as too long", fontsize=10)
    reading = (f"{len(over)} of {n} strategies send requests over the window ({', '.join(over[:4])}"
               f"{'…' if len(over) > 4 else ''}); the rest stay below it by compacting, clearing or dropping."
               if over else f"Every strategy stays under the {window:,}-token window on this trace.")
    return Figure(_save(fig, out, "02-context-per-call.png"), "Context tokens per call (the sawtooth)", reading)


def fig_cache(df: pd.DataFrame, out: Path) -> Figure:
    g = df.groupby("label")["cache_hit_rate"].mean().sort_values()
    fig, ax = plt.subplots(figsize=(9, 4.8))
    ax.barh(g.index, g.to_numpy() * 100, color="#228833")
    ax.set_xlabel("cache hit rate (% of input tokens read from cache)")
    ax.set_xlim(0, 100)
    ax.set_title(f"Prompt-cache hit rate by strategy (window {int(df['window'].iloc[0]):,})")
    reading = f"{g.index[-1]} reads {g.iloc[-1]:.0%} of its input from cache; {g.index[0]} {g.iloc[0]:.0%}."
    return Figure(_save(fig, out, "03-cache-hit-rate.png"), "Cache hit rate", reading)


def fig_latency(df: pd.DataFrame, out: Path) -> Figure:
    order = _label_order(df)
    g = df.groupby("label")
    p50, p95 = g["latency_s.p50"].mean().reindex(order), g["latency_s.p95"].mean().reindex(order)
    block = g["latency_s.compaction_blocking"].mean().reindex(order)
    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 4.8))
    y = np.arange(len(order))
    a.barh(y - 0.2, p50.to_numpy(), 0.4, label="p50")
    a.barh(y + 0.2, p95.to_numpy(), 0.4, label="p95")
    a.set_yticks(y, order)
    a.set_xlabel("latency per main call (s)")
    a.set_title(f"Latency per call (window {int(df['window'].iloc[0]):,})")
    a.legend()
    b.barh(order, block.to_numpy() / 60, color="#cc6677")
    b.set_xlabel("time blocked in compaction per session (minutes)")
    b.set_title("Blocking compaction time")
    reading = f"p95 latency ranges {p95.min():.1f}–{p95.max():.1f} s; "
    reading += (f"{block.idxmax()} blocks the session longest in compaction ({block.max() / 60:.1f} min per session)."
                if block.max() > 0 else "no strategy blocked the session on compaction here.")
    return Figure(_save(fig, out, "04-latency.png"), "Latency and compaction blocking", reading)


def fig_retention(df: pd.DataFrame, out: Path) -> Figure | None:
    cols = [c for c in (f"retention.by_category.{k}" for k in CATEGORIES) if c in df and df[c].notna().any()]
    if not cols:
        return None
    order = _label_order(df)
    g = df.groupby("label")[cols + (["retention.goal"] if "retention.goal" in df else [])].mean().reindex(order)
    fig, ax = plt.subplots(figsize=(13, 5.5))
    width = 0.8 / len(cols)
    x = np.arange(len(order))
    for i, c in enumerate(cols):
        ax.bar(x + i * width - 0.4 + width / 2, g[c].to_numpy(), width, label=c.rsplit(".", 1)[-1])
    ax.set_xticks(x, order, rotation=30, ha="right")
    ax.set_ylabel("retention score (0 = lost, 1 = verbatim and attended)")
    ax.set_title(f"Retention by fact category (window {int(df['window'].iloc[0]):,})")
    ax.set_ylim(0, 1.12)
    ax.legend(ncol=len(cols), fontsize=8, loc="upper center")
    goal = g["retention.goal"].dropna().sort_values() if "retention.goal" in g else pd.Series(dtype=float)
    reading = (f"goal retention is highest for {goal.index[-1]} ({goal.iloc[-1]:.2f}) and lowest for "
               f"{goal.index[0]} ({goal.iloc[0]:.2f})." if len(goal) else "no goal probes in these traces.")
    return Figure(_save(fig, out, "05-retention.png"), "Retention by fact category and goal retention", reading)


def fig_pareto(cfgs: pd.DataFrame, rec: dict[str, Any] | None, target: float, out: Path) -> Figure | None:
    if analysis.RETENTION not in cfgs or cfgs[analysis.RETENTION].isna().all():
        return None
    d = cfgs.dropna(subset=[analysis.RETENTION])
    front = analysis.pareto_front(d[d["overflows"] == 0])  # a configuration that overflows is no option
    fig, ax = plt.subplots(figsize=(11, 6.5))
    colors = plt.get_cmap("tab20")
    for i, (label, g) in enumerate(d.groupby("label")):
        ok = g["overflows"] == 0
        ax.scatter(g.loc[ok, "cost_usd"], g.loc[ok, analysis.RETENTION], s=34, color=colors(i % 20), label=label)
        ax.scatter(g.loc[~ok, "cost_usd"], g.loc[~ok, analysis.RETENTION], s=34, color=colors(i % 20), marker="x")
    ax.plot(front["cost_usd"], front[analysis.RETENTION], "k--", lw=1, label="Pareto front (no overflow)")
    ax.set_xscale("log")
    ax.axhline(target, color="grey", lw=0.8, ls=":", label=f"retention target {target}")
    if rec:
        ax.scatter([rec["cost_usd"]], [rec[analysis.RETENTION]], s=220, facecolors="none", edgecolors="red",
                   linewidths=2, label="recommended")
    ax.set_xlabel("cost per session (USD, log scale)")
    ax.set_ylabel("retention score (mean)")
    ax.set_title("Cost against retention, every configuration (× = some requests overflowed)")
    ax.legend(fontsize=7, ncol=2)
    reading = (f"recommended: {rec['label']} at {_money(rec['cost_usd'])} with retention {rec[analysis.RETENTION]:.2f}."
               if rec else f"no configuration reaches retention {target} without overflowing.")
    return Figure(_save(fig, out, "06-pareto.png"), "Pareto front: cost against retention", reading)


def fig_windows(df: pd.DataFrame, out: Path) -> Figure:
    wins = sorted(df["window"].dropna().unique())
    order = _label_order(df)
    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 5))
    y = np.arange(len(order))
    h = 0.8 / max(len(wins), 1)
    for i, w in enumerate(wins):
        g = df[df["window"] == w].groupby("label")
        a.barh(y + i * h - 0.4 + h / 2, g["cost_usd"].mean().reindex(order).to_numpy(), h, label=f"{int(w):,}")
        if analysis.RETENTION in df:
            b.barh(y + i * h - 0.4 + h / 2, g[analysis.RETENTION].mean().reindex(order).to_numpy(), h, label=f"{int(w):,}")
    a.set_yticks(y, order)
    b.set_yticks(y, order)
    a.set_xscale("log")
    a.set_xlabel("cost per session (USD, log scale)")
    b.set_xlabel("retention score")
    a.set_title("Cost by window size")
    b.set_title("Retention by window size")
    a.legend(title="window (tokens)", fontsize=8)
    if len(wins) < 2:
        reading = f"only one window ({int(wins[0]):,}) in these runs: sweep windows = [200000, 1000000] to compare."
    else:
        lo, hi = wins[0], wins[-1]
        c_lo = df[df["window"] == lo].groupby("label")["cost_usd"].mean()
        c_hi = df[df["window"] == hi].groupby("label")["cost_usd"].mean()
        ratio = (c_hi / c_lo).dropna()
        reading = (f"moving from {int(lo):,} to {int(hi):,} tokens changes cost by {ratio.min():.2f}–{ratio.max():.2f}x "
                   f"across strategies (mechanisms stay, parameters move: N-WIN-1).")
    return Figure(_save(fig, out, "07-windows.png"), "200k against 1M", reading)


def fig_ledger(ledger: pd.DataFrame | None, out: Path) -> Figure | None:
    if ledger is None or ledger.empty:
        return None
    fig, ax = plt.subplots(figsize=(10, 5))
    x = ledger["trigger_tokens"] / 1e3
    ax.plot(x, ledger["summary_cost_usd"], "o-", label="summary calls")
    ax.plot(x, ledger["main_cost_usd"], "s-", label="main calls (carrying the text)")
    ax.plot(x, ledger["total_cost_usd"], "k^-", label="total")
    ax.set_xlabel("soft compaction trigger (thousand tokens)")
    ax.set_ylabel("cost per session (USD)")
    ax.set_title("The compaction ledger (N-WIN-3): summary cost against carrying cost")
    ax.legend()
    best = ledger.loc[ledger["total_cost_usd"].idxmin()]
    reading = (f"on this trace the cheapest trigger is {int(best['trigger_tokens']):,} tokens "
               f"({_money(best['total_cost_usd'])}, {int(best['compactions'])} compactions).")
    return Figure(_save(fig, out, "08-compaction-ledger.png"), "Compaction ledger", reading)


# --- assembling ------------------------------------------------------------------------------------

def write_report(results: Sequence[Any] | pd.DataFrame, out_dir: str | Path, *,
                 calls: dict[str, pd.DataFrame] | None = None, ledger: pd.DataFrame | None = None,
                 target: float = 0.7, title: str = "ctxsim report",
                 probes: dict[str, pd.DataFrame] | None = None) -> Path:
    """``probes``: run key -> per-probe scores (a sweep's DIR/probes/), for the retention intervals."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if isinstance(results, pd.DataFrame):
        df, calls = results.copy(), calls or {}
    else:
        df, calls = rows_from_results(results)
        probes = {f"run{i}": r.probes for i, r in enumerate(results)}
    bad = df[df["error"].fillna("") != ""] if "error" in df else df.iloc[0:0]
    df = analysis.ok_runs(df)
    if df.empty:
        raise ValueError("no successful runs to report")
    cfgs = analysis.by_config(df)
    rec = analysis.recommend(cfgs, target)
    # the per-strategy figures use one window (the smallest: where strategies differ); figure 7
    # puts the windows side by side
    primary = df[df["window"] == df["window"].min()]
    figs = [f for f in (fig_cost(primary, out), fig_sawtooth(df, calls, out), fig_cache(primary, out),
                        fig_latency(primary, out), fig_retention(primary, out), fig_pareto(cfgs, rec, target, out),
                        fig_windows(df, out), fig_ledger(ledger, out)) if f is not None]
    summary = _summary_table(df)
    sens = analysis.sensitivity(df)
    section = uncertainty.report_section(df, probes or {})  # intervals, noise, seeds, assumptions (#16)
    md = _markdown(title, figs, summary, rec, target, sens, bad) + "\n" + "\n".join(section)
    (out / "report.md").write_text(md, encoding="utf-8")
    page = _html(title, figs, summary, rec, target, sens, bad, out)
    page = page.replace("</body></html>", uncertainty.section_html(section) + "\n</body></html>")
    (out / "index.html").write_text(page, encoding="utf-8")
    df.to_parquet(out / "runs.parquet", index=False)
    return out


def _summary_table(df: pd.DataFrame) -> pd.DataFrame:
    cols = {"cost_usd": "cost $", "cache_hit_rate": "hit rate", "latency_s.p95": "p95 s",
            "compactions.succeeded": "compactions", "overflows": "overflows", "pairing_violations": "pairing 400s",
            "peak_context_tokens": "peak context", analysis.RETENTION: "retention", "retention.goal": "goal"}
    keep = [c for c in cols if c in df]
    t = df.groupby(["label", "window"])[keep].mean().reset_index().rename(columns=cols)
    return t.sort_values(["window", "cost $"]).round(4)


def _markdown(title, figs, summary, rec, target, sens, bad) -> str:
    lines = [f"# {title}", "", "Generated by `ctxsim report`. Numbers are means over the runs of each strategy.", ""]
    if rec:
        lines += [f"**Recommendation** (cheapest with retention ≥ {target}, no overflow): `{rec['label']}` "
                  f"at {_money(rec['cost_usd'])} per session, retention {rec[analysis.RETENTION]:.3f}.", ""]
        params = analysis.config_params(rec)
        if params:
            lines += ["Parameters: " + ", ".join(f"`{k}={v}`" for k, v in params.items()), ""]
    lines += ["## Summary", "", summary.to_markdown(index=False) if _has_tabulate() else "```\n" + summary.to_string(index=False) + "\n```", ""]
    for i, f in enumerate(figs, 1):
        lines += [f"## {i}. {f.title}", "", f"![{f.title}]({f.file})", "", f"*{f.reading}*", ""]
    if not sens.empty:
        top = sens.drop_duplicates(["label", "parameter"]).sort_values("cost_spread", ascending=False).head(10)
        lines += ["## Sensitivity (cost spread across the values of each swept parameter)", "", "```",
                  top[["label", "parameter", "cost_spread"]].to_string(index=False), "```", ""]
    if len(bad):
        lines += [f"## Failed runs ({len(bad)})", ""] + [f"- {r['label']} on {r.get('trace', '')}: {str(r['error']).splitlines()[0]}"
                                                         for _, r in bad.iterrows()] + [""]
    return "\n".join(lines)


def _has_tabulate() -> bool:
    try:
        import tabulate  # noqa: F401
    except ImportError:
        return False
    return True


def _html(title, figs, summary, rec, target, sens, bad, out: Path) -> str:
    esc = html.escape
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(title)}</title>",
             "<style>body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em}"
             "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px}"
             "img{max-width:100%}.reading{font-style:italic;color:#333}</style></head><body>",
             f"<h1>{esc(title)}</h1>"]
    if rec:
        parts.append(f"<p><b>Recommendation</b> (cheapest with retention ≥ {target}, no overflow): "
                     f"<code>{esc(str(rec['label']))}</code> at {_money(rec['cost_usd'])} per session, "
                     f"retention {rec[analysis.RETENTION]:.3f}.</p>")
    parts += ["<h2>Summary</h2>", summary.to_html(index=False, border=0)]
    for i, f in enumerate(figs, 1):
        data = base64.b64encode((out / f.file).read_bytes()).decode()
        parts += [f"<h2>{i}. {esc(f.title)}</h2>", f"<img alt='{esc(f.title)}' src='data:image/png;base64,{data}'>",
                  f"<p class='reading'>{esc(f.reading)}</p>"]
    if not sens.empty:
        top = sens.drop_duplicates(["label", "parameter"]).sort_values("cost_spread", ascending=False).head(10)
        parts += ["<h2>Sensitivity</h2>", top[["label", "parameter", "cost_spread"]].to_html(index=False, border=0)]
    if len(bad):
        parts += [f"<h2>Failed runs ({len(bad)})</h2><ul>"] + [
            f"<li>{esc(str(r['label']))}: {esc(str(r['error']).splitlines()[0])}</li>" for _, r in bad.iterrows()] + ["</ul>"]
    parts.append("</body></html>")
    return "\n".join(parts)
