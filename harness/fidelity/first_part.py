"""A yes-or-no property of a log judged as its other fitted settings are (issue 41): on its first
part (the calls the token scale is fitted on; the rest held out), by the majority of the calls that
show it; where that part shows it no more one way than the other, on the whole log, in sample (one
setting of the client or its environment, not a rate fitted to the calls it is scored on: said so in
the evidence); else undecided."""

from __future__ import annotations


def verdict(first: tuple[int, int], whole: tuple[int, int]) -> tuple[bool | None, bool]:
    """``(answer, in_sample)`` from ``(yes, no)`` counts over the first part and over the whole log:
    the first part's majority; else the whole log's (``in_sample`` True); else ``(None, False)``."""
    if first[0] != first[1]:
        return first[0] > first[1], False
    if whole[0] != whole[1]:
        return whole[0] > whole[1], True
    return None, False


__all__ = ["verdict"]
