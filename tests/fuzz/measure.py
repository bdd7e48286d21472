"""Measure how ctxsim meets bad input: damaged real logs (all four formats), hand-made and damaged
traces, bad command lines. Prints the count of tracebacks, unclear errors and silent acceptances
by family, then examples of each.

    .venv/bin/python -m tests.fuzz.measure [--logs 400] [--traces 80] [--seed 7] [--examples]

The same seed gives the same cases on every machine; the real logs are read from
``<repo>/../shared/traces/real`` (that part is skipped when they are absent).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from tests.fuzz import cases, drive
from tests.fuzz.judge import Tally


def measure(logs: int, traces: int, seed: int, work: Path, parts: str = "logs,traces,cli") -> Tally:
    tally = Tally()
    todo = parts.split(",")
    values = cases.fixtures(work / "fixtures", drive.REAL)
    if "logs" in todo:
        srcs = drive.real_sources(fast=False)
        if srcs:
            per = max(1, -(-logs // len(srcs)))
            drive.fuzz_logs(srcs, per, seed, work / "logs", tally)
    if "traces" in todo:
        for name, lines in cases.TRACES.items():
            for _stage, v in cases.judge_trace(name, lines, work / "traces"):
                tally.add("trace: hand-made", v, name)
        rest = max(0, traces - len(cases.TRACES))
        bases = [Path(values["T"])] + ([Path(values["I"])] if values["I"] else [])
        if rest:
            drive.fuzz_traces(bases, -(-rest // len(bases)), seed, work / "traces", tally)
    if "cli" in todo:
        for case in cases.COMMAND_LINES:
            if case.needs_real and not values["I"]:
                continue
            v, _ = cases.judge_case(case, values)
            tally.add(f"cli: {case.argv.split()[0]}", v, case.argv)
    return tally


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--logs", type=int, default=400, help="damaged real logs (spread over every log)")
    ap.add_argument("--traces", type=int, default=80, help="bad traces (the hand-made ones, then damaged traces)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--parts", default="logs,traces,cli")
    ap.add_argument("--examples", action="store_true", help="print examples of every failure")
    args = ap.parse_args()
    t0 = time.perf_counter()
    os.environ.setdefault("CTXSIM_LIVE_TIMEOUT", "5")
    with tempfile.TemporaryDirectory(prefix="ctxsim-fuzz-") as d:
        tally = measure(args.logs, args.traces, args.seed, Path(d), args.parts)
    print(tally.table())
    print(f"({time.perf_counter() - t0:.0f} s)")
    if args.examples:
        print()
        print(tally.why_table())


if __name__ == "__main__":
    main()
