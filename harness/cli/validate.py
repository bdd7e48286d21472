"""ctxsim validate TRACE: check a trace and say what is wrong (file:line)."""

from __future__ import annotations

from collections import Counter


def register(sub) -> None:
    p = sub.add_parser("validate", help="check a trace file, explain errors",
                       description="Load and validate a trace (format v1): everything `run` needs, the "
                       "models it names priced included. Errors name the file, the line and the problem.")
    p.add_argument("trace", nargs="+", help="trace file(s) (.jsonl)")
    p.add_argument("--models", dest="models_file", default=None,
                   help="extra TOML price table for models models.toml lacks (same shape)")
    p.set_defaults(func=run)


def check_models(t, models_file: str | None = None) -> None:
    """Every model the trace names must have a price (else `run` refuses it at its first call)."""
    from ctxsim.harness.model import trace as tr
    from ctxsim.harness.provider.models import UnknownModelError, load_table

    table = load_table(models_file)
    named = [(1, t.header.model)] + [(no, e.model) for no, e in zip(t.lines, t.events)
                                     if tr.is_call(e)]
    seen: set[str] = set()
    for no, name in named:
        if name is None or name in seen:
            continue
        seen.add(name)
        try:
            table.get(name)
        except UnknownModelError as e:
            raise tr.TraceError(t.path, no, f"{e}") from None


def run(args) -> int:
    from ctxsim.harness.model import trace as tr

    for path in args.trace:
        t = tr.load(path)
        check_models(t, args.models_file)
        kinds = Counter(type(e).__name__ for e in t.events)
        parts = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
        copies = kinds["AssistantEvent"] - t.calls
        also = f" (and {copies} an earlier session made, copied in by a resume)" if copies else ""
        print(f"{path}: ok: {t.calls} model calls{also}, {len(t.events)} events ({parts}); hash {t.content_hash}")
    return 0
