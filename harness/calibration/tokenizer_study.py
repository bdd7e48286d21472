"""Which offline tokenizer stands in best for Claude's: import real Claude Code logs with each
candidate and compare, per candidate, what ``ctxsim fidelity`` reports (README, "Which tokenizer").

    python -m ctxsim.harness.calibration.tokenizer_study ../shared/traces/real/claude-code [--tokenizers cl100k,claude] [--json PATH]

Per log and tokenizer: the token scale fitted on the first 30% of the calls (one per session, and one
per recorded model), how far the scale moves with where it is fitted (``spread_pct``), and the
held-out per-call context error (median and p90 of |simulated - recorded| / recorded). Across logs:
each model's fitted scale, min-max; a good stand-in has a scale that is the same on every log of a
model (so a scale fitted once transfers) and a small per-call error. Offline; no model is called.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any


def logs_in(folder: Path) -> list[Path]:
    """The sessions of a folder of Claude Code logs (subagent transcripts belong to their session)."""
    return [f for f in sorted(folder.rglob("*.jsonl")) if "subagents" not in f.parts]


def one(log: Path, tokenizer: str) -> dict[str, Any] | None:
    """Fidelity figures of one log imported with ``tokenizer`` (None: the log carries no usage)."""
    from ctxsim.harness.fidelity.compare import run_fidelity
    from ctxsim.harness.importers import import_file
    from ctxsim.harness.provider.tokenizer import ENV

    os.environ[ENV] = tokenizer   # the importer and the provider count with the process-wide tokenizer
    trace = import_file("claude-code", log).trace
    try:
        rep = run_fidelity(trace).report
    except ValueError:
        return None
    ctx = rep["context_tokens"]
    return {"log": log.name, "tokenizer": tokenizer, "calls": rep["calls"], "token_scale": rep["token_scale"],
            "by_model": rep["token_scale_by_model"], "spread_pct": rep["token_scale_stability"]["spread_pct"],
            "median_err_pct": ctx["median_abs_pct_error"], "p90_err_pct": ctx["p90_abs_pct_error"],
            "held_out_calls": ctx["calls"]}


def summarise(rows: list[dict[str, Any]], min_calls: int = 0) -> dict[str, Any]:
    """Across logs with at least ``min_calls`` calls, per tokenizer: each model's scale range and the
    per-call errors."""
    out: dict[str, Any] = {}
    for tok in dict.fromkeys(r["tokenizer"] for r in rows):
        mine = [r for r in rows if r["tokenizer"] == tok and r["held_out_calls"] and r["calls"] >= min_calls]
        models: dict[str, list[float]] = {}
        for r in mine:
            for m, s in r["by_model"].items():
                models.setdefault(m, []).append(s)
        scales = [r["token_scale"] for r in mine]
        errs = [r["median_err_pct"] for r in mine if r["median_err_pct"] is not None]
        p90 = [r["p90_err_pct"] for r in mine if r["p90_err_pct"] is not None]
        out[tok] = {
            "logs": len(mine),
            "scale_range": [min(scales), max(scales)] if scales else None,
            "scale_spread_pct": round((max(scales) - min(scales)) / statistics.median(scales) * 100, 1) if scales else None,
            "by_model": {m: {"logs": len(v), "range": [min(v), max(v)],
                             "spread_pct": round((max(v) - min(v)) / statistics.median(v) * 100, 1)}
                         for m, v in sorted(models.items())},
            "within_log_spread_pct_median": statistics.median(r["spread_pct"] for r in mine if r["spread_pct"] is not None),
            "median_err_pct_median": round(statistics.median(errs), 2) if errs else None,
            "median_err_pct_worst": max(errs) if errs else None,
            "p90_err_pct_median": round(statistics.median(p90), 2) if p90 else None,
        }
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ctxsim.harness.calibration.tokenizer_study", description=__doc__.split("\n\n")[0])
    p.add_argument("folder", help="a folder of Claude Code session logs")
    p.add_argument("--tokenizers", default="cl100k,claude", help="comma-separated (ctxsim.harness.provider.tokenizer.BACKENDS)")
    p.add_argument("--min-calls", type=int, default=10,
                   help="leave logs with fewer calls out of the second summary (a scale fitted on 2 calls is noise)")
    p.add_argument("--json", dest="json_out", default=None, help="write rows and summary as JSON")
    args = p.parse_args(argv)
    rows = []
    for tok in args.tokenizers.split(","):
        for log in logs_in(Path(args.folder)):
            r = one(log, tok)
            if r is not None:
                rows.append(r)
                print(json.dumps(r), file=sys.stderr)
    result = {"rows": rows, "summary": summarise(rows),
              f"summary_min_{args.min_calls}_calls": summarise(rows, args.min_calls)}
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
