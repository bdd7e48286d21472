"""A sweep report read the way a reviewer reads it (issue 28, item 3): in headless Chromium at
1,280 px every figure renders and nothing runs off the page; inside each figure every legend and
every label lies within the image, and every point of the cost–retention front carries its name.
The hand-made results of tests/report/test_tuning.py at two windows, with a peer that failed."""

import pandas as pd
import pytest
from ctxsim.harness.report import figures, tuning_figures
from ctxsim.harness.report.build import write_report

from tests.report.browser import browser, check_page, screenshot
from tests.report.test_tuning import known_frame


def results() -> pd.DataFrame:
    a, b = known_frame(200_000), known_frame(1_000_000)
    b["key"] = "m" + b["key"]
    b["cost_with_recovery_usd"] *= 4
    b["cost_usd"] *= 4
    bad = b[b["label"] == "truncate"].copy()
    bad["key"] = "f" + bad["key"]
    bad["label"] = bad["strategy"] = "append_only"
    bad["completed"], bad["failed_at_call"], bad["cost_usd"] = False, 400, 300.0  # spent more, then failed
    return pd.concat([a, b, bad], ignore_index=True)


@pytest.fixture(scope="module")
def sweep_report(tmp_path_factory):
    """The report, and what each figure held when it was saved: texts and legends outside the image,
    and for the front how many points and how many names."""
    seen = {}
    real = figures._save

    def watching(fig, out, name_):
        figures.layout(fig)  # as _save lays it out before saving
        fig.canvas.draw()
        r = fig.canvas.get_renderer()
        box = fig.bbox
        def outside(artist):
            bb = artist.get_window_extent(r)
            return bb.x0 < box.x0 - 1 or bb.y0 < box.y0 - 1 or bb.x1 > box.x1 + 1 or bb.y1 > box.y1 + 1
        legends = [lg for ax in fig.axes for lg in [ax.get_legend()] if lg is not None]
        def shown_ticks(ax):  # tick labels inside the axis range (matplotlib keeps undrawn ones beyond it)
            lo, hi = sorted(ax.get_ylim())
            return [t for t in ax.get_yticklabels() if lo <= t.get_position()[1] <= hi]
        texts = [t for ax in fig.axes for t in ax.texts + [ax.title, ax.xaxis.label, ax.yaxis.label]
                 + shown_ticks(ax) if t.get_text() and t.get_visible()]
        from matplotlib.collections import PathCollection
        from matplotlib.text import Annotation

        points = sum(len(c.get_offsets()) for ax in fig.axes for c in ax.collections  # markers, not the rings
                     if isinstance(c, PathCollection) and c.get_sizes().size and c.get_sizes()[0] < 100)
        seen[name_] = {"legends_cut": sum(outside(lg) for lg in legends), "legends": len(legends),
                       "texts_cut": [t.get_text() for t in texts if outside(t)],
                       "points": points, "names": sum(isinstance(t, Annotation) for ax in fig.axes for t in ax.texts),
                       "numbers": [t.get_text() for ax in fig.axes for t in ax.texts
                                   if isinstance(t, Annotation) and t.get_text().isdigit()],
                       "key": [t.get_text() for ax in fig.axes for t in ax.texts if t.get_gid() == tuning_figures.KEY_GID]}
        return real(fig, out, name_)

    mp = pytest.MonkeyPatch()
    mp.setattr(figures, "_save", watching)
    mp.setattr(tuning_figures, "_save", watching)
    out = tmp_path_factory.mktemp("sweep-report")
    try:
        write_report(results(), out, target=0.0)
    finally:
        mp.undo()
    return out, seen


def test_every_figure_keeps_its_legends_and_labels_inside_and_every_front_point_is_named(sweep_report):
    out, seen = sweep_report
    assert {"06-pareto.png", "09-response-novacode.png", "01-cost.png"} <= set(seen)
    for name_, s in seen.items():
        assert s["legends_cut"] == 0 and s["texts_cut"] == [], (name_, s)
    front = seen["06-pareto.png"]
    # 5 settings completed at each of the 2 windows; the failed peer is named in a note, not plotted
    assert front["legends"] == 2 and front["points"] == 10
    assert front["names"] == 10  # one name (or number) beside each point
    # a number stands for a name listed in the key beside the panel; the failed configuration is named there
    assert len(front["key"]) == len(front["numbers"]) + 1
    assert all(any(k.startswith(f"{n}  ") for k in front["key"]) for n in front["numbers"])
    assert front["key"][-1].replace("\n", " ").startswith("failed (not plotted): append_only")


def test_the_front_names_its_points_in_the_reading(sweep_report):
    out, _ = sweep_report
    md = (out / "report.md").read_text()
    reading = md.split("Pareto front: cost against retention", 1)[1].split("\n## ", 1)[0]
    assert "novacode (soft 40k) ($8.00, 0.600)" in reading and "append_only" not in reading.split("failed")[0]


@pytest.mark.skipif(browser() is None, reason="no Chromium on this machine (.ci/run installs it)")
def test_the_sweep_report_reads_whole_at_1280_px(sweep_report):
    out, seen = sweep_report
    r = check_page(out / "index.html", width=1280)
    assert r["viewport"] == 1280 and r["broken"] == [] and r["images"] == len(seen)
    assert r["page_width"] <= 1280 and r["outside"] == [] and r["stray_markdown"] == 0
    assert all(f["img"] and len(f["reading"]) > 40 for f in r["figures"]), r["figures"]
    shot = screenshot(out / "index.html", out / "screenshot-1280.png", width=1280)
    assert shot is not None and shot.stat().st_size > 10_000


def test_a_crowded_cluster_keeps_every_name_readable(tmp_path, monkeypatch):
    """Nine settings within 1% of each other in cost and at one retention (the 1M cluster of a real
    sweep): every point still has a name or a number, no two of them overlap, and each number is in
    the key."""
    from ctxsim.harness.report import tuning_figures as tf
    from matplotlib.text import Annotation, Text

    from tests.report.test_tuning import _run

    rows, i = [], 0
    for sm in (13_000, 20_000, 40_000):
        for tmin in (10_000, 15_000, 20_000):
            for seed in range(2):
                rows.append(_run(i, "novacode", {"soft_margin": sm, "tail_min_tokens": tmin}, seed,
                                 300 + sm / 10_000 + tmin / 20_000, 90))
                i += 1
    for label, cost in (("truncate", 30.0), ("append_only", 3000.0)):  # the axis spans two decades
        for seed in range(2):
            rows.append(_run(i, label, {}, seed, cost, 50))
            i += 1
    seen = {}
    real = tf._save

    def watching(fig, out, name_):
        figures.layout(fig)
        fig.canvas.draw()
        r = fig.canvas.get_renderer()
        notes = [t for ax in fig.axes for t in ax.texts if isinstance(t, Annotation)]
        boxes = []
        for t in notes:
            t.update_positions(r)
            boxes.append(Text.get_window_extent(t, r))
        seen[name_] = {"names": [t.get_text() for t in notes], "boxes": boxes,
                       "key": [t.get_text() for ax in fig.axes for t in ax.texts if t.get_gid() == tf.KEY_GID]}
        return real(fig, out, name_)

    monkeypatch.setattr(tf, "_save", watching)
    write_report(pd.DataFrame(rows), tmp_path, target=0.0)
    front = seen["06-pareto.png"]
    assert len(front["names"]) == 11
    boxes = front["boxes"]
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    numbers = [n for n in front["names"] if n.isdigit()]
    assert numbers and sorted(int(n) for n in numbers) == list(range(1, len(numbers) + 1))
    assert len(front["key"]) == len(numbers) and all(k.startswith(f"{n}  ") for n, k in
                                                       zip(sorted(numbers, key=int), front["key"]))
