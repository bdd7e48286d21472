"""sliding_window: Cline's classic context manager: drop the oldest messages after the first
exchange when over budget, after first dropping duplicate file reads.

Source: cline/cline **v3.89.0**, ``apps/vscode/src/core/context/context-management/ContextManager.ts``
(``getNewContextMessagesAndMetadata``, ``getNextTruncationRange``, ``attemptFileReadOptimizationCore``,
``applyStandardContextTruncationNoticeChange``, ``ensureToolResultsFollowToolUse``),
``context-window-utils.ts`` (``getContextWindowInfo``), ``core/prompts/responses.ts`` (the notices)
and ``core/task/index.ts`` (the context-window error handler):

* allowed size = window − 27,000 (64k windows), − 30,000 (128k), − 40,000 (200k), otherwise
  max(window − 40,000, 0.8 × window);
* when the previous request's total (input + output + cache writes + cache reads, as reported) is at
  or over the allowed size, first the **duplicate file reads** go: every file read more than once
  keeps only its latest read; the earlier ones are replaced by "[[NOTE] This file read has been
  removed …]". If that saves at least 30% of the context's characters nothing more is dropped;
* otherwise the conversation after the first user–assistant pair is cut: half of the messages
  (``floor(rest / 4) × 2``) or three quarters (``floor(rest × 3/4 / 2) × 2``) when half of the total
  alone is over the allowed size. **The dropped range ends on an assistant message**, so the first
  kept message after the pair is a user message (user–assistant alternation is kept);
* the first assistant message's text becomes the truncation notice ("[NOTE] Some previous
  conversation history with the user has been removed …");
* ``ensureToolResultsFollowToolUse`` then repairs the pairs the cut broke: the first kept user
  message gets a "result missing" result for each tool use of the first assistant message (its own
  results were in the dropped range; one put for an error result keeps its ``is_error``, assumed),
  and results whose tool use was dropped are removed (a kept
  message left empty by that would put two answers in a row: the range is then a pair shorter);
* a request the API rejects for its size is cut to a quarter and retried once (then the task
  stops and asks the user).

The older reading this module had before 2026-12 is kept as labelled values: ``range_end="user"``
(the dropped range ended on a user message, the first answer's results were kept with the first
exchange and the notice was a message of its own) and ``duplicate_file_reads=False``. File reads are
the calls of a file-reading tool (``Read``, ``read_file`` …, as NovaCode's restore recognises them)
naming the same path; Cline's file mentions and write results are not tracked. The trigger also
counts the messages added since the last usage (``count_pending``, not Cline's: an open-loop replay
sends the next request whatever it holds, so the check is made on it).

``manages_window`` is not claimed: history is kept under the allowed size, but nothing here cuts a
single tool result, so one result larger than the window still overflows (so does Cline's).
"""

from __future__ import annotations

from typing import Literal

from ctxsim.harness.model.conversation import Block, History, Message
from ctxsim.strategies.base import CallInfo, Rejection, check_room
from ctxsim.strategies.novacode.restore import PATH_KEYS, READ_TOOLS
from ctxsim.strategies.templates import PeerConfig, ThresholdCompactor, tail_start
from pydantic import Field

NOTICE = ("[NOTE] Part of the earlier conversation was removed to keep the context window within its "
          "limit. The initial task and the latest exchanges are kept; what came between is gone.")
# the role of Cline's contextTruncationNotice, in this project's own words
DUPLICATE_READ_NOTICE = ("[[NOTE] This file read has been removed to save space in the context window. "
                         "Refer to the latest file read for the most up to date version of this file.]")  # responses.ts duplicateFileReadNotice
MISSING_RESULT = "result missing"  # ContextManager.ts ensureToolResultsFollowToolUse
MIN_READ_SAVING = 0.3  # attemptFileReadOptimizationCore: needToTruncate = percentSaved < 0.3


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


def cline_range(messages, keep: Literal["half", "quarter"]) -> tuple[int, int]:
    """``getNextTruncationRange`` on a history whose earlier ranges are already gone: drop from
    index 2 (the first pair is kept) an even count, moved back one if needed so that the last
    dropped message is an assistant message. Half-open ``[2, end)``."""
    n = len(messages)
    start = min(2, n)
    end = start + removal_count(n - start, keep)
    if end > start and end - 1 < n and messages[end - 1].role != "assistant":
        end -= 1
    return start, end


def assistant_cut(messages, keep: Literal["half", "quarter"]) -> tuple[int, int, Message | None] | None:
    """The range ``[start, end)`` :func:`cline_range` drops and the first kept message repaired (None: nothing can be
    dropped). Where the repaired first kept message would be left empty (two answers in a row, one turn for the API,
    starting with the notice), the range is a pair shorter (assumed: a Cline user turn also carries its environment
    details, so its repair never empties one)."""
    start, end = cline_range(messages, keep)
    first = messages[1] if len(messages) > 1 else None
    while end > start:
        kept = repair_first_kept(first, messages[end] if end < len(messages) else None)
        if kept is not None:
            return start, end, kept
        end -= 2
    return None


def user_cut(messages, keep: Literal["half", "quarter"]) -> tuple[int, int, bool] | None:
    """The older reading's range ``[start, end)`` (after the first exchange and a notice of an earlier cut) and whether
    that notice stands (None: nothing can be dropped)."""
    start = first_exchange_end(messages)
    has_notice = start < len(messages) and messages[start].meta.get("origin") == "truncation_notice"
    start, end = truncation_range(messages, keep, start + has_notice)
    return (start, end, has_notice) if end > start else None


def repair_first_kept(first_answer: Message, kept: Message | None) -> Message | None:
    """``ensureToolResultsFollowToolUse`` for the first kept user message: results for the first
    answer's tool uses first ("result missing" where the cut removed them), then its other blocks;
    results answering a dropped tool use are removed. None: nothing left."""
    ids = first_answer.tool_use_ids()
    own = {b.id: b for b in kept.blocks if b.type == "tool_result"} if kept is not None else {}
    blocks = [own.get(i) or Block.tool_result(i, MISSING_RESULT, synthetic=True) for i in ids]
    if kept is not None:
        blocks += [b for b in kept.blocks if b.type != "tool_result"]
    if not blocks:
        return None
    return Message("user", tuple(blocks), kept.meta if kept is not None else {"origin": "synthetic_result"})


def with_dropped_errors(kept: Message | None, removed) -> Message | None:
    """A "result missing" put for a dropped result keeps that result's ``is_error``: the model is
    not told that a call which failed went through."""
    errors = {b.id for m in removed for b in m.blocks if b.type == "tool_result" and b.is_error}
    if kept is None or not errors:
        return kept
    blocks = tuple(Block.tool_result(b.id, b.text, True, **b.meta)
                   if b.type == "tool_result" and b.meta.get("synthetic") and b.id in errors else b for b in kept.blocks)
    return Message(kept.role, blocks, kept.meta)


def with_notice(first_answer: Message) -> Message:
    """``applyStandardContextTruncationNoticeChange``: the first answer's first text block becomes
    the notice (one is put first when it has none). Its leading thinking blocks stay first and
    unchanged: when that answer is the open tool loop's, the Messages API refuses a turn that does
    not start with its thinking (Cline's change of block 0 would drop it)."""
    blocks = list(first_answer.blocks)
    k = 0
    while k < len(blocks) and blocks[k].type == "thinking":
        k += 1
    if k < len(blocks) and blocks[k].type == "text":
        blocks[k] = blocks[k].with_text(NOTICE)
    else:
        blocks.insert(k, Block.text_block(NOTICE))
    return Message("assistant", tuple(blocks), {**first_answer.meta, "truncation_notice": True})


def duplicate_reads(messages) -> dict[str, str]:
    """tool_use id -> path for every read of a file that is read again later (all but the latest),
    not yet replaced by the notice."""
    reads: dict[str, list[str]] = {}
    for m in messages:
        if m.role != "assistant":
            continue
        for b in m.blocks:
            if b.type == "tool_use" and b.name in READ_TOOLS and b.id:
                path = next((v for k in PATH_KEYS if isinstance(v := (b.input or {}).get(k), str) and v), None)
                if path:
                    reads.setdefault(path, []).append(b.id)
    return {i: p for p, ids in reads.items() for i in ids[:-1]}


class SlidingWindowConfig(PeerConfig):
    reserve_tokens: int | None = Field(None, ge=0, le=10_000_000, description="window minus this is the "
                                       "allowed size; None: Cline's table (200k → 40,000)")
    keep: Literal["half", "quarter", "auto"] = Field("auto", description="how much to keep: auto is "
                                                     "Cline's (quarter when half the total is still over)")
    count_pending: bool = Field(True, description="add the messages since the last reported usage to the "
                                "trigger (Cline: no, it retries after a context-window error instead)")
    notice: bool = Field(True, description="put Cline's truncation notice in the kept history")
    range_end: Literal["assistant", "user"] = Field("assistant", description="assistant: the dropped range ends "
                                                    "on an assistant message, pairs repaired as Cline does; user: "
                                                    "this module's reading before 2026-12")
    duplicate_file_reads: bool = Field(True, description="first replace all but the latest read of each file "
                                       "(Cline's file-read optimisation; off: the older reading)")


def allowed_size(config: SlidingWindowConfig, window: int) -> int:
    """The window less the configured reserve, or Cline's table (:func:`allowed_tokens`)."""
    return window - config.reserve_tokens if config.reserve_tokens is not None else allowed_tokens(window)


class SlidingWindow(ThresholdCompactor):
    name = "sliding_window"
    summary = "Cline classic: over window − 40k drop duplicate file reads, then half of the messages after the first pair"
    on_rejection = "the history is cut to a quarter and the request retried once (Cline task/index.ts context-window error)"
    Config = SlidingWindowConfig

    @classmethod
    def supersedes_reads(cls, config) -> str | None:
        """Cline's duplicate file reads: every read of a file but the latest is replaced by its notice."""
        return DUPLICATE_READ_NOTICE if config.duplicate_file_reads else None

    @classmethod
    def cut_keeps_share(cls, config: SlidingWindowConfig, window: int, max_output_tokens: int) -> tuple:
        """``getNextTruncationRange``: a cut drops at most half of the messages after the first pair (``floor(rest /
        4) × 2``), three quarters when ``keep`` is "quarter" or, with "auto", when half the total is over the allowed
        size; it cuts again while the request is still at or over it."""
        allowed = allowed_size(config, window)
        share = 0.25 if config.keep == "quarter" else 0.5
        return share, 2, 2 * allowed if config.keep == "auto" else None, allowed

    @classmethod
    def compacts_above(cls, config: SlidingWindowConfig, window: int, max_output_tokens: int) -> int | None:
        """With ``count_pending``, its own estimate (the last usage and what came since) at the allowed size cuts."""
        return allowed_size(config, window) if config.count_pending else None

    @classmethod
    def compacts_on_usage(cls, config: SlidingWindowConfig, window: int, max_output_tokens: int) -> int | None:
        """Cline's own check, without ``count_pending``: the last usage (input and output) at the allowed size."""
        return None if config.count_pending else allowed_size(config, window)

    @classmethod
    def compacts_by_cut(cls, config: SlidingWindowConfig, messages) -> bool:
        """A cut, no summary: whether a cut of ``messages`` drops any, keeping half or a quarter (the one ``auto``
        takes depends on the estimate)."""
        cut = assistant_cut if config.range_end == "assistant" else user_cut
        return all(cut(messages, keep) is not None for keep in ("half", "quarter"))

    def __init__(self, config, env) -> None:
        super().__init__(config, env)
        if config.reserve_tokens is not None:
            check_room(self.name, env.window, self.allowed(), {"reserve_tokens": config.reserve_tokens})

    def allowed(self) -> int:
        return allowed_size(self.config, self.env.window)

    def _total(self) -> int:
        if self.config.count_pending:
            return self.estimate() or 0
        a = self.anchor
        return a.anchor if a.anchor is not None else (self.estimate() or 0)

    def should_compact(self, call: CallInfo) -> bool:
        return self._total() >= self.allowed()

    def compact(self, call: CallInfo, force: Literal["half", "quarter"] | None = None) -> bool | None:
        allowed = self.allowed()
        if force is None and self.config.duplicate_file_reads and self._drop_duplicate_reads():
            return True
        total = self._total()
        dropped_any = False
        while force is not None or total >= allowed:
            keep = force or self.config.keep
            if keep == "auto":
                keep = "quarter" if total // 2 > allowed else "half"
            cut = self._cut_assistant(keep) if self.config.range_end == "assistant" else self._cut_user(keep)
            if not cut:
                break
            dropped_any = True
            total = self._total()
            if force is not None:
                break
        return True if dropped_any else None

    def _drop_duplicate_reads(self) -> bool:
        """True when the duplicate reads saved at least 30% of the characters (no cut needed)."""
        msgs = list(self.history)
        dup = duplicate_reads(msgs)
        saved, total = 0, sum(m.chars for m in msgs)
        new = []
        for m in msgs:
            if m.role == "user" and any(b.type == "tool_result" and b.id in dup and b.text != DUPLICATE_READ_NOTICE
                                        for b in m.blocks):
                blocks = []
                for b in m.blocks:
                    if b.type == "tool_result" and b.id in dup and b.text != DUPLICATE_READ_NOTICE:
                        saved += len(b.text) - len(DUPLICATE_READ_NOTICE)
                        b = b.with_text(DUPLICATE_READ_NOTICE, duplicate_read=True)
                    blocks.append(b)
                m = Message(m.role, tuple(blocks), m.meta)
            new.append(m)
        if saved <= 0:
            return False
        # re-based as a share of the anchored estimate (templates.rebased_estimate), as every rewrite
        # here: taken away at chars_per_token from a usage that counted the text at its true density,
        # the estimate ran 71-86% high after a cut of dense output (the kit's known finding, issue #45)
        self.set_history(History(new), estimate=self.rebased_estimate(new))
        self.counters.extra["duplicate_reads_dropped"] += sum(1 for _ in dup)
        return total > 0 and saved / total >= MIN_READ_SAVING

    def _cut_assistant(self, keep: Literal["half", "quarter"]) -> bool:
        msgs = list(self.history)
        found = assistant_cut(msgs, keep)
        if found is None:
            return False
        start, end, kept = found
        first = msgs[1]
        removed = msgs[start:end]
        kept = with_dropped_errors(kept, removed)
        head = [msgs[0], with_notice(first) if self.config.notice and not first.meta.get("truncation_notice") else first]
        rest = ([kept] if kept is not None else []) + msgs[end + 1:]
        new = History([*head, *rest])
        self.set_history(new, estimate=self.rebased_estimate(new))
        self.counters.extra["messages_dropped"] += len(removed)
        return True

    def _cut_user(self, keep: Literal["half", "quarter"]) -> bool:
        """The older reading: the first exchange keeps its results, the range ends on a user message,
        the notice is a message of its own."""
        msgs = list(self.history)
        found = user_cut(msgs, keep)
        if found is None:
            return False
        start, end, has_notice = found
        removed = msgs[start:end]
        added = [] if has_notice or not self.config.notice else [
            Message("user", (Block.text_block(NOTICE),), {"origin": "truncation_notice"})]
        new = History([*msgs[:start], *added, *msgs[end:]])
        self.set_history(new, estimate=self.rebased_estimate(new))
        self.counters.extra["messages_dropped"] += len(removed)
        return True

    def on_rejected(self, rejection: Rejection, call: CallInfo) -> bool:
        """Cut to a quarter and retry, once."""
        if rejection.attempt > 1:
            return False
        done = self.compact(call, force="quarter")
        if done:
            self.counters.compactions_attempted += 1
            self.counters.compactions_succeeded += 1
        return bool(done)
