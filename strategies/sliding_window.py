"""sliding_window: drop the oldest messages when over budget, keeping the first exchange (Cline).

Source: cline/cline, ``src/core/context/context-management/ContextManager.ts``
(``getNextTruncationRange``) and ``context-window-utils.ts`` (``getContextWindowInfo``), the
"classic" context manager (read 2025):

* allowed size = window − 27,000 (64k windows), − 30,000 (128k), − 40,000 (200k), otherwise
  max(window − 40,000, 0.8 × window);
* when the previous request's total (input + output + cache writes + cache reads, as reported) is at
  or over the allowed size, drop half of the messages after the first user–assistant pair
  (``floor(rest / 4) × 2``: an even number, so user/assistant alternation is kept), or three
  quarters (``floor(rest × 3/4 / 2) × 2``) when half of the total alone is over the allowed size;
* the dropped range ends on a user message, so the kept history still alternates; Cline then notes
  the removal in the first kept message.

Here the first exchange also keeps the first answer's tool results (Cline's XML tools have no
pairing to keep; native tool calls do), and the dropped range never ends between a ``tool_use`` and
its result. Cline reacts to a context-window error by truncating a quarter and retrying; an
open-loop replay cannot retry, so the trigger also counts the messages added since the last usage
(at 4 characters per token) and drops again while the estimate is still over the allowed size.

``manages_window`` is not claimed: history is kept under the allowed size, but nothing here cuts a
single tool result, so one result larger than the window still overflows (so does Cline's).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from harness.conversation import Block, History, Message
from strategies.base import CallInfo
from strategies.templates import PeerConfig, ThresholdCompactor, tail_start

NOTICE = ("[NOTE] Part of the earlier conversation was removed to keep the context window within its "
          "limit. The initial task and the latest exchanges are kept; what came between is gone.")
# the role of Cline's contextTruncationNotice, in this project's own words


def allowed_tokens(window: int) -> int:
    """Cline ``getContextWindowInfo``: the usable part of the window."""
    if window <= 0:
        raise ValueError(f"window must be > 0, got {window}")
    if window == 64_000:
        return window - 27_000
    if window == 128_000:
        return window - 30_000
    if window == 200_000:
        return window - 40_000
    return max(window - 40_000, int(window * 0.8))


def first_exchange_end(messages) -> int:
    """Messages kept at the front: the first user message and the first answer, plus that
    answer's tool results (so the pair is not split)."""
    n = len(messages)
    k = min(2, n)
    return tail_start(messages, k, "forward") if k < n else k


def removal_count(rest: int, keep: Literal["half", "quarter"]) -> int:
    """Cline's even counts: half → floor(rest/4)·2 (drops about half), quarter → floor(rest·3/4/2)·2
    (keeps about a quarter)."""
    if keep == "half":
        return (rest // 4) * 2
    return ((rest * 3) // 4 // 2) * 2


def truncation_range(messages, keep: Literal["half", "quarter"], start: int | None = None) -> tuple[int, int]:
    """Half-open range ``[start, end)`` to drop (empty when there is nothing to drop); ``start``
    defaults to the end of the first exchange."""
    n = len(messages)
    start = first_exchange_end(messages) if start is None else start
    count = removal_count(n - start, keep)
    if count <= 0:
        return start, start
    end = start + count
    # the last dropped message is a user message (Cline); the first kept one carries no tool_result
    while end > start and end < n and messages[end - 1].role != "user":
        end -= 1
    end = tail_start(messages, end, "forward")
    return start, min(end, n)


class SlidingWindowConfig(PeerConfig):
    reserve_tokens: int | None = Field(None, ge=0, le=10_000_000, description="window minus this is the "
                                       "allowed size; None: Cline's table (200k → 40,000)")
    keep: Literal["half", "quarter", "auto"] = Field("auto", description="how much to keep: auto is "
                                                     "Cline's (quarter when half the total is still over)")
    count_pending: bool = Field(True, description="add the messages since the last reported usage to the "
                                "trigger (Cline: no, it retries after a context-window error instead)")
    notice: bool = Field(True, description="insert Cline's truncation notice after the first exchange")


class SlidingWindow(ThresholdCompactor):
    name = "sliding_window"
    summary = "drop half of the messages after the first exchange when over window − 40k (Cline classic)"
    Config = SlidingWindowConfig

    def allowed(self) -> int:
        c = self.config
        return self.env.window - c.reserve_tokens if c.reserve_tokens is not None else allowed_tokens(self.env.window)

    def _total(self) -> int:
        if self.config.count_pending:
            return self.estimate() or 0
        a = self.anchor
        return a.anchor if a.anchor is not None else (self.estimate() or 0)

    def should_compact(self, call: CallInfo) -> bool:
        return self._total() >= self.allowed()

    def compact(self, call: CallInfo) -> bool | None:
        allowed = self.allowed()
        total = self._total()
        dropped_any = False
        while total >= allowed:
            keep = self.config.keep
            if keep == "auto":
                keep = "quarter" if total // 2 > allowed else "half"
            msgs = list(self.history)
            start = first_exchange_end(msgs)
            has_notice = start < len(msgs) and msgs[start].meta.get("origin") == "truncation_notice"
            start += has_notice
            start, end = truncation_range(msgs, keep, start)
            if end <= start:
                break
            removed = msgs[start:end]
            added = [] if has_notice or not self.config.notice else [
                Message("user", (Block.text_block(NOTICE),), {"origin": "truncation_notice"})]
            new = History([*msgs[:start], *added, *msgs[end:]])
            known = self.anchor.anchor is not None
            self.set_history(new, estimate=total - self.tokens_of(removed) + self.tokens_of(added) if known else None)
            self.counters.extra["messages_dropped"] += len(removed)
            dropped_any = True
            total = self._total()
        return True if dropped_any else None
