"""What the engine makes of trace events for the strategy: an assistant event's blocks, which
events open a user turn, which user messages wait for the rest of a call's results, and the system
prompt an isolated sub-agent span sends."""

from __future__ import annotations

from ctxsim.harness.model.conversation import Block, Message, SystemPrompt
from ctxsim.harness.model.trace import (
    LOGGED_ONLY,
    TOOLS_LOADED,
    AssistantEvent,
    FactEvent,
    ProbeEvent,
    SubtaskEnd,
    SubtaskStart,
    TextContent,
    ThinkingContent,
    ToolResultEvent,
    ToolUseContent,
    Trace,
    UserEvent,
)

TOKEN_FACTOR = "token_factor"     # event meta: the log's measured size of its text (harness/fidelity/measured.py)
HIDDEN_TOKENS = "hidden_tokens"   # event meta: content sent with it that the log has no text for (same)


def result_block(ev: ToolResultEvent) -> Block:
    """A tool result as every strategy receives it, sized as the log measured it where it did, with
    the tools it loaded (``meta.tools_loaded``: a tool search's) where it loaded any."""
    loaded = ev.meta.get(TOOLS_LOADED)
    return Block("tool_result", ev.content, ev.tool_use_id, is_error=ev.is_error,
                 **({"meta": {TOOLS_LOADED: tuple(loaded)}} if loaded else {}),
                 token_factor=ev.meta.get(TOKEN_FACTOR, 1.0), opaque_tokens=ev.meta.get(HIDDEN_TOKENS, 0))


def user_message(ev: UserEvent) -> Message:
    """A user message as every strategy receives it (its meta kept), sized as the log measured it."""
    factor, hidden = ev.meta.get(TOKEN_FACTOR), ev.meta.get(HIDDEN_TOKENS)
    if factor is None and hidden is None:
        return Message.user(ev.text, **ev.meta)
    meta = {k: v for k, v in ev.meta.items() if k not in (TOKEN_FACTOR, HIDDEN_TOKENS)}
    return Message("user", (Block("text", ev.text, token_factor=factor or 1.0, opaque_tokens=hidden or 0),), meta)


def assistant_blocks(ev: AssistantEvent) -> list[Block]:
    """The model's answer as every strategy receives it; thinking whose text the log withheld carries
    the size its growth measured (``meta.hidden_tokens``, harness/fidelity/measured.py) on its first block."""
    out = []
    withheld = ev.meta.get(HIDDEN_TOKENS, 0)
    for c in ev.content:
        if isinstance(c, TextContent):
            out.append(Block.text_block(c.text))
        elif isinstance(c, ThinkingContent):
            out.append(Block("thinking", c.thinking, opaque_tokens=withheld if not c.thinking else 0))
            withheld = 0 if not c.thinking else withheld
        else:   # input the log holds but the agent never sent: known to the strategy (Block.meta), not counted
            out.append(Block.tool_use(c.id, c.name, c.input, **({LOGGED_ONLY: dict(c.logged_only)} if c.logged_only else {})))
    return out


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


def between_results(events) -> frozenset[int]:
    """Indices of the user messages that sit between a call and the last of its results: what Claude Code
    writes while the call's tools run (a todo-list reminder, a skill's text, a message the user typed
    meanwhile; 22 of the 209 development sessions hold one between two results, and more before the first
    when the user typed while a tool ran). The API takes a call's results first in the next user turn and any
    text after them ("the tool_result blocks must come FIRST": harness/provider/protocol.py), so that is what
    the agent sent. The replay delivers these after the call's last result: delivered where they sit, they
    made a strategy answer the later results as missing (a synthetic error result, then the real one: a 400).
    Facts and probes are not messages and do not end a call's results."""
    out: set[int] = set()
    held: list[int] = []
    open_ = False   # after a call with tool uses, until its results end
    for i, ev in enumerate(events):
        if isinstance(ev, ToolResultEvent):
            out.update(held)
            held, open_ = [], True
        elif isinstance(ev, UserEvent):
            if open_:
                held.append(i)
        elif isinstance(ev, AssistantEvent):
            held, open_ = [], any(isinstance(c, ToolUseContent) for c in ev.content)
        elif not isinstance(ev, (FactEvent, ProbeEvent)):
            held, open_ = [], False
    return frozenset(out)


def held_users(trace: Trace) -> frozenset[int]:
    """:func:`between_results` of the trace's events, found once for every run over it (``trace.memo``)."""
    held = trace.memo.get("between_results")
    if held is None:
        held = trace.memo["between_results"] = between_results(trace.events)
    return held


def span_system(trace: Trace, system: SystemPrompt, span: str) -> SystemPrompt:
    """An isolated sub-agent's system prompt: the size the log measured for its span (its own
    system prompt and tools, which the log only sizes), else the parent's ``system``. Every
    strategy sends it (issue 27: a warm-up sidechain lost its 16,965-token prefix outside ``recorded``)."""
    rec = trace.header.recorded
    opaque = rec.subagent_prefix_tokens.get(span) if rec is not None else None
    shared = min(rec.subagent_shared_tokens.get(span, 0), opaque or 0) if rec is not None else 0
    if opaque is None or (opaque == system.opaque_tokens and shared == system.shared_tokens):
        return system
    return SystemPrompt(system.blocks, opaque, shared)
