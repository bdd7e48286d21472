"""The rows of a run's call table: one per request sent (main and side calls alike), the columns
``run --calls`` writes (DESIGN.md). Plain dicts; the frame is made after the loop (harness/replay/results.py)."""

from __future__ import annotations

from typing import Any

from ctxsim.harness.model.conversation import Request, Usage

CALL_COLUMNS = ["index", "kind", "session", "t", "model", "context_tokens", "estimated_tokens",
                "input_uncached", "cache_write_5m", "cache_write_1h", "cache_read", "output", "cost_usd",
                "ttft_s", "duration_s", "overflow", "pairing_violation", "compaction", "rejected", "failed",
                "blocking", "error", "call", "attempt", "session_failed"]


def call_row(index: int, req: Request, session: str | None, now: float, model: str, usage: Usage | None,
             tokens: int, cost: float, ttft: float, duration: float, overflow: bool, pairing: bool, rejected: bool,
             failed: bool, blocking: bool, error: str, call: int, attempt: int) -> dict[str, Any]:
    """One row of the call table (CALL_COLUMNS)."""
    u = usage or Usage()
    return {"index": index, "kind": req.kind, "session": session, "t": now, "model": req.model or model,
            "context_tokens": tokens,
            "estimated_tokens": req.estimated_tokens if req.estimated_tokens is not None else -1,
            "input_uncached": u.input_uncached, "cache_write_5m": u.cache_write_5m,
            "cache_write_1h": u.cache_write_1h, "cache_read": u.cache_read, "output": u.output,
            "cost_usd": cost, "ttft_s": ttft, "duration_s": duration, "overflow": overflow,
            "pairing_violation": pairing, "compaction": req.rewrite, "rejected": rejected, "failed": failed,
            "blocking": blocking, "error": error, "call": call, "attempt": attempt, "session_failed": False}
