"""What the Messages API rejects with a 400, checked on every request the engine sends.

* a ``tool_result`` whose id is not a ``tool_use`` of the preceding assistant turn ("unexpected
  tool_use_id found in tool_result blocks");
* a ``tool_use`` with no ``tool_result`` in the next user turn ("tool_use ids were found without
  tool_result blocks immediately after");
* a request over the window ("prompt is too long: N tokens > W maximum");
* more than 4 cache breakpoints ("A maximum of 4 blocks with cache_control may be provided");
* content the API refuses (:func:`content_error`, used by the property kit): an empty or
  whitespace-only text block ("text content blocks must be non-empty" / "must contain
  non-whitespace text"), an empty thinking block ("each thinking block must contain thinking"), a
  message with no content, and a user turn whose ``tool_result`` blocks do not come first ("In the
  user message containing tool results, the tool_result blocks must come FIRST in the content
  array. Any text must come AFTER all tool results": platform.claude.com/docs/en/agents-and-tools/
  tool-use/handle-tool-calls, read 2026-11), and a ``tool_use`` id the request already holds
  ("messages.5.content.1: `tool_use` ids must be unique", as Claude Code users met it:
  anthropics/claude-code#20700, #21083).

Consecutive messages of one role are merged first, as the API does. The pairing check is a fold
over the messages memoised in the history's store, so each message is checked once per run, not
once per request.
"""

from __future__ import annotations

from dataclasses import dataclass

from ctxsim.harness.model.conversation import Message, Request

MAX_BREAKPOINTS = 4  # Anthropic docs: at most 4 cache_control blocks per request


@dataclass(frozen=True, slots=True)
class Rejection:
    reason: str  # "pairing" | "overflow" | "breakpoints"
    detail: str


# fold state: (role of the open turn, ids the open user turn must answer, ids answered so far,
#              tool_use ids of the open assistant turn, first violation or "")
_INIT = ("", frozenset(), frozenset(), frozenset(), "")


def _step(state, m: Message):
    role, expected, answered, uses, bad = state
    if m.role != role:
        if role == "user" and not bad and not expected <= answered:
            missing = ", ".join(sorted(expected - answered))
            bad = f"tool_use ids were found without tool_result blocks immediately after: {missing}"
        if role == "assistant":
            expected, answered = uses, frozenset()
        elif m.role == "user":  # first turn
            expected, answered = frozenset(), frozenset()
        uses = frozenset()
        role = m.role
    if m.role == "user":
        for b in m.blocks:
            if b.type == "tool_result":
                if b.id not in expected or b.id in answered:
                    if not bad:
                        bad = f"unexpected tool_use_id found in tool_result blocks: {b.id}"
                else:
                    answered = answered | {b.id}
    else:
        ids = [b.id for b in m.blocks if b.type == "tool_use"]
        if ids:
            uses = uses | frozenset(ids)
    return (role, expected, answered, uses, bad)




def pairing_error(req: Request) -> str:
    msgs = req.messages
    role, expected, answered, uses, bad = msgs.fold_through(len(msgs) - 1, _step, _INIT, _step)
    if bad:
        return bad
    if role == "assistant" and uses:
        return f"tool_use ids were found without tool_result blocks immediately after: {', '.join(sorted(uses))}"
    if role == "user" and not expected <= answered:
        return f"tool_use ids were found without tool_result blocks immediately after: {', '.join(sorted(expected - answered))}"
    return ""


# fold state: (role of the open turn, a block other than tool_result seen in the open user turn,
#              index of the next message, first violation or "", tool_use ids so far)
_CONTENT_INIT = ("", "", 0, "", frozenset())


def _content_step(state, m: Message):
    role, other, i, bad, seen = state
    if m.role != role:
        role, other = m.role, ""
    ids = [b.id for b in m.blocks if b.type == "tool_use"]
    if ids:
        if not bad:
            again = next((x for k, x in enumerate(ids) if x in seen or x in ids[:k]), None)
            if again is not None:
                bad = f"message {i} (assistant) holds tool_use id {again} again: tool_use ids must be unique"
        seen = seen | frozenset(ids)
    if not bad:
        if not m.blocks:
            bad = f"message {i} ({m.role}) has no content"
        for b in m.blocks:
            if bad:
                break
            if b.type == "text" and not b.text.strip():
                bad = (f"message {i} ({m.role}) holds an empty text block" if not b.text else
                       f"message {i} ({m.role}) holds a text block of whitespace only")
            elif b.type == "thinking" and not b.text.strip():
                bad = f"message {i} (assistant) holds an empty thinking block"
            elif m.role == "user" and b.type == "tool_result" and other:
                bad = f"tool_result for {b.id} is not first in the user turn (message {i}: it follows a {other} block)"
            elif m.role == "user" and b.type != "tool_result" and not other:
                other = b.type
    return (role, other, i + 1, bad, seen)


def content_error(req: Request) -> str:
    """The API's complaint about the content of ``req``'s messages, or ``""``: memoised per
    message like the pairing fold, so each message is checked once per run."""
    msgs = req.messages
    if not len(msgs):
        return ""
    return msgs.fold_through(len(msgs) - 1, _content_step, _CONTENT_INIT, _content_step)[3]


def ttl_order_error(req: Request) -> str:
    """A 1-hour breakpoint after a 5-minute one, in prompt order (tools, system, messages): the API
    refuses it (platform.claude.com/docs/en/build-with-claude/prompt-caching, "Mixing different
    TTLs": cache entries with a longer TTL must appear before shorter ones). Only explicit TTLs
    are judged (None is the run's TTL, whatever it is)."""
    rank = {"tools": -2, "system": -1}
    seen_5m = None
    for b in sorted(req.breakpoints, key=lambda b: rank.get(b.at, b.at) if isinstance(b.at, str) else b.at):
        if b.ttl == "5m" and seen_5m is None:
            seen_5m = b.at
        elif b.ttl == "1h" and seen_5m is not None:
            return (f"a 1h cache_control on {_where(b.at)} after a 5m one on {_where(seen_5m)}: a longer TTL "
                    "must come before a shorter one")
    return ""


def _where(at) -> str:
    return f"message {at}" if isinstance(at, int) else f"the {at}"


def validate(req: Request, window: int, input_tokens: int) -> list[Rejection]:
    out: list[Rejection] = []
    if len(req.breakpoints) > MAX_BREAKPOINTS:
        out.append(Rejection("breakpoints", f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {len(req.breakpoints)}."))
    n = len(req.messages)
    bad_at = [b.at for b in req.breakpoints if isinstance(b.at, int) and not 0 <= b.at < n]
    if bad_at:
        out.append(Rejection("breakpoints", f"cache_control on message index {bad_at[0]} of a {n}-message request"))
    ttl = ttl_order_error(req)
    if ttl:
        out.append(Rejection("breakpoints", ttl))
    err = pairing_error(req)
    if err:
        out.append(Rejection("pairing", err))
    if input_tokens > window:
        out.append(Rejection("overflow", f"prompt is too long: {input_tokens} tokens > {window} maximum"))
    return out
