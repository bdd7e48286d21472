"""ctxsim reproduce: the field's published results approached in ctxsim, one row per study
(:mod:`ctxsim.harness.validation`); ``--markdown`` writes docs/validation.md from the same run."""

from __future__ import annotations

import sys
from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser(
        "reproduce", help="reproduce the field's published results (docs/validation.md)",
        description="For each published study (The Complexity Trap, OpenHands' condenser, Anthropic's context "
        "editing, the PNNL condensers, ACE's context collapse, Manus' cache hit rate), run ctxsim on sessions "
        "shaped like the study's (and on the bundled real logs where they fit) and print the published figure, "
        "ctxsim's, and whether they agree. Deterministic; a few minutes at most.")
    p.add_argument("--fast", action="store_true", help="fewer and shorter sessions and one real log (seconds; the "
                   "figures move with it)")
    p.add_argument("--only", default=None, metavar="KEY[,KEY...]",
                   help="run these studies only: complexity_trap, openhands_condenser, context_editing, "
                   "pnnl_condensers, ace_collapse, manus_cache")
    p.add_argument("--real", default=None, metavar="DIR",
                   help="the folder of the real logs (default: ../shared/traces/real beside a checkout, when there)")
    p.add_argument("--no-real", action="store_true", help="synthetic sessions only")
    p.add_argument("--markdown", default=None, metavar="PATH", help="write the full write-up (docs/validation.md)")
    p.add_argument("--json", dest="json_out", default=None, metavar="PATH|-", help="write the figures as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    from ctxsim.harness.cli import BadInput, checks
    from ctxsim.harness.files import bundled
    from ctxsim.harness.validation import studies, table

    only = [k.strip() for k in args.only.split(",") if k.strip()] if args.only else None
    if only is not None:
        unknown = sorted(set(only) - set(studies.keys()))
        if unknown or not only:
            raise BadInput(f"--only {args.only!r}: unknown {', '.join(unknown) or 'empty list'}; known: "
                           f"{', '.join(studies.keys())}")
    if args.real is not None and args.no_real:
        raise BadInput("--real and --no-real: give one")
    real = None
    if args.real is not None:
        real = Path(args.real)
        if not real.is_dir():
            raise BadInput(f"--real {args.real}: not a folder")
    elif not args.no_real:
        real = bundled.shared_logs()
    checks.output("--markdown", args.markdown)
    checks.output("--json", args.json_out)
    quiet = args.json_out == "-"

    def progress(key: str) -> None:
        if not quiet and sys.stderr.isatty():
            print(f"  running {key} ...", file=sys.stderr)

    findings = studies.run_all(fast=args.fast, real=real, only=only, progress=progress)
    if not quiet:
        where = f"real logs: {real}" if real is not None else "no real logs"
        print(f"{len(findings)} published result{'s' if len(findings) != 1 else ''} reproduced "
              f"({'fast' if args.fast else 'full'} run; {where})")
        for line in table.terminal(findings):
            print(line)
    if args.markdown:
        command = "ctxsim reproduce" + (" --fast" if args.fast else "") + (f" --only {args.only}" if only else "") + \
            (" --no-real" if real is None else "") + f" --markdown {args.markdown}"
        checks.atomic_write_text(args.markdown, table.markdown(findings, command), "--markdown")
    if args.json_out:
        from ctxsim.harness.cli.run import write_json

        write_json(table.as_json(findings), args.json_out)
    return 0
