"""Issue #45, seventh round: a strategy that does less than its configuration says. Blind sets 21 and 22,
written apart, both measured context_editing's trigger on the prompt an earlier clearing left instead of the
whole prompt the API is sent: once cleared below the trigger it stops clearing the newer results, in episodes
where the API clears each request (``clears_above``). And sliding_window's duplicate file reads keeping the first
read of each file and replacing the later ones (blind sets 19 to 22, four times written apart): the model is left
the stale read (``supersedes_reads``). And Claude Code's last answer forgotten at a resume (blind set 22): the
idle gap is never measured across one, so the time-based clearing does not fire after it (``idle_clear``, now
judged at a resume's first request). And SWE-agent's masking leaving the template out of its count (blind set 22):
one observation fewer masked than its n allows, which only a promise of what a masking takes shows
(``clears_all_but_recent``, now declared by observation_masking). And gemini-cli's budget of tool output walked
oldest first (blind sets 20 and 22): the newest outputs are cut, the old ones kept (``keeps_recent_tool_chars``,
now declared by gemini_cli, its outputs cut past the kit's share of 40,000 characters). And opencode's prune
guard counted one turn short (blind set 21; blind set 19 one long): the turn before the last pruned
(``keeps_recent_turns``, reached on a session whose turns outgrow the budget kept in tokens). And Roo Code's
condense trigger read on the last request's input alone (blind set 21): the message that crosses the line goes
out uncondensed (``compaction_trigger``, now declared by roo_code). And tiered_budget's cut with its head and tail
shares swapped (blind set 21), and its budgets applied to the first result of a message only (blind set 22): a
promise of each tier's cut (``result_cuts``). And on_demand_reading's idle clock set only when over budget
(blind set 21): reads replaced while the cache is warm, which the random sample alone had found
(``replaces_only_when_idle``). And observation_masking's count of what it masked reset when a sub-agent starts
(blind set 21): back in the parent the masked are masked again from their own placeholders (``replaced_once``,
held where ``keeps_replacements`` is set). Each beside its correct twin, the registered base."""

from __future__ import annotations

from ctxsim.strategies import opencode as oc
from ctxsim.strategies import sliding_window as sw
from ctxsim.strategies.claude_code import ClaudeCode
from ctxsim.strategies.context_editing import ContextEditing
from ctxsim.strategies.gemini_cli import GeminiCli
from ctxsim.strategies.observation_masking import ObservationMasking
from ctxsim.strategies.on_demand_reading import OnDemandReading
from ctxsim.strategies.opencode import OpenCode
from ctxsim.strategies.roo_code import RooCode
from ctxsim.strategies.sliding_window import SlidingWindow
from ctxsim.strategies.tiered_budget import TieredBudget

from tests.testing.mutants.kit45e import _seen_as


class ContextEditingTriggerOnView(ContextEditing):
    """The trigger is read on the view (what the last clearing left) where the server measures the whole prompt:
    what earlier clearings took out is not counted back. After a clearing the prompt falls under the trigger, and
    the results that come after go whole until it grows back."""

    name = "context_editing_trigger_on_view"

    def _per_request(self):
        earlier, self._cleared_tokens = self._cleared_tokens, 0
        try:
            return super()._per_request()
        finally:
            self._cleared_tokens += earlier


def _all_but_the_first_read(messages) -> dict[str, str]:
    """``sliding_window.duplicate_reads`` with the slice the wrong way round (``ids[1:]`` for ``ids[:-1]``)."""
    reads: dict[str, list[str]] = {}
    for m in messages:
        for b in m.blocks if m.role == "assistant" else ():
            if b.type == "tool_use" and b.name in sw.READ_TOOLS and b.id:
                path = next((v for k in sw.PATH_KEYS if isinstance(v := (b.input or {}).get(k), str) and v), None)
                if path:
                    reads.setdefault(path, []).append(b.id)
    return {i: p for p, ids in reads.items() for i in ids[1:]}


class SlidingWindowKeepsFirstRead(SlidingWindow):
    """Duplicate file reads: every read of a file after the first is replaced by the notice, so the model keeps the
    oldest content of a file it has since read again (and maybe edited)."""

    name = "sliding_window_keeps_first_read"

    def _drop_duplicate_reads(self) -> bool:
        sw.duplicate_reads, kept = _all_but_the_first_read, sw.duplicate_reads
        try:
            return super()._drop_duplicate_reads()
        finally:
            sw.duplicate_reads = kept


class ClaudeCodeIdleForgottenAtResume(ClaudeCode):
    """When it last answered is reset at every launch, resumes included: the conversation picked up after hours
    away sends every old result whole, where the cache is cold and the time-based microcompact clears them."""

    name = "claude_code_idle_forgotten_at_resume"

    def on_session_start(self, session: str, resume: bool, now: float) -> None:
        super().on_session_start(session, resume, now)
        self.last_answer_at = None


class MaskingCountsWithoutTheTask(ObservationMasking):
    """The observations counted without the task (the instance template, SWE-agent's observation 0): the window
    is one observation longer than ``n`` allows, so each query leaves one more old output whole."""

    name = "masking_counts_without_the_task"

    def prepare(self, call) -> None:
        c = _seen_as(self, n=self.config.n + 1)
        try:
            super().prepare(call)
        finally:
            self.__dict__["config"] = c


class GeminiBudgetOldestFirst(GeminiCli):
    """``truncateHistoryToBudget`` walked from the oldest message: the budget is spent on the old outputs, and the
    newest ones, those the model works from, are saved to files and cut."""

    name = "gemini_budget_oldest_first"

    def truncate_to_budget(self, messages):
        return list(reversed(super().truncate_to_budget(list(reversed(messages)))))


class OpenCodePrunesTheTurnBefore(OpenCode):
    """The prune walk's guard ``turns < 1`` for ``turns < 2``: only the turn that just ended is kept whole, the one
    before it pruned with the old output."""

    name = "opencode_prunes_the_turn_before"

    def prune(self) -> int:
        oc.PRUNE_TURNS, kept = oc.PRUNE_TURNS - 1, oc.PRUNE_TURNS
        try:
            return super().prune()
        finally:
            oc.PRUNE_TURNS = kept


class RooTriggerOnLastInput(RooCode):
    """The condense trigger compares the last request's reported input alone, not the running estimate (that and
    what came since): a big result that crosses the line is sent before anything is condensed."""

    name = "roo_trigger_on_last_input"

    def estimate(self, *args, **kwargs):
        if self.anchor.anchor is not None and getattr(self, "_in_trigger", False):
            return self.anchor.last_input or 0
        return super().estimate(*args, **kwargs)

    def should_compact(self, call) -> bool:
        self._in_trigger = True
        try:
            return super().should_compact(call)
        finally:
            self._in_trigger = False


class TieredSharesSwapped(TieredBudget):
    """The cut keeps ``1 - head_share`` of the budget from the start and ``head_share`` from the end: a test log's
    failures and stack trace, at its end, mostly cut away."""

    name = "tiered_shares_swapped"

    def apply(self, b, message):
        c = _seen_as(self, head_share=1 - self.config.head_share)
        try:
            return super().apply(b, message)
        finally:
            self.__dict__["config"] = c


class TieredFirstResultOnly(TieredBudget):
    """Only a message's first result goes through its tier's budget: the others of parallel calls enter whole."""

    name = "tiered_first_result_only"

    def on_tool_results(self, message):
        from ctxsim.harness.model.conversation import Message

        first = next((k for k, b in enumerate(message.blocks) if b.type == "tool_result"), None)
        blocks = [self.apply(b, message) if k == first else b for k, b in enumerate(message.blocks)]
        super(TieredBudget, self).on_tool_results(Message(message.role, tuple(blocks), message.meta))


class OnDemandIdleClockWhenOverBudget(OnDemandReading):
    """When it last called is noted only on calls over the read budget: the first over-budget call after a quiet
    stretch of small ones measures its gap from long ago and replaces reads while the cache is warm."""

    name = "on_demand_idle_clock_when_over_budget"

    def before_call(self, call) -> None:
        if not self.in_isolated_subtask and self.inline_tokens() < self.config.inline_read_tokens:
            return   # the clock below is left as it was
        super().before_call(call)


class MaskingCountResetBySubagent(ObservationMasking):
    """The count of observations masked so far is zeroed when a sub-agent starts and not put back when it ends:
    the parent's next query masks its oldest observations again, from their own placeholders."""

    name = "masking_count_reset_by_subagent"

    def on_subtask_start(self, id: str, description: str, isolated: bool) -> None:
        super().on_subtask_start(id, description, isolated)
        self.masked = 0

    def on_subtask_end(self, id: str, conclusion: str) -> None:
        super().on_subtask_end(id, conclusion)
        self.masked = 0
