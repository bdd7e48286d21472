"""ctxsim run TRACE --strategy NAME: one replay, a table on the terminal, JSON and per-call rows
on request."""

from __future__ import annotations

import sys
from pathlib import Path

from ctxsim.harness.cli.options import add_provider_args, run_config, warn_overrides


def register(sub) -> None:
    p = sub.add_parser(
        "run", help="replay one trace through one strategy",
        description="Replay a trace through a context strategy and report cost, tokens by kind, cache hit "
        "rate, latency, compactions, overflows, pairing violations and retention.")
    p.add_argument("trace", help="trace file (.jsonl); see `ctxsim synth` and `ctxsim import`")
    p.add_argument("--strategy", "-s", required=True,
                   help="strategy name (`ctxsim strategies` lists them) or MODULE:CLASS of your own")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a strategy parameter (repeatable); names as in `ctxsim strategies`")
    add_provider_args(p)
    p.add_argument("--json", dest="json_out", default=None, metavar="PATH|-", help="write the metrics as JSON")
    p.add_argument("--calls", default=None, metavar="PATH.csv|PATH.parquet", help="write one row per model call")
    p.add_argument("--session-dir", default=None, help="keep the run's files (spills, transcripts) here")
    p.add_argument("--quiet", "-q", action="store_true", help="no table on the terminal")
    p.set_defaults(func=run)


def write_json(obj, dest: str) -> None:
    from ctxsim.harness.cli.checks import atomic_write_text
    from ctxsim.harness.files import strictjson

    text = strictjson.dumps(obj, indent=2, default=str)   # never NaN / Infinity: NotFinite, exit 1
    if dest == "-":
        sys.stdout.write(text + "\n")
    else:
        atomic_write_text(dest, text + "\n", "--json")


def write_calls(df, dest: str) -> None:
    from ctxsim.harness.cli import BadInput
    from ctxsim.harness.cli.checks import atomic_write

    path = Path(dest)
    if path.suffix == ".csv":
        atomic_write(path, lambda p: df.to_csv(p, index=False), "--calls")
    elif path.suffix == ".parquet":
        atomic_write(path, lambda p: df.to_parquet(p, index=False), "--calls")
    else:
        raise BadInput(f"--calls: {dest}: use a .csv or .parquet file name")


def check_outputs(args, sources) -> None:
    """--json, --calls and --session-dir can be written, are not inputs, not the same file: before the replay."""
    from ctxsim.harness.cli import checks

    checks.output("--json", args.json_out, sources=sources)
    checks.output("--calls", args.calls, sources=sources, suffixes=(".csv", ".parquet"))
    checks.output("--session-dir", args.session_dir, sources=sources, folder=True)
    checks.distinct(json=args.json_out, calls=args.calls, session_dir=args.session_dir)
    if args.session_dir:
        from ctxsim.harness.replay.rundirs import check_session_dir

        sd = Path(args.session_dir)
        for what, p in (("the trace", args.trace), ("--json", args.json_out), ("--calls", args.calls)):
            if p is not None and str(p) != "-" and checks.inside(Path(p), sd):
                from ctxsim.harness.cli import BadInput

                raise BadInput(f"--session-dir {sd}: holds {what} ({p}), and a run clears its session folder first: "
                               "give another folder")

        try:   # a marker ctxsim did not write for this folder is refused here, before anything is removed
            check_session_dir(Path(args.session_dir))
        except ValueError as e:
            from ctxsim.harness.cli import BadInput

            raise BadInput(str(e)) from None


def run(args) -> int:
    from ctxsim.harness.model import trace as tr
    from ctxsim.harness.replay.engine import replay
    from ctxsim.strategies import registry

    check_outputs(args, [args.trace])
    trace = tr.load(args.trace)
    cls = registry.load_class(args.strategy)  # a registered name or MODULE:CLASS
    from ctxsim.harness.cli import BadInput, checks

    checks.strategy_fits(cls, trace, args.trace)
    from ctxsim.harness.replay.engine import recorded_models

    if (trace.header.source and not trace.header.model and not recorded_models(trace) and not args.model):
        raise BadInput(f"{args.trace}: the log records no model (header.model is empty and no call names one): "
                       "give --model M; a default model would price someone else's session")
    params = registry.parse_sets(args.set)
    registry.make_config(cls, params)  # fail on bad parameters before any work
    cfg = run_config(args, session_dir=Path(args.session_dir) if args.session_dir else None)
    warn_overrides("run", cfg, [trace])
    res = replay(trace, cls, params, cfg)
    had_calls = bool(args.calls) and Path(args.calls).exists()
    if args.calls:
        write_calls(res.calls, args.calls)
    try:
        if args.json_out:
            write_json(res.metrics, args.json_out)
    except BaseException:   # all or nothing: no --calls file of a run whose --json could not be written
        if args.calls and not had_calls:
            Path(args.calls).unlink(missing_ok=True)
        raise
    if not args.quiet and args.json_out != "-":
        from ctxsim.harness.cli.table import print_table

        print_table([res.metrics], title=f"{res.strategy} on {Path(args.trace).name} ({res.model}, window {res.window:,})")
        from ctxsim.harness.retention import needs

        for line in needs.run_lines(res.metrics):
            print(line)
    from ctxsim.harness.fidelity.billcheck import run_notes

    as_recorded = cfg.cache and not cfg.overrides()   # the bill is comparable only on the recorded setting
    for line in run_notes(trace, res.strategy if as_recorded else "", res.calls, res.metrics["cost_usd"], res.metrics, args.models_file):
        print(f"ctxsim run: {line}", file=sys.stderr)
    return 0
