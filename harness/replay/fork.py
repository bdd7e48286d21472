"""A fork of the conversation (``SubtaskStart.fork``): Claude Code's forked agents, a side question (/btw) and
a prompt suggestion, send the main conversation as it stands with their own prompt after it, and nothing of
them stays in it. Claude Code 2.1.72 (cli.js, ``KR``): the request is ``[...forkContextMessages,
...promptMessages]`` with the main loop's system prompt and tools (its ``cacheSafeParams``), so that it reads
what the main loop cached; the logs agree (a side question's call read from the cache the whole context of the
main call before it, and wrote only its own question).

The replay sends the strategy's last request in that context, its answer where the answer holds no tool use (a
turn's last answer; one whose tools still run would leave its calls unanswered), then the fork's own messages,
with the last request's cache breakpoints. The strategy is not told: a fork changes nothing of its
conversation, and a fork of a strategy that keeps less costs less. Each fork call is billed as a sub-agent's
(kind ``subagent``) and counts as the log's call it replays; a fork request the API would refuse (over the
window) is recorded as refused, and the session goes on, as Claude Code's does when a fork fails."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ctxsim.harness.llm.services import SUBAGENT
from ctxsim.harness.model import trace as tr
from ctxsim.harness.model.conversation import Block, History, Message, Request
from ctxsim.harness.provider import protocol
from ctxsim.harness.replay.events import assistant_blocks, result_block, user_message


@dataclass
class Fork:
    id: str
    request: Request                                     # the parent's conversation, then the fork's own messages
    results: list[Block] = field(default_factory=list)   # tool results not yet in a message

    def add(self, m: Message) -> None:
        self.request = replace(self.request, messages=self.request.messages.append(m))


def base_request(run: Any) -> Request:
    """The parent's last request with its answer where that holds no tool use; before any, the bare prompt."""
    last = run.contexts[-1].last
    if last is None:
        return Request(run.env.system, run.env.tools, History(), kind=SUBAGENT, model=run.current_model,
                       route=run.current_route)
    req, answer = last
    open_calls = any(b.type == "tool_use" for b in answer.blocks)
    return replace(req, messages=req.messages if open_calls else req.messages.append(answer), kind=SUBAGENT,
                   estimated_tokens=None, rewrite=False)


def step(run: Any, ev: Any) -> None:
    """One event of an open fork (``run.forked``), or the start that opens one."""
    f = run.forked
    if f is None:   # the SubtaskStart
        run.forked = Fork(ev.id, base_request(run))
        return
    if isinstance(ev, tr.SubtaskEnd) and ev.id == f.id:
        run.forked = None
        return
    if isinstance(ev, tr.ToolResultEvent):
        f.results.append(result_block(ev))
        return
    if f.results and isinstance(ev, (tr.UserEvent, tr.AssistantEvent)):
        f.add(Message("user", tuple(f.results)))
        f.results = []
    if isinstance(ev, tr.UserEvent):
        f.add(user_message(ev))
    elif isinstance(ev, tr.AssistantEvent):
        answer = Message("assistant", tuple(assistant_blocks(ev)))
        if not ev.copied and (run.cfg.max_calls is None or run.main_index < run.cfg.max_calls):
            call(run, f, ev, answer)
        f.add(answer)
    # facts, probes and spans inside a fork: nothing the parent's conversation holds


def call(run: Any, f: Fork, ev: tr.AssistantEvent, answer: Message) -> None:
    """Send the fork's request for the recorded call ``ev``: billed, or recorded as refused (no wait added: the
    main loop does not wait for a fork)."""
    req = replace(f.request, model=(ev.model if run.call_models and ev.model else f.request.model),
                  route=ev.meta.get(tr.ROUTE, f.request.route))
    lay = run.provider.layout(req)
    refused = protocol.validate(req, run.provider.window, lay.total())
    if refused:
        run.refused(req, lay.total(), refused)
    else:   # the recorded answer's output, as a main call's
        run.bill(req, lay, ev.usage.output if ev.usage is not None else run.provider.output_tokens(answer))
    run.main_index += 1
