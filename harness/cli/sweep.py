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
        from harness import formatting as fmt

        cfgs = analysis.by_config(df)
        target = args.target if args.target is not None else cfg.retention_target
        rec = analysis.recommend(cfgs, target)
        failed = int((~cfgs["completed"]).sum())
        if failed:
            print(f"{failed} of {len(cfgs)} configurations failed (a rejected request not recovered from): "
                  "never recommended, their cost is spend until the failure")
        if rec:
            print(f"recommended: {rec['config']} at window {fmt.count(rec['window'])}, {fmt.money(rec['cost_usd'])} "
                  f"per session, retention {fmt.share(rec['retention.score'])}")
        else:
            print(f"no recommendation: {analysis.no_recommendation_reason(cfgs, target)}")
    return 0
