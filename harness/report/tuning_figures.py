"""The figures that answer a tuning question at a glance: the labelled cost–retention front (one
panel per window, every point named, 95% intervals on both axes, the front and the recommended
settings marked), the response of cost and retention to each swept parameter (one line per window),
and the compaction ledger on the grid's own axis."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from ctxsim.harness.report import formatting as fmt  # noqa: E402
from ctxsim.harness.report.content import Context, Figure
from ctxsim.harness.report.figures import _save, layout  # noqa: E402
from ctxsim.harness.sweep import tuning  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.text import Text  # noqa: E402

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


NEAR = 20  # the first NEAR offsets sit beside the point: a full name goes there or becomes a number


def _try(ax, r, inside, placed, x, y, text, bold, offsets):
    """The first annotation of ``text`` at one of ``offsets`` that overlaps nothing placed and stays in
    the axes, or None."""
    for dx, dy in offsets:
        ha = "left" if dx > 0 else "right" if dx < 0 else "center"
        va = "bottom" if dy > 0 else "top" if dy < 0 else "center"
        t = ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va,
                        fontsize=FONT - 1, fontweight="bold" if bold else "normal",
                        arrowprops=dict(arrowstyle="-", lw=0.6, color="#555555") if abs(dx) + abs(dy) > 20 else None)
        # the name's own box (an Annotation's would hold its leader line, which always meets its point),
        # with a gap between names, not just no overlap
        t.update_positions(r)  # where the offset puts the text (otherwise only known at draw time)
        bb = Text.get_window_extent(t, r).padded(2)
        if not _overlaps(bb, placed) and inside.contains(bb.x0, bb.y0) and inside.contains(bb.x1, bb.y1):
            placed.append(bb)
            return t
        t.remove()
    return None


def place_labels(ax, xs, ys, texts, bold, line: list[tuple[float, float]] = ()) -> list[int | None]:
    """Each point's name beside it where it overlaps no name already placed, no marker and stays
    inside the axes; where no spot beside the point is free (a crowded cluster), a number instead,
    beside it or further out with a leader line, and the caller lists the numbers in a key. Returns,
    per point, its number (None: named in full). Front points are placed first; ``line`` (the front's
    polyline, data coordinates) is kept clear too, so no name is struck through."""
    fig = ax.figure
    layout(fig)  # the final geometry, so what is measured here is what is saved
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    inside = ax.get_window_extent(r)
    pts = ax.transData.transform(np.column_stack([xs, ys]))
    from matplotlib.transforms import Bbox

    placed = [Bbox.from_bounds(px - 6, py - 6, 12, 12) for px, py in pts]  # a marker, and the star's ring
    if len(line) > 1:
        lp = ax.transData.transform(np.asarray(line, dtype=float))
        for (x0, y0), (x1, y1) in zip(lp, lp[1:]):
            steps = max(1, int(math.hypot(x1 - x0, y1 - y0) // 6))
            placed += [Bbox.from_bounds(x0 + (x1 - x0) * k / steps - 2, y0 + (y1 - y0) * k / steps - 2, 4, 4)
                       for k in range(steps + 1)]
    order = sorted(range(len(texts)), key=lambda i: (not bold[i], xs[i]))
    numbers: list[int | None] = [None] * len(texts)
    crowded = []
    for i in order:
        if _try(ax, r, inside, placed, xs[i], ys[i], texts[i], bold[i], OFFSETS[:NEAR]) is None:
            crowded.append(i)
    for n, i in enumerate(sorted(crowded, key=lambda i: (xs[i], -ys[i])), start=1):
        numbers[i] = n
        if _try(ax, r, inside, placed, xs[i], ys[i], str(n), bold[i], OFFSETS) is None:
            t = ax.annotate(str(n), (xs[i], ys[i]), xytext=OFFSETS[0], textcoords="offset points", ha="left",
                            va="center", fontsize=FONT - 1, fontweight="bold" if bold[i] else "normal")
            placed.append(t.get_window_extent(r))
    return numbers


def _merge_same(ok: list[tuning.Setting]) -> list[tuple[tuning.Setting, list[tuning.Setting]]]:
    """Settings that measured the same (tuning.measures_same) drawn as one point: the default (or the
    first) stands for them, the others named beside it."""
    groups: list[list[tuning.Setting]] = []
    for s in sorted(ok, key=lambda s: (bool(s.changed), len(s.changed), s.config)):
        for g in groups:
            if g[0].label == s.label and tuning.measures_same(g[0], s):
                g.append(s)
                break
        else:
            groups.append([s])
    return [(g[0], g[1:]) for g in groups]


def _point_name(s: tuning.Setting, same: list[tuning.Setting]) -> str:
    if not same:
        return tuning.short_name(s)
    alias = " = ".join(tuning.short_name(x).removeprefix(s.label).strip(" ()") for x in same)
    return f"{tuning.short_name(s)} = {alias}"


def fig_front(ctx: Context) -> Figure | None:
    sets = [s for s in ctx.sets if not math.isnan(s.retention.est)]
    if not sets:
        return None
    wins = sorted({s.window for s in sets})
    labels = list(dict.fromkeys(s.label for s in sorted(sets, key=lambda s: s.label)))
    color = _colors(labels)
    picks = {id(p.setting) for a in ctx.answers for p in (a.cheapest, a.best_retention) if p is not None}
    defaults = {id(a.default) for a in ctx.answers}
    fig = plt.figure(figsize=(12, 6.2 * len(wins)))
    grid = fig.add_gridspec(len(wins), 2, width_ratios=[3.1, 1])
    readings, failed_all, n_labels, n_numbered = [], [], 0, 0
    for row, w in enumerate(wins):
        ax, side = fig.add_subplot(grid[row, 0]), fig.add_subplot(grid[row, 1])
        side.axis("off")
        here = [s for s in sets if s.window == w]
        ok = [s for s in here if s.completed]
        failed_all += [s for s in here if not s.completed]
        fr = tuning.front(ok)
        onfront = {id(s) for s in fr}
        points = _merge_same(ok)
        for s, same in points:
            lo, hi = tuning.cost_interval(s)
            xerr = [[max(s.cost - lo, 0)], [max(hi - s.cost, 0)]] if not math.isnan(lo) else None
            r = s.retention
            yerr = [[max(r.est - r.lo, 0)], [max(r.hi - r.est, 0)]] if not math.isnan(r.lo) else None
            ax.errorbar([s.cost], [r.est], xerr=xerr, yerr=yerr, fmt="none", ecolor=color[s.label], alpha=0.45,
                        elinewidth=1, capsize=2)
            marker = "D" if any(id(x) in defaults for x in [s, *same]) else "o"
            key = any(id(x) in onfront for x in [s, *same])
            ax.scatter([s.cost], [r.est], s=70 if key else 40, marker=marker, color=color[s.label],
                       edgecolors="k" if key else "none", linewidths=1.2, zorder=3)
            if any(id(x) in picks for x in [s, *same]):
                ax.scatter([s.cost], [r.est], s=300, marker="*", facecolors="none", edgecolors="red", linewidths=1.5,
                           zorder=4)
        if len(fr) > 1:
            ax.plot([s.cost for s in fr], [s.retention.est for s in fr], "k--", lw=1, zorder=2)
        ax.set_xscale("log")
        dollar_axis(ax)
        ax.set_xlabel("cost per session (USD, log scale; bars: 95% interval over runs)", fontsize=FONT)
        ax.set_ylabel("needs at risk kept (95% interval)" if tuning.has_needs(ctx.runs) else "retention (95% interval)",
                      fontsize=FONT)
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
        legend = side.legend(handles=handles, fontsize=FONT - 1, loc="upper left", bbox_to_anchor=(0, 1),
                             frameon=False, borderaxespad=0)
        if points:
            names = [_point_name(s, same) for s, same in points]
            numbers = place_labels(ax, [s.cost for s, _ in points], [s.retention.est for s, _ in points], names,
                                   [any(id(x) in onfront for x in [s, *same]) for s, same in points],
                                   [(s.cost, s.retention.est) for s in fr])
            n_labels += len(points)
            keyed = sorted((n, f"{name}: {fmt.money(s.cost)}, {s.retention.est:.3f}")
                           for n, name, (s, _) in zip(numbers, names, points) if n is not None)
            n_numbered += len(keyed)
            _key(fig, side, legend, keyed, [s for s in here if not s.completed])
        if fr:
            readings.append(f"at {w:,} the front runs " + " → ".join(
                f"{tuning.short_name(s)} ({fmt.money(s.cost)}, {s.retention.est:.3f})" for s in fr))
    f = _save(fig, ctx.out, "06-pareto.png")
    reading = ("Every point is named (beside it, or by a number listed on the right where points crowd); "
               + "; ".join(readings) + ".") if readings else "No setting completed every run."
    if failed_all:
        reading += (f" {len(failed_all)} configuration(s) failed and are not plotted: a failed session is no option "
                    "at any cost.")
    fig_ = Figure(f, "Pareto front: cost against retention", reading)
    fig_.labels = n_labels  # type: ignore[attr-defined]  (points named: the browser test counts them)
    fig_.numbered = n_numbered  # type: ignore[attr-defined]  (of them, named by a number in the key)
    return fig_


KEY_GID = "front-key"  # the key's texts (number: name), told apart from the points' names


def _key(fig, side, legend, keyed: list[tuple[int, str]], failed: list[tuning.Setting]) -> None:
    """Under the legend in the side panel: each number and the name it stands for, then the failed
    configurations (not plotted)."""
    import textwrap

    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    top = side.transAxes.inverted().transform(legend.get_window_extent(r))[0][1] - 0.04
    lines = [(f"{n}  {textwrap.fill(name, 30, subsequent_indent='    ')}", "k") for n, name in keyed]
    if failed:
        lines.append((textwrap.fill("failed (not plotted): " + ", ".join(tuning.short_name(s) for s in failed), 32),
                      "#aa3377"))
    for text, c in lines:
        t = side.text(0, top, text, transform=side.transAxes, fontsize=FONT - 1, va="top", ha="left", color=c,
                      gid=KEY_GID)
        bb = side.transAxes.inverted().transform(t.get_window_extent(r))
        top = bb[0][1] - 0.015


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
        if not params:   # a strategy run at one setting (a peer): no response to draw
            continue
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
    """N-WIN-3 against the grid's own values of the ledger axis, one column per window. The total
    (and the main calls that carry the text) on the upper panel, the summary calls on the lower one,
    each on its own scale fitted to its values: at 1M the summaries cost cents beside hundreds of
    dollars of main calls, and one axis from $0 drew both flat."""
    led = ctx.grid_ledger
    if led is None or led.empty:
        return None
    groups = list(led.groupby(["label", "window", "group"], sort=False))
    fig, axes = plt.subplots(2, len(groups), figsize=(6 * len(groups), 6.4), squeeze=False,
                             gridspec_kw={"height_ratios": [3, 2]}, sharex="col")
    readings = []
    for i, ((label, w, group), g) in enumerate(groups):
        top, low = axes[0][i], axes[1][i]
        x = g[tuning.LEDGER_AXIS].astype(float) / 1e3
        top.plot(x, g["total_cost_usd"], "k^-", label="total")
        top.plot(x, g["main_cost_usd"], "s-", color="#ee7733", label="main calls (carrying the text)")
        low.plot(x, g["summary_cost_usd"], "o-", color="#0077bb", label="summary calls")
        bad = ~g["completed"].astype(bool)
        if bad.any():
            top.scatter(x[bad], g.loc[bad, "total_cost_usd"], s=160, marker="x", color="#aa3377", zorder=4,
                        label="a session failed")
        for ax, cols in ((top, ["total_cost_usd", "main_cost_usd"]), (low, ["summary_cost_usd"])):
            ax.set_ylim(*fitted_range([v for c in cols for v in g[c].astype(float)]))
            ax.set_ylabel("USD per session", fontsize=FONT)
            ax.legend(fontsize=FONT - 1, loc="best")
        low.set_xticks(x, [f"{v:g}k" for v in x])
        low.set_xlabel(f"{tuning.LEDGER_AXIS} (thousand tokens; the grid's values)", fontsize=FONT)
        top.set_title(f"{label}, window {w:,} ({group})", fontsize=FONT + 1)
        ok = g[g["completed"].astype(bool)]
        if len(ok):
            best = ok.loc[ok["total_cost_usd"].idxmin()]
            readings.append(f"at {w:,} the cheapest total is at {tuning.LEDGER_AXIS} {fmt.value(float(best[tuning.LEDGER_AXIS]))} "
                            f"({fmt.money(best['total_cost_usd'])}, of which summaries {fmt.money(best['summary_cost_usd'])})")
    f = _save(fig, ctx.out, "08-compaction-ledger.png")
    return Figure(f, "Compaction ledger", ("On the grid's own values (each panel on its own scale): "
                                           + "; ".join(readings) + ".") if readings
                  else "No setting on the ledger's axis completed every run.")


def fitted_range(values: list[float], pad: float = 0.15) -> tuple[float, float]:
    """A y-range that shows how ``values`` move: their span with ``pad`` of it either side (a flat
    series gets ±5% of its value), from 0 only when the values come near it."""
    v = [x for x in values if x == x]
    if not v:
        return 0.0, 1.0
    lo, hi = min(v), max(v)
    span = hi - lo if hi > lo else max(abs(hi) * 0.05, 1e-6)
    bottom = lo - pad * span
    if lo >= 0 and bottom < 0 or lo <= 0.5 * span:
        bottom = min(0.0, lo)
    return bottom, hi + pad * span
