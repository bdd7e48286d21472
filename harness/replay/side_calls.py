"""The engine side of :class:`ctxsim.harness.llm.services.LLMServices`: every side call a strategy makes
(summaries, memory selection, ...) validated like a main call, possibly failed by seeded
injection, billed, timed and recorded as a row of the run."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ctxsim.harness.llm.services import BackendReply, CallSpec, SideCallFailed, SideCallResult
from ctxsim.harness.model.conversation import Message, Request
from ctxsim.harness.provider import protocol


class Services:
    def __init__(self, run: Any) -> None:
        self.run = run   # the engine's run: provider, clock, rows, backend, fail_rng, cfg
        self.counts: dict[str, int] = {}

    def call(self, request: Request, spec: CallSpec) -> SideCallResult:
        run = self.run
        n = self.counts.get(spec.kind, 0)
        self.counts[spec.kind] = n + 1
        req = request
        if spec.instructions:
            req = request.with_messages(request.messages.append(Message.user(spec.instructions, origin="instruction")))
        # the strategy's request as sent, as a side call: its thinking and effort settings stay (they key
        # the cache: a summary call that dropped them would miss what the main calls wrote)
        req = replace(req, kind=spec.kind, estimated_tokens=None, rewrite=False,
                      model=req.model or run.current_model or run.provider.model, max_output_tokens=spec.max_output_tokens,
                      route=req.route or run.current_route)
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
            raise SideCallFailed("prompt_too_long" if r.reason == "overflow" else r.reason, r.detail,
                                 tokens if r.reason == "overflow" else 0)
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
