"""Where the doubling figure of ``make bench`` comes from (issue 30): per strategy, the 900- and
1,800-call long-200k sessions of the bench (its seed), and for each

* the CPU time of a warm replay (least of ``--repeats``) and its ratio, as the bench measures it;
* the Python function calls of one replay (cProfile's count: the same on every run, so a ratio of
  work that no other process on the machine moves) and the compactions and side calls (the
  workload: a 900-call session spends a larger share of its calls filling its first window);
* the median time from one main call to the next, by quintile of the history's length in the
  1,800-call session: flat medians mean no per-call work in proportion to the history.

    python -m tests.tools.growth_probe novacode,sliding_window [--repeats 3] [--seed 4243] [--calls 900]

The per-call times are taken by wrapping the engine's ``main_call`` (this tool's own
instrumentation; the engine has no timing hook, DESIGN.md keeps I/O and display out of its loop).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import time

import numpy as np


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("strategies", help="comma-separated registered names")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=None, help="the sessions' seed (default: the bench's first)")
    ap.add_argument("--calls", type=int, default=None, help="the small session's calls (default: the bench's)")
    a = ap.parse_args(argv)
    if a.calls is not None and a.calls < 2:
        ap.error(f"--calls must be at least 2 (got {a.calls})")
    if a.repeats < 1:
        ap.error(f"--repeats must be at least 1 (got {a.repeats})")
    from ctxsim.harness.model import trace as tr
    from ctxsim.harness.replay import engine
    from ctxsim.harness.replay.engine import RunConfig, replay
    from ctxsim.harness.synth import generate, load_preset

    from tests.bench.test_growth import BENCH_SEED, N_CALLS

    seed = BENCH_SEED if a.seed is None else a.seed
    small = N_CALLS if a.calls is None else a.calls
    sessions = {n: generate(load_preset("long-200k", [f"calls={n}"]), seed) for n in (small, 2 * small)}
    turns = {n: sum(isinstance(e, tr.UserEvent) for e in t.events) for n, t in sessions.items()}
    print(f"seed {seed}: user turns {turns[small]} -> {turns[2 * small]}")
    cfg = RunConfig(window=200_000)
    stamps: list[tuple[float, int]] = []
    main_call = engine._Run.main_call

    def timed(self, *args, **kw):
        h = getattr(self.strategy, "history", None)
        stamps.append((time.perf_counter(), len(h) if h is not None else 0))
        return main_call(self, *args, **kw)

    engine._Run.main_call = timed
    try:
        for s in a.strategies.split(","):
            row = {}
            for n, t in sessions.items():
                replay(t, s, None, cfg)   # warm: per-process caches of the trace's blocks
                best, per_call = float("inf"), None
                for _ in range(a.repeats):
                    stamps.clear()
                    gc.collect()
                    t0 = time.process_time()
                    r = replay(t, s, None, cfg)
                    cpu = time.process_time() - t0
                    gaps = np.diff([x for x, _ in stamps])
                    per_call = gaps if per_call is None else np.minimum(per_call, gaps)
                    best = min(best, cpu)
                hist = np.array([h for _, h in stamps[:-1]])
                pr = cProfile.Profile()
                pr.enable()
                replay(t, s, None, cfg)
                pr.disable()
                row[n] = (best, pstats.Stats(pr).total_calls, r.metrics.get("compactions", {}).get("succeeded", 0),
                          int((r.calls["kind"] != "main").sum()), per_call, hist)
            (t1, c1, k1, q1, _, _), (t2, c2, k2, q2, gaps, hist) = row[small], row[2 * small]
            quint = [f"{np.median(gaps[i]) * 1e6:.0f}" for i in np.array_split(np.argsort(hist), 5)]
            print(f"{s}: cpu {t1:.2f} -> {t2:.2f} s ({t2 / t1:.2f}x); python calls {c1:,} -> {c2:,} ({c2 / c1:.2f}x); "
                  f"compactions {k1} -> {k2}; side calls {q1} -> {q2}; median us a main call by history "
                  f"quintile (up to {hist.max()} messages): {' '.join(quint)}", flush=True)
    finally:
        engine._Run.main_call = main_call
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
