"""The figure and table defects of issue 42, each on a case worked out by hand: the sawtooth's
trigger lines and titles, "200k against 1M" on different sessions, the ledger's flat 1M panel, the
price table's long-context row, and a grid whose retention is saturated."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from ctxsim.harness.report import build, figures, grid_checks, tuning_figures
from ctxsim.harness.report.content import Context
from ctxsim.harness.sweep import analysis, tuning

from tests.report.test_population_report import population

# --- the sawtooth: each NovaCode setting's own lines, titles that fit ---------------------------------

def test_each_novacode_setting_draws_its_own_trigger_lines():
    """N-COMP-1..3: soft line = window − summary_reserve (20,000) − soft_margin, hard line = window −
    20,000 − hard_margin (3,000); the default soft_margin is 13,000."""
    assert figures.trigger_lines({"strategy": "novacode", "param.soft_margin": 80_000}, 200_000) == [
        (100_000, "orange"), (177_000, "r")]
    assert figures.trigger_lines({"strategy": "novacode"}, 200_000) == [(167_000, "orange"), (177_000, "r")]
    assert figures.trigger_lines({"strategy": "novacode", "param.soft_margin": 40_000}, 1_000_000)[0] == (940_000, "orange")
    assert figures.trigger_lines({"strategy": "codex", "param.soft_margin": 80_000}, 200_000) == []   # not its lines


def _calls(n: int, peak: int) -> pd.DataFrame:
    ctx = np.linspace(5_000, peak, n).astype(int)
    return pd.DataFrame({"kind": "main", "call": np.arange(n), "attempt": 1, "context_tokens": ctx,
                         "compaction": False, "rejected": False})


def _sawtooth_context(tmp_path) -> Context:
    df = population()
    df = df[df["trace_hash"] == "h00"].copy()
    df["param.tail_min_tokens"] = df["strategy"].map({"novacode": 20_000})
    runs = analysis.with_outcome(df).assign(config=[analysis.config_name(r) for _, r in df.iterrows()])
    cfgs = analysis.ranked(analysis.by_config(runs))
    calls = {k: _calls(50, 150_000) for k in runs["key"]}
    return Context(runs, cfgs.reset_index(drop=True), calls, None, 0.5, tmp_path, runs.iloc[0:0])


def test_the_sawtooth_panels_carry_their_own_lines_and_their_titles_fit(tmp_path, monkeypatch):
    seen = {}
    real = figures._save

    def watching(fig, out, name_):
        figures.layout(fig)
        fig.canvas.draw()
        r = fig.canvas.get_renderer()
        for ax in fig.axes:
            if not ax.get_visible():
                continue
            dashed = sorted(round(line.get_ydata()[0] * 1e3) for line in ax.get_lines() if line.get_linestyle() == "--")
            t = ax.title.get_window_extent(r)
            a = ax.get_window_extent(r)
            seen[ax.get_title()] = (dashed, t.x0 >= a.x0 - 40 and t.x1 <= a.x1 + 40)
        return real(fig, out, name_)

    monkeypatch.setattr(figures, "_save", watching)
    assert figures.fig_sawtooth(_sawtooth_context(tmp_path)) is not None
    by = {k.split(" (peak")[0]: v for k, v in seen.items()}
    assert by["novacode (soft 80k, tail≥ 20k)"][0] == [100_000, 177_000]
    assert by["novacode (soft 40k, tail≥ 20k)"][0] == [140_000, 177_000]
    assert by["novacode (tail≥ 20k)"][0] == [167_000, 177_000]
    assert by["truncate"][0] == [] and by["claude_code"][0] == []
    assert all(fits for _, fits in seen.values()), seen   # no title runs past its panel


# --- 200k against 1M: only on the same sessions -----------------------------------------------------

def _two_windows(same: bool) -> Context:
    a = population()
    a = a[a["key"].str[0].isin(["d", "t"])]
    b = a.copy()
    b["window"] = 1_000_000
    b["key"] = "m" + b["key"]
    b["cost_usd"] = b["cost_usd"] * 3
    b["cost_with_recovery_usd"] = b["cost_with_recovery_usd"] * 3
    if not same:
        b["trace_hash"] = "x" + b["trace_hash"]
        b["trace"] = b["trace"].str.replace("long-200k", "long-1m")
        b["provenance.trace.preset"] = "long-1m"
    df = pd.concat([a, b], ignore_index=True)
    runs = analysis.with_outcome(df).assign(config=[analysis.config_name(r) for _, r in df.iterrows()])
    cfgs = analysis.by_config(runs)
    ctx = Context(runs, cfgs, {}, None, 0.5, None, runs.iloc[0:0])
    ctx.pooled = tuning.settings(runs, by_group=False)
    return ctx


def test_different_sessions_at_two_windows_give_no_ratio(tmp_path):
    ctx = _two_windows(same=False)
    ctx.out = tmp_path
    f = figures.fig_windows(ctx)
    assert f.title == "Each window on its own sessions"
    assert "The windows ran different sessions (200,000: long-200k; 1,000,000: long-1m)" in f.reading
    assert "changes cost by" not in f.reading


def test_the_same_sessions_at_two_windows_give_the_window_s_ratio(tmp_path):
    ctx = _two_windows(same=True)
    ctx.out = tmp_path
    f = figures.fig_windows(ctx)
    assert f.title == "200k against 1M"
    assert "on the 12 sessions run at both, moving from 200,000 to 1,000,000 tokens changes cost by 3.00–3.00×" in f.reading


# --- the compaction ledger: each series on a scale that shows it -------------------------------------

def test_a_ledger_panel_is_scaled_to_its_own_values():
    """1M: totals $354–$393 and summaries $0.76–$0.83: neither drawn flat from $0 (the issue's
    $0–330 panel); 200k summaries $0.16–0.26 keep their own scale too."""
    lo, hi = tuning_figures.fitted_range([393.0, 376.0, 354.0])
    assert lo == pytest.approx(354 - 0.15 * 39) and hi == pytest.approx(393 + 0.15 * 39)
    lo, hi = tuning_figures.fitted_range([0.757, 0.792, 0.834])
    assert lo > 0.7 and hi < 0.9
    assert tuning_figures.fitted_range([0.0, 1.0, 2.0]) == (0.0, pytest.approx(2.3))   # near 0: from 0
    assert tuning_figures.fitted_range([5.0, 5.0]) == pytest.approx((5.0 - 0.0375, 5.0 + 0.0375))


def test_the_ledger_figure_puts_summaries_on_their_own_axis(tmp_path, monkeypatch):
    led = pd.DataFrame({"label": "novacode", "window": 1_000_000, "group": "long-1m", "soft_margin": [13_000, 40_000, 80_000],
                        "summary_cost_usd": [0.757, 0.792, 0.834], "main_cost_usd": [392.3, 375.9, 353.9],
                        "total_cost_usd": [393.0, 376.6, 354.7], "compactions": 3.0, "retention": 0.9,
                        "retention_lo": 0.8, "retention_hi": 1.0, "completed": True, "default": [True, False, False]})
    ctx = Context(pd.DataFrame(), pd.DataFrame(), {}, None, 0.5, tmp_path, pd.DataFrame())
    ctx.grid_ledger = led
    seen = []
    real = figures._save
    monkeypatch.setattr(tuning_figures, "_save", lambda fig, out, n: seen.append([ax.get_ylim() for ax in fig.axes])
                        or real(fig, out, n))
    assert tuning_figures.fig_grid_ledger(ctx) is not None
    (top, low), = seen
    assert top[0] > 300 and top[1] < 410          # the totals' own range, not from $0
    assert low[0] > 0.7 and low[1] < 0.9          # the summaries' own range


# --- the price table: a long-context tier is one row ----------------------------------------------

def test_a_long_context_tier_is_its_model_s_row_not_a_model_of_its_own():
    p = "provenance.prices.models.claude-sonnet-4-5."
    runs = pd.DataFrame([{p + "input": 3.0, p + "output": 15.0, p + "cache_write_5m": 3.75, p + "cache_write_1h": 6.0,
                          p + "cache_read": 0.3, p + "long_context.above_tokens": 200_000, p + "long_context.input": 6.0,
                          p + "long_context.output": 22.5, p + "as_of": "2026-12-01", p + "source": "pricing page"}])
    prices = build._prices(runs)
    assert list(prices) == ["claude-sonnet-4-5"]
    assert prices["claude-sonnet-4-5"]["input"] == 3.0 and prices["claude-sonnet-4-5"]["long_context.input"] == 6.0


# --- retention that cannot tell the settings apart ----------------------------------------------------

def test_a_saturated_retention_is_said():
    df = population()
    df = df[df["key"].str[0].isin(["d", "a"])]   # both settings keep 60 of 60
    lines = grid_checks.warnings(tuning.settings(df))
    assert ("novacode: retention is saturated at window 200,000 on long-200k: every one of its 2 settings keeps 100% "
            "of the needs at risk (60 of 60); the answer there is cost alone") in " ".join(lines)
