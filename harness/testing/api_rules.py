"""What the Messages API refuses with a 400, beyond a split pair and a request over the window
(invariants ``pairing`` and ``window``): the ``api`` invariant, one request at a time.

Each rule, with its source:

* at most 4 ``cache_control`` blocks per request (docs.claude.com, "Prompt caching": "You can
  define up to 4 cache breakpoints"; the 400 reads "A maximum of 4 blocks with cache_control may be
  provided"), each on a block that exists: a message index inside the request, a tools array or a
  system prompt that is not empty;
* in prompt order (tools, system, messages) no 1-hour breakpoint after a 5-minute one
  (platform.claude.com/docs/en/build-with-claude/prompt-caching, "Mixing different TTLs": "cache
  entries with longer TTL must appear before shorter TTLs", so a 1-hour entry before any 5-minute
  one; :func:`ctxsim.harness.provider.protocol.ttl_order_error`);
* no empty or whitespace-only text block, no empty thinking block, no message without content,
  ``tool_result`` blocks first in their user turn (:func:`ctxsim.harness.provider.protocol.content_error`, sources
  there);
* the first message is the user's: Amazon Bedrock and Google Vertex refuse anything else ("messages:
  first message must use the \\"user\\" role"; anthropics/anthropic-sdk-typescript#622, 2024-12,
  where the first-party endpoint was seen to accept it): a strategy's request must be valid on the
  platforms its agent is run on;
* with extended thinking, the assistant turn answered by the request's last ``tool_result`` blocks
  (the open tool loop) starts with its thinking block, unmodified (docs.claude.com, "Extended
  thinking", thinking with tool use: "a final assistant message must start with a thinking block
  (preceeding the lastmost set of tool_use and tool_result blocks)"). Thinking is on for a request
  when the recorded answer of that turn had thinking; side calls (summaries) do not enable it, so
  only main-line requests are held to it;
* a request whose messages hold a ``tool_use`` or ``tool_result`` block defines tools: the Messages
  API refused it ("Requests which include tool_use or tool_result blocks must define tools.",
  anthropics/anthropic-sdk-python#494, 2024-05) and Bedrock refuses it ("The toolConfig field must be
  defined when using toolUse and toolResult content blocks", elastic/kibana#246943, 2025-12;
  aws-samples/bedrock-access-gateway#239, 2026-04). Held on main-line requests (the agent's own
  loop, which always has its tools): a side call's API is the agent's own, and an OpenAI-served
  summary (Codex compacts with no tools) is not refused for it.
"""

from __future__ import annotations

from collections.abc import Mapping

from ctxsim.harness.model.conversation import Request, merged_turns
from ctxsim.harness.provider import protocol

MAX_BREAKPOINTS = protocol.MAX_BREAKPOINTS


def breakpoint_error(req: Request) -> str:
    bps = req.breakpoints
    if len(bps) > MAX_BREAKPOINTS:
        return f"{len(bps)} cache breakpoints (the API allows {MAX_BREAKPOINTS})"
    n = len(req.messages)
    for b in bps:
        if isinstance(b.at, int):
            if not 0 <= b.at < n:
                return f"a cache breakpoint on message {b.at} of a {n}-message request (no such block)"
        elif b.at == "tools" and not len(req.tools):
            return "a cache breakpoint on the tools array, which is empty"
        elif b.at == "system" and not req.system.blocks and not req.system.opaque_tokens:
            return "a cache breakpoint on the system prompt, which is empty"
    return ""


def system_error(req: Request) -> str:
    for b in req.system.blocks:
        if not b.text.strip():
            return "the system prompt holds an empty text block" if not b.text else \
                "the system prompt holds a text block of whitespace only"
    return ""


def first_message_error(req: Request) -> str:
    if len(req.messages) and req.messages[0].role != "user":
        return (f"the first message is the {req.messages[0].role}'s: Bedrock and Vertex refuse it "
                "(\"first message must use the user role\")")
    return ""


def thinking_error(req: Request, thinking_of: Mapping[str, str]) -> str:
    """The open tool loop's assistant turn lost (or changed) the thinking its recorded answer
    started with. ``thinking_of`` maps a tool_use id to the thinking text of the recorded answer
    that made the call."""
    msgs = req.messages
    if not len(msgs) or not thinking_of or msgs[-1].role != "user":
        return ""
    # only the last two turns matter: walk back over the trailing user messages, then the assistant ones
    i = len(msgs) - 1
    while i >= 0 and msgs[i].role == "user":
        i -= 1
    if i < 0 or not any(m.has_tool_result for m in msgs[i + 1:]):
        return ""
    j = i
    while j >= 0 and msgs[j].role == "assistant":
        j -= 1
    turns = merged_turns(msgs[j + 1: i + 1])
    blocks = turns[0][1] if turns else []
    want = next((thinking_of[b.id] for b in blocks if b.type == "tool_use" and b.id in thinking_of), None)
    if want is None:
        return ""
    ids = ", ".join(b.id or "" for b in blocks if b.type == "tool_use")
    first = blocks[0] if blocks else None
    if first is None or first.type != "thinking":
        return (f"thinking stripped from the open tool loop: the assistant turn of {ids} must start with its "
                f"thinking block (it starts with a {first.type if first else 'nothing'} block)")
    if first.text != want:
        return f"thinking of the open tool loop ({ids}) changed: a thinking block is sent back unmodified"
    return ""


def tools_error(req: Request) -> str:
    if len(req.tools):
        return ""
    for i, m in enumerate(req.messages):
        if m.has_tool_use or m.has_tool_result:
            kind = "tool_use" if m.has_tool_use else "tool_result"
            return (f"message {i} holds a {kind} block and the request defines no tools (\"Requests which include "
                    "tool_use or tool_result blocks must define tools\")")
    return ""


def api_errors(req: Request, thinking_of: Mapping[str, str] | None = None) -> list[str]:
    """Every reason (other than pairing and size) the API would refuse ``req``; ``thinking_of``
    given for a main-line request (see :func:`thinking_error`)."""
    out = [e for e in (breakpoint_error(req), protocol.ttl_order_error(req), system_error(req), protocol.content_error(req),
                       first_message_error(req)) if e]
    if thinking_of is not None:   # a main-line request
        out += [e for e in (thinking_error(req, thinking_of), tools_error(req)) if e]
    return out
