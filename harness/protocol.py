"""What the Messages API rejects with a 400, checked on every request the engine sends.

* a ``tool_result`` whose id is not a ``tool_use`` of the preceding assistant turn ("unexpected
  tool_use_id found in tool_result blocks");
* a ``tool_use`` with no ``tool_result`` in the next user turn ("tool_use ids were found without
  tool_result blocks immediately after");
* a request over the window ("prompt is too long: N tokens > W maximum");
* more than 4 cache breakpoints ("A maximum of 4 blocks with cache_control may be provided").

Consecutive messages of one role are merged first, as the API does. The pairing check is a fold
over the messages memoised in the history's store, so each message is checked once per run, not
once per request.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.conversation import Message, Request

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


def validate(req: Request, window: int, input_tokens: int) -> list[Rejection]:
    out: list[Rejection] = []
    if len(req.breakpoints) > MAX_BREAKPOINTS:
        out.append(Rejection("breakpoints", f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {len(req.breakpoints)}."))
    n = len(req.messages)
    bad_at = [b.at for b in req.breakpoints if isinstance(b.at, int) and not 0 <= b.at < n]
    if bad_at:
        out.append(Rejection("breakpoints", f"cache_control on message index {bad_at[0]} of a {n}-message request"))
    err = pairing_error(req)
    if err:
        out.append(Rejection("pairing", err))
    if input_tokens > window:
        out.append(Rejection("overflow", f"prompt is too long: {input_tokens} tokens > {window} maximum"))
    return out
