"""ctxsim fidelity TRACE|FOLDER: replay an imported real session with the ``recorded`` strategy and
compare it, call by call, with the usage the real API reported (harness/fidelity/compare.py); over a
folder of imported sessions, each session's error and dominant cause and the distribution by model
and Claude Code version (harness/fidelity/population.py)."""

from __future__ import annotations

import math
import sys
from collections import Counter
from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser(
        "fidelity", help="simulated vs recorded usage (one trace, or a folder of them)",
        description="Replay an imported trace with the `recorded` strategy and compare with its recorded usage: "
        "context tokens per call (token scale fitted on the first 30% of calls, error on the rest), cache-read "
        "share, cost, NovaCode's 3.5 chars/token estimator, compactions, every recorded cache miss classified "
        "(ttl / prefix_change / unexplained) and the hidden-content deltas. Given a folder (what `ctxsim import` "
        "wrote), every trace in it: one line per session with its cost error and dominant cause, then the "
        "distribution (within 2 / 5 / 10%, median and p90 absolute error, median signed error) overall, by model "
        "and by Claude Code version, and how close a replay exact in all but the cache's random fall-backs could "
        "come (the dice: harness/fidelity/dice.py).")
    p.add_argument("trace", help="an imported trace (ctxsim import ...) with per-call usage, or a folder of them")
    p.add_argument("--json", dest="json_out", default=None, metavar="PATH|-", help="write the report as JSON")
    p.add_argument("--figure", default=None, metavar="PNG", help="recorded vs simulated context per call (one trace)")
    p.add_argument("--calls", default=None, metavar="PATH.csv", help="write the per-call comparison table (one trace)")
    p.add_argument("--model", default=None, help="price and cache every call on this model (default: each call on "
                   "the model the log recorded for it)")
    p.add_argument("--models", dest="models_file", default=None,
                   help="extra TOML price table for models models.toml lacks (same shape)")
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
    folder = Path(args.trace).is_dir()
    if folder and (args.figure or args.calls):
        raise BadInput(f"--figure and --calls are per trace; {args.trace} is a folder (--json writes every session)")
    checks.output("--json", args.json_out, sources=[args.trace])
    checks.output("--figure", args.figure, sources=[args.trace], suffixes=(".png", ".svg", ".pdf"))
    checks.output("--calls", args.calls, sources=[args.trace], suffixes=(".csv",))
    checks.distinct(json=args.json_out, figure=args.figure, calls=args.calls)
    from ctxsim.harness.provider.models import UnknownModelError

    table = checks.price_table(args.models_file)
    if args.model is not None:
        try:
            table.get(args.model)
        except UnknownModelError as e:
            raise BadInput(f"--model: {e}") from None

    def measure(trace):
        return run_fidelity(trace, model=args.model, fit_fraction=args.fit_fraction, token_scale=args.token_scale,
                            models_file=args.models_file)

    if folder:
        return _folder(args, Path(args.trace), measure)
    trace = tr.load(args.trace)
    if args.model is not None:
        from ctxsim.harness.cli.options import warn_overrides
        from ctxsim.harness.replay.engine import RunConfig

        warn_overrides("fidelity", RunConfig(model=args.model), [trace])
    try:
        fid = measure(trace)
    except (ValueError, KeyError) as e:   # FidelityGap, ReplayOverflow (with its call), no usage, unpriced
        raise BadInput(f"{args.trace}: {str(e).strip(chr(34))}") from None
    report = dict(fid.report)
    if args.details:
        report["misses"] = fid.misses
        report["hidden"] = fid.hidden
    report["attribution_usd"] = {k: round(v, 4) for k, v in fid.attribution.items()}
    if args.json_out:
        _write_json(args.json_out, report)
    if args.figure:
        checks.atomic_write(args.figure, lambda p: figure(fid, str(p)))
    if args.calls:
        checks.atomic_write(args.calls, lambda p: fid.calls.to_csv(p, index=False))
    if args.json_out != "-":
        print(summary_table(report))
    return 0


def _folder(args, root: Path, measure) -> int:
    """Every trace under ``root``: one session after another (a session that cannot be measured is
    a row with its reason); exit 0 when every one was measured, 1 if one met an internal error, else 2."""
    from ctxsim.harness.cli import BadInput
    from ctxsim.harness.fidelity import population as pop
    from ctxsim.harness.model import trace as tr

    paths = pop.traces_in(root)
    if not paths:
        raise BadInput(f"{root}: no ctxsim trace here (expected what `ctxsim import` writes: *.jsonl traces)")
    results = []
    for i, p in enumerate(paths, 1):
        results.append(pop.measure(p, measure, tr.load))
        if sys.stderr.isatty():
            print(f"\rfidelity {i}/{len(paths)}", end="", file=sys.stderr, flush=True)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    report = pop.folder_report(results)
    if args.json_out:
        _write_json(args.json_out, report)
    if args.json_out != "-":
        print("\n".join(pop.session_lines(results, root) + pop.summary_lines(report)))
    status = {r.status for r in results}
    code = 0 if status == {"measured"} else 1 if "error" in status else 2
    if code:   # the exit status says why, where a script sees it
        unmeasured = Counter(r.status for r in results if r.status != "measured")
        print(f"ctxsim fidelity: {sum(unmeasured.values())} of {len(results)} sessions not measured ("
              + ", ".join(f"{k} {v}" for k, v in sorted(unmeasured.items())) + f"; each named above) (exit {code})",
              file=sys.stderr)
    return code


def _write_json(out: str, report: dict) -> None:
    """The report as JSON on stdout (``-``) or in a file written whole; never NaN or Infinity."""
    from ctxsim.harness.cli import checks
    from ctxsim.harness.files import strictjson

    text = strictjson.dumps(report, indent=2, default=str) + "\n"
    if out == "-":
        sys.stdout.write(text)
    else:
        checks.atomic_write_text(out, text)
