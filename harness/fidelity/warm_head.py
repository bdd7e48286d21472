"""Whether the shared head a log's first call found cached stays cached across its idle gaps (issue 41).

A Claude Code session's first call often reads the head of its system prompt from the cache
(``recorded.warm_prefix_tokens``): an earlier session wrote it. Whether that head is still there
after the session itself has been idle past its TTL depends on traffic the log does not show (other
sessions sending the same head keep it alive). The log shows it at every call after a TTL expiry:
the read is the head again (kept warm), or nothing.

The development population (issue 41; main-context calls after a TTL expiry, in the 73 sessions
whose first call read a head) shows a property of the session, not a coin: 98 reads were the head
again and 41 were nothing, but only 4 sessions hold both. So each log is judged on its own first
part (the calls the token scale is fitted on, the rest held out), by the majority of those reads;
where the first part has none, on all its calls, in sample and labelled so (one property of the
environment, not a rate fitted to the calls it is scored on); else the replay keeps what the
provider model does by itself (the head lives its TTL from the first call, refreshed when read).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxsim.harness.fidelity.cache_misses import expired_since
from ctxsim.harness.fidelity.first_part import judged

HEAD_TOLERANCE = 64   # assumed: a read this close to the head's size is the head (its framing varies by a few tokens)


def expiry_reads(calls: Sequence[Any], upto: int, head: int) -> tuple[int, int]:
    """``(head_again, nothing)``: of the main context's calls among ``calls[:upto]`` that came after
    their predecessor's TTL had run out, how many read the shared ``head`` again and how many read
    nothing (a read of anything else says neither and is left out)."""
    again = nothing = 0
    for c in calls[:upto]:
        if c.thread != "main" or c.usage is None or c.prev_in_thread is None:
            continue
        prev = calls[c.prev_in_thread]
        if prev.usage is None or not expired_since(prev, c):
            continue
        if abs(c.usage.cache_read - head) <= HEAD_TOLERANCE:
            again += 1
        elif c.usage.cache_read == 0:
            nothing += 1
    return again, nothing


def head_kept_warm(calls: Sequence[Any], upto: int, head: int) -> tuple[bool | None, str, bool]:
    """Whether the shared ``head`` (the first call's cached read) stays cached across the log's idle
    gaps, and the evidence: the majority of :func:`expiry_reads` over ``calls[:upto]``, else over
    all ``calls`` (in sample, said so, and the third value True); ``None`` with no head or no such read."""
    if not head:
        return None, "", False
    kept, seen, in_sample = judged(lambda k: expiry_reads(calls, k, head), upto, len(calls),
                        lambda f: (f"of the calls in the first {upto} after a TTL expiry, {f[0]} read the {head:,}-token "
                                   f"head the first call read and {f[1]} read nothing"),
                        ("read it", "nothing"), ("the head stays cached (other sessions keep it)", "the head expires"))
    if kept is not None:
        return kept, seen, in_sample
    return None, f"{seen}; the provider model's own TTL", False


__all__ = ["HEAD_TOLERANCE", "expiry_reads", "head_kept_warm"]
