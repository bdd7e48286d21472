"""The tool calls and messages the simulated agent adds before a call's recorded answer, each billed and sent
through the strategy like any call: read-backs of the pointers a probe needed and recoveries of lost needs
(:func:`inject`), and a user restating a goal or constraint the request lacked (:func:`restate`). Called
by the engine's main call (harness/replay/engine.py) on its run object."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ctxsim.harness.llm.services import READBACK, RESTATE
from ctxsim.harness.model.conversation import Block, Message, Request


def restate(run: Any, req: Request, lay: Any, texts: list[str], answer: Message,
            recorded_output: int | None) -> tuple[Request, Any] | None:
    """A violated goal/constraint (harness/retention/recovery.py): ``req`` lacks it, so the call made on it
    is wasted — billed with the recorded answer's output tokens, its text entering history (its tool uses
    are not run) — then the user restates ``texts`` (one user message) and the call is sent again (kind
    ``restate``, billed by the caller). None when the session failed."""
    s = run.strategy
    out = recorded_output if recorded_output is not None else run.provider.output_tokens(answer)
    usage = run.bill(req, lay, out)
    for _ in range(run.recovery.params.wasted_calls if run.recovery is not None else 0):
        run.bill(replace(req, kind=RESTATE), lay, out)   # the work done against it until noticed
    said = "".join(b.text for b in answer.blocks if b.type == "text").strip() or "(done)"
    s.on_response(Message("assistant", (Block.text_block(said),), {"origin": RESTATE}), usage)
    s.on_user(Message.user("\n".join(texts), origin=RESTATE))
    return run.accept(replace(s.build_request(run.call_info()), kind=RESTATE), RESTATE)


def inject(run: Any, req: Request, lay: Any, steps: list[tuple[str, Any, str, bool]],
           kind: str) -> tuple[Request, Any] | None:
    """Tool calls the simulated agent makes before the call's recorded answer (read-backs of
    pointers, recoveries of lost needs: harness/retention/recovery.py), one at a time: ``req`` is billed
    as the call that emits the tool use, its result enters history, and the call is sent again
    (``kind``). None when the session failed there."""
    s = run.strategy
    for name, inp, text, is_error in steps:
        run.tool_calls_added += 1
        tu = Block.tool_use(f"ctxsim_{kind}_{run.tool_calls_added}", name, inp)
        ask = Message("assistant", (tu,), {"origin": kind})
        usage = run.bill(req, lay, run.provider.output_tokens(ask))
        s.on_response(ask, usage)
        s.on_tool_results(Message("user", (Block.tool_result(tu.id, text, is_error),), {"origin": kind}))
        if kind == READBACK:
            run.readbacks += 1
        got = run.accept(replace(s.build_request(run.call_info()), kind=kind), kind)
        if got is None:
            return None
        req, lay = got
    return req, lay
