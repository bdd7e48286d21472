"""The figures that answer a tuning question at a glance: the labelled cost–retention front (one
panel per window, every point named, 95% intervals on both axes, the front and the recommended
settings marked), the response of cost and retention to each swept parameter (one line per window),
and the compaction ledger on the grid's own axis."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from ctxsim.harness import formatting as fmt  # noqa: E402
from ctxsim.harness import tuning  # noqa: E402
from ctxsim.harness.figures import Figure, _save, layout  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

if TYPE_CHECKING:
    from ctxsim.harness.report import Context

FONT = 10  # readable at 1280 px (a figure is drawn 12 in wide at 100 dpi and scaled to the page)
# label offsets tried in turn (points): right, left, above, below, then the diagonals, then further out
OFFSETS = [(7, 0), (-7, 0), (0, 8), (0, -9), (7, 8), (-7, 8), (7, -9), (-7, -9), (14, 16), (-14, 16), (14, -18),
           (-14, -18), (0, 20), (0, -22), (22, 0), (-22, 0), (24, 26), (-24, 26), (24, -28), (-24, -28)]
# then rings further out, with a leader line back to the point: a crowded cluster still gets every name
OFFSETS += [(round(r * math.cos(a)), round(0.8 * r * math.sin(a))) for r in (40, 60, 85, 115, 150, 190)
            for a in [k * math.pi / 8 for k in range(16)]]


def dollar_axis(ax) -> None:
    """A log cost axis read in dollars ($5, $8, $10), not powers of ten."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    f = FuncFormatter(lambda v, _: f"${v:,.0f}" if v >= 10 else f"${v:,.2g}")
    ax.xaxis.set_major_formatter(f)
    ax.xaxis.set_minor_locator(LogLocator(subs=(2, 3, 5)))
    ax.xaxis.set_minor_formatter(f)
    ax.tick_params(axis="x", which="minor", labelsize=FONT - 2)


def _colors(labels: list[str]) -> dict[str, tuple]:
    cmap = plt.get_cmap("tab10")
    return {lab: cmap(i % 10) for i, lab in enumerate(labels)}


def _overlaps(bb, placed) -> bool:
    return any(bb.overlaps(p) for p in placed)


def place_labels(ax, xs, ys, texts, bold) -> list:
    """Each point's name beside it, at the first offset where it overlaps no label already placed,
    no marker and stays inside the axes (the nearest offset otherwise): every point keeps a
    readable name."""
    fig = ax.figure
    layout(fig)  # the final geometry, so what is measured here is what is saved
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    inside = ax.get_window_extent(r)
    pts = ax.transData.transform(np.column_stack([xs, ys]))
    from matplotlib.transforms import Bbox

    placed = [Bbox.from_bounds(px - 4, py - 4, 8, 8) for px, py in pts]
    if ax.get_legend() is not None:  # names keep clear of the legend too
        placed.append(ax.get_legend().get_window_extent(r))
    order = sorted(range(len(texts)), key=lambda i: (not bold[i], xs[i]))
    out = [None] * len(texts)
    for i in order:
        chosen = None
        for dx, dy in OFFSETS:
            ha = "left" if dx > 0 else "right" if dx < 0 else "center"
            va = "bottom" if dy > 0 else "top" if dy < 0 else "center"
            t = ax.annotate(texts[i], (xs[i], ys[i]), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va,
                            fontsize=FONT - 1, fontweight="bold" if bold[i] else "normal",
                            arrowprops=dict(arrowstyle="-", lw=0.5, color="#777777") if abs(dx) + abs(dy) > 20 else None)
            bb = t.get_window_extent(r)
            if not _overlaps(bb, placed) and inside.contains(bb.x0, bb.y0) and inside.contains(bb.x1, bb.y1):
                chosen = t
                placed.append(bb)
                break
            t.remove()
        if chosen is None:  # nowhere free: the first offset, so the name is still there
            dx, dy = OFFSETS[0]
            chosen = ax.annotate(texts[i], (xs[i], ys[i]), xytext=(dx, dy), textcoords="offset points", ha="left",
                                 va="center", fontsize=FONT - 1, fontweight="bold" if bold[i] else "normal")
            placed.append(chosen.get_window_extent(r))
        out[i] = chosen
    return out


def fig_front(ctx: Context) -> Figure | None:
    sets = [s for s in ctx.sets if not math.isnan(s.retention.est)]
    if not sets:
        return None
    wins = sorted({s.window for s in sets})
    labels = list(dict.fromkeys(s.label for s in sorted(sets, key=lambda s: s.label)))
    color = _colors(labels)
    picks = {id(p.setting) for a in ctx.answers for p in (a.cheapest, a.best_retention) if p is not None}
    defaults = {id(a.default) for a in ctx.answers}
    fig, axes = plt.subplots(len(wins), 1, figsize=(12, 6.2 * len(wins)), squeeze=False)
    readings, failed_all, n_labels = [], [], 0
    for ax, w in zip(axes[:, 0], wins):
        here = [s for s in sets if s.window == w]
        ok = [s for s in here if s.completed]
        failed_all += [s for s in here if not s.completed]
        fr = tuning.front(ok)
        onfront = {id(s) for s in fr}
        for s in ok:
            lo, hi = tuning.cost_interval(s)
            xerr = [[max(s.cost - lo, 0)], [max(hi - s.cost, 0)]] if not math.isnan(lo) else None
            r = s.retention
            yerr = [[max(r.est - r.lo, 0)], [max(r.hi - r.est, 0)]] if not math.isnan(r.lo) else None
            ax.errorbar([s.cost], [r.est], xerr=xerr, yerr=yerr, fmt="none", ecolor=color[s.label], alpha=0.55,
                        elinewidth=1, capsize=2)
            marker = "D" if id(s) in defaults else "o"
            ax.scatter([s.cost], [r.est], s=70 if id(s) in onfront else 40, marker=marker, color=color[s.label],
                       edgecolors="k" if id(s) in onfront else "none", linewidths=1.2, zorder=3)
            if id(s) in picks:
                ax.scatter([s.cost], [r.est], s=300, marker="*", facecolors="none", edgecolors="red", linewidths=1.5,
                           zorder=4)
        if len(fr) > 1:
            ax.plot([s.cost for s in fr], [s.retention.est for s in fr], "k--", lw=1, zorder=2)
        ax.set_xscale("log")
        dollar_axis(ax)
        ax.set_xlabel("cost per session (USD, log scale; bars: 95% interval over runs)", fontsize=FONT)
        ax.set_ylabel("retention (95% interval)", fontsize=FONT)
        ax.tick_params(labelsize=FONT - 1)
        ax.set_title(f"Window {w:,}: {len(ok)} settings that completed every run", fontsize=FONT + 1)
        ax.margins(x=0.12, y=0.12)
        handles = [Line2D([], [], marker="o", ls="", color=color[lab], label=lab) for lab in labels
                   if any(s.label == lab for s in ok)]
        handles += [Line2D([], [], marker="o", ls="--", color="k", markerfacecolor="w", label="Pareto front"),
                    Line2D([], [], marker="D", ls="", color="grey", label="a swept strategy's default")]
        if picks:
            handles.append(Line2D([], [], marker="*", ls="", markersize=14, markerfacecolor="none",
                                  markeredgecolor="red", label="recommended (tuning answer)"))
        ax.legend(handles=handles, fontsize=FONT - 1, loc="best", framealpha=0.9)
        if ok:
            place_labels(ax, [s.cost for s in ok], [s.retention.est for s in ok], [tuning.short_name(s) for s in ok],
                         [id(s) in onfront for s in ok])
            n_labels += len(ok)
        bad = [s for s in here if not s.completed]
        if bad:
            ax.text(0.01, 0.01, "failed (not plotted): " + ", ".join(tuning.short_name(s) for s in bad),
                    transform=ax.transAxes, fontsize=FONT - 2, color="#aa3377", va="bottom", wrap=True)
        if fr:
            readings.append(f"at {w:,} the front runs " + " → ".join(
                f"{tuning.short_name(s)} ({fmt.money(s.cost)}, {s.retention.est:.3f})" for s in fr))
    f = _save(fig, ctx.out, "06-pareto.png")
    reading = ("Every point is named; " + "; ".join(readings) + ".") if readings else "No setting completed every run."
    if failed_all:
        reading += (f" {len(failed_all)} configuration(s) failed and are not plotted: a failed session is no option "
                    "at any cost.")
    fig_ = Figure(f, "Pareto front: cost against retention", reading)
    fig_.labels = n_labels  # type: ignore[attr-defined]  (points named: the browser test counts them)
    return fig_


def _slice(a: tuning.Answer, p: str) -> list[tuning.Setting]:
    """The settings that differ from the default only in ``p`` (and the default)."""
    base = a.default.params
    return [s for s in a.settings if all(repr(s.params.get(q)) == repr(base.get(q)) for q in a.swept if q != p)]


def fig_response(ctx: Context) -> list[Figure]:
    """One figure per swept strategy: a row per swept parameter, cost (relative to the default, per
    window) and retention against its values, one line per window."""
    out = []
    for label in dict.fromkeys(a.label for a in ctx.answers):
        mine = [a for a in ctx.answers if a.label == label]
        params = sorted({p for a in mine for p in a.swept})
        fig, axes = plt.subplots(len(params), 2, figsize=(12, 3.6 * len(params) + 0.6), squeeze=False)
        cmap = plt.get_cmap("tab10")
        lines = []
        for row, p in zip(axes, params):
            for i, a in enumerate(mine):
                sl = sorted((s for s in _slice(a, p) if s.params.get(p) is not None), key=lambda s: s.params[p])
                if len({repr(s.params[p]) for s in sl}) < 2:
                    continue
                xs = [s.params[p] for s in sl]
                done = [s.completed for s in sl]
                cost = [100 * (s.cost / a.default.cost - 1) if s.completed else np.nan for s in sl]
                ret = [s.retention.est if s.completed else np.nan for s in sl]
                lo = [s.retention.est - s.retention.lo if not math.isnan(s.retention.lo) else 0 for s in sl]
                hi = [s.retention.hi - s.retention.est if not math.isnan(s.retention.hi) else 0 for s in sl]
                name = f"window {a.window:,} ({a.group})"
                row[0].plot(xs, cost, "o-", color=cmap(i), label=name)
                row[1].errorbar(xs, ret, yerr=[lo, hi], fmt="o-", color=cmap(i), capsize=3, label=name)
                for x, d in zip(xs, done):
                    if not d:
                        for ax in row:
                            ax.axvline(x, color="#aa3377", ls=":", lw=1)
                best = min((s for s in sl if s.completed), key=lambda s: s.cost, default=None)
                if best is not None:
                    lines.append(f"`{p}` at {a.window:,}: cheapest at {fmt.value(best.params[p])} "
                                 f"({100 * (best.cost / a.default.cost - 1):+.0f}% against the default)")
            default = mine[0].default.params.get(p)
            for ax in row:
                if default is not None:
                    ax.axvline(default, color="grey", lw=0.8, ls="--")
                ax.set_xlabel(f"{p} (dashed: default {fmt.value(default)}; dotted red: a failed session)", fontsize=FONT)
                ax.tick_params(labelsize=FONT - 1)
                ax.grid(alpha=0.3)
            row[0].axhline(0, color="k", lw=0.6)
            row[0].set_ylabel("cost vs default (%)", fontsize=FONT)
            row[1].set_ylabel("retention (95% interval)", fontsize=FONT)
            row[0].set_title(f"Cost against {p} (others at default)", fontsize=FONT + 1)
            row[1].set_title(f"Retention against {p}", fontsize=FONT + 1)
            if row[0].get_legend_handles_labels()[0]:
                row[0].legend(fontsize=FONT - 1, loc="best")
                row[1].legend(fontsize=FONT - 1, loc="best")
        f = _save(fig, ctx.out, f"09-response-{label}.png")
        out.append(Figure(f, f"How {label}'s cost and retention respond to each swept parameter",
                          ("; ".join(lines) + ".") if lines else "No parameter of this strategy varies on its own."))
    return out


def fig_grid_ledger(ctx: Context) -> Figure | None:
    """N-WIN-3 against the grid's own values of the ledger axis, one panel per window (own scale)."""
    led = ctx.grid_ledger
    if led is None or led.empty:
        return None
    groups = list(led.groupby(["label", "window", "group"], sort=False))
    fig, axes = plt.subplots(1, len(groups), figsize=(6 * len(groups), 4.6), squeeze=False)
    readings = []
    for ax, ((label, w, group), g) in zip(axes[0], groups):
        x = g[tuning.LEDGER_AXIS].astype(float) / 1e3
        ax.plot(x, g["summary_cost_usd"], "o-", label="summary calls")
        ax.plot(x, g["main_cost_usd"], "s-", label="main calls (carrying the text)")
        ax.plot(x, g["total_cost_usd"], "k^-", label="total")
        bad = ~g["completed"].astype(bool)
        if bad.any():
            ax.scatter(x[bad], g.loc[bad, "total_cost_usd"], s=160, marker="x", color="#aa3377", zorder=4,
                       label="a session failed")
        ax.set_xticks(x, [f"{v:g}k" for v in x])
        ax.set_xlabel(f"{tuning.LEDGER_AXIS} (thousand tokens; the grid's values)", fontsize=FONT)
        ax.set_ylabel("cost per session (USD)", fontsize=FONT)
        ax.set_title(f"{label}, window {w:,} ({group})", fontsize=FONT + 1)
        ax.legend(fontsize=FONT - 1, loc="best")
        ok = g[g["completed"].astype(bool)]
        if len(ok):
            best = ok.loc[ok["total_cost_usd"].idxmin()]
            readings.append(f"at {w:,} the cheapest total is at {tuning.LEDGER_AXIS} {fmt.value(float(best[tuning.LEDGER_AXIS]))} "
                            f"({fmt.money(best['total_cost_usd'])}, of which summaries {fmt.money(best['summary_cost_usd'])})")
    f = _save(fig, ctx.out, "08-compaction-ledger.png")
    return Figure(f, "Compaction ledger", ("On the grid's own values: " + "; ".join(readings) + ".") if readings
                  else "No setting on the ledger's axis completed every run.")
