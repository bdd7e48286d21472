"""The provider side of a replay and its seed (:class:`RunConfig`), and the recorded setting a
trace brings with it (which models its calls named). A run is a pure function of
(trace, strategy config, RunConfig)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ctxsim.harness.llm.services import LLMBackend
from ctxsim.harness.model.trace import CacheMissModel, CompactEvent, Trace, is_call
from ctxsim.harness.provider import DEFAULT_MODEL, Provider
from ctxsim.harness.provider.cache import LOG_CLOCK_GRACE_S

# The most requests one main call may send: the first and up to five retries after a rejection.
# assumed: the longest documented ladder is Goose's (a context error retried with 0/10/20/50/100% of
# tool responses removed, peers.md), five steps; Claude Code compacts once and errors, Codex and
# gemini-cli do not retry. A RunConfig field (``max_attempts``) so a run can vary it.
MAX_ATTEMPTS_PER_CALL = 6


@dataclass(frozen=True)
class RunConfig:
    """The provider side of a run, and the run's seed. A run is a pure function of
    (trace, strategy config, RunConfig).

    ``model``, ``window``, ``cache_ttl`` and ``token_scale`` left at None take the trace's recorded
    setting (``header.recorded``: imported logs), else the defaults: each call on the model the log
    recorded for it (the trace's model, else DEFAULT_MODEL, for calls it does not name), the window
    the agent ran with, the TTL it wrote, the scale fitted on the log. Set, they apply to every call.
    """

    model: str | None = None
    window: int | None = None
    cache_ttl: Literal["5m", "1h"] | None = None
    cache: bool = True
    seed: int = 0
    failure_rates: Mapping[str, float] = field(default_factory=dict)  # side-call kind -> probability
    fail_calls: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  # kind -> 0-based call numbers that fail
    session_dir: Path | None = None
    backend: LLMBackend | None = None  # None: the simulated backend (harness/llm/simulated.py)
    token_scale: float | Mapping[str, float] | None = None  # one scale, or {model: scale}
    models_file: Path | None = None
    max_calls: int | None = None
    fitted_misses: bool = True   # apply the trace's fitted cache-miss model (header.recorded.cache_miss_model)
    max_attempts: int = MAX_ATTEMPTS_PER_CALL  # requests per main call, retries after a rejection included
    readback_probability: float | None = None  # overrides the retention model's recovery probability
    retention: Mapping[str, Any] = field(default_factory=dict)  # RetentionParams overrides
    recovery: Mapping[str, Any] = field(default_factory=dict)  # ctxsim.harness.retention.recovery.RecoveryParams overrides
    summariser: Mapping[str, Any] = field(default_factory=dict)  # SimParams overrides (the simulated summariser)
    # observer(request, info) sees every request sent, main and side calls (the property kit uses
    # it); info: {"tokens", "window", "rejections", "now", "call"}
    observer: Any = None

    def overrides(self) -> frozenset[str]:
        """Which of the recorded setting's fields this config sets for every call."""
        return frozenset(k for k in ("model", "window", "cache_ttl", "token_scale") if getattr(self, k) is not None)

    def caching(self, trace: Trace | None = None) -> bool:
        """Prompt caching in this run: on unless the run turns it off or the trace's log ran without
        it (``recorded.prompt_caching``, issue 41: a log of 112 calls with no cache read replayed as
        cached was 85% below its bill)."""
        rec = trace.header.recorded if trace is not None else None
        return self.cache and (rec is None or rec.prompt_caching)

    def provider(self, trace: Trace | None = None, miss_model: CacheMissModel | None = None) -> Provider:
        """The run's provider, with the trace's recorded setting where this config leaves it open;
        ``miss_model``: this one instead of the trace's (a fit trying shares on the same provider)."""
        rec = trace.header.recorded if trace is not None else None
        model = self.model or run_model(trace)
        if miss_model is None and rec is not None and self.fitted_misses:
            miss_model = rec.cache_miss_model
        return Provider(model, window=self.window or (rec.window if rec else None), cache=self.caching(trace),
                        token_scale=self.token_scale or (rec.token_scale if rec else None),
                        models_file=self.models_file, cache_ttl=self.cache_ttl or (rec.cache_ttl if rec else None),
                        miss_model=miss_model,
                        seed=self.seed, uncached_models=tuple(rec.uncached_models) if rec is not None else (),
                        ttl_grace_s=LOG_CLOCK_GRACE_S if rec is not None else 0.0,
                        head_kept_warm=bool(rec is not None and rec.warm_prefix_kept))


def recorded_models(trace: Trace) -> list[str]:
    """Every model the trace's calls name (its recorded compaction calls' too), in first-seen order
    (a copy of an earlier session's call is no call: ``is_call``)."""
    seen: dict[str, None] = {}
    for e in trace.events:
        m = e.model if is_call(e) else e.meta.get("call_model") if isinstance(e, CompactEvent) else None
        if m:
            seen.setdefault(str(m), None)
    return list(seen)


def run_model(trace: Trace | None) -> str:
    """The model of a replay that names none: the trace's recorded model, else DEFAULT_MODEL."""
    return (trace.header.model if trace is not None else None) or DEFAULT_MODEL
