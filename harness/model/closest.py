"""The first items of a sequence whose sizes add up closest to a target: what a replay takes out of a
context to follow a size the log measured (harness/fidelity/drops.py: the oldest tool results an
unrecorded drop cleared; strategies/recorded.py: the rebuilt re-attachments a compaction's first
call did not hold). Stopping at the first sum past the target would take a large item for a small
remainder, and the replay would then run below the log until its next compaction."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

K = TypeVar("K")


def nearest_prefix(sizes: Iterable[tuple[K, float]], target: float) -> tuple[list[K], float]:
    """The keys of the first items of ``sizes`` whose sizes add up closest to ``target`` (none when
    it is not positive, and none when every sum is farther than taking nothing), and their sum. The
    items are read up to the first sum past the target (``sizes`` may be lazy)."""
    if target <= 0:
        return [], 0.0
    best_k, best_err, total, keys, sums = 0, target, 0.0, [], [0.0]
    for key, size in sizes:
        total += size
        keys.append(key)
        sums.append(total)
        if abs(total - target) < best_err:
            best_k, best_err = len(keys), abs(total - target)
        if total >= target:
            break
    return keys[:best_k], sums[best_k]


__all__ = ["nearest_prefix"]
