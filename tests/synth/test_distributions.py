"""Fitted distributions reproduce their declared median and 90th percentile (issue 4 check)."""

import numpy as np
import pytest
from ctxsim.harness.synth import distributions as D
from ctxsim.harness.synth.config import SynthConfig
from ctxsim.harness.synth.distributions import LogNormal, categorical
from hypothesis import given, settings
from hypothesis import strategies as st

FITTED_TABLES = {
    **{f"result_chars.{k}": v for k, v in D.FITTED_RESULT_CHARS.items()},
    **{f"input_chars.{k}": v for k, v in D.FITTED_INPUT_CHARS.items()},
    "text_chars": D.FITTED_TEXT_CHARS,
    "calls_per_turn": D.FITTED_CALLS_PER_TURN,
    "call_gap_s": D.FITTED_CALL_GAP_S,
    "user_gap_s": D.FITTED_USER_GAP_S,
}


def _config_dist(key: str) -> LogNormal:
    cfg = SynthConfig()
    obj = cfg
    for part in key.split("."):
        obj = obj[part] if isinstance(obj, dict) else getattr(obj, part)
    return obj


@pytest.mark.parametrize("key", sorted(FITTED_TABLES))
def test_fitted_distribution_reproduces_median_and_p90_on_5000_draws(key):
    """The generator's default for each fitted quantity, drawn 5,000 times, has the median and p90
    the fit declares, within 10% (e.g. read results: median 2,000, p90 10,260 chars)."""
    _, med, p90 = FITTED_TABLES[key]
    dist = _config_dist(key)
    assert dist.median == med and dist.p90 == p90  # the config default is the fitted figure
    if dist.sigma == 0:
        pytest.skip("degenerate fit (all samples equal)")
    x = dist.sample(np.random.default_rng(12345), 5000)
    assert abs(np.median(x) - med) / med <= 0.10
    assert abs(np.quantile(x, 0.9) - p90) / p90 <= 0.10


def test_lognormal_parameters_by_hand():
    # median 100, p90 1000: mu = ln 100 = 4.6052; sigma = (ln 1000 - ln 100) / 1.28155 = 2.302585 / 1.281552 = 1.796717
    d = LogNormal(median=100, p90=1000)
    assert d.mu == pytest.approx(4.605170, abs=1e-6)
    assert d.sigma == pytest.approx(1.796717, abs=1e-6)
    assert d.quantile(0.5) == pytest.approx(100)
    assert d.quantile(0.9) == pytest.approx(1000)


def test_lognormal_clipping_and_validation():
    d = LogNormal(median=10, p90=100, lo=5, hi=20)
    x = d.sample(np.random.default_rng(0), 1000)
    assert x.min() >= 5 and x.max() <= 20
    assert isinstance(d.sample(np.random.default_rng(0)), float)
    with pytest.raises(ValueError, match="p90"):
        LogNormal(median=10, p90=5)
    with pytest.raises(ValueError, match="hi"):
        LogNormal(median=10, p90=20, lo=5, hi=5)


def test_categorical_normalises_and_sorts():
    names, p = categorical({"b": 3, "a": 1})
    assert names == ["a", "b"] and p.tolist() == [0.25, 0.75]
    with pytest.raises(ValueError):
        categorical({})
    with pytest.raises(ValueError):
        categorical({"a": 0.0})


@settings(max_examples=25, deadline=None)
@given(st.floats(1, 1e5), st.floats(1.0, 50.0))
def test_lognormal_quantiles_property(med, ratio):
    d = LogNormal(median=med, p90=med * ratio)
    assert d.quantile(0.5) == pytest.approx(med, rel=1e-9)
    assert d.quantile(0.9) == pytest.approx(med * ratio, rel=1e-9)
