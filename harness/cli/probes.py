"""ctxsim probes TRACE -o TRACE: add facts and probes derived from the session's own content
(harness/retention/probes.py), so retention can be scored on real traffic. Deriving again replaces what an
earlier derivation added (ids ``df…``/``dp…``); planted facts and probes are kept."""

from __future__ import annotations

import json
import sys


def register(sub) -> None:
    p = sub.add_parser(
        "probes", help="derive facts and probes from a trace's content",
        description="At each model call, the distinctive items the call uses (paths, identifiers, error messages, "
        "hashes, ticket ids, commands) that first entered through a tool result or a user message become a fact "
        "(where they entered) and a probe (where they are used); the user's first request is the goal. "
        "Deterministic; the rules are in traces/README.md.")
    p.add_argument("trace", help="trace file (.jsonl), e.g. from `ctxsim import`")
    p.add_argument("-o", "--output", required=True, metavar="TRACE",
                   help="trace file to write (may be the input: it is replaced atomically)")
    p.add_argument("--json", dest="json_out", action="store_true",
                   help="print what was derived and how far back the probes reach, as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    from ctxsim.harness.cli import checks
    from ctxsim.harness.model import trace as tr
    from ctxsim.harness.provider.tokenizer import get_tokenizer
    from ctxsim.harness.retention import probes

    checks.output("-o", args.output)   # may be the input itself: it is replaced atomically
    trace = tr.load(args.trace)
    out, derived = probes.apply(trace)
    tr.write(out, args.output)
    reach = probes.distance_summary(probes.distances(out, get_tokenizer().count))
    summary = {"trace": args.trace, "output": args.output, **derived.summary(), "distances": reach}
    if args.json_out:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
        return 0
    kinds = ", ".join(f"{k} {v}" for k, v in summary["by_kind"].items()) or "none"
    print(f"{args.trace} → {args.output}: {derived.facts} facts ({kinds}), {derived.probes} probes at "
          f"{derived.calls} calls")
    for key, what in (("first_tokens", "first entered"), ("last_tokens", "last seen")):
        d = reach.get(key)
        if d:
            calls = reach[key.replace("tokens", "calls")]
            print(f"  {what}: median {d['median']:,.0f} tokens ({calls['median']:,.0f} calls) back, "
                  f"p90 {d['p90']:,.0f}; {d['over_40k']:.0%} beyond 40k, {d['over_100k']:.0%} beyond 100k")
    return 0
