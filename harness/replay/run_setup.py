"""Everything a replay needs before its loop starts, built in a fixed order from (trace,
RunConfig, run directory): the provider, the seeded generators, the LLM backend, the retention,
needs and recovery models, the trace's prefix (system prompt and tools) and seeded files, and the
strategy with the recorded setting's defaults under the caller's parameters."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from ctxsim.harness.model.conversation import SystemPrompt, ToolDef, ToolSet
from ctxsim.harness.model.trace import Trace
from ctxsim.harness.provider import Provider
from ctxsim.harness.replay.readback import READ_TOOL
from ctxsim.harness.replay.runconfig import RunConfig, recorded_models
from ctxsim.harness.replay.rundirs import seed_files
from ctxsim.strategies.base import Strategy, StrategyEnv
from ctxsim.strategies.registry import build as build_strategy


@dataclass
class Parts:
    provider: Provider
    fail_rng: Any
    facts: dict
    backend: Any
    retention: Any
    needs: Any
    recovery: Any
    env: StrategyEnv
    read_tool: str
    warm_prefix: int
    warm_spans: frozenset[str] = frozenset()   # sub-agent spans whose shared head an earlier session cached


def assemble(trace: Trace, cfg: RunConfig, session_dir: Path, services: Any, closed_loop: bool = True) -> Parts:
    """``closed_loop``: the strategy's ``closed_loop`` (False: no recovery, its recoveries are the log's)."""
    provider = cfg.provider(trace)
    rec = trace.header.recorded
    if cfg.model is None:   # each call on its recorded model: every one must have a price before the replay
        for m in recorded_models(trace):
            provider.spec_for(m)
    seeds = np.random.SeedSequence([cfg.seed, int(trace.content_hash[:8] or "0", 16)]).spawn(4)
    facts = trace.facts()
    if cfg.backend is not None:
        backend = cfg.backend
    else:
        from ctxsim.harness.llm.simulated import SimulatedLLM

        backend = SimulatedLLM(facts, provider.count_text, cfg.seed, params=dict(cfg.summariser),
                               run_dir=str(session_dir), message_tokens=provider.message_tokens)
    retention = _retention(facts, cfg, seeds[2], session_dir)
    from ctxsim.harness.retention import needs as nd

    needs = nd.for_run(trace, provider) if facts else None  # the same for every strategy
    recovery = _recovery(trace, needs, cfg, seeds[3], provider) if closed_loop else None
    h = trace.header
    if "prefix" not in trace.memo:
        trace.memo["prefix"] = (SystemPrompt.of(h.system, opaque_tokens=h.prefix_tokens,
                                                shared_tokens=rec.warm_prefix_tokens if rec else 0),
                                ToolSet(tuple(ToolDef(t.name, t.description, t.input_schema) for t in h.tools)))
    system, tools = trace.memo["prefix"]
    home, project = seed_files(session_dir, h.meta.get("files") or {})
    env = StrategyEnv(session_dir=session_dir, services=services, now=services.run.now,
                      window=provider.window, max_output_tokens=provider.spec.max_output,
                      model=provider.model, provider=provider.spec.provider,
                      system=system, tools=tools, rng=np.random.default_rng(seeds[1]),
                      home_dir=home, project_dir=project, count_tokens=provider.table_count)
    return Parts(provider, np.random.default_rng(seeds[0]), facts, backend, retention, needs, recovery, env,
                 str(h.meta.get("read_tool", READ_TOOL)), rec.warm_prefix_tokens if rec is not None and cfg.caching(trace) else 0,
                 frozenset(rec.subagent_warm_spans) if rec is not None and cfg.caching(trace) else frozenset())


def strategy(cls: type[Strategy], params: Mapping[str, Any] | None, trace: Trace, cfg: RunConfig,
             env: StrategyEnv) -> tuple[Strategy, tuple[str, ...]]:
    """``cls`` built with ``params`` over the parameters it reads from the log's recorded setting, and the
    names of those it took from the log (the caller set none of them: each session's own, not a setting)."""
    defaults = cls.trace_defaults(trace, cfg.overrides()) if trace.header.recorded is not None else {}
    return (build_strategy(cls, {**defaults, **(params or {})}, env),
            tuple(sorted(k for k in defaults if k not in (params or {}))))


def _recovery(trace: Trace, needs: Any, cfg: RunConfig, seed, provider: Provider) -> Any:
    from ctxsim.harness.retention import recovery as rc

    params = rc.RecoveryParams(**dict(cfg.recovery))
    if needs is None or not params.enabled:
        return None
    return rc.Recovery(trace, needs, params, np.random.default_rng(seed), provider.count_text)


def _retention(facts: dict, cfg: RunConfig, seed, session_dir: Path) -> Any:
    if not facts:
        return None
    from ctxsim.harness.retention import scoring as ret

    params = dict(cfg.retention)
    if cfg.readback_probability is not None:
        params["recover_probability"] = cfg.readback_probability
    return ret.RetentionModel(facts, ret.RetentionParams(**params), np.random.default_rng(seed), session_dir=session_dir)
