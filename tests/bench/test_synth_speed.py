"""Generation speed (pytest-benchmark; reported by `make bench`, not asserted in the suite)."""

import pytest
from ctxsim.harness.model import trace as tr
from ctxsim.harness.synth import generate, load_preset


def test_generate_long_1m(benchmark):
    if benchmark.disabled:
        pytest.skip("benchmarks are disabled in the suite (make bench runs them)")
    cfg = load_preset("long-1m")
    t = benchmark.pedantic(lambda: tr.dumps(generate(cfg, 0)), rounds=1, iterations=1)
    assert t
