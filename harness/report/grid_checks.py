"""What a sweep's grid failed to measure, named: a parameter whose values all gave the same results,
and a window at which a swept strategy never compacted (so its thresholds were never reached).
Both are said by ``ctxsim sweep`` and ``ctxsim report`` and listed in the report; neither is an
error (the numbers are right, they just answer nothing about that knob)."""

from __future__ import annotations

import math
from collections.abc import Iterable

from ctxsim.harness.report import formatting as fmt
from ctxsim.harness.sweep.tuning import Setting

SAME = 1e-9  # two results are "identical" when cost, retention and compactions agree this closely (assumed)


def _outcome(s: Setting) -> tuple[float, ...]:
    return (s.cost, s.retention.est, s.compactions, float(s.completed))


def _same(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return all((math.isnan(x) and math.isnan(y)) or abs(x - y) <= SAME * max(1.0, abs(x)) for x, y in zip(a, b))


def _groups(sets: Iterable[Setting]) -> dict[tuple[str, int, str], list[Setting]]:
    out: dict[tuple[str, int, str], list[Setting]] = {}
    for s in sets:
        out.setdefault((s.label, s.window, s.group), []).append(s)
    return {k: v for k, v in out.items() if len(v) > 1}


def swept_params(ss: list[Setting]) -> list[str]:
    return sorted({k for s in ss for k in s.params if len({repr(x.params.get(k)) for x in ss}) > 1})


def idle_parameters(sets: Iterable[Setting]) -> list[str]:
    """One line per strategy, window, trace group and parameter whose values changed nothing: among
    settings that differ only in that parameter, every value gave identical results."""
    lines = []
    for (label, window, group), ss in sorted(_groups(sets).items()):
        for p in swept_params(ss):
            rest: dict[str, list[Setting]] = {}
            for s in ss:
                rest.setdefault(repr(sorted((k, repr(v)) for k, v in s.params.items() if k != p)), []).append(s)
            pairs = [g for g in rest.values() if len({repr(s.params.get(p)) for s in g}) > 1]
            if pairs and all(all(_same(_outcome(g[0]), _outcome(s)) for s in g[1:]) for g in pairs):
                values = sorted({s.params.get(p) for s in ss if s.params.get(p) is not None}, key=repr)
                lines.append(f"{label}: `{p}` changed nothing at window {window:,} on {group}: its values "
                             f"{', '.join(fmt.value(v) for v in values)} gave identical results")
    return lines


def idle_windows(sets: Iterable[Setting]) -> list[str]:
    """One line per swept strategy, window and trace group where no run compacted."""
    lines = []
    for (label, window, group), ss in sorted(_groups(sets).items()):
        comp = [s.compactions for s in ss]
        if all(not math.isnan(c) and c == 0 for c in comp):
            lines.append(f"{label}: no run compacted at window {window:,} on {group}: the session never reaches "
                         f"its thresholds there, so the {len(ss)} settings of {', '.join(f'`{p}`' for p in swept_params(ss))} "
                         "measure nothing (give that window a longer session: `window_traces` in the sweep file)")
    return lines


def saturated(sets: Iterable[Setting]) -> list[str]:
    """One line per swept strategy, window and trace group where retention cannot tell its settings
    apart: every setting that completed keeps every need at risk (or none is at risk), so the answer
    there is cost alone."""
    lines = []
    for (label, window, group), ss in sorted(_groups(sets).items()):
        done = [s for s in ss if s.completed and not math.isnan(s.retention.est)]
        if len(done) < 2:
            continue
        shares = {round(s.retention.est, 9) for s in done}
        if shares == {1.0}:
            share = 1.0
            r = done[0].retention
            lines.append(f"{label}: retention is saturated at window {window:,} on {group}: every one of its "
                         f"{len(done)} settings keeps {share:.0%} of the needs at risk ({r.k:.0f} of {r.n:.0f}); the "
                         "answer there is cost alone, and a loss below the detection limit would not show")
        elif not any(s.retention.n for s in done if not math.isnan(s.retention.n)):
            lines.append(f"{label}: no need at risk at window {window:,} on {group}: retention says nothing there")
    return lines


def warnings(sets: Iterable[Setting]) -> list[str]:
    """Idle windows, then idle parameters (those of an idle window left out: it says it already),
    then saturated retention."""
    sets = list(sets)
    idle = idle_windows(sets)
    quiet = {(s.label, s.window, s.group) for s in sets
             if any(line.startswith(f"{s.label}: no run compacted at window {s.window:,} on {s.group}:") for line in idle)}
    rest = [s for s in sets if (s.label, s.window, s.group) not in quiet]
    return idle + idle_parameters(rest) + saturated(rest)
