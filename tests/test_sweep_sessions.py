"""Statistics at the session level (harness/sweep/sessions.py, issue 42), on small populations worked
out by hand: differences paired by session, intervals over sessions, needs counted once, the
detection limit and where a saving reverses."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ctxsim.harness.sweep import sessions as S
from hypothesis import given, settings
from hypothesis import strategies as st


def test_a_ratio_of_sums_and_its_interval_over_sessions():
    iv = S.ratio_interval([1, 2, 3], [10, 10, 10])
    assert iv.est == pytest.approx(6 / 30)
    # every resample is a mean of three of {0.1, 0.2, 0.3}: the interval lies within [0.1, 0.3]
    assert 0.1 <= iv.lo < 0.2 < iv.hi <= 0.3
    assert not S.ratio_interval([1], [10]).has_ci   # one session: no interval over sessions


NEEDS_B = {"s1": S.Needs(n=4, kept=4), "s2": S.Needs(n=2, kept=1), "s3": S.Needs(n=0)}
NEEDS_A = {"s1": S.Needs(n=4, kept=3), "s2": S.Needs(n=2, kept=2), "s3": S.Needs(n=0)}


def test_a_comparison_is_paired_by_session():
    c = S.compare({"s1": 8.0, "s2": 9.0, "s3": 12.0, "only-a": 1.0}, {"s1": 10.0, "s2": 10.0, "s3": 10.0},
                  NEEDS_A, NEEDS_B)
    assert c.sessions == ["s1", "s2", "s3"]                  # "only-a" is not paired: left out
    assert c.saving_usd.est == pytest.approx((2 + 1 - 2) / 3)
    assert c.saving.est == pytest.approx(1 / 30)           # Σ(b − a) / Σ b
    assert (c.cheaper_on, c.reversed_cost) == (2, ["s3"])
    # retention: s1 keeps one fewer, s2 one more, s3 has no need at risk: (−1 + 1) / 6 = 0
    assert c.retention.est == pytest.approx(0.0) and c.needs == 6 and c.with_needs == 2
    assert (c.not_worse_on, c.reversed_retention) == (1, ["s1"])


def test_the_detection_limit_is_the_bootstrap_se_times_2_8_never_below_three_over_n():
    # two sessions, differences −1 of 4 and +1 of 2: a resample is (s1, s1) −2/8, (s2, s2) +2/4 or a
    # mix 0/6, with chances 1/4, 1/4, 1/2: mean 0.0625, sd sqrt(0.078125 − 0.0625²) = 0.2724
    c = S.compare({"s1": 1.0, "s2": 1.0}, {"s1": 1.0, "s2": 1.0}, NEEDS_A, NEEDS_B, n_boot=20_000)
    assert c.detection == pytest.approx(S.Z_DETECT * 0.2724, rel=0.04)
    assert S.Z_DETECT == pytest.approx(1.96 + 0.8416, abs=1e-3)
    # no discordant session among 30 needs: the rule of three, 3 / 30
    same = {f"s{i}": S.Needs(n=10, kept=10) for i in range(3)}
    c = S.compare({k: 1.0 for k in same}, {k: 1.0 for k in same}, same, same)
    assert c.retention.est == 0 and c.detection == pytest.approx(0.1)


def test_a_saving_holds_only_with_its_interval_above_zero_on_most_sessions_and_retention_not_worse():
    cost_b = {f"s{i}": 10.0 for i in range(10)}
    needs = {k: S.Needs(n=3, kept=3) for k in cost_b}
    cheaper = {k: 9.0 + 0.01 * i for i, k in enumerate(cost_b)}
    assert S.holds(S.compare(cheaper, cost_b, needs, needs))
    # the same saving but losing a need on every session: retention worse beyond noise
    lossy = {k: S.Needs(n=3, kept=2) for k in cost_b}
    assert not S.holds(S.compare(cheaper, cost_b, lossy, needs))
    # cheaper on average through two sessions only: the interval reaches 0, and 2 of 10 is not most
    two = {k: (1.0 if i < 2 else 10.5) for i, k in enumerate(cost_b)}
    c = S.compare(two, cost_b, needs, needs)
    assert c.saving.est > 0 and c.cheaper_on == 2 and not S.holds(c)


def test_what_the_reversing_sessions_have_in_common():
    traits = {"a": {"calls": 50, "source": "synthetic"}, "b": {"calls": 60, "source": "synthetic"},
              "c": {"calls": 150, "source": "synthetic"}, "d": {"calls": 200, "source": "real"},
              "e": {"calls": 180, "source": "synthetic"}}
    assert S.common_trait(["a", "b"], list(traits), traits) == "fewer calls (median 55 against 180)"
    mixed = {k: {"calls": v["calls"]} for k, v in traits.items()}
    assert S.common_trait(["a", "d"], list(mixed), mixed) == ""   # 50 and 200 against 60-180: nothing sets them apart
    real = {"a": {"source": "real"}, "b": {"source": "real"}, "c": {"source": "synthetic"},
            "d": {"source": "synthetic"}, "e": {"source": "synthetic"}}
    assert S.common_trait(["a", "b"], list(real), real) == "all 2 are source real (against 0% of the others)"


def test_the_evidence_clause_names_n_sessions_n_needs_the_limit_and_the_reversals():
    c = S.compare({"s1": 8.0, "s2": 9.0, "s3": 12.0}, {"s1": 10.0, "s2": 10.0, "s3": 10.0}, NEEDS_A, NEEDS_B)
    text = S.evidence(c, {"s1": {"calls": 10}, "s2": {"calls": 12}, "s3": {"calls": 90}}, {"s3": "long-200k-s3"})
    assert text.startswith("n = 3 sessions, 6 needs at risk; detection limit ")
    assert "cheaper on 2 of 3, retention not worse on 1 of 2" in text
    assert "the saving reverses on 1 (long-200k-s3): more calls (median 90 against 11)" in text


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6), st.integers(0, 6)), min_size=2, max_size=12))
def test_needs_are_counted_once_whatever_the_seeds(rows):
    """Replaying each session with more seeds (the same needs, kept the same) changes no count."""
    a = {f"s{i}": S.Needs(n=n, kept=min(k, n)) for i, (n, k, _) in enumerate(rows)}
    b = {f"s{i}": S.Needs(n=n, kept=min(j, n)) for i, (n, _, j) in enumerate(rows)}
    costs = {k: 1.0 for k in a}
    c = S.compare(costs, costs, a, b)
    assert c.needs == sum(n for n, _, _ in rows if n > 0)
    iv = S.kept_interval(a)
    total = sum(n for n, _, _ in rows)
    if total:
        assert iv.est == pytest.approx(sum(min(k, n) for n, k, _ in rows) / total)
    else:
        assert math.isnan(iv.est)
    assert np.isfinite(c.detection) or c.needs == 0


def test_an_interval_that_only_touches_zero_is_on_the_side_of_its_estimate():
    """−0.062 [−0.333, 0.000]: every resample fell below 0 or on it; that is a loss, not noise
    (a peer there is not "at equal retention")."""
    assert S.direction(S.Interval(-0.062, -0.333, 0.0)) == -1 and not S.not_worse(S.Interval(-0.062, -0.333, 0.0))
    assert S.direction(S.Interval(0.068, 0.0, 0.167)) == 1
    assert S.direction(S.Interval(0.0, 0.0, 0.0)) == 0 and S.not_worse(S.Interval(0.0, 0.0, 0.0))
    assert S.direction(S.Interval(-0.045, -0.167, 0.031)) == 0 and S.not_worse(S.Interval(-0.045, -0.167, 0.031))


def test_sessions_on_their_own_models_are_one_setting():
    """make sweep's real logs run each on its own model (models = [none]): grouped by the model each
    run used, three sessions were three settings of one session each, and compared with one another."""
    import pandas as pd
    from ctxsim.harness.sweep.analysis import by_config

    df = pd.DataFrame({"label": ["novacode"] * 3, "strategy": ["novacode"] * 3, "param.soft_margin": [13_000] * 3,
                       "model": ["claude-opus-4-6", "claude-sonnet-4-5", "claude-opus-4-7"], "model_setting": [""] * 3,
                       "window": [200_000] * 3, "cache": [True] * 3, "trace": ["a", "b", "c"],
                       "cost_usd": [1.0, 2.0, 6.0], "completed": [True] * 3, "error": [""] * 3})
    g = by_config(df)
    assert len(g) == 1 and int(g["runs"].iloc[0]) == 3 and g["cost_usd"].iloc[0] == pytest.approx(3.0)
