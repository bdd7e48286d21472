"""How much of the grid a store's results cover, said in a report's first lines (issue 44, item 7):
runs missing or failed, configurations with fewer seeds (or sessions) than the grid asked, runs
whose per-probe scores are missing (their retention intervals rest on fewer seeds), rows that could
not be read, a database that fails SQLite's integrity check, a sweep still writing.

Each note is one Markdown sentence, starting with its kind in bold; ``ctxsim report`` prints the same
sentences on stderr. No note: the results are the whole grid.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from ctxsim.harness.sweep import analysis
from ctxsim.harness.sweep.store import Health, describe

MAX_LISTED = 4   # configurations named in a note before "and N more"


def _config(spec: dict[str, Any]) -> tuple:
    return (spec.get("label"), json.dumps(spec.get("params", {}), sort_keys=True, default=str), spec.get("window"),
            spec.get("model"), spec.get("cache"), json.dumps(spec.get("assume", {}), sort_keys=True, default=str))


def _name(spec: dict[str, Any]) -> str:
    row = {"label": spec.get("label"), "strategy": spec.get("strategy"),
           **{f"param.{k}": v for k, v in (spec.get("params") or {}).items()}}
    w = spec.get("window")
    return f"`{analysis.config_name(row)}`" + (f" at window {int(w):,}" if w else "")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def _listed(items: list[str]) -> str:
    more = len(items) - MAX_LISTED
    return "; ".join(items[:MAX_LISTED]) + (f"; and {more} more" if more > 0 else "")


def _short_fall(specs: list[dict[str, Any]], present: set[tuple[str, str]]) -> str | None:
    """How one configuration's runs fall short of what the grid asked ("1 of 2 seeds on t.jsonl",
    "28 of 30 sessions"), or None when nothing is missing. ``present``: (key, label) with a row."""
    by_trace: dict[str, tuple[int, int]] = {}
    for sp in specs:
        have, asked = by_trace.get(sp.get("trace", ""), (0, 0))
        by_trace[sp.get("trace", "")] = (have + ((sp.get("key"), sp.get("label")) in present), asked + 1)
    if all(h == a for h, a in by_trace.values()):
        return None
    seeds = max(a for _, a in by_trace.values())
    if len(by_trace) == 1 or seeds > 1 and all(h > 0 for h, _ in by_trace.values()):
        parts = [f"{h} of {a} seed{'s' if a != 1 else ''} on {Path(t).name}" for t, (h, a) in by_trace.items() if h < a]
        return _listed(parts)
    whole = sum(1 for h, a in by_trace.values() if h == a)
    return f"{whole} of {len(by_trace)} sessions complete"


def notes(grid: Sequence[tuple[str, str, dict[str, Any]]], df: pd.DataFrame, health: Health) -> list[str]:
    """The report's first lines about what these results are not (empty: the whole grid, readable).
    ``grid``: (label, key, spec) per entry (Store.grid); ``df``: the rows read (Store.results)."""
    out: list[str] = []
    if health.running is not None:
        out.append(f"**A sweep is writing these results now** ({describe(health.running)}): this report holds the runs "
                   "finished so far.")
    if health.damaged or health.integrity:
        parts = []
        if health.damaged:
            whys = [f"`{k}`: {health.why[k]}" for k in health.damaged if k in health.why]
            parts.append(f"{_plural(len(health.damaged), 'run')} could not be read from the store (left out; "
                         "`ctxsim sweep` again redoes them)"
                         + (f" ({'; '.join(whys[:3])}{'; ...' if len(whys) > 3 else ''})" if whys else ""))
        if health.integrity:
            parts.append(f"SQLite's integrity check reports: {health.integrity}")
        out.append("**Damaged results**: " + "; ".join(parts) + ".")
    present = set(zip(df["key"], df["label"], strict=True)) if len(df) and "key" in df else set()
    failed = int((df["error"].fillna("") != "").sum()) if "error" in df else 0
    keyed = [(label, key, {**spec, "key": key, "label": label}) for label, key, spec in grid]
    missing = sum(1 for label, key, _ in keyed if (key, label) not in present)
    if missing or failed:
        configs: dict[tuple, list[dict[str, Any]]] = {}
        for _, _, spec in keyed:
            configs.setdefault(_config(spec), []).append(spec)
        short = []
        for specs in configs.values():
            why = _short_fall(specs, present)
            if why:
                short.append(f"{_name(specs[0])}: {why}")
        text = (f"**Partial results**: {missing} of {len(keyed)} runs of the grid missing, {failed} failed "
                "(`ctxsim sweep` again, with `--retry-failed` for the failed ones).")
        if short:
            text += " Fewer runs than asked: " + _listed(short) + "."
        out.append(text)
    if health.no_probes:
        runs = {k: spec for _, k, spec in keyed}
        with_probes = present - {(k, label) for k in health.no_probes for label in _labels(keyed, k)}
        parts = []
        seen = set()
        for k in health.no_probes:
            spec = runs.get(k)
            if spec is None:
                continue
            c = _config(spec)
            if c in seen:
                continue
            seen.add(c)
            same = [s for _, _, s in keyed if _config(s) == c and s.get("trace") == spec.get("trace")]
            have = sum(1 for s in same if (s["key"], s["label"]) in with_probes)
            parts.append(f"{_name(spec)} on {Path(str(spec.get('trace', ''))).name}: its retention intervals rest on "
                         f"{have} of {len(same)} seed{'s' if len(same) != 1 else ''}")
        n = len(health.no_probes)
        out.append(f"**Per-probe scores missing**: {_plural(n, 'run')} {'has' if n == 1 else 'have'} no per-probe scores "
                   f"in the store ({_listed(parts)}); `ctxsim sweep` again redoes {'it' if n == 1 else 'them'}.")
    return out


def _labels(keyed: Sequence[tuple[str, str, dict[str, Any]]], key: str) -> list[str]:
    return [label for label, k, _ in keyed if k == key]


def plain(note: str) -> str:
    """A note for the terminal: Markdown marks removed."""
    return note.replace("**", "").replace("`", "")
