"""A yes-or-no property of a log judged as its other fitted settings are (issue 41): on its first
part (the calls the token scale is fitted on; the rest held out), by the majority of the calls that
show it; where that part shows it no more one way than the other, on the whole log, in sample (one
setting of the client or its environment, not a rate fitted to the calls it is scored on: said so in
the evidence); else undecided."""

from __future__ import annotations

from collections.abc import Callable


def verdict(first: tuple[int, int], whole: tuple[int, int]) -> tuple[bool | None, bool]:
    """``(answer, in_sample)`` from ``(yes, no)`` counts over the first part and over the whole log:
    the first part's majority; else the whole log's (``in_sample`` True); else ``(None, False)``."""
    if first[0] != first[1]:
        return first[0] > first[1], False
    if whole[0] != whole[1]:
        return whole[0] > whole[1], True
    return None, False


def judged(count: Callable[[int], tuple[int, int]], upto: int, calls: int, seen: Callable[[tuple[int, int]], str],
           words: tuple[str, str], said: tuple[str, str]) -> tuple[bool | None, str, bool]:
    """:func:`verdict` on ``count(upto)`` (the first part's yes and no) and ``count(calls)`` (the whole
    log's), with its evidence: ``seen(first)`` (what the first part shows), then, where the whole log
    decided, its counts (``words``: what a yes and a no are called) marked in sample, then ``said``
    (the answer, yes or no, in words), and whether the whole log decided (in sample). Undecided:
    ``(None, seen(first), False)``, for the caller to go on."""
    first, whole = count(upto), count(calls)
    shown = seen(first)
    answer, in_sample = verdict(first, whole)
    if answer is None:
        return None, shown, False
    text = said[0] if answer else said[1]
    if in_sample:
        return answer, f"{shown}; in sample, over all {calls} calls: {whole[0]} {words[0]}, {whole[1]} {words[1]}: {text}", True
    return answer, f"{shown}: {text}", False


__all__ = ["judged", "verdict"]
