"""ctxsim tune CONFIG.toml --out DIR: a strategy's parameters searched with Optuna over the sweep
file's sessions (harness/sweep/tune.py): two objectives (cost including recovery, needs at risk
kept), successive halving over sessions, the study in DIR/study.sqlite (resumable)."""

from __future__ import annotations

from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser(
        "tune", help="search a strategy's parameters with Optuna over a population of sessions",
        description="Search the parameters of one strategy of a sweep file (its [tune] table, else the parameters its "
        "grid varies, from the smallest to the largest value) on the file's sessions at one window: two objectives "
        "(cost per session including recovery, needs at risk kept), successive halving over sessions (a setting "
        "clearly worse on the sessions seen so far stops), the study stored in DIR/study.sqlite and every run in "
        "DIR/results.sqlite (resumable after a kill; `ctxsim report DIR` reads the runs; optuna-dashboard "
        "sqlite:///DIR/study.sqlite shows the study, extra [dashboard]). Needs the [tune] extra.")
    p.add_argument("config", help="sweep file (TOML), or a shipped one by name (thresholds)")
    p.add_argument("--out", required=True, help="results directory (the study and the runs)")
    p.add_argument("--strategy", default=None, help="the strategy to tune (default: [tune] strategy, else the one "
                   "the grid sweeps)")
    p.add_argument("--window", type=int, default=None, help="the window to tune at (default: the file's first)")
    p.add_argument("--trials", type=int, default=None, help="trials in all (default: [tune] trials, else 40)")
    p.add_argument("--workers", type=int, default=None, help="local worker processes (default: all cores)")
    p.add_argument("--executor", choices=["local", "dask"], default="local")
    p.add_argument("--scheduler", default=None, help="Dask scheduler address (with --executor dask)")
    p.add_argument("--seed", type=int, default=0, help="the sampler's seed (default 0)")
    p.set_defaults(func=run)


def run(args) -> int:
    from ctxsim.harness.cli import BadInput, checks
    from ctxsim.harness.sweep import tune
    from ctxsim.harness.sweep.grid import SweepError, load_config

    if args.workers is not None and args.workers < 1:
        raise BadInput("--workers must be at least 1")
    if args.executor == "dask" and not args.scheduler:
        raise BadInput("--executor dask needs --scheduler ADDRESS (e.g. tcp://127.0.0.1:8786)")
    checks.seed(args.seed)
    if not Path(args.config).exists():
        from ctxsim.harness.files import bundled

        args.config = str(bundled.example_sweep(args.config) or args.config)
    checks.output("--out", args.out, sources=[args.config], folder=True)
    try:
        cfg = load_config(args.config)
        strategy = args.strategy or (cfg.tune.strategy if cfg.tune and cfg.tune.strategy else _swept(cfg))
        trials = args.trials or (cfg.tune.trials if cfg.tune else 40)
        res = tune.run_tune(cfg, args.out, strategy=strategy, window=args.window, trials=trials,
                            base=Path(args.config).resolve().parent, workers=args.workers, executor=args.executor,
                            scheduler=args.scheduler, seed=args.seed)
    except SweepError as e:
        raise BadInput(str(e)) from None
    for line in tune.answer(res, strategy):
        print(line)
    print(f"study: {Path(args.out) / tune.STUDY} (optuna-dashboard sqlite:///{Path(args.out).resolve() / tune.STUDY}); "
          f"runs: {Path(args.out) / 'results.sqlite'} (ctxsim report {args.out})")
    return 0


def _swept(cfg) -> str:
    from ctxsim.harness.sweep.grid import SweepError

    swept = list(dict.fromkeys(s.name for s in cfg.strategies if s.grid))
    if len(swept) != 1:
        raise SweepError("tune: give --strategy (the sweep file varies "
                         + (", ".join(swept) if swept else "no strategy's parameters") + ")")
    return swept[0]
