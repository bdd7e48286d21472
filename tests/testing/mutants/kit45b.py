"""Issue #45, second round: bug kinds a held-out set found the kit blind to, written afresh (the held-out
mutants themselves stay outside the repository): a summary made and then not used by the rewrite it was
made for, a new launch that carries the previous conversation in, an estimate off on a request under a
quarter of the window, a sub-agent's usage taken for the parent's, a date on a clock the strategy does
not declare, a clearing gate that counts what another edit cleared, and a placeholder naming a file of
the run that does not hold its result (deleted on resume, or a typo in the notice). Each beside its correct twin
(tests/testing/mutants/variants.py, or the registered base)."""

from __future__ import annotations

import datetime as dt
import shutil
from dataclasses import replace
from pathlib import Path

from ctxsim.harness.model.conversation import Block, History, Message, SystemPrompt
from ctxsim.strategies.claude_code import ClaudeCode
from ctxsim.strategies.gemini_cli import GeminiCli
from ctxsim.strategies.tiered_budget import TieredBudget

from tests.testing.mutants.variants import ClearingThinking, MyCodex


class CodexKeepsPreviousSummary(MyCodex):
    """The handoff summary is stored after the new history is built from the stored one: each
    compaction installs the summary of the compaction before it (the first, a placeholder)."""

    name = "codex_keeps_previous_summary"

    def _summarise(self):
        text = super()._summarise()
        if text is None:
            return None
        previous = getattr(self, "_previous", "(no summary yet)")
        self._previous = text
        return previous


class ClaudeCodeNewLaunchKeepsGoal(ClaudeCode):
    """A new launch (not a resume) starts with the previous conversation's first request kept "for
    context", verbatim."""

    name = "claude_code_new_launch_keeps_goal"

    def on_session_start(self, session, resume, now):
        first = next((m for m in self.history if m.role == "user" and not m.has_tool_result), None)
        super().on_session_start(session, resume, now)
        if not resume and first is not None:
            self.history = History([first, Message("assistant", (Block.text_block("Noted."),))])


class ClaudeCodeMicrocompactInCharacters(ClaudeCode):
    """Microcompact takes what it cleared off the estimate as characters (not tokens): the estimate of the
    request after it runs far under the truth, on a request that is mostly not large."""

    name = "claude_code_microcompact_in_characters"

    def set_history(self, history, *, estimate=None):
        if estimate is not None and getattr(self, "_micro", False):
            before = self.estimate() or 0
            estimate = max(0, before - round((before - estimate) * self.config.chars_per_token))
        super().set_history(history, estimate=estimate)

    def microcompact(self):
        self._micro = True
        try:
            return super().microcompact()
        finally:
            self._micro = False


class ClaudeCodeSubagentUsageKept(ClaudeCode):
    """The usage anchor is one per process: a sub-agent's last usage stays the parent's anchor after it
    returns, so the parent's next estimate starts from the sub-agent's context."""

    name = "claude_code_subagent_usage_kept"

    def on_subtask_end(self, id, conclusion):
        a = self.anchor
        kept = (a.anchor, a.anchor_len, a.last_input)
        super().on_subtask_end(id, conclusion)
        if kept[0] is not None:
            a.anchor, a.anchor_len, a.last_input = kept[0], min(kept[1], len(self.history)), kept[2]


class ClaudeCodeDateOnBuildEpoch(ClaudeCode):
    """Today's date at the end of the system prompt, per request, on a clock of its own that it does not
    declare (the trace's time read from the build's epoch, 2025-03-01 09:30 UTC)."""

    name = "claude_code_date_on_build_epoch"
    EPOCH = 1_740_821_400.0  # 2025-03-01 09:30 UTC: not a midnight, so its midnights are not the trace's

    def build_request(self, call):
        req = super().build_request(call)
        date = dt.datetime.fromtimestamp(self.EPOCH + call.now, dt.UTC).strftime("%Y-%m-%d")
        s = self.env.system
        return replace(req, system=SystemPrompt((*s.blocks, Block.text_block(f"Today's date: {date}")),
                                                s.opaque_tokens, s.shared_tokens))


class CEGateCountsThinking(ClearingThinking):
    """clear_thinking on: the tool-result edit's clear_at_least is held against what the request clears
    in all, the thinking the thinking edit cleared in the same request included, so it clears results
    that free next to nothing."""

    name = "ce_gate_counts_thinking"

    def _clear_thinking(self):
        before = self._thinking_chars
        n = super()._clear_thinking()
        self._thinking_now = self._thinking_chars - before
        return n

    def _clear_in_view(self, ids):
        return super()._clear_in_view(ids) + getattr(self, "_thinking_now", 0)


# --- a placeholder that names a file of the run which does not hold its result ---------------------
# (the path back a strategy's own notice claims: held for every strategy, promise or not)

class GeminiCleansOutputsOnResume(GeminiCli):
    """A resumed launch clears the saved tool outputs as stale, while the masked previews in the
    resumed history still name them."""

    name = "gemini_cleans_outputs_on_resume"

    def on_session_start(self, session, resume, now):
        super().on_session_start(session, resume, now)
        if resume:
            shutil.rmtree(Path(self.env.session_dir) / "tool-outputs", ignore_errors=True)


class TieredBudgetNoticeTypo(TieredBudget):
    """The spill notice names ``tool-result/`` where the file went to ``tool-results/``."""

    name = "tiered_budget_notice_typo"

    def apply(self, b, message):
        out = super().apply(b, message)
        if out.meta.get("spilled"):
            return out.with_text(out.text.replace("/tool-results/", "/tool-result/"), spilled=out.meta["spilled"])
        return out
