"""Replay speed (pytest-benchmark; `make bench`). Ratios are measured within one run, never as
absolute timings in the test suite: this machine is shared and noisy."""

import time

import pytest
from ctxsim.harness.replay.engine import RunConfig, replay

from tests.helpers_traces import Builder


def session(calls: int):
    b = Builder().user("migrate the storage layer to the new API")
    for i in range(calls):
        b.call(f"step {i}: looking at the next module", [f"result {i}\n" + ("def f():\n    return 1\n" * 40)])
    return b.call("done").build()


def _best(fn, repeat=5) -> float:
    """Least CPU time of this process over ``repeat`` runs (CPU time, not wall time: other
    processes on a shared machine then disturb the ratio far less)."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


STRATEGIES = [("append_only", {"cache_breakpoints": True}, 10_000_000),
              ("novacode", {}, 200_000)]  # NovaCode compacts every ~150 calls at 200k


@pytest.mark.parametrize("strategy,params,window", STRATEGIES)
def test_replay_throughput_2000_calls(benchmark, strategy, params, window):
    t = session(2000)
    cfg = RunConfig(window=window)
    replay(t, strategy, params, cfg)  # warm: the trace's blocks are counted once per process
    res = benchmark.pedantic(lambda: replay(t, strategy, params, cfg), rounds=3, iterations=1)
    assert res.metrics["calls"] == 2001
    if benchmark.stats:  # None when benchmarks are disabled (a plain `pytest tests` run)
        benchmark.extra_info["calls_per_s"] = 2001 / benchmark.stats.stats.min


@pytest.mark.parametrize("strategy,params,window", STRATEGIES)
def test_growth_when_the_session_doubles(benchmark, strategy, params, window):
    """Replay time of a 2N-call session over an N-call one: linear work gives ~2, a per-call walk
    over the whole history gives ~4. Target <= 2.3."""
    small, big = session(1000), session(2000)
    cfg = RunConfig(window=window)
    for t in (small, big):
        replay(t, strategy, params, cfg)  # warm both: token counts are per-trace, once
    t_small = _best(lambda: replay(small, strategy, params, cfg))
    t_big = _best(lambda: replay(big, strategy, params, cfg))
    ratio = t_big / t_small
    benchmark.extra_info["growth_ratio"] = ratio
    benchmark.pedantic(lambda: replay(big, strategy, params, cfg), rounds=1, iterations=1)
    assert ratio <= 2.3, f"replay time grew {ratio:.2f}x when the session doubled"
