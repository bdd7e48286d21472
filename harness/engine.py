"""The replay engine: one loop over a trace, in trace order, deterministic.

For each event the strategy sees what a real agent would; at each model call it builds a request,
the protocol checks what the API would reject, and the provider bills the rest. A rejected request
(a 400) is not billed but costs the time of the round trip; the strategy is told
(``Strategy.on_rejected``) and may react as its agent does and have the call sent again, at most
``MAX_ATTEMPTS_PER_CALL`` times. A strategy that gives up ends the session at that call: the rest
of the trace is not replayed and the probes it holds score 0 (the task was not finished). Side calls made by
the strategy (summaries, memory selection...) go through :class:`Services`, which validates, bills
and times them like any call and can make them fail (seeded injection). The clock is the trace's
time plus the blocking time side calls add, so cache TTLs expire as they would. At each probe the
retention model scores the request the strategy sends next.

No I/O here beyond the run's own session directory (the strategy's files), no display, no
concurrency: those live at the edges (CLI, sweep, report).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
from ctxsim.harness import protocol
from ctxsim.harness.conversation import Block, Message, Request, SystemPrompt, ToolDef, ToolSet, Usage
from ctxsim.harness.llm import (
    READBACK,
    RECOVERY,
    RESTATE,
    BackendReply,
    CallSpec,
    LLMBackend,
    SideCallFailed,
    SideCallResult,
)
from ctxsim.harness.provider import DEFAULT_MODEL, Provider
from ctxsim.harness.retention import FactScore
from ctxsim.harness.trace import (
    AssistantEvent,
    CompactEvent,
    FactEvent,
    ProbeEvent,
    SessionEnd,
    SessionStart,
    SubtaskEnd,
    SubtaskStart,
    TextContent,
    ThinkingContent,
    ToolResultEvent,
    Trace,
    UserEvent,
)
from ctxsim.strategies.base import CallInfo, Rejection, Strategy, StrategyEnv
from ctxsim.strategies.registry import build as build_strategy
from ctxsim.strategies.registry import config_dict
from ctxsim.strategies.registry import get as get_strategy

READ_TOOL = "Read"  # the file-reading tool a read-back uses unless the trace names one (header.meta.read_tool)

# The most requests one main call may send: the first and up to five retries after a rejection.
# assumed: the longest documented ladder is Goose's (a context error retried with 0/10/20/50/100% of
# tool responses removed, peers.md), five steps; Claude Code compacts once and errors, Codex and
# gemini-cli do not retry. A RunConfig field (``max_attempts``) so a run can vary it.
MAX_ATTEMPTS_PER_CALL = 6

CALL_COLUMNS = ["index", "kind", "session", "t", "model", "context_tokens", "estimated_tokens",
                "input_uncached", "cache_write_5m", "cache_write_1h", "cache_read", "output", "cost_usd",
                "ttft_s", "duration_s", "overflow", "pairing_violation", "compaction", "rejected", "failed",
                "blocking", "error", "call", "attempt", "session_failed"]


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
    backend: LLMBackend | None = None
    token_scale: float | Mapping[str, float] | None = None  # one scale, or {model: scale}
    models_file: Path | None = None
    max_calls: int | None = None
    fitted_misses: bool = True   # apply the trace's fitted cache-miss model (header.recorded.cache_miss_model)
    max_attempts: int = MAX_ATTEMPTS_PER_CALL  # requests per main call, retries after a rejection included
    readback_probability: float | None = None  # overrides the retention model's recovery probability
    retention: Mapping[str, Any] = field(default_factory=dict)  # RetentionParams overrides
    recovery: Mapping[str, Any] = field(default_factory=dict)  # ctxsim.harness.recovery.RecoveryParams overrides
    summariser: Mapping[str, Any] = field(default_factory=dict)  # SimParams overrides (the simulated summariser)
    # observer(request, info) sees every request sent, main and side calls (the property kit uses
    # it); info: {"tokens", "window", "rejections", "now", "call"}
    observer: Any = None

    def overrides(self) -> frozenset[str]:
        """Which of the recorded setting's fields this config sets for every call."""
        return frozenset(k for k in ("model", "window", "cache_ttl", "token_scale") if getattr(self, k) is not None)

    def provider(self, trace: Trace | None = None) -> Provider:
        """The run's provider, with the trace's recorded setting where this config leaves it open."""
        rec = trace.header.recorded if trace is not None else None
        model = self.model or run_model(trace)
        return Provider(model, window=self.window or (rec.window if rec else None), cache=self.cache,
                        token_scale=self.token_scale or (rec.token_scale if rec else None),
                        models_file=self.models_file, cache_ttl=self.cache_ttl or (rec.cache_ttl if rec else None),
                        miss_model=rec.cache_miss_model if rec is not None and self.fitted_misses else None,
                        seed=self.seed)


def recorded_models(trace: Trace) -> list[str]:
    """Every model the trace's calls name (its recorded compaction calls' too), in first-seen order."""
    seen: dict[str, None] = {}
    for e in trace.events:
        m = e.model if isinstance(e, AssistantEvent) else e.meta.get("call_model") if isinstance(e, CompactEvent) else None
        if m:
            seen.setdefault(str(m), None)
    return list(seen)


def run_model(trace: Trace | None) -> str:
    """The model of a replay that names none: the trace's recorded model, else DEFAULT_MODEL."""
    return (trace.header.model if trace is not None else None) or DEFAULT_MODEL


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


class Services:
    """The engine side of :class:`ctxsim.harness.llm.LLMServices`: every side call validated, possibly
    failed by injection, billed, timed and recorded."""

    def __init__(self, run: _Run) -> None:
        self.run = run
        self.counts: dict[str, int] = {}

    def call(self, request: Request, spec: CallSpec) -> SideCallResult:
        run = self.run
        n = self.counts.get(spec.kind, 0)
        self.counts[spec.kind] = n + 1
        req = request
        if spec.instructions:
            req = request.with_messages(request.messages.append(Message.user(spec.instructions, origin="instruction")))
        req = Request(req.system, req.tools, req.messages, req.breakpoints, spec.kind, None, False,
                      req.model or run.current_model or run.provider.model, spec.max_output_tokens)
        lay = run.provider.layout(req)
        tokens = lay.total()
        rejections = protocol.validate(req, run.provider.window, tokens)
        now = run.now()
        if rejections:
            r = rejections[0]
            wait = run.rejection_wait(req)  # a 400 is not billed, but the round trip takes time
            run.record_call(req, now, None, tokens, failed=True, error=f"{r.reason}: {r.detail}", blocking=spec.blocking,
                            duration=wait)
            if spec.blocking:
                run.offset += wait
            raise SideCallFailed("prompt_too_long" if r.reason == "overflow" else r.reason, r.detail)
        if n in run.cfg.fail_calls.get(spec.kind, ()) or (
            run.cfg.failure_rates.get(spec.kind, 0.0) > 0 and run.fail_rng.random() < run.cfg.failure_rates[spec.kind]
        ):
            # an injected failure (an API error after the request was sent): billed for nothing,
            # but it costs time (modelled as the time to first token)
            bill = run.provider.bill(req, now, 0, lay)
            run.record_call(req, now, None, tokens, failed=True, error="injected failure", blocking=spec.blocking,
                            duration=bill.ttft_s)
            raise SideCallFailed("injected", f"{spec.kind} call #{n}")
        try:
            reply: BackendReply = run.backend.respond(req, spec)
        except SideCallFailed as e:  # a live API error: the row shows it, the strategy counts it
            bill = run.provider.bill(req, now, 0, lay)
            run.record_call(req, now, None, tokens, failed=True, error=f"{e.reason}: {e.detail}",
                            blocking=spec.blocking, duration=bill.ttft_s)
            raise
        out_tokens = min(run.provider.count_text(reply.text), spec.max_output_tokens)
        bill = run.provider.bill(req, now, out_tokens, lay)
        usage = reply.usage or bill.usage
        cost = run.provider.price(usage, run.provider.spec_for(req.model)) if reply.usage else bill.cost_usd
        late = spec.timeout_s is not None and bill.duration_s > spec.timeout_s
        run.record_call(req, now, usage, tokens, cost=cost, ttft=bill.ttft_s, duration=bill.duration_s,
                        blocking=spec.blocking, error="late: dropped" if late else "")
        if spec.blocking:
            run.offset += bill.duration_s
        return SideCallResult(reply.text, usage, bill.duration_s, late)


class _Run:
    def __init__(self, trace: Trace, strategy_cls: type[Strategy], params: Mapping[str, Any] | None,
                 cfg: RunConfig, session_dir: Path) -> None:
        self.trace, self.cfg = trace, cfg
        self.provider = cfg.provider(trace)
        # each call on the model the log recorded for it, unless the run names one for all
        self.call_models = cfg.model is None
        self.current_model: str | None = None  # the recorded model side calls run on (see Services)
        rec = trace.header.recorded
        self.warm_prefix = rec.warm_prefix_tokens if rec is not None and cfg.cache else 0
        if self.call_models:   # every recorded model must have a price before the replay starts
            for m in recorded_models(trace):
                self.provider.spec_for(m)
        self.offset = 0.0
        self.t = 0.0
        self.rows: list[dict[str, Any]] = []
        self.main_index = 0
        self.session: str | None = None
        self.subtasks: list[str] = []
        seeds = np.random.SeedSequence([cfg.seed, int(trace.content_hash[:8] or "0", 16)]).spawn(4)
        self.fail_rng = np.random.default_rng(seeds[0])
        facts = trace.facts()
        self.facts = facts
        if cfg.backend is not None:
            self.backend = cfg.backend
        else:
            from ctxsim.harness.simllm import SimulatedLLM

            self.backend = SimulatedLLM(facts, self.provider.count_text, cfg.seed, params=dict(cfg.summariser),
                                        run_dir=str(session_dir), message_tokens=self.provider.message_tokens)
        self.retention = _make_retention(facts, cfg, seeds[2], session_dir)
        from ctxsim.harness import needs as nd

        self.needs = nd.for_run(trace, self.provider) if facts else None  # the same for every strategy
        self.recovery = (_make_recovery(trace, self.needs, cfg, seeds[3], self.provider)
                         if strategy_cls.closed_loop else None)
        h = trace.header
        self.read_tool = str(h.meta.get("read_tool", READ_TOOL))
        if "prefix" not in trace.memo:
            trace.memo["prefix"] = (SystemPrompt.of(h.system, opaque_tokens=h.prefix_tokens,
                                                    shared_tokens=rec.warm_prefix_tokens if rec else 0),
                                    ToolSet(tuple(ToolDef(t.name, t.description, t.input_schema) for t in h.tools)))
        system, tools = trace.memo["prefix"]
        home, project = _seed_files(session_dir, h.meta.get("files") or {})
        self.services = Services(self)
        self.env = StrategyEnv(session_dir=session_dir, services=self.services, now=self.now,
                               window=self.provider.window, max_output_tokens=self.provider.spec.max_output,
                               model=self.provider.model, provider=self.provider.spec.provider,
                               system=system, tools=tools, rng=np.random.default_rng(seeds[1]),
                               home_dir=home, project_dir=project)
        # parameters the strategy reads from the log's recorded setting, under the caller's own
        defaults = strategy_cls.trace_defaults(trace, cfg.overrides()) if rec is not None else {}
        self.strategy = build_strategy(strategy_cls, {**defaults, **(params or {})}, self.env)
        self.probe_rows: list[dict[str, Any]] = []
        self.fact_scores: list[Any] = []
        self.readbacks = 0
        self._rb = 0
        self.attempt = 1              # of the main call being sent (1, then 2 after a retry ...)
        self.failed_at: int | None = None  # index of the main call whose rejection ended the session
        self.failure: Rejection | None = None
        self.probes_not_reached = 0
        self.isolated: list[bool] = []  # per open subtask span: run in its own context?
        self.span_systems: list[SystemPrompt] = []  # the system prompt each open span set aside
        self.turns, self.turns_failed = 0, 0

    def now(self) -> float:
        return self.t + self.offset

    def _span_system(self, span: str) -> SystemPrompt:
        """An isolated sub-agent's system prompt: the size the log measured for its span (its
        own system prompt and tools, which the log only sizes), else the parent's. Every strategy
        sends it (issue 27: a warm-up sidechain lost its 16,965-token prefix outside ``recorded``)."""
        rec = self.trace.header.recorded
        opaque = rec.subagent_prefix_tokens.get(span) if rec is not None else None
        sys_ = self.env.system
        return sys_ if opaque is None or opaque == sys_.opaque_tokens else SystemPrompt(sys_.blocks, opaque)

    # --- rows -----------------------------------------------------------------------------------
    def record_call(self, req: Request, now: float, usage: Usage | None, tokens: int, *, cost: float = 0.0,
                    ttft: float = 0.0, duration: float = 0.0, overflow: bool = False, pairing: bool = False,
                    rejected: bool = False, failed: bool = False, error: str = "", blocking: bool = False,
                    attempt: int = 1) -> None:
        if self.cfg.observer is not None:
            self.cfg.observer(req, {"tokens": tokens, "window": self.provider.window, "error": error,
                                    "rejected": rejected or failed, "now": now, "call": len(self.rows)})
        u = usage or Usage()
        self.rows.append({
            "index": len(self.rows), "kind": req.kind, "session": self.session, "t": now,
            "model": req.model or self.provider.model, "context_tokens": tokens,
            "estimated_tokens": req.estimated_tokens if req.estimated_tokens is not None else -1,
            "input_uncached": u.input_uncached, "cache_write_5m": u.cache_write_5m,
            "cache_write_1h": u.cache_write_1h, "cache_read": u.cache_read, "output": u.output,
            "cost_usd": cost, "ttft_s": ttft, "duration_s": duration, "overflow": overflow,
            "pairing_violation": pairing, "compaction": req.rewrite, "rejected": rejected, "failed": failed,
            "blocking": blocking, "error": error, "call": self.main_index, "attempt": attempt,
            "session_failed": False,
        })

    # --- the main loop ----------------------------------------------------------------------------
    def run(self) -> None:
        """Replay ``self.trace.events`` (the property kit calls this again with each further chunk
        of a session; after a failure nothing more is replayed)."""
        if self.failed_at is not None:
            self.not_reached(self.trace.events, [])
            return
        s = self.strategy
        pending: list[Block] = []
        probes: list[ProbeEvent] = []
        max_calls = self.cfg.max_calls
        memo = self.trace.memo
        for i, ev in enumerate(self.trace.events):
            # a fact may sit between two results of one call (after the result it is in): the
            # results still reach the strategy as one message
            if pending and not isinstance(ev, (ToolResultEvent, FactEvent)):
                s.on_tool_results(Message("user", tuple(pending)))
                pending = []
            self.t = ev.t
            if isinstance(ev, ToolResultEvent):
                b = memo.get(i)
                if b is None:
                    b = memo[i] = Block.tool_result(ev.tool_use_id, ev.content, ev.is_error)
                pending.append(b)
            elif isinstance(ev, UserEvent):
                if not any(self.isolated):
                    self.turns += 1
                m = memo.get(i)
                if m is None:
                    m = memo[i] = Message.user(ev.text, **ev.meta)
                s.on_user(m)
            elif isinstance(ev, AssistantEvent):
                if max_calls is not None and self.main_index >= max_calls:
                    break
                m = memo.get(i)
                if m is None:
                    m = memo[i] = Message("assistant", tuple(_blocks(ev)))
                if self.call_models:
                    self.current_model = ev.model
                if not self.main_call(m, probes, ev.usage.output if ev.usage is not None else None):
                    self.failed_at = self.main_index
                    self.turns_failed = 1 if self.turns else 0  # the turn in progress
                    self.not_reached(self.trace.events[i + 1:], probes)
                    return
                probes = []
            elif isinstance(ev, ProbeEvent):
                probes.append(ev)
            elif isinstance(ev, SessionStart):
                self.session = ev.session
                s.on_session_start(ev.session, ev.resume, self.now())
            elif isinstance(ev, SessionEnd):
                s.on_session_end(ev.session, self.now())
                self.session = None
            elif isinstance(ev, CompactEvent):
                s.on_recorded_compact(ev.trigger, ev.summary, self.now())
            elif isinstance(ev, SubtaskStart):
                self.subtasks.append(ev.id)
                self.isolated.append(ev.isolated)
                self.span_systems.append(self.env.system)
                if ev.isolated:
                    self.env.system = self._span_system(ev.id)
                s.on_subtask_start(ev.id, ev.description, ev.isolated)
            elif isinstance(ev, SubtaskEnd):
                self.subtasks.pop()
                self.isolated.pop()
                s.on_subtask_end(ev.id, ev.conclusion)
                self.env.system = self.span_systems.pop()
            elif isinstance(ev, FactEvent):
                pass  # ground truth: the engine's, never the strategy's
        if pending:
            s.on_tool_results(Message("user", tuple(pending)))

    def _call_info(self) -> CallInfo:
        return CallInfo(self.main_index, self.now(), self.session, self.subtasks[-1] if self.subtasks else None,
                        self.current_model)

    def rejection_wait(self, req: Request) -> float:
        """The time a 400 costs: the fixed round trip of the latency model (its ``ttft_base_s``,
        models.toml) with no prefill and no output."""
        return self.provider.spec_for(req.model).ttft_base_s

    def accept(self, req: Request, kind: str | None = None) -> tuple[Request, Any] | None:
        """Validate ``req``; while the API would reject it, record the rejected request (unbilled,
        with the time it cost), tell the strategy and, if it reacted, rebuild the request and try
        again, at most ``max_attempts`` requests in all. Returns the request the API accepts and
        its layout, or None when the strategy gave up (or ran out of attempts). ``kind`` overrides
        the kind of a rebuilt request (a read-back stays a read-back)."""
        s = self.strategy
        self.attempt = 1
        while True:
            req = self._on_recorded_model(req)
            lay = self.provider.layout(req)
            tokens = lay.total()
            rejections = protocol.validate(req, self.provider.window, tokens)
            if not rejections:
                return req, lay
            reasons = tuple(dict.fromkeys(r.reason for r in rejections))
            detail = "; ".join(f"{r.reason}: {r.detail}" for r in rejections)
            wait = self.rejection_wait(req)
            self.record_call(req, self.now(), None, tokens, overflow="overflow" in reasons,
                             pairing="pairing" in reasons, rejected=True, error=detail, duration=wait,
                             attempt=self.attempt)
            self.offset += wait  # the agent waited for the 400 (time the trace does not hold)
            rejection = Rejection(reasons, "; ".join(r.detail for r in rejections), tokens, self.provider.window,
                                  self.attempt)
            if self.attempt >= self.cfg.max_attempts or not s.on_rejected(rejection, self._call_info()):
                self.rows[-1]["session_failed"] = True
                self.failure = rejection
                return None
            self.attempt += 1
            req = s.build_request(self._call_info())
            if kind is not None:
                req = _with_kind(req, kind)

    def _on_recorded_model(self, req: Request) -> Request:
        """A request that names no model runs on the model the log recorded for this call."""
        return replace(req, model=self.current_model) if req.model is None and self.current_model else req

    def _bill(self, req: Request, lay: Any, output_tokens: int) -> Usage:
        """Bill one accepted main-loop request."""
        if self.warm_prefix:
            # the log's first call read this head from the cache: an earlier session wrote it
            self.provider.warm_shared_prefix(req, self.now())
            self.warm_prefix = 0
        bill = self.provider.bill(req, self.now(), output_tokens, lay)
        self.record_call(req, self.now(), bill.usage, lay.total(), cost=bill.cost_usd, ttft=bill.ttft_s,
                         duration=bill.duration_s, attempt=self.attempt)
        return bill.usage

    def main_call(self, answer: Message, probes: list[ProbeEvent], recorded_output: int | None = None) -> bool:
        """One main call: build, send (with the strategy's reactions to rejections), score the
        probes on what was sent, read back what they point to, bill. False: the session failed here.
        The answer is the log's whatever the strategy, so its output tokens are the log's count when
        it has one (``header.output_tokens_partial``: a lower bound, Claude Code 2.1.x), else the
        answer's own count."""
        s = self.strategy
        got = self.accept(s.build_request(self._call_info()))
        if got is None:
            return False
        req, lay = got
        if probes and self.retention is not None:
            mark = len(self.fact_scores)
            pointers = self.score_probes(probes, req)
            if pointers:
                got = self.read_back(req, lay, pointers)
                if got is None:
                    return False
                req, lay = got
            if self.recovery is not None:   # the lost needs at risk the agent re-acquires (harness/recovery.py)
                steps = self.recovery.at_call(self.fact_scores[mark:], answer, self.main_index)
                if steps:
                    got = self.inject(req, lay, [(*x.step(), x.content, x.is_error) for x in steps], RECOVERY)
                    if got is None:
                        return False
                    req, lay = got
                said = self.recovery.take_restatements()
                if said:
                    got = self.restate(req, lay, said, answer, recorded_output)
                    if got is None:
                        return False
                    req, lay = got
        unneeded = self.recovery is not None and self.recovery.unneeded_call(
            lambda: "\n".join(m.text for m in req.messages), answer)
        out = recorded_output if recorded_output is not None else self.provider.output_tokens(answer)
        usage = self._bill(req, lay, out)
        if unneeded:  # a recorded re-acquisition this strategy did not need: its cost is credited
            self.recovery.credit_usd += self.rows[-1]["cost_usd"]
        self.main_index += 1
        s.on_response(answer, usage)
        return True

    def not_reached(self, events, probes: list[ProbeEvent]) -> None:
        """The session failed: ``events`` will not be replayed. The probes among them (and
        ``probes``, those of the failing call) score 0: the task was not finished; their user turns
        count as turns that failed."""
        later = [ev for ev in events if isinstance(ev, ProbeEvent)]
        for p in [*probes, *later] if self.retention is not None else []:
            self.probes_not_reached += 1
            for fid in p.needs:
                fact = self.facts.get(fid)
                sc = FactScore(fid, fact.category if fact is not None else "", "lost", 0.0, None, p.id)
                self.fact_scores.append(sc)
                self.probe_rows.append({"probe": p.id, "call": self.main_index, "fact": fid, "category": sc.category,
                                        "where": "not_reached", "score": 0.0, "pointer": ""})
        n = len(user_turns(events, self.isolated))
        self.turns += n
        self.turns_failed += n

    # --- retention and read-backs -----------------------------------------------------------------
    def score_probes(self, probes: list[ProbeEvent], req: Request) -> list[tuple[str, int | None]]:
        """Score each probe on ``req``; return the pointers (file, line of the fact) the model
        would read back."""
        lay = self.provider.layout(req)
        total = lay.total()
        base = lay.tokens(-1)

        def before(i: int) -> int:
            return base if i <= 0 else lay.tokens(i - 1)

        pointers: list[tuple[str, int | None]] = []
        for p in probes:
            scores = self.retention.score(p, req, before, total)
            for sc in scores:
                self.fact_scores.append(sc)
                self.probe_rows.append({"probe": p.id, "call": self.main_index, "fact": sc.fact_id,
                                        "category": sc.category, "where": sc.where, "score": sc.score,
                                        "pointer": sc.pointer or ""})
                ptr = (sc.pointer, getattr(sc, "pointer_line", None))
                if sc.where == "recoverable" and sc.score > 0 and sc.pointer and sc.pointer not in [q for q, _ in pointers]:
                    pointers.append(ptr)
        return pointers

    def read_back(self, req: Request, lay: Any, pointers: list[tuple[str, int | None]]) -> tuple[Request, Any] | None:
        """The model reads each pointer back before it answers: one call whose answer is the Read
        tool use (billed as this main call), the excerpt entering history as its result, then the
        request that gets the recorded answer (kind ``readback``: the extra call). Like Claude
        Code's Read, it reads a window of lines around the fact (READBACK_LINES), not the whole file.
        The request after a read-back can be rejected like any (the excerpt made it too long):
        None when the session failed there."""
        steps = []
        for path, line in pointers:
            try:
                text, inp = _excerpt(Path(path), line)
            except OSError:
                continue
            steps.append((self.read_tool, {"file_path": path, **inp}, text, False))
        return self.inject(req, lay, steps, READBACK)

    def restate(self, req: Request, lay: Any, texts: list[str], answer: Message,
                recorded_output: int | None) -> tuple[Request, Any] | None:
        """A violated goal/constraint (harness/recovery.py): ``req`` lacks it, so the call made on
        it is wasted — billed with the recorded answer's output tokens, its text entering history
        (its tool uses are not run) — then the user restates ``texts`` (one user message) and the
        call is sent again (kind ``restate``, billed by the caller). None when the session failed."""
        s = self.strategy
        out = recorded_output if recorded_output is not None else self.provider.output_tokens(answer)
        usage = self._bill(req, lay, out)
        said = "".join(b.text for b in answer.blocks if b.type == "text").strip() or "(done)"
        s.on_response(Message("assistant", (Block.text_block(said),), {"origin": RESTATE}), usage)
        s.on_user(Message.user("\n".join(texts), origin=RESTATE))
        return self.accept(_with_kind(s.build_request(self._call_info()), RESTATE), RESTATE)

    def inject(self, req: Request, lay: Any, steps: list[tuple[str, Any, str, bool]], kind: str) -> tuple[Request, Any] | None:
        """Tool calls the simulated agent makes before the call's recorded answer (read-backs of
        pointers, recoveries of lost needs: harness/recovery.py), one at a time: ``req`` is billed
        as the call that emits the tool use, its result enters history, and the call is sent again
        (``kind``). None when the session failed there."""
        s = self.strategy
        for name, inp, text, is_error in steps:
            self._rb += 1
            tu = Block.tool_use(f"ctxsim_{kind}_{self._rb}", name, inp)
            ask = Message("assistant", (tu,), {"origin": kind})
            usage = self._bill(req, lay, self.provider.output_tokens(ask))
            s.on_response(ask, usage)
            s.on_tool_results(Message("user", (Block.tool_result(tu.id, text, is_error),), {"origin": kind}))
            if kind == READBACK:
                self.readbacks += 1
            got = self.accept(_with_kind(s.build_request(self._call_info()), kind), kind)
            if got is None:
                return None
            req, lay = got
        return req, lay


def _with_kind(req: Request, kind: str) -> Request:
    return Request(req.system, req.tools, req.messages, req.breakpoints, kind, req.estimated_tokens,
                   req.rewrite, req.model, req.max_output_tokens)


def user_turns(events, spans: list[bool] | tuple[bool, ...] = ()) -> list[int]:
    """Indices of the events that open a user turn of the main conversation: every ``user`` event
    outside an isolated sub-agent span (a sub-agent's prompt is its parent's tool call, not a
    turn of the user's). ``spans``: the isolation of the spans already open before ``events``."""
    out, spans = [], list(spans)
    for i, ev in enumerate(events):
        if isinstance(ev, SubtaskStart):
            spans.append(ev.isolated)
        elif isinstance(ev, SubtaskEnd):
            if spans:
                spans.pop()
        elif isinstance(ev, UserEvent) and not any(spans):
            out.append(i)
    return out


READBACK_LINES = 2000  # Claude Code's Read tool: 2,000 lines from an offset by default
READBACK_MAX_CHARS = 100_000  # and a cap on what one read returns


def _excerpt(path: Path, line: int | None) -> tuple[str, dict[str, int]]:
    """What ``Read(file_path, offset, limit)`` returns around ``line`` (1-based)."""
    with path.open("r", encoding="utf-8", errors="replace") as fh:
        lines = fh.read().splitlines(keepends=True)
    if line is None or len(lines) <= READBACK_LINES:
        start = 1 if line is None else max(1, line - READBACK_LINES // 2)
    else:
        start = max(1, min(line - READBACK_LINES // 2, len(lines) - READBACK_LINES + 1))
    chunk = "".join(lines[start - 1:start - 1 + READBACK_LINES])
    if len(chunk) > READBACK_MAX_CHARS:
        if line is not None:  # keep the fact's line inside the cut
            at = sum(len(x) for x in lines[start - 1:line - 1])
            lo = max(0, min(at - READBACK_MAX_CHARS // 2, len(chunk) - READBACK_MAX_CHARS))
            chunk = chunk[lo:lo + READBACK_MAX_CHARS]
        else:
            chunk = chunk[:READBACK_MAX_CHARS]
    return chunk, {"offset": start, "limit": READBACK_LINES}


def _blocks(ev: AssistantEvent) -> list[Block]:
    out = []
    for c in ev.content:
        if isinstance(c, TextContent):
            out.append(Block.text_block(c.text))
        elif isinstance(c, ThinkingContent):
            out.append(Block("thinking", c.thinking))
        else:
            out.append(Block.tool_use(c.id, c.name, c.input))
    return out


def _seed_files(session_dir: Path, files: Mapping[str, str]) -> tuple[Path, Path]:
    """The simulated user's home and project, with the files the trace header asks for."""
    home, project = session_dir / "home", session_dir / "project"
    home.mkdir(parents=True, exist_ok=True)
    project.mkdir(parents=True, exist_ok=True)
    root = session_dir.resolve()
    for rel, content in files.items():
        target = (session_dir / rel).resolve()
        if root not in target.parents:
            raise ValueError(f"header.meta.files: {rel!r} escapes the run directory")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
    return home, project


def _needs_metrics(res: RunResult, run: _Run, calls: pd.DataFrame, probes: pd.DataFrame, cfg: RunConfig) -> None:
    """The needs-at-risk headline and the cost of forgetting (harness/needs.py, harness/recovery.py);
    the keys are there for every run (zeros without facts or with the loop off)."""
    from ctxsim.harness import needs as nd
    from ctxsim.harness import recovery as rc

    needs = run.needs if run.needs is not None else nd.Needs({}, (), 0)
    restored = run.recovery.restored if run.recovery is not None else {}
    res.metrics["needs_at_risk"] = nd.headline(run.probe_rows, needs, restored)
    res.metrics["needs_by_distance"] = nd.by_distance(run.probe_rows, needs)
    rec = res.metrics["recovery"] = (run.recovery.metrics(calls) if run.recovery is not None
                                     else rc.Recovery.none(rc.RecoveryParams(**dict(cfg.recovery)),
                                                           closed_loop=type(run.strategy).closed_loop))
    res.metrics["cost_with_recovery_usd"] = res.metrics["cost_usd"] - rec["credit_usd"]
    got = [needs.get(p, f) for p, f in zip(probes["probe"], probes["fact"], strict=True)]
    probes["at_risk"] = [bool(g is not None and g.at_risk) for g in got]
    probes["distance_tokens"] = [g.distance_tokens if g is not None else -1 for g in got]
    probes["restored"] = [nd.restored_by_loop({"fact": f, "call": c}, restored)
                          for f, c in zip(probes["fact"], probes["call"], strict=True)]


def _make_recovery(trace: Trace, needs: Any, cfg: RunConfig, seed, provider: Provider) -> Any:
    from ctxsim.harness import recovery as rc

    params = rc.RecoveryParams(**dict(cfg.recovery))
    if needs is None or not params.enabled:
        return None
    return rc.Recovery(trace, needs, params, np.random.default_rng(seed), provider.count_text)


def _make_retention(facts: dict[str, FactEvent], cfg: RunConfig, seed, session_dir: Path) -> Any:
    if not facts:
        return None
    from ctxsim.harness import retention as ret

    params = dict(cfg.retention)
    if cfg.readback_probability is not None:
        params["recover_probability"] = cfg.readback_probability
    return ret.RetentionModel(facts, ret.RetentionParams(**params), np.random.default_rng(seed), session_dir=session_dir)


# Run directories: the paths of spill files and transcripts appear in the conversation, so they
# are tokenised and billed. A random temporary name would make a run's numbers depend on it; a
# fixed root and a fixed-width counter (every 6-digit suffix is two cl100k tokens) keep the text's
# token count the same for every run, in any process, on any POSIX machine.
# The root is per user (a machine's users never share or clean up each other's runs), named with
# the uid in six digits: /tmp/ctxsim000000/run-000003/... has the cl100k token count the shared
# /tmp/ctxsim-runs/run-000003/... had, for every uid (checked in tests/core/test_run_dirs.py).
def _run_root() -> Path:
    uid = os.getuid() if hasattr(os, "getuid") else 0
    base = Path("/tmp") if os.name == "posix" else Path(tempfile.gettempdir())
    return base / f"ctxsim{uid % 1_000_000:06d}"


RUN_ROOT = _run_root()
SESSION_MARK = ".ctxsim-session"   # in a --session-dir: it holds a ctxsim run's files (cleared on reuse)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def _sweep_stale(root: Path) -> None:
    """Remove the run directories of processes that were killed (their ``.pid`` names a dead one)."""
    for pidfile in root.glob("run-*.pid"):
        try:
            pid = int(pidfile.read_text().strip() or 0)
        except (OSError, ValueError):
            continue
        if pid and not _alive(pid):
            shutil.rmtree(pidfile.with_suffix(""), ignore_errors=True)
            pidfile.unlink(missing_ok=True)


def _fresh_run_dir() -> Path:
    RUN_ROOT.mkdir(mode=0o700, parents=True, exist_ok=True)
    if hasattr(os, "getuid") and RUN_ROOT.stat().st_uid != os.getuid():
        raise RuntimeError(f"{RUN_ROOT} belongs to another user: remove it (ctxsim keeps each user's runs apart)")
    _sweep_stale(RUN_ROOT)
    for i in range(1_000_000):
        d = RUN_ROOT / f"run-{i:06d}"
        try:
            d.mkdir()
        except FileExistsError:
            continue
        d.with_suffix(".pid").write_text(str(os.getpid()))
        return d
    raise RuntimeError(f"{RUN_ROOT}: no free run directory")


def _clean_session_dir(d: Path) -> None:
    """A reused ``--session-dir`` starts clean (a run never appends to an earlier run's transcript);
    a folder that holds anything else is refused, never emptied."""
    if d.exists() and not d.is_dir():
        raise ValueError(f"--session-dir {d}: a file, not a folder")
    if d.is_dir() and any(d.iterdir()):
        if not (d / SESSION_MARK).exists():
            raise ValueError(f"--session-dir {d}: not empty and not a ctxsim session folder; give a new or empty one")
        for p in d.iterdir():
            if p.name != SESSION_MARK:
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    d.mkdir(parents=True, exist_ok=True)
    (d / SESSION_MARK).write_text("a ctxsim run's files: the next run in this folder clears it\n")


@contextmanager
def _session_dir(cfg: RunConfig):
    if cfg.session_dir is not None:
        d = Path(cfg.session_dir)
        _clean_session_dir(d)
        yield d
        return
    d = _fresh_run_dir()
    try:
        yield d
    finally:   # on any exit; a killed process's directory goes at the next run (_sweep_stale)
        shutil.rmtree(d, ignore_errors=True)
        d.with_suffix(".pid").unlink(missing_ok=True)


def _provenance(run: _Run, calls: pd.DataFrame) -> dict[str, Any]:
    from ctxsim.harness import provenance as pv
    from ctxsim.harness import retention as ret

    models = [run.provider.model, *calls["model"].dropna().unique().tolist()]
    params = run.retention.params if run.retention is not None else ret.RetentionParams(**run.cfg.retention)
    return {"trace": pv.trace_source(run.trace.header), "prices": pv.prices(run.provider.table, models),
            "summariser": pv.summariser(run.backend), "retention": pv.retention(params),
            "max_attempts_per_call": run.cfg.max_attempts,
            "cache_model": ({"fitted": True, "share": run.provider.miss_model.share,
                             "fallback_none": run.provider.miss_model.fallback_none,
                             "routed_requests": run.provider.routed,
                             "continuing_requests": run.provider.router._n}
                            if run.provider.miss_model is not None else {"fitted": False})}


def replay(trace: Trace, strategy: str | type[Strategy], params: Mapping[str, Any] | None = None,
           config: RunConfig | None = None) -> RunResult:
    """Replay ``trace`` through ``strategy`` (a registered name or a class) with ``params``."""
    cfg = config or RunConfig()
    cls = get_strategy(strategy) if isinstance(strategy, str) else strategy
    with _session_dir(cfg) as d:
        run = _Run(trace, cls, params, cfg, d)
        run.run()
    calls = pd.DataFrame(run.rows, columns=CALL_COLUMNS)
    probes = pd.DataFrame(run.probe_rows, columns=["probe", "call", "fact", "category", "where", "score", "pointer"])
    from ctxsim.harness.metrics import compute_metrics

    res = RunResult(cls.name, config_dict(run.strategy.config), trace.path or trace.header.name,
                    trace.content_hash, run.provider.model, run.provider.window, cfg.seed, calls, {}, probes)
    outcome = {"completed": run.failed_at is None, "failed_at_call": run.failed_at,
               "failure": list(run.failure.reasons) if run.failure is not None else None,
               "turns": run.turns, "turns_failed": run.turns_failed, "probes_not_reached": run.probes_not_reached}
    res.metrics = compute_metrics(res, run.strategy.counters, run.fact_scores, run.readbacks, outcome,
                                  run.retention.params if run.retention is not None else None)
    res.metrics["provenance"] = _provenance(run, calls)
    _needs_metrics(res, run, calls, probes, cfg)
    return res
