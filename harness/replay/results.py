"""A replay's result: the rows the loop recorded made into frames, the metrics, the needs-at-risk
figures and the provenance (which prices, summariser and retention model made the numbers).
Built after the loop, from the run object it leaves (harness/replay/engine.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from ctxsim.harness.replay.call_rows import CALL_COLUMNS
from ctxsim.harness.retention.probe_scoring import PROBE_COLUMNS
from ctxsim.strategies.registry import config_dict


@dataclass
class RunResult:
    strategy: str
    params: dict[str, Any]
    trace: str
    trace_hash: str
    model: str
    window: int
    seed: int
    calls: pd.DataFrame
    metrics: dict[str, Any]
    probes: pd.DataFrame = field(default_factory=pd.DataFrame)
    # parameters the strategy read from the log's recorded setting, the caller setting none of them (claude_code's
    # release, a cache TTL): each session's own, so runs over sessions that differ there are one configuration
    from_log: tuple[str, ...] = ()
    params_set: tuple[str, ...] = ()   # the parameters the caller set (the rest: defaults, or from_log)
    model_setting: str = ""   # the model the run was asked for ("": each call on the one its log recorded)


def build(run: Any, name: str) -> RunResult:
    """The result of a finished run (``name``: the strategy's registered name)."""
    from ctxsim.harness.replay.metrics import compute_metrics

    cfg, trace, scorer = run.cfg, run.trace, run.scorer
    calls = pd.DataFrame(run.rows, columns=CALL_COLUMNS)
    probes = pd.DataFrame(scorer.rows, columns=PROBE_COLUMNS)
    res = RunResult(name, config_dict(run.strategy.config), trace.path or trace.header.name,
                    trace.content_hash, run.provider.model, run.provider.window, cfg.seed, calls, {}, probes,
                    from_log=run.from_log, params_set=run.params_set, model_setting=cfg.model or "")
    outcome = {"completed": run.failed_at is None, "failed_at_call": run.failed_at,
               "failure": list(run.failure.reasons) if run.failure is not None else None,
               "turns": run.turns, "turns_failed": run.turns_failed, "probes_not_reached": scorer.not_reached_count}
    retention = scorer.retention
    res.metrics = compute_metrics(res, run.strategy.counters, scorer.fact_scores, run.readbacks, outcome,
                                  retention.params if retention is not None else None)
    res.metrics["provenance"] = provenance(run, calls)
    needs_metrics(res, run, calls, probes)
    return res


def needs_metrics(res: RunResult, run: Any, calls: pd.DataFrame, probes: pd.DataFrame) -> None:
    """The needs-at-risk headline and the cost of forgetting (harness/retention/needs.py, harness/retention/recovery.py);
    the keys are there for every run (zeros without facts or with the loop off)."""
    from ctxsim.harness.retention import needs as nd
    from ctxsim.harness.retention import recovery as rc

    needs = run.needs if run.needs is not None else nd.Needs({}, (), 0)
    restored = run.recovery.restored if run.recovery is not None else {}
    rows = run.scorer.rows
    res.metrics["needs_at_risk"] = nd.headline(rows, needs, restored)
    res.metrics["needs_by_distance"] = nd.by_distance(rows, needs)
    rec = res.metrics["recovery"] = (run.recovery.metrics(calls) if run.recovery is not None
                                     else rc.Recovery.none(rc.RecoveryParams(**dict(run.cfg.recovery)),
                                                           closed_loop=type(run.strategy).closed_loop))
    res.metrics["cost_with_recovery_usd"] = res.metrics["cost_usd"] - rec["credit_usd"]
    got = [needs.get(p, f) for p, f in zip(probes["probe"], probes["fact"], strict=True)]
    probes["at_risk"] = [bool(g is not None and g.at_risk) for g in got]
    probes["distance_tokens"] = [g.distance_tokens if g is not None else -1 for g in got]
    probes["restored"] = [nd.restored_by_loop({"fact": f, "call": c}, restored)
                          for f, c in zip(probes["fact"], probes["call"], strict=True)]


def provenance(run: Any, calls: pd.DataFrame) -> dict[str, Any]:
    from ctxsim.harness.replay import provenance as pv
    from ctxsim.harness.retention import scoring as ret

    retention = run.scorer.retention
    models = [run.provider.model, *calls["model"].dropna().unique().tolist()]
    params = retention.params if retention is not None else ret.RetentionParams(**run.cfg.retention)
    p = run.provider
    return {"trace": pv.trace_source(run.trace.header), "prices": pv.prices(p.table, models),
            "summariser": pv.summariser(run.backend), "retention": pv.retention(params),
            "max_attempts_per_call": run.cfg.max_attempts,
            "cache_model": ({"fitted": True, "share": p.miss_model.share, "fallback_none": p.miss_model.fallback_none,
                             "routed_requests": round(p.routed, 3), "continuing_requests": round(p.continuing, 3)}
                            if p.miss_model is not None else {"fitted": False})}
