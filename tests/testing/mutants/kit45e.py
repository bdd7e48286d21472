"""Issue #45, fifth round: counts a strategy keeps that were not declared, so an off-by-one in them
went unseen (blind sets 3 and 10): SWE-agent's masking window and Claude Code's microcompact keep,
each now a declared promise (``keeps_recent_tool_uses``); a sub-agent's report asked of the parent's
context (set 9). Each beside its correct twin, the registered base."""

from __future__ import annotations

from ctxsim.harness.model.conversation import Block, Message
from ctxsim.strategies.claude_code import CLEARED, COMPACTABLE_TOOLS, ClaudeCode
from ctxsim.strategies.observation_masking import ObservationMasking, last_removed_index, masked_history
from ctxsim.strategies.structured_state import WindowedStrategy
from ctxsim.strategies.subagent_isolation import SubagentIsolation
from ctxsim.strategies.templates import chars_to_tokens


class MaskingTemplateOffByOne(ObservationMasking):
    """The template's shift forgotten: with the task as observation 0 the list of tool results is one
    shorter than SWE-agent's, so one observation more than ``n`` allows is masked."""

    name = "masking_template_off_by_one"

    def prepare(self, call):
        template, obs = self._observations()
        count = len(obs) + (1 if template else 0)
        last = last_removed_index(count, self.config.n, self.config.polling)
        lo, hi = (0, last) if template else (1, last)   # the bug: (0, last - 1) with a template
        want = max(0, hi - lo)
        if want <= self.masked:
            return
        todo: dict[int, list[int]] = {}
        for i, j in obs[lo + self.masked: lo + want]:
            todo.setdefault(i, []).append(j)
        h = masked_history(self.history, todo)
        self.counters.extra["masked_observations"] += want - self.masked
        self.masked = want
        self.set_history(h, estimate=self.rebased_estimate(h))


class MicrocompactKeepsFewer(ClaudeCode):
    """The newest compactable results sliced one short: an idle gap clears one result more than
    ``microcompact_keep`` leaves."""

    name = "microcompact_keeps_fewer"

    def microcompact(self) -> int:
        h = self.history
        spots = [(i, j) for i, m in enumerate(h) if m.role == "user" for j, b in enumerate(m.blocks)
                 if b.type == "tool_result" and self.tool_names.get(b.id or "") in COMPACTABLE_TOOLS]
        keep = self.config.microcompact_keep
        old = [(i, j) for i, j in spots[:len(spots) - keep + 1] if h[i].blocks[j].text != CLEARED]   # the bug
        if not old:
            return 0
        freed = 0
        by_msg: dict[int, set[int]] = {}
        for i, j in old:
            by_msg.setdefault(i, set()).add(j)
        for i in sorted(by_msg):
            m = h[i]
            blocks = []
            for j, b in enumerate(m.blocks):
                if j in by_msg[i]:
                    freed += len(b.text) - len(CLEARED)
                    b = Block.tool_result(b.id or "", CLEARED, b.is_error, cleared=True)
                blocks.append(b)
            h = h.replace_at(i, Message(m.role, tuple(blocks), m.meta))
        est = self.estimate()
        self.set_history(h, estimate=est - chars_to_tokens(max(0, freed), self.config.chars_per_token)
                         if est is not None and self.anchor.anchor is not None else None)
        self.counters.extra["microcompacted_results"] += len(old)
        self.counters.extra["microcompactions"] += 1
        return len(old)


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
