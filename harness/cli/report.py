"""ctxsim report DIR: Markdown + HTML + figures from a sweep's results."""

from __future__ import annotations

import sys
from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser("report", help="write report.md, index.html and figures from sweep results",
                       description="Read the sweep results store DIR/results.sqlite (read-only) and write a report for a design "
                       "review: cost, tokens by kind, context per call, cache hit rate, latency, retention, "
                       "Pareto front with a recommendation, 200k vs 1M, and the compaction ledger.")
    p.add_argument("dir", help="sweep results directory")
    p.add_argument("--out", default=None, help="report directory (default: DIR)")
    p.add_argument("--target", type=float, default=0.7, help="retention target of the recommendation")
    p.add_argument("--no-ledger", action="store_true", help="skip the compaction ledger (it replays NovaCode "
                   "at several trigger points on the longest trace)")
    p.add_argument("--title", default=None)
    p.set_defaults(func=run)


LEDGER_MARGINS = [3_000, 13_000, 30_000, 60_000, 100_000]  # soft margins: the seed's 13k, and either side


def run(args) -> int:
    from ctxsim.harness.cli import BadInput, checks
    from ctxsim.harness.model import trace as tr
    from ctxsim.harness.report.build import write_report
    from ctxsim.harness.sweep import analysis, coverage, store

    checks.fraction(args.target, "--target")
    checks.output("--out", args.out, folder=True)
    d = Path(args.dir)
    if not d.is_dir():
        raise BadInput(f"{d}: no such sweep folder")
    if not (d / store.FILE).is_file() and (d / "runs").is_dir():
        raise BadInput(f"{d}: results of an older ctxsim (runs/*.parquet, no {store.FILE}): run the sweep again with "
                       "this one")
    try:   # everything the report shows is read here, read-only, from the store: nothing under DIR is written
        with store.Store.read(d) as db:
            health = db.health()
            df = db.results(health)
            grid = db.grid()
            ok = analysis.ok_runs(df) if len(df) else df
            probes = db.probes(ok["key"], health) if len(ok) else {}
            calls = db.calls(ok["key"]) if len(ok) else {}
    except store.StoreError as e:
        raise BadInput(str(e)) from None
    if df.empty:
        whys = [f"{k}: {health.why[k]}" for k in health.damaged if k in health.why][:3]
        raise BadInput(f"{d}: no sweep results in {d / store.FILE}"
                       + (f" (every run could not be read{': ' + '; '.join(whys) if whys else ''})"
                          if health.damaged else ""))
    notes = coverage.notes(grid, df, health)
    for note in notes:   # partial or damaged results are said, never passed off as the grid
        print(f"ctxsim report: warning: {coverage.plain(note)}", file=sys.stderr)
    if ok.empty:
        raise BadInput(f"{args.dir}: every run failed; nothing to report")
    from ctxsim.harness.report.tuning_sections import terminal_lines

    answers, idle = terminal_lines(ok, probes)   # the report's opening, on the terminal too
    for line in answers:
        print(f"- {line}")
    for line in idle:  # what the grid did not measure: said here too, and in the report
        print(f"ctxsim report: warning: {line}", file=sys.stderr)
    ledger = None
    on_grid = "param.soft_margin" in ok and ok["param.soft_margin"].nunique() > 1 and bool(calls)
    if not args.no_ledger and "trace" in ok and not on_grid:  # a grid that sweeps it: the ledger is read from its runs
        longest = ok.sort_values("calls").iloc[-1]
        window = int(ok["window"].min())
        if Path(longest["trace"]).exists():
            print(f"compaction ledger: NovaCode at {len(LEDGER_MARGINS)} trigger points on {longest['trace']}")
            ledger = analysis.compaction_ledger(tr.load(longest["trace"]), window, LEDGER_MARGINS)
    from ctxsim.harness.files import atomic

    out = Path(args.out or args.dir)
    with atomic.staged_folder(out) as stage:   # a new folder appears whole or not at all
        write_report(ok if len(ok) == len(df) else df, stage, calls=calls, ledger=ledger,
                     target=args.target, title=args.title, probes=probes, notes=notes)
    print(f"wrote {out}/report.md and {out}/index.html")
    return 0
