"""ctxsim strategies [--json]: every registered strategy and its parameters."""

from __future__ import annotations

import json


def register(sub) -> None:
    p = sub.add_parser("strategies", help="list strategies and their parameters",
                       description="List every registered strategy (built-in and from the ctxsim.strategies "
                       "entry-point group) with its parameters: default, type, bounds and meaning.")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("name", nargs="?", help="show only this strategy")
    p.set_defaults(func=run)


def run(args) -> int:
    from ctxsim.strategies import registry
    from ctxsim.strategies.departures import in_effect, listing

    found = registry.all_strategies()
    if args.name:
        found = {args.name: registry.get(args.name)}
    if args.json:
        print(json.dumps({n: {"summary": c.summary, "module": c.__module__, "manages_window": c.manages_window,
                              "on_rejection": c.on_rejection,
                              "parameters": c.parameters(), "departures": in_effect(c, {})}
                          for n, c in found.items()}, indent=2, default=str))
        return 0
    for n, c in found.items():
        print(f"{n}: {c.summary}")
        print(f"    when the API rejects a request: {c.on_rejection}")
        for pname, info in c.parameters().items():
            bounds = " ".join(f"{k}={info[k]}" for k in ("minimum", "maximum", "exclusiveMinimum", "enum") if k in info)
            print(f"    {pname} = {info['default']!r}  ({info['type']}{', ' + bounds if bounds else ''})  {info['description']}")
        for line in listing(c):
            print(line)
    return 0
