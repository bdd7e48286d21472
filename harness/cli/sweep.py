"""ctxsim sweep CONFIG.toml --out DIR: a parameter grid on local processes or a Dask cluster."""

from __future__ import annotations

from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser(
        "sweep", help="run a parameter grid (strategies x parameters x windows x models x traces x seeds)",
        description="Run every configuration of a TOML grid and write one Parquet row per run to "
        "DIR/results.parquet (per-call rows under DIR/calls/). Resumable: runs already in DIR are skipped. "
        "See sweeps/thresholds.toml for the format.")
    p.add_argument("config", help="sweep grid (TOML)")
    p.add_argument("--out", required=True, help="results directory")
    p.add_argument("--workers", type=int, default=None, help="local worker processes (default: all cores)")
    p.add_argument("--executor", choices=["local", "dask"], default="local")
    p.add_argument("--scheduler", default=None, help="Dask scheduler address (with --executor dask)")
    p.add_argument("--limit", type=int, default=None, help="run at most N of the pending runs (then stop)")
    p.add_argument("--target", type=float, default=None, help="retention target of the recommendation (default: the config's)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args) -> int:
    from harness import analysis
    from harness.cli import BadInput
    from harness.sweep import SweepError, load_config, run_sweep

    try:
        cfg = load_config(args.config)
        if args.workers is not None and args.workers < 1:
            raise BadInput("--workers must be at least 1")
        df = run_sweep(cfg, args.out, base=Path(args.config).resolve().parent, workers=args.workers,
                       executor=args.executor, scheduler=args.scheduler, progress=not args.no_progress,
                       limit=args.limit)
    except SweepError as e:
        raise BadInput(str(e)) from None
    errors = int((df["error"].fillna("") != "").sum()) if len(df) else 0
    print(f"{len(df)} runs in {args.out}/results.parquet ({errors} failed)")
    if len(df) and errors < len(df):
        cfgs = analysis.by_config(df)
        rec = analysis.recommend(cfgs, args.target if args.target is not None else cfg.retention_target)
        if rec:
            params = analysis.config_params(rec)
            print(f"recommended: {rec['label']} {params} at ${rec['cost_usd']:.3f} per session, "
                  f"retention {rec['retention.score']:.3f}")
        else:
            print("no configuration meets the retention target without overflow")
    return 0
