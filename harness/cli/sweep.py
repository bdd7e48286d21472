"""ctxsim sweep CONFIG.toml --out DIR: a parameter grid on local processes or a Dask cluster."""

from __future__ import annotations

import sys
from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser(
        "sweep", help="run a parameter grid (strategies x parameters x windows x models x traces x seeds)",
        description="Run every configuration of a TOML grid and keep one row per run (with its per-probe "
        "scores and per-call rows) in the results store DIR/results.sqlite (exported to DIR/results.parquet for "
        "pandas). Resumable: runs already in DIR under the same prices, tokenizer and ctxsim are skipped; one "
        "sweep at a time per DIR. See sweeps/thresholds.toml for the format.")
    p.add_argument("config", help="sweep grid (TOML), or the name of an example shipped with ctxsim "
                   "(demo, example, thresholds: the repository's sweeps/)")
    p.add_argument("--out", required=True, help="results directory")
    p.add_argument("--workers", type=int, default=None, help="local worker processes (default: all cores)")
    p.add_argument("--executor", choices=["local", "dask"], default="local")
    p.add_argument("--scheduler", default=None, help="Dask scheduler address (with --executor dask)")
    p.add_argument("--limit", type=int, default=None, help="run at most N of the pending runs (then stop)")
    p.add_argument("--target", type=float, default=None, help="retention target of the recommendation (default: the config's)")
    p.add_argument("--retry-failed", action="store_true", help="run again the runs that raised an error (by "
                   "default a resumed sweep keeps them as they are)")
    p.add_argument("--with", dest="extra", action="append", default=[], metavar="WINDOW=TRACES",
                   help="also run TRACES (a trace, a folder of them such as an imported one, a glob, preset:NAME or "
                   "population:PRESET:N; paths relative to here) at WINDOW, beside the grid's own (repeatable)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--models", dest="models_file", default=None,
                   help="extra TOML price table for models models.toml lacks (same shape); set as CTXSIM_MODELS for "
                   "this sweep and its local workers (a Dask worker reads CTXSIM_MODELS from its own environment)")
    p.set_defaults(func=run)
    # `ctxsim tune` beside it: its own module, registered here so that it follows sweep in --help
    from ctxsim.harness.cli import tune

    tune.register(sub)


def with_traces(cfg, extra: list[str]):
    """``cfg`` with each ``WINDOW=TRACES`` of ``--with`` added to the traces run at that window."""
    import os

    from ctxsim.harness.cli import BadInput
    from ctxsim.harness.sweep.grid import population_item

    for item in extra:
        w, sep, what = item.partition("=")
        if not sep or not w.strip().replace("_", "").isdigit() or not what.strip():
            raise BadInput(f"--with {item!r}: expected WINDOW=TRACES (e.g. 200000=my-traces)")
        window = int(w.strip().replace("_", ""))
        if window not in cfg.windows:
            raise BadInput(f"--with {item!r}: {window:,} is not one of the grid's windows "
                           f"({', '.join(f'{x:,}' for x in cfg.windows if x)})")
        what = what.strip()
        if not what.startswith(("preset:", "population:")):
            if not any(ch in what for ch in "*?[") and not os.path.exists(what):
                raise BadInput(f"--with {item!r}: {what}: no such file or folder")
            what = os.path.abspath(what)
        else:
            population_item(what)   # a malformed population is said now
        cfg.window_traces[str(window)] = [*cfg.traces_at(window), what]
    return cfg


def run(args) -> int:
    from ctxsim.harness.cli import BadInput, checks
    from ctxsim.harness.sweep import analysis
    from ctxsim.harness.sweep.grid import SweepError, load_config, run_sweep

    if args.workers is not None and args.workers < 1:
        raise BadInput("--workers must be at least 1")
    if args.limit is not None and args.limit < 0:
        raise BadInput(f"--limit {args.limit}: give a number of runs >= 0")
    checks.fraction(args.target, "--target")
    if args.executor == "dask" and not args.scheduler:
        raise BadInput("--executor dask needs --scheduler ADDRESS (e.g. tcp://127.0.0.1:8786)")
    if not Path(args.config).exists():   # a shipped example by name (harness/files/bundled.py)
        from ctxsim.harness.files import bundled

        args.config = str(bundled.example_sweep(args.config) or args.config)
    checks.output("--out", args.out, sources=[args.config], folder=True)
    if args.models_file:   # before any price is looked up: the grid's models are checked against it
        import os

        from ctxsim.harness.provider.models import load_table

        checks.price_table(args.models_file)
        os.environ["CTXSIM_MODELS"] = str(Path(args.models_file).resolve())
        load_table.cache_clear()
    try:
        cfg = with_traces(load_config(args.config), args.extra)
        df = run_sweep(cfg, args.out, base=Path(args.config).resolve().parent, workers=args.workers,
                       executor=args.executor, scheduler=args.scheduler, progress=not args.no_progress,
                       limit=args.limit, retry_failed=args.retry_failed)
    except SweepError as e:
        raise BadInput(str(e)) from None
    errors = int((df["error"].fillna("") != "").sum()) if len(df) else 0
    missing = len(df.attrs.get("missing", []))   # runs asked for that left no row: failed too
    print(f"{len(df)} runs in {Path(args.out) / 'results.sqlite'} ({errors + missing} failed; for pandas: "
          f"{Path(args.out) / 'results.parquet'})")
    if len(df) and errors < len(df):

        cfgs = analysis.by_config(df)
        target = args.target if args.target is not None else cfg.retention_target
        failed = int((~cfgs["completed"]).sum())
        if failed:
            print(f"{failed} of {len(cfgs)} configurations failed (a rejected request not recovered from): "
                  "never recommended, their cost is spend until the failure")
        from ctxsim.harness.report.needs_sections import terminal_line

        print(terminal_line(df, target))   # on needs at risk, as the report (issue 26)
        from ctxsim.harness.report.tuning_sections import terminal_lines
        from ctxsim.harness.sweep.grid import load_probes

        ok = analysis.ok_runs(df)
        answers, idle = terminal_lines(ok, load_probes(args.out, ok["key"]))   # the probes the report reads too
        if answers:
            print("The answer (as the report opens):")
        for line in answers:
            print(f"- {line}")
        for line in idle:   # a part of the grid that measured nothing is said, never left silent
            print(f"ctxsim sweep: warning: {line}", file=sys.stderr)
    if errors:   # a run that raised is no result: the sweep did not do what it was asked
        first = str(df.loc[df["error"].fillna("") != "", "error"].iloc[0]).splitlines()[0]
        print(f"ctxsim sweep: error: {errors + missing} of {len(df) + missing} runs failed (first: {first}); fix and "
              "run again with --retry-failed", file=sys.stderr)
        return 1
    if missing:
        print(f"ctxsim sweep: error: {missing} runs produced no result row (first: {df.attrs['missing'][0]}); run "
              "the sweep again", file=sys.stderr)
        return 1
    return 0
