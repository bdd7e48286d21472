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
    p.set_defaults(func=run)


def run(args) -> int:
    from harness import trace as tr
    from harness.importers import import_file

    result = import_file(args.format, args.src)
    tr.write(result.trace, args.output)
    tr.load(args.output)  # what was written must load: an importer bug fails here, not at replay
    if args.json_out:
        sys.stdout.write(json.dumps({**result.summary, "output": args.output}, indent=2) + "\n")
    else:
        print(f"{args.src} → {args.output}")
        for line in result.summary_lines():
            if not line.startswith(("source:", "format:")):
                print(f"  {line}")
    return 0
