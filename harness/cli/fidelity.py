"""ctxsim fidelity TRACE: replay an imported real session with the ``recorded`` strategy and
compare it, call by call, with the usage the real API reported (harness/fidelity/compare.py)."""

from __future__ import annotations

import math
import sys


def register(sub) -> None:
    p = sub.add_parser(
        "fidelity", help="simulated vs recorded usage",
        description="Replay an imported trace with the `recorded` strategy and compare with its recorded usage: "
        "context tokens per call (token scale fitted on the first 30% of calls, error on the rest), cache-read "
        "share, cost, NovaCode's 3.5 chars/token estimator, compactions, every recorded cache miss classified "
        "(ttl / prefix_change / unexplained) and the hidden-content deltas.")
    p.add_argument("trace", help="an imported trace (ctxsim import ...) with per-call usage")
    p.add_argument("--json", dest="json_out", default=None, metavar="PATH|-", help="write the report as JSON")
    p.add_argument("--figure", default=None, metavar="PNG", help="recorded vs simulated context per call")
    p.add_argument("--calls", default=None, metavar="PATH.csv", help="write the per-call comparison table")
    p.add_argument("--model", default=None, help="price and cache every call on this model (default: each call on "
                   "the model the log recorded for it)")
    p.add_argument("--token-scale", type=float, default=None, help="use this scale instead of fitting one")
    p.add_argument("--fit-fraction", type=float, default=0.30, help="share of the calls the scale is fitted on")
    p.add_argument("--details", action="store_true", help="include every miss and hidden delta in the JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    from ctxsim.harness.cli import BadInput, checks
    from ctxsim.harness.fidelity.compare import figure, run_fidelity, summary_table
    from ctxsim.harness.model import trace as tr

    if not (math.isfinite(args.fit_fraction) and 0 < args.fit_fraction < 1):
        raise BadInput(f"--fit-fraction must be between 0 and 1, got {args.fit_fraction}")
    checks.token_scale(args.token_scale)
    checks.output("--json", args.json_out, sources=[args.trace])
    checks.output("--figure", args.figure, sources=[args.trace], suffixes=(".png", ".svg", ".pdf"))
    checks.output("--calls", args.calls, sources=[args.trace], suffixes=(".csv",))
    checks.distinct(json=args.json_out, figure=args.figure, calls=args.calls)
    if args.model is not None:
        from ctxsim.harness.provider.models import UnknownModelError, load_table

        try:
            load_table().get(args.model)
        except UnknownModelError as e:
            raise BadInput(f"--model: {e}") from None
    trace = tr.load(args.trace)
    if args.model is not None:
        from ctxsim.harness.cli.options import warn_overrides
        from ctxsim.harness.replay.engine import RunConfig

        warn_overrides("fidelity", RunConfig(model=args.model), [trace])
    try:
        fid = run_fidelity(trace, model=args.model, fit_fraction=args.fit_fraction, token_scale=args.token_scale)
    except (ValueError, KeyError) as e:
        raise BadInput(f"{args.trace}: {e}") from None
    report = dict(fid.report)
    if args.details:
        report["misses"] = fid.misses
        report["hidden"] = fid.hidden
    if args.json_out:
        from ctxsim.harness.files import strictjson

        text = strictjson.dumps(report, indent=2, default=str) + "\n"   # never NaN / Infinity
        if args.json_out == "-":
            sys.stdout.write(text)
        else:
            checks.atomic_write_text(args.json_out, text)
    if args.figure:
        checks.atomic_write(args.figure, lambda p: figure(fid, str(p)))
    if args.calls:
        checks.atomic_write(args.calls, lambda p: fid.calls.to_csv(p, index=False))
    if args.json_out != "-":
        print(summary_table(report))
    return 0
