"""ctxsim validate TRACE: check a trace and say what is wrong (file:line)."""

from __future__ import annotations

from collections import Counter


def register(sub) -> None:
    p = sub.add_parser("validate", help="check a trace file, explain errors",
                       description="Load and validate a trace (format v1). Errors name the file, the line and the problem.")
    p.add_argument("trace", nargs="+", help="trace file(s) (.jsonl)")
    p.set_defaults(func=run)


def run(args) -> int:
    from harness import trace as tr

    for path in args.trace:
        t = tr.load(path)
        kinds = Counter(type(e).__name__ for e in t.events)
        parts = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
        print(f"{path}: ok: {t.calls} model calls, {len(t.events)} events ({parts}); hash {t.content_hash}")
    return 0
