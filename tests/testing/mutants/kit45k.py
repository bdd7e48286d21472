"""Issue #45, eleventh round: what a strategy keeps in memory from one launch to the next. Blind set 52 had NovaCode's
memory layer leave its injection markers as they were at a new launch (not a resume): a memory recalled in one
conversation is never offered to a recall again, in any later conversation, though the new one has never seen it.
Nothing the kit judged within a launch changes, and memories were judged again only after a compaction. A new launch
of an agent is a new process that starts with its files and nothing else: the kit's second replay of each session now
builds the strategy anew at each new launch and expects the same requests (``deterministic``), and the memory scenario
ends with a new launch (``memory_then_compaction``). Blind set 53 had claude_code load its startup files (CLAUDE.md, the
memory index) at the first launch of a run only: the kit's sessions had no such files, so nothing differed. In one
session of two the kit's user now has instruction files and memories on disk (those of the synthetic sessions). Blind set
54 had NovaCode size its tail at a fixed 3.5 characters a token where it calibrates: a dense tail passed its cap in true
tokens, and the kit held caps at 4 characters a token; a strategy that counts at the measured rate now declares it
(``compaction_tail_calibrated``). Blind set 55 had NovaCode's restore attachment take a spilled read's preview for the
file: the kit judged only which file was named; the attachment now holds the opening of what the read returned
(``restores_file_chars``). Blind set 56 had claude_code write its cache marks without its one-hour TTL: where the marks
stood was judged, not how long they were bought for (``cache_marks_ttl``). Blind set 60 had NovaCode's sub-agents write
to the parent's read tracker: files only a sub-agent read were restored to the parent; the kit did not judge the
attachment after a sub-agent's reads (``restored`` now does: no file only an isolated sub-agent read)."""

from __future__ import annotations

from dataclasses import replace

from ctxsim.harness.model.conversation import Message
from ctxsim.strategies.claude_code import ClaudeCode
from ctxsim.strategies.novacode.strategy import NovaCode


class NovaCodeMemoryMarkersSurviveALaunch(NovaCode):
    """A new launch resets the memory layer's conversation but not its injection markers."""

    name = "novacode_memory_markers_survive_a_launch"

    def on_session_start(self, session: str, resume: bool, now: float) -> None:
        layer = self.memory
        kept = (set(layer.injected), list(layer._order)) if layer is not None else None
        super().on_session_start(session, resume, now)
        if layer is not None and not resume:
            layer.injected, layer._order = kept   # the bug: the markers of the last conversation stand


class ClaudeCodeStartupAtTheFirstLaunchOnly(ClaudeCode):
    """The flag that the startup files were loaded is kept at a new launch: later launches start without them."""

    name = "claude_code_startup_at_the_first_launch_only"

    def on_session_start(self, session: str, resume: bool, now: float) -> None:
        started = self.started
        super().on_session_start(session, resume, now)
        self.started = started   # the bug: a new launch does not load CLAUDE.md and the memory index again


class NovaCodeTailAtTheSeedRate(NovaCode):
    """The tail sized at the seed's 3.5 characters a token where the budgets are calibrated (denser text: a longer tail)."""

    name = "novacode_tail_at_the_seed_rate"

    def _budget_cpt(self) -> float:
        return self.config.chars_per_token   # the bug: the calibrated rate is never used


class NovaCodeRestoresThePreview(NovaCode):
    """The read tracker is given the results after spilling: a spilled file is restored as its preview."""

    name = "novacode_restores_the_preview"

    def on_tool_results(self, message: Message) -> None:
        if self.config.spill:
            message = self._spill(message)
        originals = {b.id: b.text for b in message.blocks if b.type == "tool_result" and b.id}  # the bug: after spilling
        self.reads.on_results(message, len(self.history), originals)
        self._append(message)


class ClaudeCodeMarksAtTheDefaultTtl(ClaudeCode):
    """Cache marks written without the configured TTL: the run's default, five minutes, where Claude Code buys an hour."""

    name = "claude_code_marks_at_the_default_ttl"

    def breakpoints(self, history):
        return tuple(replace(b, ttl=None) for b in super().breakpoints(history))   # the bug: the TTL dropped


class NovaCodeSubAgentReadsTheParents(NovaCode):
    """An isolated sub-agent's reads go to the parent's tracker: the parent restores files it never read."""

    name = "novacode_sub_agent_reads_the_parents"

    def on_subtask_start(self, id: str, description: str, isolated: bool) -> None:
        parent = self.reads
        super().on_subtask_start(id, description, isolated)
        self.reads = parent   # the bug: one tracker for both contexts
