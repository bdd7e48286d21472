"""Profile a warm replay (issue 30): ``python -m tests.tools.profile_replay TRACE STRATEGY [--window N]
[--top 25]``. The first replay warms the trace's per-process caches (token counts of its blocks);
the second is timed (CPU) and profiled with cProfile, entries sorted by own time."""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("strategy")
    ap.add_argument("--window", type=int, default=None)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--sort", default="tottime")
    ap.add_argument("--no-profile", action="store_true")
    a = ap.parse_args(argv)
    from ctxsim.harness import trace as tr
    from ctxsim.harness.engine import RunConfig, replay

    t = tr.load(a.trace)
    cfg = RunConfig(window=a.window)
    replay(t, a.strategy, None, cfg)
    best = float("inf")
    for _ in range(2):
        t0 = time.process_time()
        res = replay(t, a.strategy, None, cfg)
        best = min(best, time.process_time() - t0)
    print(f"{a.strategy} on {a.trace} window={a.window}: {res.metrics['calls']} calls, warm replay {best:.3f} s CPU")
    if not a.no_profile:
        pr = cProfile.Profile()
        pr.enable()
        replay(t, a.strategy, None, cfg)
        pr.disable()
        s = io.StringIO()
        pstats.Stats(pr, stream=s).sort_stats(a.sort).print_stats(a.top)
        print(s.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
