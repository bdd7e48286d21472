"""Needs at risk pooled over a folder of real sessions: the check of issue 43 and its before/after table.

``python -m ctxsim.harness.calibration.needs_population TRACE_OR_DIR ... [--strategies a,b] [--seeds 3]
[--window N] [--json OUT]`` replays every compacting trace (one with a recorded compaction) under each
strategy and seed, at the trace's recorded setting unless ``--window`` is given, and prints per strategy,
pooled over the sessions: the needs at risk by outcome (verbatim, summary, pointer followed, lost), kept
(verbatim + summary + pointer) and kept *without pointers* (verbatim + summary alone), each with its
Wilson interval on each need once; the goal; recovery and restatement dollars, violations, cost and cost
including recovery (means over seeds, summed over sessions); and novacode − cut_no_summary on both
figures, paired on the same needs (Newcombe). A trace that cannot be read or replayed is skipped with a
warning on stderr (named, never aborting the rest).

It reads only what every ctxsim since the needs-at-risk headline writes (``run``'s metrics and probe
rows), so the same file measures an older checkout: ``OLD/.venv/bin/python harness/calibration/needs_population.py``.
Nothing of the sessions is written but counts (``--json``: per session, by a digest of its path).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DEFAULT = ("novacode", "cut_no_summary", "claude_code", "codex", "openhands")
PARTS = ("verbatim", "summary", "pointer", "lost")


def traces(items: Sequence[str]) -> list[Path]:
    out: list[Path] = []
    for it in items:
        p = Path(it)
        out += sorted(p.rglob("*.jsonl")) if p.is_dir() else [p]
    return out


def _where(w: str) -> str:
    from ctxsim.harness.retention.needs import WHERE

    return WHERE.get(w, "lost")


def one(trace, strategy: str, seed: int, window: int | None) -> dict[str, Any]:
    """One replay's needs-at-risk outcomes per need, and its money."""
    from ctxsim.harness.replay.engine import RunConfig, replay

    r = replay(trace, strategy, None, RunConfig(seed=seed, window=window))
    m = r.metrics
    pr = r.probes
    rows = {}
    if len(pr) and "at_risk" in pr:
        back = pr["restored"] if "restored" in pr else [False] * len(pr)
        for p, f, w, risk, b, cat in zip(pr["probe"], pr["fact"], pr["where"], pr["at_risk"], back, pr["category"],
                                         strict=True):
            if risk:
                rows[(str(p), str(f))] = ("lost" if b and _where(w) != "lost" else _where(w), str(cat))
    rec = m.get("recovery", {})
    return {"needs": rows, "cost": m["cost_usd"], "cost_with_recovery": m.get("cost_with_recovery_usd", m["cost_usd"]),
            "recovery_usd": rec.get("cost_usd", 0.0), "restate_usd": rec.get("restate_cost_usd", 0.0),
            "violated": rec.get("violated", 0), "completed": m.get("completed", True),
            "main_call_usd": float(r.calls.loc[r.calls["kind"] == "main", "cost_usd"].mean()) if len(r.calls) else 0.0}


def paired(a: dict, b: dict, keep: tuple[str, ...]) -> tuple[float, float, float, float]:
    """(a, b, c, d) on the needs both runs scored: both keep, only a, only b, neither."""
    n = [0, 0, 0, 0]
    for k, (wa, _) in a.items():
        if k not in b:
            continue
        x, y = wa in keep, b[k][0] in keep
        n[0 if x and y else 1 if x else 2 if y else 3] += 1
    return tuple(n)  # type: ignore[return-value]


def measure(paths: Sequence[Path], strategies: Sequence[str], seeds: int, window: int | None,
            log=sys.stderr.write) -> list[dict[str, Any]]:
    from ctxsim.harness.model import trace as tr

    out = []
    for path in paths:
        try:
            t = tr.load(path)
        except Exception as e:  # noqa: BLE001  (a bad file is skipped, named)
            log(f"warning: {path}: skipped ({e})\n")
            continue
        if not any(isinstance(e, tr.CompactEvent) for e in t.events):
            continue
        row: dict[str, Any] = {"session": hashlib.sha256(str(path).encode()).hexdigest()[:12],
                               "version": (t.header.source or {}).get("version"), "runs": {}}
        t0 = time.time()
        try:
            for s in strategies:
                row["runs"][s] = [one(t, s, seed, window) for seed in range(seeds)]
        except Exception as e:  # noqa: BLE001
            log(f"warning: {path}: skipped ({type(e).__name__}: {e})\n")
            continue
        log(f"{path.name}: {time.time() - t0:.0f}s\n")
        out.append(row)
    return out


def _share(k: float, n: float) -> float:
    return k / n if n else float("nan")


def report(rows: list[dict[str, Any]], strategies: Sequence[str], seeds: int) -> list[str]:
    from ctxsim.harness.retention.needs import newcombe_paired, wilson

    lines = [f"{len(rows)} compacting sessions, {seeds} seed(s); k/n on each need once (counts / seeds)", "",
             "| strategy | n | verbatim | summary | pointer followed | lost | kept [95%] | verbatim+summary [95%] | goal | "
             "violated | recovery + restatement $ | cost $ | incl. recovery $ |", "|---|" + "---|" * 12]
    for s in strategies:
        c = {p: 0 for p in PARTS}
        goal = [0, 0]
        money = [0.0, 0.0, 0.0, 0.0]
        for r in rows:
            for run in r["runs"].get(s, []):
                for w, cat in run["needs"].values():
                    c[w] += 1
                    if cat == "goal":
                        goal[0] += 1
                        goal[1] += w != "lost"
                money[0] += run["recovery_usd"] + run["restate_usd"]
                money[1] += run["cost"]
                money[2] += run["cost_with_recovery"]
                money[3] += run["violated"]
        n = sum(c.values())
        k1, k2 = c["verbatim"] + c["summary"] + c["pointer"], c["verbatim"] + c["summary"]
        lo1, hi1 = wilson(k1 / seeds, n / seeds)
        lo2, hi2 = wilson(k2 / seeds, n / seeds)
        lines.append(f"| {s} | {n / seeds:.0f} | " + " | ".join(f"{c[p] / seeds:.1f}" for p in PARTS)
                     + f" | {_share(k1, n):.3f} [{lo1:.3f}, {hi1:.3f}] | {_share(k2, n):.3f} [{lo2:.3f}, {hi2:.3f}] | "
                     f"{goal[1] / seeds:.1f}/{goal[0] / seeds:.0f} | {money[3] / seeds:.1f} | {money[0] / seeds:.2f} | "
                     f"{money[1] / seeds:.2f} | {money[2] / seeds:.2f} |")
    if "novacode" in strategies and "cut_no_summary" in strategies:
        lines.append("")
        for label, keep in (("kept (verbatim, summary, pointer followed)", ("verbatim", "summary", "pointer")),
                            ("verbatim or summary alone (pointers aside)", ("verbatim", "summary"))):
            tot = [0.0, 0.0, 0.0, 0.0]
            for r in rows:
                for ra, rb in zip(r["runs"]["novacode"], r["runs"]["cut_no_summary"], strict=True):
                    for i, x in enumerate(paired(ra["needs"], rb["needs"], keep)):
                        tot[i] += x / seeds
            d, lo, hi = newcombe_paired(*tot)
            verdict = "PASS" if lo > 0 else "FAIL"
            lines.append(f"- novacode − cut_no_summary, {label}: {d:+.3f} [{lo:+.3f}, {hi:+.3f}] (paired, each need once: "
                         f"a={tot[0]:.1f} b={tot[1]:.1f} c={tot[2]:.1f} d={tot[3]:.1f}) -> {verdict}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="needs_population", description=__doc__.split("\n\n")[0])
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--strategies", default=",".join(DEFAULT))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--window", type=int, default=None)
    ap.add_argument("--json", default=None, help="per-session counts (digests of paths only)")
    a = ap.parse_args(argv)
    strategies = [s for s in a.strategies.split(",") if s]
    rows = measure(traces(a.traces), strategies, a.seeds, a.window)
    if a.json:
        Path(a.json).write_text(json.dumps([{**r, "runs": {s: [{**x, "needs": {f"{p}|{f}": v for (p, f), v in x["needs"].items()}}
                                                              for x in runs] for s, runs in r["runs"].items()}}
                                            for r in rows]) + "\n")
    print("\n".join(report(rows, strategies, a.seeds)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
