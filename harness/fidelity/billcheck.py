"""What a run on an imported trace says about the bill: one line when the fitted cache model is in
play, one warning when the ``recorded`` replay is more than ``BILL_TOLERANCE`` off the log's bill,
naming the cause. Pure functions over a trace and a run's per-call table; the CLI prints them."""

from __future__ import annotations

from typing import Any

import pandas as pd
from ctxsim.harness.fidelity.population import FIRST_PARTY
from ctxsim.harness.model.trace import Trace
from ctxsim.harness.provider.routing import ROUTER_PHASES

BILL_TOLERANCE = 0.05   # issue 27: a recorded replay more than 5% off the bill is flagged
SHARE_SLACK = 0.005     # assumed: cache-read shares closer than this are the same for naming a cause


def cache_model_line(trace: Trace, routed: float | None = None) -> str | None:
    """``cache model: fitted on the log ...`` for a trace whose import fitted a miss model."""
    rec = trace.header.recorded
    m = rec.cache_miss_model if rec is not None else None
    if m is None:
        return None
    tail = f"; {routed:.1f} requests routed astray in this run" if routed is not None else ""
    where = "on all the log's calls, in sample" if m.in_sample else "on the log's first calls"
    return (f"cache model: fitted {where} ({m.strays} of {m.eligible} calls fell back and recovered): "
            f"{m.share:.1%} of requests routed off the session's cache node (of those that continue the previous "
            f"one), {m.fallback_none:.0%} of them "
            f"reading nothing{tail} (the expected bill: the mean over {ROUTER_PHASES} router phases; "
            f"header.recorded.cache_miss_model)")


def bill_warning(trace: Trace, calls: pd.DataFrame, cost: float, models_file: str | None = None) -> str | None:
    """A warning when a ``recorded`` replay's ``cost`` differs from the bill by more than 5%."""
    from ctxsim.harness.fidelity.cache_misses import label_calls
    from ctxsim.harness.fidelity.recorded import recorded_calls, recorded_cost, recorded_usages
    from ctxsim.strategies.recorded import strips_for

    if trace.header.usage != "per_call":
        return None
    billed = recorded_cost(trace, models_file)
    if not billed or abs(cost - billed) <= BILL_TOLERANCE * billed:
        return None
    usages = [u for u, _ in recorded_usages(trace)]
    rec_in = sum(u.context_tokens for u in usages)
    rec_share = sum(u.cache_read for u in usages) / rec_in if rec_in else 0.0
    sim_in = float((calls["input_uncached"] + calls["cache_write_5m"] + calls["cache_write_1h"] + calls["cache_read"]).sum())
    sim_share = float(calls["cache_read"].sum()) / sim_in if sim_in else 0.0
    rec = trace.header.recorded
    fitted = rec is not None and rec.cache_miss_model is not None
    if sim_share > rec_share + SHARE_SLACK:
        labels = label_calls(recorded_calls(trace), strips_for(rec))[0]
        n = sum(1 for v in labels.values() if v == "stray")
        cause = (f"the replay reads the cache more than the log did (share {sim_share:.2f} vs {rec_share:.2f}): "
                 + (f"{n} recorded fall-backs the cache model does not reproduce (unexplained)" if not fitted else
                    "the fitted cache model's expected strays cost less here than the log's did"))
    elif sim_share < rec_share - SHARE_SLACK:
        cause = (f"the replay reads the cache less than the log did (share {sim_share:.2f} vs {rec_share:.2f})"
                 + (": the fitted cache model's expected strays cost more here than the log's did" if fitted else ""))
    elif trace.header.output_tokens_partial:
        cause = "the log's output counts are partial (streaming), a lower bound"
    else:
        sim_ctx = float(calls["context_tokens"].sum())
        gap = (sim_ctx - rec_in) / rec_in * 100 if rec_in else 0.0
        scale = f" (token scale {rec.token_scale}: {rec.token_scale_evidence})" if rec is not None and rec.token_scale else ""
        cause = (f"the replay's requests are {abs(gap):.1f}% {'larger' if gap > 0 else 'smaller'} than the log's in "
                 f"sum{scale}" if abs(gap) >= 1 else "context sizes differ from the recorded ones")
    pct = (cost - billed) / billed * 100
    route = (trace.header.source or {}).get("route")
    # a Claude model's replay, priced at Anthropic's rates, against what a relay or proxy reported
    whose = (f"; the log was served through a {route}, whose usage is its own account, not Anthropic's bill"
             if route is not None and route not in FIRST_PARTY and str(trace.header.model or "").startswith("claude")
             else "")
    return (f"the recorded replay costs ${cost:.4f}, {abs(pct):.1f}% {'above' if pct > 0 else 'below'} the bill "
            f"${billed:.4f}: {cause}{whose} (ctxsim fidelity shows the misses by cause)")


def run_notes(trace: Trace, strategy: str, calls: pd.DataFrame, cost: float, metrics: dict[str, Any],
              models_file: str | None = None) -> list[str]:
    """The lines a run prints after its table: the cache model, and the bill warning (recorded only)."""
    out = []
    if trace.header.source and trace.header.usage == "none":
        out.append("the log records no usage (e.g. a Codex rollout without token_count): this cost is simulated, "
                   "there is no bill to compare it with")
    routed = (metrics.get("provenance") or {}).get("cache_model", {}).get("routed_requests")
    line = cache_model_line(trace, routed)
    if line:
        out.append(line)
    if strategy == "recorded":
        w = bill_warning(trace, calls, cost, models_file)
        if w:
            out.append("warning: " + w)
    return out


__all__ = ["BILL_TOLERANCE", "bill_warning", "cache_model_line", "run_notes"]
