"""Issue 21 and 30 targets, as ratios measured side by side in one process (pytest-benchmark; `make bench`).

* Doubling a session: the warm replay of a 2N-call long-200k session over that of an N-call one,
  every registered strategy at a 200k window (linear work gives ~2, a per-call walk over the whole
  history ~4). Target <= 2.2. Plus append_only on a window it never fills, where the history grows
  without bound (the engine's per-call work on a growing history).
* A warm replay of a ~2,200-call session at a 1M window against an orjson parse of the same file.
  Target <= 25x (issue 30; it was 40x in issue 21).

The sessions come from the presets with seeds the repository ships no trace or test for
(BENCH_SEEDS), so nothing here is fitted to a bundled file. Times are CPU times of this process, the
least of interleaved repeats (small, big, small, big ...): other processes on a shared machine then
disturb the ratio far less than a wall clock.

The doubling figure sums three seeds. A generated session's user turns are drawn, and one seed's
1,800 calls can hold far more than twice the turns of its 900: 4242 has 32 -> 103 (3.22x), and over
14 seeds the ratio runs from 1.58 to 3.22 (median 2.05). Work done once a user turn (NovaCode's
recall scan and extraction, N-MEM-4/5) then grows with the draw, not with the
history: on 4242 novacode's side calls go 71 -> 226. Summed over 4242, 4243 and 4244 (the first
unshipped seed and the next two, taken by that rule) the turns go 167 -> 333 (1.99x): the sessions
are twice as long in what they ask, as the figure means. Each seed's own ratio, its turns and its
compactions are reported beside it (``extra_info``)."""

from __future__ import annotations

import gc
import time

import pytest
from ctxsim.harness.model import trace as tr
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.harness.synth import generate, load_preset
from ctxsim.strategies.registry import names

BENCH_SEEDS = (4242, 4243, 4244)  # no shipped trace, sweep or test uses them (see the module docstring)
BENCH_SEED = BENCH_SEEDS[0]        # the 1M replay's session
N_CALLS = 900      # long-200k's own length; the big session has twice as many calls
REPEATS = 5  # least of 5: on a shared machine 3 left single strategies 1.5x off from one run to the next
GROWTH_REPEATS = 3  # for the doubling, least of 3 a seed: three seeds summed are 6 replays a size
GROWTH_TARGET = 2.2
REPLAY_TARGET = 25.0  # issue 30

# strategies that replay a recorded agent's decisions need an imported log, not a preset
NEEDS_IMPORTED = {"recorded"}


def _cpu(fn) -> float:
    gc.collect()
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def interleaved(fns, repeats: int = REPEATS) -> list[float]:
    """Least CPU time of each of ``fns``, run in turn ``repeats`` times (one warm-up round first)."""
    for f in fns:
        f()
    best = [float("inf")] * len(fns)
    for _ in range(repeats):
        for i, f in enumerate(fns):
            best[i] = min(best[i], _cpu(f))
    return best


@pytest.fixture(scope="module")
def sessions():
    return {seed: (generate(load_preset("long-200k", [f"calls={N_CALLS}"]), seed),
                   generate(load_preset("long-200k", [f"calls={2 * N_CALLS}"]), seed)) for seed in BENCH_SEEDS}


CASES = [(s, None, 200_000) for s in names() if s not in NEEDS_IMPORTED] + [
    ("append_only", {"cache_breakpoints": True}, 10_000_000)]


def _turns(t: tr.Trace) -> int:
    return sum(isinstance(e, tr.UserEvent) for e in t.events)


@pytest.mark.parametrize("strategy,params,window", CASES,
                         ids=[f"{s}@{w // 1000}k" for s, _, w in CASES])
def test_doubling_a_session(benchmark, sessions, strategy, params, window):
    if benchmark.disabled:
        pytest.skip("benchmarks are disabled in the suite (make bench runs them)")
    cfg = RunConfig(window=window)
    out = {}

    def run(t, key):
        def f():
            out[key] = replay(t, strategy, params, cfg)
        return f

    keys = [(seed, size) for seed in BENCH_SEEDS for size in ("small", "big")]
    times = dict(zip(keys, interleaved([run(sessions[seed][size == "big"], (seed, size)) for seed, size in keys],
                                       GROWTH_REPEATS), strict=True))
    t_small = sum(times[(seed, "small")] for seed in BENCH_SEEDS)
    t_big = sum(times[(seed, "big")] for seed in BENCH_SEEDS)
    ratio = t_big / t_small
    # a session that gave up early (failed_at_call) replays fewer calls: its ratio says little
    done = {k: f"{r.metrics['calls']} calls" + ("" if r.metrics["completed"] else f", failed at {r.metrics['failed_at_call']}")
            for k, r in out.items()}
    # the workload beside the time: the user turns drawn (see the module docstring), and the
    # compactions and side calls, which more than double where the first window fill has none
    def total(size, f):
        return sum(f(out[(seed, size)], sessions[seed][size == "big"]) for seed in BENCH_SEEDS)

    work = {size: (total(size, lambda r, t: _turns(t)),
                   total(size, lambda r, t: r.metrics.get("compactions", {}).get("succeeded", 0)),
                   total(size, lambda r, t: int((r.calls["kind"] != "main").sum()))) for size in ("small", "big")}
    benchmark.extra_info.update(
        growth_ratio=round(ratio, 3), small_s=round(t_small, 3), big_s=round(t_big, 3),
        per_seed={seed: round(times[(seed, "big")] / times[(seed, "small")], 3) for seed in BENCH_SEEDS},
        small=[done[(seed, "small")] for seed in BENCH_SEEDS], big=[done[(seed, "big")] for seed in BENCH_SEEDS],
        user_turns=f"{work['small'][0]} -> {work['big'][0]}", compactions=f"{work['small'][1]} -> {work['big'][1]}",
        side_calls=f"{work['small'][2]} -> {work['big'][2]}")
    benchmark.pedantic(run(sessions[BENCH_SEED][1], (BENCH_SEED, "big")), rounds=1, iterations=1)
    assert ratio <= GROWTH_TARGET, f"{strategy}: replay time grew {ratio:.2f}x when the sessions doubled"


@pytest.fixture(scope="module")
def long_1m(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench") / "long-1m.jsonl"
    tr.write(generate(load_preset("long-1m"), BENCH_SEED), path)
    return path


@pytest.mark.parametrize("strategy", ["novacode", "append_only"])
def test_warm_replay_against_a_json_parse(benchmark, long_1m, strategy):
    if benchmark.disabled:
        pytest.skip("benchmarks are disabled in the suite (make bench runs them)")
    orjson = pytest.importorskip("orjson")
    raw = long_1m.read_bytes()
    trace = tr.load(long_1m)
    cfg = RunConfig(window=1_000_000)

    def parse():
        return [orjson.loads(line) for line in raw.splitlines()]

    out = {}

    def run():
        out["r"] = replay(trace, strategy, None, cfg)

    t_parse, t_replay = interleaved([parse, run])
    ratio = t_replay / t_parse
    m = out["r"].metrics
    benchmark.extra_info.update(replay_over_parse=round(ratio, 1), parse_s=round(t_parse, 4),
                                replay_s=round(t_replay, 3), trace_calls=trace.calls, replayed=m["calls"],
                                completed=m["completed"])
    benchmark.pedantic(lambda: replay(trace, strategy, None, cfg), rounds=1, iterations=1)
    assert ratio <= REPLAY_TARGET, f"{strategy}: a warm replay took {ratio:.0f}x an orjson parse of its file"
