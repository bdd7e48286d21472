"""Prompt-cache breakpoints on NovaCode's three longest stable prefixes (N-CACHE-1…3).

Three ``cache_control`` markers: the last tool of the tools array, the system block, and the last
content block of the last user message (N-CACHE-1). The Anthropic prefix order is tools → system →
messages, so the markers are listed in that order. They stay valid only because the bytes before
them are stable: tool results are final when they enter history (N-SPILL-6) and the system prompt
holds only project-independent text (N-CACHE-3); a compaction is the one declared break.

For a live request the tools array is shallow-copied before the marker is set on a copy of its last
tool (N-CACHE-2): the registry's shared tool-schema dicts are never mutated, or every later request
(and every other session sharing the registry) would carry a stray marker.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ctxsim.harness.model.conversation import Breakpoint, Message

TTL = Literal["5m", "1h"]
MAX_BREAKPOINTS = 4  # Anthropic: at most 4 cache_control markers per request (peers.md)


def last_user_index(messages: Sequence[Message]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user":
            return i
    return None


def breakpoints(messages: Sequence[Message], ttl: TTL | None = None, *, tools: bool = True,
                system: bool = True) -> tuple[Breakpoint, ...]:
    """N-CACHE-1: tools, system, and the last user message (its last block), in prefix order.
    An empty tools array or system prompt has nothing to mark (``tools=False`` / ``system=False``)."""
    out = []
    if tools:
        out.append(Breakpoint("tools", ttl))
    if system:
        out.append(Breakpoint("system", ttl))
    i = last_user_index(messages)
    if i is not None:
        out.append(Breakpoint(i, ttl))
    return tuple(out)


def cache_control(ttl: TTL = "5m") -> dict[str, str]:
    return {"type": "ephemeral", "ttl": ttl}


def mark_last_tool(tools: Sequence[Mapping[str, Any]], ttl: TTL = "5m") -> list[dict[str, Any]]:
    """N-CACHE-2: a shallow copy of the tools array whose last element is a copy carrying
    ``cache_control``. Every other element is the caller's own object (shared, untouched)."""
    out: list[Any] = list(tools)
    if out:
        out[-1] = {**out[-1], "cache_control": cache_control(ttl)}
    return out


def mark_system(system: Sequence[Mapping[str, Any]], ttl: TTL = "5m") -> list[dict[str, Any]]:
    """The same for the system blocks: the marker goes on a copy of the last block."""
    return mark_last_tool(system, ttl)


def mark_last_user_message(messages: Sequence[Mapping[str, Any]], ttl: TTL = "5m") -> list[dict[str, Any]]:
    """API-form messages with ``cache_control`` on a copy of the last content block of the last
    user message; the caller's message and block dicts are not mutated."""
    out: list[Any] = list(messages)
    for i in range(len(out) - 1, -1, -1):
        m = out[i]
        if m.get("role") != "user":
            continue
        content = m.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not content:
            break
        blocks = list(content)
        blocks[-1] = {**blocks[-1], "cache_control": cache_control(ttl)}
        out[i] = {**m, "content": blocks}
        break
    return out
