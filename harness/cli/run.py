"""ctxsim run TRACE --strategy NAME: one replay, a table on the terminal, JSON and per-call rows
on request."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from harness.cli.options import add_provider_args, run_config, warn_overrides


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
    text = json.dumps(obj, indent=2, default=str)
    if dest == "-":
        sys.stdout.write(text + "\n")
    else:
        Path(dest).parent.mkdir(parents=True, exist_ok=True)
        Path(dest).write_text(text + "\n", encoding="utf-8")


def write_calls(df, dest: str) -> None:
    from harness.cli import BadInput

    path = Path(dest)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".csv":
        df.to_csv(path, index=False)
    elif path.suffix == ".parquet":
        df.to_parquet(path, index=False)
    else:
        raise BadInput(f"--calls: {dest}: use a .csv or .parquet file name")


def run(args) -> int:
    from harness import trace as tr
    from harness.engine import replay
    from strategies import registry

    trace = tr.load(args.trace)
    cls = registry.load_class(args.strategy)  # a registered name or MODULE:CLASS
    params = registry.parse_sets(args.set)
    registry.make_config(cls, params)  # fail on bad parameters before any work
    cfg = run_config(args, session_dir=Path(args.session_dir) if args.session_dir else None)
    warn_overrides("run", cfg, [trace])
    res = replay(trace, cls, params, cfg)
    if args.calls:
        write_calls(res.calls, args.calls)
    if args.json_out:
        write_json(res.metrics, args.json_out)
    if not args.quiet and args.json_out != "-":
        from harness.cli.table import print_table

        print_table([res.metrics], title=f"{res.strategy} on {Path(args.trace).name} ({res.model}, window {res.window:,})")
    return 0
