"""The replay engine: one loop over a trace, in trace order, deterministic.

For each event the strategy sees what a real agent would; at each model call it builds a request, the
protocol checks what the API would reject, and the provider bills the rest (a call an earlier session
made, copied in by a resume, is history: no request). A rejected request (a 400) is not billed but costs
the round trip; the strategy is told (``Strategy.on_rejected``) and may have the call sent again, at most
``max_attempts`` times; one that gives up ends the session there (the rest is not replayed, its probes
score 0). Side calls go through :class:`~ctxsim.harness.replay.side_calls.Services`. The clock is the
trace's time plus the blocking time side calls add, so cache TTLs expire as they would. At each probe the
retention model scores the request the strategy sends next. The edges: run directories (replay/rundirs.py),
what is built before the loop (replay/run_setup.py), probe scoring (retention/probe_scoring.py), read-back
excerpts (replay/readback.py), the calls the simulated agent adds before a recorded answer (replay/injected.py),
frames, metrics and provenance (replay/results.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ctxsim.harness.llm.services import READBACK, RECOVERY
from ctxsim.harness.model import trace as tr
from ctxsim.harness.model.conversation import Block, Message, Request, SystemPrompt, Usage
from ctxsim.harness.provider import protocol
from ctxsim.harness.replay import events, fork, injected, readback, run_setup
from ctxsim.harness.replay.call_rows import call_row
from ctxsim.harness.replay.events import assistant_blocks, result_block, span_system, user_message, user_turns
from ctxsim.harness.replay.heap import replay_heap
from ctxsim.harness.replay.runconfig import MAX_ATTEMPTS_PER_CALL, RunConfig, recorded_models, run_model  # noqa: F401
from ctxsim.harness.replay.rundirs import RUN_ROOT, SESSION_MARK, session_dir  # noqa: F401 (re-exported)
from ctxsim.harness.replay.side_calls import Services
from ctxsim.harness.retention.probe_scoring import ProbeScorer
from ctxsim.strategies.base import CallInfo, Rejection, Strategy
from ctxsim.strategies.registry import get as get_strategy

if TYPE_CHECKING:
    from ctxsim.harness.replay.results import RunResult


@dataclass
class _Context:   # what the engine keeps of one open context (the main conversation, then each isolated span's)
    warm: bool   # its first call reads the head an earlier session cached (warm_prefix_tokens; warm_spans)
    last: tuple[Request, Message] | None = None   # its last request, with the answer to it (harness/replay/fork.py)


class _Run:
    def __init__(self, trace: tr.Trace, strategy_cls: type[Strategy], params: Mapping[str, Any] | None,
                 cfg: RunConfig, session_dir) -> None:
        self.trace, self.cfg = trace, cfg
        self.offset, self.t = 0.0, 0.0
        self.rows: list[dict[str, Any]] = []
        self.main_index = 0
        self.session: str | None = None
        self.subtasks: list[str] = []
        self.call_models = cfg.model is None  # each call on the model the log recorded for it
        self.current_model = self.current_route = None  # str | None: the recorded model and route side calls run on
        self.services = Services(self)
        p = run_setup.assemble(trace, cfg, session_dir, self.services, strategy_cls.closed_loop)
        self.provider, self.fail_rng, self.facts, self.backend = p.provider, p.fail_rng, p.facts, p.backend
        self.needs, self.recovery, self.env, self.read_tool = p.needs, p.recovery, p.env, p.read_tool
        self.contexts, self.warm_spans = [_Context(bool(p.warm_prefix))], p.warm_spans   # main, then each span's
        self.forked: fork.Fork | None = None   # a fork of the conversation being replayed (harness/replay/fork.py)
        self.scorer = ProbeScorer(p.facts, p.retention)
        self.strategy, self.from_log = run_setup.strategy(strategy_cls, params, trace, cfg, self.env)
        self.params_set = tuple(sorted(params or {}))   # the parameters the caller set
        self.readbacks, self.tool_calls_added = 0, 0   # read-backs made; tool calls added (they number the ids)
        self.attempt = 1              # of the main call being sent (1, then 2 after a retry ...)
        self.failed_at: int | None = None  # index of the main call whose rejection ended the session
        self.failure: Rejection | None = None
        self.isolated: list[bool] = []  # per open subtask span: run in its own context?
        self.span_systems: list[SystemPrompt] = []  # the system prompt each open span set aside
        self.turns, self.turns_failed = 0, 0

    def now(self) -> float:
        return self.t + self.offset

    def record_call(self, req: Request, now: float, usage: Usage | None, tokens: int, *, cost: float = 0.0,
                    ttft: float = 0.0, duration: float = 0.0, overflow: bool = False, pairing: bool = False,
                    rejected: bool = False, failed: bool = False, error: str = "", blocking: bool = False,
                    attempt: int = 1, warmed: bool = False) -> None:
        if self.cfg.observer is not None:
            self.cfg.observer(req, {"tokens": tokens, "window": self.provider.window, "error": error, "warmed": warmed,
                                    "rejected": rejected or failed, "now": now, "call": len(self.rows),
                                    "fork": self.forked is not None})   # the engine's request, not the strategy's
        self.rows.append(call_row(len(self.rows), req, self.session, now, self.provider.model, usage, tokens, cost,
                                  ttft, duration, overflow, pairing, rejected, failed, blocking, error,
                                  self.main_index, attempt))

    def run(self) -> None:
        """Replay ``self.trace.events`` (the property kit calls this again with each further chunk
        of a session; after a failure nothing more is replayed)."""
        if self.failed_at is not None:
            self.not_reached(self.trace.events, [])
            return
        s = self.strategy
        pending: list[Block] = []
        waiting: list[Message] = []   # user messages sent after the results of the call they sit in
        probes: list[tr.ProbeEvent] = []
        max_calls, memo = self.cfg.max_calls, self.trace.memo
        held = events.held_users(self.trace)
        for i, ev in enumerate(self.trace.events):
            if self.forked is not None or (isinstance(ev, tr.SubtaskStart) and ev.fork):
                self.t = ev.t   # its events never reach the strategy, nor end the results of a call
                fork.step(self, ev)
                continue
            # a fact may sit between two results of one call (after the result it is in), and so may a user
            # message (events.between_results), sent after them: the results still reach the strategy as one message
            if pending and not isinstance(ev, (tr.ToolResultEvent, tr.FactEvent)) and i not in held:
                s.on_tool_results(Message("user", tuple(pending)))
                pending = []
            if waiting and not pending and not isinstance(ev, (tr.ToolResultEvent, tr.FactEvent, tr.ProbeEvent)) \
                    and i not in held:
                for m in waiting:   # a probe between the results does not end them
                    self.user(m)
                waiting = []
            self.t = ev.t
            if isinstance(ev, tr.ToolResultEvent):
                b = memo.get(i)
                if b is None:
                    b = memo[i] = result_block(ev)
                pending.append(b)
            elif isinstance(ev, tr.UserEvent):
                m = memo.get(i)
                if m is None:
                    m = memo[i] = user_message(ev)
                if i in held:
                    waiting.append(m)
                else:
                    self.user(m)
            elif isinstance(ev, tr.AssistantEvent):
                if max_calls is not None and self.main_index >= max_calls:
                    break
                m = memo.get(i)
                if m is None:
                    m = memo[i] = Message("assistant", tuple(assistant_blocks(ev)))
                if ev.copied:   # an earlier session's call, copied in by a resume: history, no request
                    s.on_response(m, None)
                    continue
                if self.call_models:
                    self.current_model, self.current_route = ev.model, ev.meta.get(tr.ROUTE, self.current_route)
                if not self.main_call(m, probes, ev.usage.output if ev.usage is not None else None):
                    self.failed_at = self.main_index
                    self.turns_failed = 1 if self.turns else 0  # the turn in progress
                    self.not_reached(self.trace.events[i + 1:], probes)
                    return
                probes = []
            elif isinstance(ev, tr.ProbeEvent):
                probes.append(ev)
            elif isinstance(ev, tr.SessionStart):
                self.session = ev.session
                s.on_session_start(ev.session, ev.resume, self.now())
            elif isinstance(ev, tr.SessionEnd):
                s.on_session_end(ev.session, self.now())
                self.session = None
            elif isinstance(ev, tr.CompactEvent):
                s.on_recorded_compact(ev.trigger, ev.summary, self.now())
            elif isinstance(ev, tr.SubtaskStart):
                self.subtasks.append(ev.id)
                self.isolated.append(ev.isolated)
                self.span_systems.append(self.env.system)
                if ev.isolated:
                    self.env.system = span_system(self.trace, self.env.system, ev.id)
                    self.contexts.append(_Context(ev.id in self.warm_spans))
                s.on_subtask_start(ev.id, ev.description, ev.isolated)
            elif isinstance(ev, tr.SubtaskEnd):
                self.subtasks.pop()
                if self.isolated.pop():
                    self.contexts.pop()
                s.on_subtask_end(ev.id, ev.conclusion)
                self.env.system = self.span_systems.pop()
            # tr.FactEvent: ground truth, the engine's, never the strategy's
        if pending:
            s.on_tool_results(Message("user", tuple(pending)))
        for m in waiting:
            self.user(m)

    def call_info(self) -> CallInfo:
        return CallInfo(self.main_index, self.now(), self.session, self.subtasks[-1] if self.subtasks else None,
                        self.current_model)

    def rejection_wait(self, req: Request) -> float:
        """The time a 400 costs: the latency model's fixed round trip (``ttft_base_s``), no prefill, no output."""
        return self.provider.spec_for(req.model).ttft_base_s

    def accept(self, req: Request, kind: str | None = None) -> tuple[Request, Any] | None:
        """Validate ``req``; while the API would reject it, record the rejected request (unbilled, with the
        time it cost), tell the strategy and, if it reacted, rebuild the request and try again, at most
        ``max_attempts`` requests in all. Returns the request the API accepts and its layout, or None when
        the strategy gave up (or ran out of attempts). ``kind`` overrides a rebuilt request's kind."""
        s = self.strategy
        self.attempt = 1
        while True:
            if not isinstance(req, Request):   # a strategy's bug named as its own, not as the engine's
                raise TypeError(f"strategy {type(s).__module__}:{type(s).__qualname__}: build_request returned "
                                f"{type(req).__name__}, not a Request")
            if (req.model is None and self.current_model) or (req.route is None and self.current_route):
                req = replace(req, model=req.model or self.current_model, route=req.route or self.current_route)
            lay = self.provider.layout(req)
            tokens = lay.total()
            rejections = protocol.validate(req, self.provider.window, tokens)
            if not rejections:
                return req, lay
            wait = self.rejection_wait(req)
            reasons = self.refused(req, tokens, rejections, wait)
            self.offset += wait  # the agent waited for the 400 (time the trace does not hold)
            rejection = Rejection(reasons, "; ".join(r.detail for r in rejections), tokens, self.provider.window,
                                  self.attempt)
            if self.attempt >= self.cfg.max_attempts or not s.on_rejected(rejection, self.call_info()):
                self.rows[-1]["session_failed"] = True
                self.failure = rejection
                return None
            self.attempt += 1
            req = s.build_request(self.call_info())
            if kind is not None and isinstance(req, Request):   # every field kept (thinking too)
                req = replace(req, kind=kind)

    def refused(self, req: Request, tokens: int, rejections: list[Any], wait: float = 0.0) -> tuple[str, ...]:
        """Record a request the API refuses (unbilled, ``wait`` seconds the 400 cost); its reasons, in order."""
        reasons = tuple(dict.fromkeys(r.reason for r in rejections))
        self.record_call(req, self.now(), None, tokens, overflow="overflow" in reasons, pairing="pairing" in reasons,
                         rejected=True, error="; ".join(f"{r.reason}: {r.detail}" for r in rejections), duration=wait,
                         attempt=self.attempt)
        return reasons

    def bill(self, req: Request, lay: Any, output_tokens: int) -> Usage:
        """Bill one accepted main-loop request, its shared head warmed first where an earlier session cached it."""
        if warmed := self.contexts[-1].warm:
            self.provider.warm_shared_prefix(req, self.now())
            self.contexts[-1].warm = False
        bill = self.provider.bill(req, self.now(), output_tokens, lay)
        self.record_call(req, self.now(), bill.usage, lay.total(), cost=bill.cost_usd, ttft=bill.ttft_s,
                         duration=bill.duration_s, attempt=self.attempt, warmed=warmed)
        return bill.usage

    def main_call(self, answer: Message, probes: list[tr.ProbeEvent], recorded_output: int | None = None) -> bool:
        """One main call: build, send (with the strategy's reactions to rejections), score the
        probes on what was sent, read back what they point to, recover lost needs, bill. False: the
        session failed here. The answer is the log's whatever the strategy, so its output tokens are
        the log's count when it has one (``header.output_tokens_partial``: a lower bound, Claude Code
        2.1.x), else the answer's own count."""
        s = self.strategy
        got = self.accept(s.build_request(self.call_info()))
        if got is None:
            return False
        if probes and self.scorer.retention is not None:
            mark = len(self.scorer.fact_scores)
            pointers = self.scorer.score(probes, got[0], self.provider.layout(got[0]), self.main_index)
            if pointers:   # a pointer carries a need only when its read-back is made and billed
                reads = readback.steps(pointers, self.read_tool)
                self.scorer.unpaid(mark, {p for p, _ in pointers} - {x[1]["file_path"] for x in reads})
                got = injected.inject(self, *got, reads, READBACK)
                if got is None:
                    self.scorer.unpaid(mark)
            if got is not None and self.recovery is not None:   # lost needs at risk re-acquired (harness/retention/recovery.py)
                steps = self.recovery.at_call(self.scorer.fact_scores[mark:], answer, self.main_index)
                if steps:
                    got = injected.inject(self, *got, [(*x.step(), x.content, x.is_error) for x in steps], RECOVERY)
                said = self.recovery.take_restatements() if got is not None else None
                if said:
                    got = injected.restate(self, *got, said, answer, recorded_output)
            if got is None:
                return False
        req, lay = got
        unneeded = self.recovery is not None and self.recovery.unneeded_call(req.messages, answer)
        usage = self.bill(req, lay, recorded_output if recorded_output is not None else self.provider.output_tokens(answer))
        if unneeded:  # a recorded re-acquisition this strategy did not need: its cost is credited
            self.recovery.credit_usd += self.rows[-1]["cost_usd"]
        self.main_index += 1
        self.contexts[-1].last = (req, answer)
        s.on_response(answer, usage)
        return True

    def user(self, m: Message) -> None:
        """A user message reaches the strategy (a turn of the user's outside an isolated span)."""
        if not any(self.isolated):
            self.turns += 1
        self.strategy.on_user(m)

    def not_reached(self, events, probes: list[tr.ProbeEvent]) -> None:
        """The session failed: ``events`` will not be replayed. Their probes (and ``probes``, the failing
        call's) score 0, the task not finished; their user turns count as turns that failed."""
        self.scorer.not_reached([*probes, *(ev for ev in events if isinstance(ev, tr.ProbeEvent))], self.main_index)
        n = len(user_turns(events, self.isolated))
        self.turns += n
        self.turns_failed += n


def replay(trace: tr.Trace, strategy: str | type[Strategy], params: Mapping[str, Any] | None = None,
           config: RunConfig | None = None) -> RunResult:
    """Replay ``trace`` through ``strategy`` (a registered name or a class) with ``params``."""
    cfg = config or RunConfig()
    cls = get_strategy(strategy) if isinstance(strategy, str) else strategy
    with replay_heap(), session_dir(cfg.session_dir) as d:
        run = _Run(trace, cls, params, cfg, d)
        run.run()
    from ctxsim.harness.replay import results  # pandas: after the loop, never at import

    return results.build(run, cls.name)
