"""Sweep speed (pytest-benchmark; `make bench`): runs per second on 1 and 2 local workers, and what
a run costs once its trace is parsed and counted (the per-worker cache) against a cold one."""

import shutil
import time

from ctxsim.harness.model import trace as tr
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.harness.sweep.executors import _TRACES
from ctxsim.harness.sweep.grid import load_config, run_sweep

from tests.bench.test_replay_speed import session

GRID = """
name = "bench"
traces = ["trace.jsonl"]
windows = [60_000, 200_000]
seeds = [0]   # 16 runs: one per setting and window (a sweep's default is 3 seeds)
[[strategies]]
name = "novacode"
[strategies.grid]
soft_margin = [3_000, 8_000, 13_000, 20_000]
tail_min_tokens = [5_000, 10_000]
"""


def test_sweep_two_workers_vs_one(benchmark, tmp_path):
    """16 runs of 600 calls each. Target: 2 workers >= 1.6x the runs per second of 1 (2 cores)."""
    tr.write(session(600), tmp_path / "trace.jsonl")
    (tmp_path / "grid.toml").write_text(GRID)
    cfg = load_config(tmp_path / "grid.toml")

    def once(workers: int) -> float:
        out = tmp_path / f"out{workers}"
        shutil.rmtree(out, ignore_errors=True)
        t0 = time.perf_counter()
        df = run_sweep(cfg, out, base=tmp_path, workers=workers, progress=False, log=lambda s: None)
        assert len(df) == 16 and (df["error"] == "").all()
        return 16 / (time.perf_counter() - t0)

    one = max(once(1) for _ in range(2))
    two = max(once(2) for _ in range(2))
    benchmark.extra_info.update(runs_per_s_1=one, runs_per_s_2=two, speedup=two / one)
    benchmark.pedantic(lambda: once(2), rounds=1, iterations=1)
    assert two / one >= 1.6, f"2 workers gave {two / one:.2f}x the runs per second of 1"


def test_run_on_a_parsed_and_counted_trace(benchmark, tmp_path):
    """A run whose trace a worker already holds (parsed, blocks counted) against a cold one."""
    path = tmp_path / "trace.jsonl"
    tr.write(session(600), path)
    cfg = RunConfig(window=200_000)

    def cold():
        _TRACES.clear()
        return replay(tr.load(path), "novacode", None, cfg)

    t0 = time.process_time()
    cold()
    cold_s = time.process_time() - t0
    warm_trace = tr.load(path)
    replay(warm_trace, "novacode", None, cfg)
    res = benchmark.pedantic(lambda: replay(warm_trace, "novacode", None, cfg), rounds=3, iterations=1)
    assert res.metrics["calls"] == 601
    if benchmark.stats:
        benchmark.extra_info.update(cold_s=cold_s, warm_s=benchmark.stats.stats.min,
                                    warm_share=benchmark.stats.stats.min / cold_s)
