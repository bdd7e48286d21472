"""Layer 2 of NovaCode, the pure part: when to compact and where to cut (N-COMP-1…3, 6…8).

Everything here is a pure function of numbers, so the rules can be tested one by one and as
hypothesis properties; the strategy does the I/O (the summary call, the history rewrite).

The triggers are derived from the model's window, never fixed (cline #9599 condenses at 200k on a
1M model): effective window = window − 20,000 reserved for the summary's own output (N-COMP-1);
soft line 13,000 below it, hard line 3,000 below it (N-COMP-2, N-COMP-3). On a 200k window that is
167,000 / 177,000; on 1M, 967,000 / 977,000.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

SUMMARY_RESERVE_TOKENS = 20_000  # N-COMP-1: window minus the summary output reserve
SOFT_MARGIN_TOKENS = 13_000  # N-COMP-2: soft trigger, guarded by the circuit breaker
HARD_MARGIN_TOKENS = 3_000  # N-COMP-3: hard trigger, forced, bypasses the breaker
TAIL_MIN_TOKENS = 10_000  # N-COMP-6: the verbatim tail holds at least this many tokens
TAIL_MIN_MESSAGES = 5  # N-COMP-6: ... and at least this many messages
TAIL_MAX_TOKENS = 40_000  # N-COMP-6: never more than this (the cap wins over the minimums)
MIN_COMPRESSIBLE_TOKENS = 2_000  # N-COMP-8: give up below this: the summary costs more than it frees

TailRule = Literal["both", "either"]
Trigger = Literal["none", "soft", "hard"]


@dataclass(frozen=True)
class Thresholds:
    effective: int
    soft: int
    hard: int


def thresholds(window: int, reserve: int = SUMMARY_RESERVE_TOKENS, soft_margin: int = SOFT_MARGIN_TOKENS,
               hard_margin: int = HARD_MARGIN_TOKENS) -> Thresholds:
    """N-COMP-1…3 for a given window."""
    if window <= 0:
        raise ValueError(f"window must be > 0, got {window}")
    effective = window - reserve
    return Thresholds(effective, effective - soft_margin, effective - hard_margin)


def trigger(estimate: int, th: Thresholds) -> Trigger:
    """Which line the estimated usage has reached (N-COMP-2: soft at >=, N-COMP-3: hard at >=)."""
    if estimate >= th.hard:
        return "hard"
    if estimate >= th.soft:
        return "soft"
    return "none"


@dataclass(frozen=True)
class TailChoice:
    """Where history is cut: messages[boundary:] stay verbatim, messages[:boundary] are summarised."""

    boundary: int
    tail_tokens: int
    prefix_tokens: int
    moved: Literal["none", "back", "forward"] = "none"  # N-COMP-7 adjustment


def select_tail(
    tokens: Sequence[int],
    has_tool_result: Sequence[bool],
    min_tokens: int = TAIL_MIN_TOKENS,
    min_messages: int = TAIL_MIN_MESSAGES,
    max_tokens: int = TAIL_MAX_TOKENS,
    rule: TailRule = "both",
) -> TailChoice:
    """Choose the verbatim tail (N-COMP-6, N-COMP-7) from per-message token estimates.

    Walk back from the newest message, accumulating, until the tail holds at least ``min_tokens``
    and at least ``min_messages`` (``rule="both"``, the spec's reading; ``"either"``: one of them
    suffices), but never past ``max_tokens``: a message that would push the tail over the cap stops
    the walk, so one huge message cannot blow up the tail (the cap wins over the minimums).

    N-COMP-7: if the boundary falls on a message carrying a ``tool_result``, the boundary moves back
    one more message so the result keeps its ``tool_use`` (repeated while the boundary still falls
    on a result, which only a malformed history would need). When moving back would break the cap,
    the boundary moves forward instead, past the result(s): the pair then goes whole into the
    summary. Either way no pair is split and the cap holds.
    """
    n = len(tokens)
    if len(has_tool_result) != n:
        raise ValueError("tokens and has_tool_result must have one entry per message")
    if rule not in ("both", "either"):
        raise ValueError(f"rule must be 'both' or 'either', got {rule!r}")
    if min(min_tokens, min_messages, max_tokens) < 0:
        raise ValueError("tail sizes must be >= 0")
    total = sum(tokens)

    def done(tok: int, count: int) -> bool:
        if rule == "both":
            return tok >= min_tokens and count >= min_messages
        return tok >= min_tokens or count >= min_messages

    b, acc = n, 0
    while b > 0 and not done(acc, n - b):
        if acc + tokens[b - 1] > max_tokens:
            break
        b -= 1
        acc += tokens[b]
    moved: Literal["none", "back", "forward"] = "none"
    if b < n and has_tool_result[b]:
        back, back_acc = b, acc
        while back > 0 and has_tool_result[back]:
            back -= 1
            back_acc += tokens[back]
        if not has_tool_result[back] and back_acc <= max_tokens:
            b, acc, moved = back, back_acc, "back"
        else:
            while b < n and has_tool_result[b]:
                acc -= tokens[b]
                b += 1
            moved = "forward"
    return TailChoice(b, acc, total - acc, moved)


def worth_compacting(choice: TailChoice, min_compressible: int = MIN_COMPRESSIBLE_TOKENS) -> bool:
    """N-COMP-8: give up when the compressible prefix is under ``min_compressible`` tokens."""
    return choice.prefix_tokens >= min_compressible


def fit_summary_input(tokens: Sequence[int], boundary: int, excess: int, stub_tokens: int = 60) -> list[int]:
    """Messages of the compressible prefix to elide from the summary *request* so that it fits.

    Not a rule of the seed, which assumes the conversation fits when the summary is asked for (the
    hard line is 3,000 tokens under the effective window). It does not when one message jumped past
    the line (a read-back, exempt from spilling by N-SPILL-3; a message of results within the
    aggregate budget but larger than what was left): the summary call would fail as too long on
    every turn, forever. So messages of ``messages[:boundary]`` are replaced in the summary request
    by a stub of ``stub_tokens`` pointing to the transcript, newest first, until ``excess`` tokens
    are freed: newest first keeps the cached prefix before them readable, and the message that
    jumped is usually the newest. Returns their indices (empty when ``excess <= 0``; every
    candidate when even that is not enough).
    """
    if excess <= 0:
        return []
    out: list[int] = []
    freed = 0
    for i in range(boundary - 1, -1, -1):
        if freed >= excess:
            break
        if tokens[i] > stub_tokens:
            out.append(i)
            freed += tokens[i] - stub_tokens
    return out
