"""ctxsim import FORMAT SRC -o TRACE: a third-party agent log to a trace (the module is not named
``import``: that is a keyword). The import summary — calls, tool uses, compactions, and every record
kind ignored or repaired, with counts — is printed and kept in the trace header's notes."""

from __future__ import annotations

import json
import sys

from harness.importers import FORMATS


def register(sub) -> None:
    p = sub.add_parser(
        "import", help="third-party log → trace",
        description="Convert a recorded agent session into a ctxsim trace. Formats: claude-code (session "
        ".jsonl; its <session>/subagents/ directory is read too), codex (rollout .jsonl), swe-agent (.traj), "
        "openhands (event stream .json). A truncated or foreign file fails with its path, line and reason.")
    p.add_argument("format", choices=list(FORMATS), help="log format")
    p.add_argument("src", help="the log file")
    p.add_argument("-o", "--output", required=True, metavar="TRACE", help="trace file to write (.jsonl)")
    p.add_argument("--json", dest="json_out", action="store_true", help="print the import summary as JSON")
    p.add_argument("--no-probes", action="store_true",
                   help="do not derive facts and probes from the content (`ctxsim probes` does it later)")
    p.set_defaults(func=run)


def run(args) -> int:
    from harness import probes
    from harness import trace as tr
    from harness.importers import import_file

    result = import_file(args.format, args.src)
    trace, derived = (result.trace, None) if args.no_probes else probes.apply(result.trace)
    tr.write(trace, args.output)
    tr.load(args.output)  # what was written must load: an importer bug fails here, not at replay
    if args.json_out:
        extra = {"probes": derived.summary()} if derived else {}
        sys.stdout.write(json.dumps({**result.summary, **extra, "output": args.output}, indent=2) + "\n")
    else:
        print(f"{args.src} → {args.output}")
        for line in result.summary_lines():
            if not line.startswith(("source:", "format:")):
                print(f"  {line}")
        if derived:
            print(f"  derived: {derived.facts} facts, {derived.probes} probes at {derived.calls} calls")
    return 0
