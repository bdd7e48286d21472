"""A :class:`~ctxsim.harness.model.conversation.Request` as the Messages API takes it (live side calls).

The simulator never needs this: its provider model reads the request objects directly. A live
backend (``ctxsim.harness.llm.live``) does, and so does the response store, whose keys hash exactly what was
sent. Rendering follows what the API accepts, not what would be convenient:

* ``cache_control`` markers are placed per ``request.breakpoints`` (``{"type": "ephemeral",
  "ttl": ...}``): ``Breakpoint("tools")`` on the last tool, ``Breakpoint("system")`` on the last
  system block, ``Breakpoint(i)`` on the last content block of message ``i``. Tools are rendered as
  fresh dicts and the marked one is a shallow copy (N-CACHE-2): nothing shared is ever mutated.
* Consecutive messages of one role are merged into one turn (as the API does before validating),
  and inside a user turn the ``tool_result`` blocks come first: the API answers 400 to text placed
  before the results of the previous call.
* Thinking blocks are not sent. A recorded thinking block has no valid signature (N-TRANS-3: the
  signature only means something inside the tool loop that produced it) and the API rejects an
  invalid one; empty or whitespace-only text blocks are rejected too, so they are left out. A turn
  left with no block at all is dropped.
* ``SystemPrompt.opaque_tokens`` stands for prompt text the trace does not have: it cannot be sent,
  so such a request is refused with :class:`RenderError` rather than sent short.
"""

from __future__ import annotations

from typing import Any

from ctxsim.harness.model.conversation import Block, Breakpoint, Request

#: Anthropic's ``cache_control`` type; the only one the Messages API has.
CACHE_CONTROL_TYPE = "ephemeral"  # Anthropic prompt-caching docs


class RenderError(ValueError):
    """A request that cannot be sent to the live API as it is."""


def cache_control(bp: Breakpoint) -> dict[str, str]:
    # a breakpoint with no TTL of its own: the API's default, 5 minutes
    return {"type": CACHE_CONTROL_TYPE, "ttl": bp.ttl or "5m"}


def _sendable(block: Block) -> bool:
    if block.type == "thinking":
        return False
    if block.type == "text":
        return bool(block.text.strip())
    return True


def _marked(d: dict[str, Any], bp: Breakpoint | None) -> dict[str, Any]:
    return d if bp is None else {**d, "cache_control": cache_control(bp)}


def to_anthropic_params(request: Request, model: str, max_tokens: int,
                        extra_user_text: str | None = None, omit_opaque: bool = False) -> dict[str, Any]:
    """The keyword arguments of ``client.messages.create`` for ``request``.

    ``omit_opaque``: send the text the trace has and leave out the opaque part of the system prompt
    (an imported log's prompt that is not in it); the caller bills that call as simulated.

    ``extra_user_text`` is a side call's own instruction, sent as the final user text after the
    request's messages (merged into the last turn when that is a user turn), so the call reuses the
    conversation's cached prefix.
    """
    if request.system.opaque_tokens and not omit_opaque:
        raise RenderError(
            f"the system prompt holds {request.system.opaque_tokens} opaque tokens (prompt text the trace "
            "does not have, derived from recorded usage); a live call cannot send text it does not have. "
            "Use --llm simulated for this trace, or a trace whose system prompt is in the header.")
    if max_tokens < 1:
        raise RenderError(f"max_tokens must be >= 1, got {max_tokens}")
    n = len(request.messages)
    tools_bp = system_bp = None
    message_bp: dict[int, Breakpoint] = {}
    for bp in request.breakpoints:
        if bp.at == "tools":
            tools_bp = bp
        elif bp.at == "system":
            system_bp = bp
        elif isinstance(bp.at, int) and not isinstance(bp.at, bool):
            i = bp.at + n if bp.at < 0 else bp.at
            if not 0 <= i < n:
                raise RenderError(f"breakpoint on message {bp.at}, but the request has {n} messages")
            message_bp[i] = bp
        else:
            raise RenderError(f"unknown breakpoint position {bp.at!r}")

    params: dict[str, Any] = {"model": model, "max_tokens": int(max_tokens)}

    sys_blocks = [b for b in request.system.blocks if _sendable(b)]
    if sys_blocks:
        system = [{"type": "text", "text": b.text} for b in sys_blocks]
        system[-1] = _marked(system[-1], system_bp)
        params["system"] = system

    if len(request.tools):
        tools = [t.to_api() for t in request.tools.tools]  # fresh dicts, never the shared schemas
        tools[-1] = _marked(tools[-1], tools_bp)            # N-CACHE-2: the marked tool is a copy
        params["tools"] = tools

    turns: list[dict[str, Any]] = []
    for i, m in enumerate(request.messages):
        blocks = [b.to_api() for b in m.blocks if _sendable(b)]
        if not blocks:
            continue
        if i in message_bp:
            blocks[-1] = _marked(blocks[-1], message_bp[i])
        if turns and turns[-1]["role"] == m.role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": m.role, "content": blocks})
    if extra_user_text is not None and extra_user_text.strip():
        tail = {"type": "text", "text": extra_user_text}
        if turns and turns[-1]["role"] == "user":
            turns[-1]["content"].append(tail)
        else:
            turns.append({"role": "user", "content": [tail]})
    for t in turns:
        if t["role"] == "user":  # tool results first in a user turn (a stable partition)
            c = t["content"]
            t["content"] = [b for b in c if b["type"] == "tool_result"] + [b for b in c if b["type"] != "tool_result"]
    if not turns:
        raise RenderError("nothing to send: the request has no message with sendable content")
    params["messages"] = turns
    return params


def count_tokens_params(params: dict[str, Any]) -> dict[str, Any]:
    """The subset of ``messages.create`` params that ``messages.count_tokens`` takes."""
    return {k: v for k, v in params.items() if k in ("model", "system", "tools", "messages")}


def breakpoints_in(params: dict[str, Any]) -> int:
    """How many ``cache_control`` markers the rendered params carry (the API allows 4)."""
    n = sum(1 for b in params.get("system", []) if "cache_control" in b)
    n += sum(1 for t in params.get("tools", []) if "cache_control" in t)
    for turn in params.get("messages", []):
        n += sum(1 for b in turn["content"] if "cache_control" in b)
    return n
