"""Where a strategy departs from the source it models, stated where users look: ``ctxsim strategies
NAME`` and a report's Assumptions.

Two kinds, read from the strategy itself (nothing here knows a concrete strategy):

* every parameter whose description starts with "not in the seed" (a rule the source does not have,
  added so the system holds on real traffic); it is *on* unless its value is False or None;
* the readings and constants a strategy declares in ``seed_readings`` (a :class:`Departure` each):
  where the source is ambiguous or silent and a value had to be chosen. Always in effect.

A report lists, per strategy and resolved parameters, the departures in effect; ``--set NAME=VALUE``
with the seed's value turns a flag off.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

MARK = "not in the seed"


@dataclass(frozen=True)
class Departure:
    """A reading or a constant chosen where the source is ambiguous or silent."""

    param: str   # the parameter that holds it
    rule: str    # the source rule it reads (e.g. "N-COMP-6")
    note: str    # what was chosen, and the alternative


def flags(cls) -> list[str]:
    """Parameters of ``cls`` whose description starts with "not in the seed", in declaration order."""
    return [n for n, f in cls.Config.model_fields.items() if (f.description or "").lower().startswith(MARK)]


def readings(cls) -> tuple[Departure, ...]:
    return tuple(getattr(cls, "seed_readings", ()))


def is_on(value: Any) -> bool:
    return value is not None and value is not False


def listing(cls) -> list[str]:
    """Lines for ``ctxsim strategies NAME``: every departure with its default (empty: none)."""
    fl, rd = flags(cls), readings(cls)
    if not fl and not rd:
        return []
    fields = cls.Config.model_fields
    out = ["    departures from the seed (each with its default; a report lists those in effect under Assumptions):"]
    for n in fl:
        d = fields[n].default
        seed = f" (the seed: --set {n}=false)" if isinstance(d, bool) and d else ""
        out.append(f"      {n} = {d!r}: beyond the seed, {'on' if is_on(d) else 'off'} by default{seed}")
    for r in rd:
        out.append(f"      {r.param} = {fields[r.param].default!r}: {r.rule}: {r.note}")
    return out


def in_effect(cls, params: Mapping[str, Any]) -> list[str]:
    """The departures in effect for a run of ``cls`` with these (resolved or partial) parameters:
    the "not in the seed" flags that are on, then every reading and constant, each with its value."""
    fields = cls.Config.model_fields
    value = {n: params.get(n, f.default) for n, f in fields.items()}
    on = [f"{n}={value[n]!r}" for n in flags(cls) if is_on(value[n])]
    rd = [f"{r.param}={value[r.param]!r} ({r.rule}: {r.note})" for r in readings(cls)]
    parts = []
    if on:
        parts.append("beyond the seed, on: " + ", ".join(on))
    if rd:
        parts.append("readings and constants: " + "; ".join(rd))
    return parts


def assumption_lines(runs: Any) -> list[str]:
    """Bullets for a report's Assumptions: one per strategy and distinct set of departures in effect.
    ``runs``: the report's rows (a DataFrame with ``strategy`` and ``param.*`` columns) or an iterable
    of ``(strategy, params)`` pairs."""
    from ctxsim.strategies import registry

    pairs: Iterable[tuple[str, Mapping[str, Any]]]
    if hasattr(runs, "iterrows"):
        pcols = [c for c in runs.columns if c.startswith("param.")]
        pairs = [(str(r["strategy"]), {c[6:]: r[c] for c in pcols if _present(r[c])})
                 for _, r in runs.iterrows() if "strategy" in runs.columns]
    else:
        pairs = runs
    seen: dict[str, list[str]] = {}
    for name, params in pairs:
        try:
            cls = registry.get(name)
        except Exception:  # a strategy given as MODULE:CLASS or no longer registered: nothing to state
            continue
        if not flags(cls) and not readings(cls):
            continue
        parts = in_effect(cls, params)
        if parts:
            line = f"**`{name}` departs from its source** (`ctxsim strategies {name}` lists each with its default): " \
                   + "; ".join(parts) + "."
            seen.setdefault(line, [])
    return list(seen)


def _present(v: Any) -> bool:
    try:
        return not (v != v)  # NaN: the column belongs to another strategy's runs
    except Exception:
        return True
