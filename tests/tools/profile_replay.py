"""Profile a warm replay (issue 30): ``python -m tests.tools.profile_replay TRACE STRATEGY [--window N]
[--top 25] [--io]``. The first replay warms the trace's per-process caches (token counts of its blocks);
the second is timed (CPU) and profiled with cProfile, entries sorted by own time. ``--io``: also the
own time of the file-system builtins (open, read, write, stat, replace, scandir ...) summed, the
part of a replay that is real-file I/O."""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

# cProfile's names of the builtins that touch the file system (posix.*, io.open, a DirEntry's stat,
# file objects' read/write/close)
_IO = ("posix.", "io.open", "DirEntry", "_io.")


def io_time(stats: pstats.Stats) -> tuple[float, int]:
    """Own time and calls of the file-system builtins in ``stats``."""
    t, n = 0.0, 0
    for (file, _line, name), (_cc, nc, tt, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        if file == "~" and any(k in name for k in _IO):
            t += tt
            n += nc
    return t, n


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("strategy")
    ap.add_argument("--window", type=int, default=None)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--sort", default="tottime")
    ap.add_argument("--no-profile", action="store_true")
    ap.add_argument("--io", action="store_true", help="sum the own time of the file-system builtins")
    a = ap.parse_args(argv)
    from ctxsim.harness.model import trace as tr
    from ctxsim.harness.replay.engine import RunConfig, replay

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
        stats = pstats.Stats(pr, stream=s)
        stats.sort_stats(a.sort).print_stats(a.top)
        print(s.getvalue())
        if a.io:
            io_s, calls = io_time(stats)
            print(f"file-system builtins: {io_s:.3f} s own time in {calls:,} calls")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
