"""The tuning answer on hand-made results where the answer is known (issue 28, item 1), the
intervals it rests on, and the grid checks (item 2). ``known_frame`` is one session replayed with
three seeds: a saving there has no interval over sessions (the seeds are not other sessions), its
needs are counted once (issue 42), and the report names no setting to ship from it."""

import math

import pandas as pd
import pytest
from ctxsim.harness.report import grid_checks
from ctxsim.harness.report.build import write_report
from ctxsim.harness.retention import proportions
from ctxsim.harness.sweep import tuning

W = 200_000


def test_wilson_and_newcombe_match_the_published_examples():
    """Newcombe 1998 (Stat Med 17:857, example 81/263: 0.2553–0.3662) and (Stat Med 17:873, Table II
    example 56/70 − 48/80: 0.0524–0.3339); Wilson at k = 0 of 10: upper 0.2775, lower exactly 0."""
    p, lo, hi = proportions.wilson(81, 263)
    assert (round(lo, 4), round(hi, 4)) == (0.2553, 0.3662)
    d, lo, hi = proportions.newcombe(56, 70, 48, 80)
    assert (round(d, 4), round(lo, 4), round(hi, 4)) == (0.2, 0.0524, 0.3339)
    assert proportions.wilson(0, 10)[1:] == (0.0, pytest.approx(0.2775, abs=1e-4))
    assert proportions.wilson(10, 10)[2] == 1.0 and math.isnan(proportions.wilson(0, 0)[0])


def _run(i, label, params, seed, cost, kept, n=100, window=W, trace="long-200k-seed1.jsonl", compactions=2,
         completed=True, verbatim_share=0.5):
    """One run's flat row; ``kept`` of ``n`` needs kept, split between verbatim and summary."""
    v = round(kept * verbatim_share)
    row = {"key": f"k{i}", "label": label, "strategy": label, "trace": trace, "trace_hash": trace, "window": window,
           "seed": seed, "error": "", "completed": completed, "failed_at_call": None, "cost_usd": cost - 0.5,
           "recovery.cost_usd": 0.5, "cost_with_recovery_usd": cost, "needs_at_risk.n": n,
           "needs_at_risk.verbatim": v, "needs_at_risk.summary": kept - v, "needs_at_risk.pointer": 0,
           "needs_at_risk.lost": n - kept, "needs_at_risk.kept": kept / n, "needs_at_risk.kept_ci": "[0, 1]",
           "recovery.calls": 1, "compactions.attempted": compactions, "compactions.succeeded": compactions,
           "retention.score": kept / n, "calls": 900, "model": "claude-sonnet-4-6", "cache": True,
           "cache_hit_rate": 0.9, "latency_s.p50": 10.0, "latency_s.p95": 20.0, "latency_s.compaction_blocking": 60.0,
           "tokens.input_uncached": 1e6, "tokens.cache_write": 2e6, "tokens.cache_read": 3e7, "tokens.output": 5e5}
    row.update({f"param.{k}": v for k, v in params.items()})
    return row


def known_frame(window=W):
    """NovaCode at its defaults (soft_margin 13,000, tail_min_tokens 10,000): $10 a session, 60 of
    100 needs kept per seed. soft_margin 40,000: $8, the same 60 kept: cheaper at equal retention.
    soft_margin 80,000: $6 but 30 kept: worse beyond noise (90/300 against 180/300). tail_min_tokens
    20,000: $9.50 and 75 kept: the best retention at no more cost. truncate, a peer: $5, 20 kept."""
    grid = [({"soft_margin": 13_000, "tail_min_tokens": 10_000}, [10.0, 10.2, 9.8], 60),
            ({"soft_margin": 40_000, "tail_min_tokens": 10_000}, [8.0, 8.1, 7.9], 60),
            ({"soft_margin": 80_000, "tail_min_tokens": 10_000}, [6.0, 6.0, 6.0], 30),
            ({"soft_margin": 13_000, "tail_min_tokens": 20_000}, [9.5, 9.5, 9.5], 75)]
    rows, i = [], 0
    for params, costs, kept in grid:
        for seed, c in enumerate(costs):
            rows.append(_run(i, "novacode", params, seed, c, kept, window=window))
            i += 1
    for seed in range(3):
        rows.append(_run(i, "truncate", {}, seed, 5.0, 20, window=window))
        i += 1
    return pd.DataFrame(rows)


def test_the_cheapest_setting_at_equal_retention_and_the_best_retention_at_no_more_cost():
    sets = tuning.settings(known_frame())
    [a] = tuning.answers(sets)
    assert (a.label, a.window, a.group, a.default_in_grid) == ("novacode", W, "long-200k", True)
    assert a.swept == ["soft_margin", "tail_min_tokens"]
    assert a.cheapest.setting.changed == {"soft_margin": 40_000}
    # saving on the one session: the seeds' mean costs 10.0 and 8.0 → 2.0; no interval over sessions
    d, lo, hi = a.cheapest.saving
    assert d == pytest.approx(2.0) and math.isnan(lo) and math.isnan(hi) and a.cheapest.comparison is None
    assert a.cheapest.saving_pct[0] == pytest.approx(0.2)
    assert a.cheapest.retention_diff[0] == 0.0  # 60/100 both (each need once, whatever the seeds)
    assert (a.default.retention.k, a.default.retention.n) == (60, 100)
    assert a.best_retention.setting.changed == {"tail_min_tokens": 20_000}
    assert a.best_retention.saving[0] == pytest.approx(0.5)
    d, lo, hi = a.best_retention.retention_diff  # 225/300 − 180/300 = 0.15, beyond noise
    assert d == pytest.approx(0.15) and lo > 0
    # soft_margin 80,000 is cheaper still but worse beyond noise: not the answer
    sm80 = next(s for s in sets if s.changed == {"soft_margin": 80_000})
    assert tuning.retention_difference(sm80, a.default)[2] < 0


def test_the_report_opens_with_the_answer(tmp_path):
    """One session: the opening names no setting to ship, says why, and gives what this session shows."""
    write_report(known_frame(), tmp_path, target=0.0)
    md = (tmp_path / "report.md").read_text()
    first = md.split("\n## ", 2)[1]
    assert first.startswith("The answer")
    assert ("**Window 200,000, long-200k (1 session)**, novacode: one session only, so no setting can be shown to hold "
            "across sessions") in first
    assert ("On this session the cheapest setting at equal retention is `novacode (soft_margin=40,000)`: $8.00 against "
            "$10.00 at the default (saving $2.00, 20.0%), needs kept +0.0 pts") in first
    assert "ship `" not in first
    tuning_part = md.split("## Tuning: which setting to ship", 1)[1].split("\n## ", 1)[0]
    assert "| 200,000 (long-200k) | $10.00; 0.600 [0.502, 0.691] | soft_margin=40,000 | $8.00; 0.600 [" in tuning_part
    assert "Newcombe" in tuning_part
    peers = md.split("## The tuned strategy against its peers", 1)[1].split("\n## ", 1)[0]
    assert "| truncate | yes | $5.00 | -$3.00 | 0.200 [0." in peers and "worse |" in peers
    assert md.startswith("# Which settings to ship: novacode soft_margin, tail_min_tokens at 200k window")


def test_without_the_needs_at_risk_columns_the_report_says_it_fell_back(tmp_path):
    old = known_frame().drop(columns=[c for c in known_frame().columns if c.startswith("needs_at_risk.")])
    old = old.drop(columns=["cost_with_recovery_usd", "recovery.cost_usd"])
    write_report(old, tmp_path, target=0.0)
    md = (tmp_path / "report.md").read_text()
    assert "no needs-at-risk figure (written by an older ctxsim): retention is `retention.score`" in md
    # the estimate alone (no probes: no interval) still ranks it
    assert "the cheapest setting at equal retention is `novacode (soft_margin=40,000)`" in md


def test_the_grid_names_what_measured_nothing():
    """At 1M nothing compacts (every cell the same); at 200k tail_max_tokens 40k and 80k give
    identical rows."""
    rows, i = [], 0
    for sm in (13_000, 80_000):
        for tm in (40_000, 80_000):
            p = {"soft_margin": sm, "tail_max_tokens": tm}
            for seed in range(2):
                rows.append(_run(i, "novacode", p, seed, 10.0 if sm == 13_000 else 8.0, 60))
                rows.append(_run(i + 1, "novacode", p, seed, 30.0, 60, window=1_000_000, compactions=0))
                i += 2
    sets = tuning.settings(pd.DataFrame(rows))
    assert grid_checks.warnings(sets) == [
        "novacode: no run compacted at window 1,000,000 on long-200k: the session never reaches its thresholds "
        "there, so the 4 settings of `soft_margin`, `tail_max_tokens` measure nothing (give that window a longer "
        "session: `window_traces` in the sweep file)",
        "novacode: `tail_max_tokens` changed nothing at window 200,000 on long-200k: its values 40,000, 80,000 "
        "gave identical results"]


def _same_as_default_frame(improving: bool) -> pd.DataFrame:
    """NovaCode's default ($10, 60 of 100 kept per seed) and tail_max_tokens 15,000, whose runs gave
    exactly the default's results (the cap was never reached); with ``improving`` also soft_margin
    40,000 at $8 with the same 60 kept, else soft_margin 80,000 at $12 (dearer) with 60 kept."""
    grid = [({}, [10.0, 10.2, 9.8], 60), ({"tail_max_tokens": 15_000}, [10.0, 10.2, 9.8], 60),
            ({"soft_margin": 40_000}, [8.0, 8.1, 7.9], 60) if improving else ({"soft_margin": 80_000}, [12.0] * 3, 60)]
    rows, i = [], 0
    for params, costs, kept in grid:
        full = {"soft_margin": 13_000, "tail_max_tokens": 40_000, **params}
        for seed, c in enumerate(costs):
            rows.append(_run(i, "novacode", full, seed, c, kept))
            i += 1
    return pd.DataFrame(rows)


def test_a_setting_that_measures_the_same_as_the_default_is_never_an_answer():
    """tail_max_tokens 15,000 is cheaper than nothing and keeps what the default keeps: with an
    improving setting beside it the answer is that one; without, no answer at all."""
    sets = tuning.settings(_same_as_default_frame(True))
    [a] = tuning.answers(sets)
    same = next(s for s in sets if s.changed == {"tail_max_tokens": 15_000})
    assert tuning.measures_same(same, a.default)
    assert a.cheapest.setting.changed == {"soft_margin": 40_000} and a.cheapest.saving[0] == pytest.approx(2.0)
    assert a.best_retention is None  # nothing keeps more than 60/100 at no more cost; 15,000 only repeats the default

    [b] = tuning.answers(tuning.settings(_same_as_default_frame(False)))
    assert b.cheapest is None and b.best_retention is None


def test_the_report_says_no_setting_improves_on_the_default(tmp_path):
    write_report(_same_as_default_frame(False), tmp_path, target=0.0)
    first = (tmp_path / "report.md").read_text().split("\n## ", 2)[1]
    assert "**Window 200,000, long-200k (1 session)**, novacode: keep the default ($10.00 per session, 60% of needs " \
        "kept): no setting is cheaper." in first
    assert "tail_max_tokens=15,000" not in first


def test_the_recommendation_is_made_on_needs_at_risk_with_its_interval(tmp_path):
    """known_frame at target 0.5: soft_margin 80,000 ($6) keeps 30 of 100 needs, below it; soft_margin
    40,000 ($8, 60 of 100) is the cheapest at the target. Against the default (60 of 100 too) it is within
    noise; against tail_min_tokens 20,000 (75 of 100) it is below: 0.60 − 0.75 by Newcombe's hybrid
    interval on 100 needs each (no per-probe tables here) is −0.150 [−0.273, −0.020]."""
    write_report(known_frame(), tmp_path, target=0.5)
    md = (tmp_path / "report.md").read_text()
    rec = md.split("## Cheapest of all configurations at needs at risk kept ≥ 0.5", 1)[1].split("\n## ", 1)[0]
    assert rec.strip().startswith("**novacode (soft_margin=40000)** at window 200,000")
    assert "Needs at risk kept: 60/100 on 1 session = 0.600 [0.502, 0.691] kept" in rec   # each need once
    # the needs table too: 60 of 100 (30 verbatim, 30 in a summary, 40 lost), never 180/300 over 3 seeds
    assert "| novacode | yes | $10.00 | 60/100 on 1 session = 0.600 [0.502, 0.691] | 30 | 30 | 0 | 40 | 0/0 | 0/0 |" in md
    assert "Against the reference: `novacode (soft_margin=40000)` is within noise of `novacode`: difference +0.000" in rec
    assert ("`novacode (soft_margin=40000)` is below `novacode (tail_min_tokens=20000)`: difference -0.150 "
            "[-0.273, -0.020]") in rec
    pairs = md.split("## Retention: needs at risk, and the pairs that matter", 1)[1].split("\n## ", 1)[0]
    # the front truncate → soft 80k → soft 40k → tail≥ 20k gives 3 neighbours, then truncate against the default;
    # of the 10 pairs the other 6 are not compared
    assert "The 4 pairs that matter" in pairs and "the other 6 pairs are not compared" in pairs
    assert pairs.count("\n- `") == 4 and "- `truncate` is below `novacode`: difference -0.400" in pairs
