"""Run metrics: the object ``ctxsim run --json`` writes (DESIGN.md), from the per-call rows.

Schema version 1; keys may be added, none renamed.

A run either completes (every main call of the trace was answered) or fails at the first main call
whose rejection the strategy did not recover from. ``completed`` says which; ``failed_at_call`` is
the index of that call (``null`` when completed); ``turns`` counts the user turns of the main
conversation (user messages outside isolated sub-agent spans) and ``turns_failed`` those that did
not complete: the one in progress at the failing call and every later one (0 when completed). A
failed run's ``cost_usd`` is what it spent until it failed (retries and side calls included, the
rejected requests themselves unbilled): the price of a session that did not finish its task, so it
is never ranked by cost against completed runs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from ctxsim.harness.llm.services import SUMMARY, VERIFY

MAIN_KINDS = ("main", "readback", "recovery", "restate", "subagent")  # calls the agent's own loop makes
COMPACTION_KINDS = (SUMMARY, VERIFY)


def _pct(s: pd.Series, q: float) -> float:
    return float(np.percentile(s.to_numpy(), q)) if len(s) else 0.0


NOT_FAILED = {"completed": True, "failed_at_call": None, "failure": None, "turns": 0, "turns_failed": 0,
              "probes_not_reached": 0}


def compute_metrics(res, counters, fact_scores: list, readbacks: int,
                    outcome: dict[str, Any] | None = None, retention_params: Any = None) -> dict[str, Any]:
    """``retention_params``: the run's :class:`ctxsim.harness.retention.scoring.RetentionParams` (its category
    weights make the score; None: the defaults)."""
    outcome = {**NOT_FAILED, **(outcome or {})}
    c = res.calls
    attempts = c[c["kind"].isin(MAIN_KINDS)]
    main = attempts[attempts["attempt"] == 1] if "attempt" in c else attempts  # one row per call
    tokens = {"input_uncached": int(c["input_uncached"].sum()),
              "cache_write": int(c["cache_write_5m"].sum() + c["cache_write_1h"].sum()),
              "cache_read": int(c["cache_read"].sum()), "output": int(c["output"].sum())}
    all_input = tokens["input_uncached"] + tokens["cache_write"] + tokens["cache_read"]
    est = attempts[(attempts["estimated_tokens"] >= 0) & (attempts["context_tokens"] > 0)]
    est_err = (float(((est["estimated_tokens"] - est["context_tokens"]).abs() / est["context_tokens"]).mean() * 100)
               if len(est) else None)
    main_ok = attempts[~attempts["rejected"]]
    main_only = attempts[attempts["kind"] != "subagent"]  # the main context itself, sub-agents' calls apart
    blocking = c[c["kind"].isin(COMPACTION_KINDS) & c["blocking"]]
    by_kind = {k: {"calls": int(len(g)), "cost_usd": float(g["cost_usd"].sum()),
                   "input_tokens": int((g["input_uncached"] + g["cache_write_5m"] + g["cache_write_1h"] + g["cache_read"]).sum()),
                   "output_tokens": int(g["output"].sum()), "failed": int(g["failed"].sum())}
               for k, g in c.groupby("kind", sort=True)}
    return {
        "schema_version": 1,
        "strategy": res.strategy,
        "params": res.params,
        "trace": res.trace,
        "trace_hash": res.trace_hash,
        "model": res.model,
        "window": res.window,
        "seed": res.seed,
        "completed": bool(outcome["completed"]),
        "failed_at_call": outcome["failed_at_call"],
        "failure": outcome["failure"],
        "turns": int(outcome["turns"]),
        "turns_failed": int(outcome["turns_failed"]),
        "calls": int(len(main)),
        "side_calls": int(len(c) - len(attempts)),
        "rejected_requests": int(attempts["rejected"].sum()),
        "retries": int(len(attempts) - len(main)),
        "cost_usd": float(c["cost_usd"].sum()),
        "tokens": tokens,
        "cache_hit_rate": (tokens["cache_read"] / all_input) if all_input else 0.0,
        "latency_s": {
            "p50": _pct(main_ok["duration_s"], 50),
            "p95": _pct(main_ok["duration_s"], 95),
            "total": float(c["duration_s"].sum()),  # rejected and failed requests' time included
            "compaction_blocking": float(blocking["duration_s"].sum()),
        },
        "compactions": {
            "attempted": counters.compactions_attempted,
            "succeeded": counters.compactions_succeeded,
            "failed": counters.compactions_failed,
            "breaker_trips": counters.breaker_trips,
        },
        "overflows": int(attempts["overflow"].sum()),
        "pairing_violations": int(attempts["pairing_violation"].sum()),
        "rejected_side_calls": int((c["failed"] & ~c["kind"].isin(MAIN_KINDS)).sum()),
        "spills": counters.spills,
        "readbacks": readbacks,
        "peak_context_tokens": int(attempts["context_tokens"].max()) if len(attempts) else 0,
        "peak_main_context_tokens": int(main_only["context_tokens"].max()) if len(main_only) else 0,
        "estimator": {"mean_abs_pct_error": est_err},
        "retention": {**_retention(fact_scores, retention_params),
                      "probes_not_reached": int(outcome["probes_not_reached"])},
        "by_kind": by_kind,
        "strategy_counters": dict(counters.extra),
    }


def _retention(scores: list, params: Any = None) -> dict[str, Any]:
    if not scores:
        return {"score": None, "goal": None, "by_category": {}, "probes": 0}
    from ctxsim.harness.retention.scoring import aggregate

    return aggregate(scores, params)
