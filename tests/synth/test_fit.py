"""The fit on the real logs prints the figures the generator declares (no hand-copied drift)."""

from pathlib import Path

import pytest
from ctxsim.harness.synth import distributions as D
from ctxsim.harness.synth.fit import fit, kind_of_command, lognormal_fit

REAL = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces" / "real"


@pytest.fixture(scope="module")
def fitted():
    if not REAL.is_dir():
        pytest.skip(f"real logs not found at {REAL} (they are read in place, never copied)")
    return fit(REAL)


def test_result_sizes_declared_are_the_fitted_ones(fitted):
    for kind, (n, med, p90) in D.FITTED_RESULT_CHARS.items():
        got = fitted["result_chars"][kind]
        assert (got["n"], got["median"], got["p90"]) == (n, med, p90), kind


def test_gaps_parallel_and_mix_declared_are_the_fitted_ones(fitted):
    for key, table in (("call_gap_s", D.FITTED_CALL_GAP_S), ("user_gap_s", D.FITTED_USER_GAP_S),
                       ("calls_per_turn", D.FITTED_CALLS_PER_TURN), ("assistant_text_chars", D.FITTED_TEXT_CHARS)):
        got = fitted[key]
        assert (got["n"], got["median"], got["p90"]) == table, key
    assert fitted["parallel"] == D.FITTED_PARALLEL
    assert fitted["user_gap_over_300s"] == D.FITTED_USER_GAP_OVER_300S
    for k, v in D.FITTED_TOOL_MIX.items():
        assert fitted["tool_mix"][k] == v
    for kind, (n, med, p90) in D.FITTED_INPUT_CHARS.items():
        got = fitted["input_chars"][kind]
        assert (got["n"], got["median"], got["p90"]) == (n, med, p90), kind
    assert fitted["all_gaps_over_300s"] >= 1  # 5-minute cache expiries happen in real sessions


def test_lognormal_fit_by_hand():
    # values 1..10: median 5.5, p90 (numpy linear) 9.1; sigma = ln(9.1/5.5)/1.28155 = 0.50355/1.28155 = 0.39292
    f = lognormal_fit(list(range(1, 11)))
    assert f["median"] == 5.5 and f["p90"] == 9.1
    assert f["sigma"] == pytest.approx(0.3929, abs=1e-4)


def test_kind_of_command():
    assert kind_of_command("rg -n foo src") == "grep"
    assert kind_of_command("sed -n 1,80p x.py") == "read"
    assert kind_of_command("ls -la") == "glob"
    assert kind_of_command("python -m pytest") == "bash"
