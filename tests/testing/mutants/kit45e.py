"""Issue #45, fifth round: counts a strategy keeps that were not declared, so an off-by-one in them
went unseen (blind sets 3 and 10): SWE-agent's masking window and Claude Code's microcompact keep,
each now a declared promise (``keeps_recent_tool_uses``); a sub-agent's report asked of the parent's
context (set 9); and what blind set 11 got past: a summary on the run's model where the strategy names
a fast one (``call_models``), a prune under its declared minimum (opencode's ``clear_minimum``); and what blind set 12 got past: Claude
Code's idle microcompact that never fires (``clears_when_idle``); and blind set 13's: a cache breakpoint a
message early (``cache_marks``), and a compaction trigger that never fires in a strategy that does not
promise the window (``compacts_above``); and blind set 15's: a cut to a budget counted in another unit than
declared (``result_limits`` now also hold a result that fits to entering whole). (A
second compaction that leaves the first summary out of its input is caught only where the summaries
differ: the kit's summariser restates the first request in each, so the next one often holds what the
first did; not in this corpus.) Each beside its correct twin, the registered base."""

from __future__ import annotations

from ctxsim.harness.model.conversation import Block, Message
from ctxsim.strategies.claude_code import ClaudeCode
from ctxsim.strategies.codex import Codex
from ctxsim.strategies.goose import Goose
from ctxsim.strategies.observation_masking import ObservationMasking
from ctxsim.strategies.opencode import OpenCode
from ctxsim.strategies.structured_state import WindowedStrategy
from ctxsim.strategies.subagent_isolation import SubagentIsolation


def _seen_as(strategy, **changes):
    """``strategy``'s config with ``changes``, for one method's run (a value read wrong in one place)."""
    c = strategy.config
    strategy.__dict__["config"] = c.model_copy(update=changes)
    return c


class MaskingTemplateOffByOne(ObservationMasking):
    """The template's shift forgotten: SWE-agent counts the task as observation 0, this masks as if
    the window were one observation shorter, so one observation more than ``n`` allows is masked."""

    name = "masking_template_off_by_one"

    def prepare(self, call):
        c = _seen_as(self, n=max(1, self.config.n - 1))
        try:
            super().prepare(call)
        finally:
            self.__dict__["config"] = c


class MicrocompactKeepsFewer(ClaudeCode):
    """The newest compactable results sliced one short: an idle gap clears one result more than
    ``microcompact_keep`` leaves."""

    name = "microcompact_keeps_fewer"

    def microcompact(self) -> int:
        c = _seen_as(self, microcompact_keep=max(0, self.config.microcompact_keep - 1))
        try:
            return super().microcompact()
        finally:
            self.__dict__["config"] = c


class ReportAfterRestore(SubagentIsolation):
    """The span is closed first (the parent's history and estimate restored, "tidy up, then report"),
    so the report the parent gets is a summary of the parent's own conversation."""

    name = "report_after_restore"

    def on_subtask_end(self, id, conclusion):
        if not self.spans or self.spans[-1].id != id:
            self.counters.extra["orphan_subtask_ends"] += 1
            return
        span = self.spans.pop()
        WindowedStrategy.on_subtask_end(self, id, conclusion)
        if span.tool_use is None:
            return
        report = self.report(conclusion)   # the bug: asked after the restore, of the parent's history
        self.history = self.history.extend([
            Message("assistant", (span.tool_use,), {"origin": "subagent"}),
            Message("user", (Block.tool_result(span.tool_use.id or "", report),), {"origin": "subagent"}),
        ])


class GooseSummaryOnRunModel(Goose):
    """The fast model lost in a refactor of the compaction: the summary goes to the run's model."""

    name = "goose_summary_on_run_model"

    def compact(self, call):
        c = _seen_as(self, summary_model=None)
        try:
            return super().compact(call)
        finally:
            self.__dict__["config"] = c


class PruneUnderMinimum(OpenCode):
    """The prune minimum read as zero: any old output past the protected tokens is pruned, a cache break
    for a few tokens."""

    name = "prune_under_minimum"

    def prune(self) -> int:
        c = _seen_as(self, prune_minimum_tokens=0)
        try:
            return super().prune()
        finally:
            self.__dict__["config"] = c


class MicrocompactIdleInMinutes(ClaudeCode):
    """The idle gap compared in minutes against a setting in seconds (``idle_s * 60``): a cold cache is
    never seen, so old results are never cleared; nothing else breaks."""

    name = "microcompact_idle_in_minutes"

    def prepare(self, call):
        c = _seen_as(self, microcompact_idle_s=self.config.microcompact_idle_s * 60)
        try:
            super().prepare(call)
        finally:
            self.__dict__["config"] = c


class MarksThePreviousMessage(ClaudeCode):
    """The last marker placed at ``len(history) - 2``, as if the newest message were not appended yet: the
    newest turn is written to the cache again at every call."""

    name = "marks_the_previous_message"

    def breakpoints(self, history):
        from ctxsim.harness.model.conversation import Breakpoint

        n = len(history)
        return (Breakpoint("system"),) + ((Breakpoint(n - 2),) if n > 1 else ())


class ThresholdInCharacters(ClaudeCode):
    """The auto-compact threshold compared with the estimate times the characters per token (a count of
    characters against a count of tokens): it never fires before the window; the overflow that follows is
    one this strategy does not promise to avoid."""

    name = "threshold_in_characters"

    def should_compact(self, call):
        return (self.failures < self.config.max_consecutive_failures
                and (self.estimate() or 0) >= self.threshold() * self.config.chars_per_token)


class TriggerOnCharacters(ClaudeCode):
    """The estimate turned into characters before it meets the threshold (a count of characters against a
    count of tokens): the conversation is summarised at a quarter of the threshold, a cache break each time."""

    name = "trigger_on_characters"

    def should_compact(self, call):
        return (self.failures < self.config.max_consecutive_failures
                and (self.estimate() or 0) * self.config.chars_per_token >= self.threshold())


class CodexCutInCharacters(Codex):
    """The output budget taken in characters (``chars_per_token`` left out of the cut): every output of more
    than ``tool_output_tokens`` characters is cut to a quarter of what Codex keeps."""

    name = "codex_cut_in_characters"

    def on_tool_results(self, message):
        c = _seen_as(self, chars_per_token=1.0)
        try:
            super().on_tool_results(message)
        finally:
            self.__dict__["config"] = c


class GooseWindowOfItsOwn(Goose):
    """The share taken of a fixed 200,000-token window, not the model's: on a smaller window a reply never
    starts over the threshold, and the conversation runs into the window instead."""

    name = "goose_window_of_its_own"

    def should_compact(self, call):
        started, self.reply_started = self.reply_started, False
        last = self.anchor.anchor
        return started and last is not None and last / 200_000 > self.config.threshold
