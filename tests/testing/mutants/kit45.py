"""Issue #45's bug kinds, written afresh against this week's code (first as a held-out set outside
the repository, measured there, then added here as regression tests): a clearing that does not honour
its own clear_at_least, a summary that drops an item its strategy promises to keep, a compaction that
changes the system prompt or the tools, a boundary on (or after) a message of empty tool results, a date
stamped from the strategy's own epoch, an estimate after a clearing taken away at a fixed chars per
token, and bugs of the new code of issue #46 (inputs cleared in place, thinking cleared off by one or
undeclared), each beside its correct twin (tests/testing/mutants/variants.py: users' subclasses, under
other class names and ``name`` values)."""

from __future__ import annotations

import datetime as dt
from contextlib import contextmanager
from dataclasses import replace

from ctxsim.harness.model.conversation import Block, History, Message, SystemPrompt, ToolSet
from ctxsim.strategies import claude_code as claude_code_module
from ctxsim.strategies.claude_code import ClaudeCode
from ctxsim.strategies.novacode import compaction as rules
from ctxsim.strategies.templates import chars_to_tokens

from tests.testing.mutants.variants import (
    ClearingAssistant,
    ClearingEpisodic,
    ClearingInputsOfReads,
    ClearingInSteps,
    ClearingThinking,
    MyCodex,
    MyCutNoSummary,
    MyNovaCode,
)


@contextmanager
def swapped(module, name, fn):
    """One function of a strategy's module swapped for the duration of one call (one strategy runs at
    a time in this process)."""
    real = getattr(module, name)
    setattr(module, name, fn)
    try:
        yield real
    finally:
        setattr(module, name, real)


def _with_content(m) -> bool:
    return any(b.type == "tool_result" and b.text for b in m.blocks)


# --- minimum: clear_at_least ---------------------------------------------------------------------------

class CEMinimumInCharacters(ClearingAssistant):
    """The gate compares clear_at_least with the characters a clearing frees, not its tokens
    (``tokens = freed`` for ``freed / chars_per_token``)."""

    def _clear_in_view(self, ids):
        return int(super()._clear_in_view(ids) * self.config.chars_per_token)


class CEMinimumOncePerInstance(ClearingAssistant):
    """per_request: the all-or-nothing gate is passed once per strategy instance (a flag set at the
    first clearing and never reset), so a new conversation's, or a sub-agent's, first clearing is not
    held to the minimum."""

    def _reset_view(self):
        passed = bool(getattr(self, "_passed", False))
        super()._reset_view()
        if passed:
            self._cleared = {"(passed)"}

    def _per_request(self):
        req = super()._per_request()
        self._passed = getattr(self, "_passed", False) or bool(self._cleared - {"(passed)"})
        return req


class CEPerClearingOnlyFirst(ClearingInSteps):
    """Issue #45's bug 2: the per-clearing minimum checked on the first clearing only (the code
    tests ``not self._cleared``, the per_request rule, whatever the scope)."""

    def __init__(self, config, env):
        super().__init__(config.model_copy(update={"clear_at_least_scope": "per_request"}), env)


class CEEpisodicMinimumOnPrompt(ClearingEpisodic):
    """episodic: an episode is held to clear_at_least by the prompt's estimate, not by what it frees
    ("worth it when the prompt is big")."""

    def compact(self, call):
        c = self.config
        if c.clear_at_least is None:
            return super().compact(call)
        real = c.clear_at_least
        self.config = c.model_copy(update={"clear_at_least": None})
        try:
            if (self.estimate() or 0) < real:
                self.counters.extra["clear_skipped"] += 1
                return None
            return super().compact(call)
        finally:
            self.config = c


# --- summary: what a summary keeps -------------------------------------------------------------------

class CodexWithoutActiveTask(MyCodex):
    """Issue #45's bug 3: the prompt's "Active task" item dropped (its sections taken from index 1)."""

    def _summarise(self):
        cfg = self.config

        class _Cfg:
            def __getattr__(self, k):
                return getattr(cfg, k)

            def prompt_and_sections(self):
                p, s = cfg.prompt_and_sections()
                return p, s[1:]
        self.config = _Cfg()
        try:
            return super()._summarise()
        finally:
            self.config = cfg


class NovaCodeSummaryCapped(MyNovaCode):
    """The summary is capped at 1,500 characters before it goes in ("summaries are never longer than
    that"): the later sections are cut off."""

    def _apply(self, choice, text, est, now, resident):
        return super()._apply(choice, text[:1_500], est, now, resident)


class ClaudeCodeSectionsFiltered(ClaudeCode):
    """The summary prompt and sections built without "All user messages" ("they are in the tail
    anyway")."""

    def compact(self, call):
        sections = tuple(s for s in claude_code_module.SECTIONS if s != "All user messages")
        with swapped(claude_code_module, "SECTIONS", sections):
            return super().compact(call)


class NovaCodePromptListsFive(MyNovaCode):
    """The instructions list only the first five sections (a copy of the prompt never updated); the
    spec's sections are all nine."""

    def _summarise(self, choice, resident, fired, est):
        from ctxsim.strategies.novacode import strategy as nm

        real = nm.SUMMARY_INSTRUCTIONS

        class _Five(str):
            def format(self, **kw):
                kw["sections"] = "\n".join(kw["sections"].splitlines()[:5])
                return str.format(real, **kw)
        with swapped(nm, "SUMMARY_INSTRUCTIONS", _Five(real)):
            return super()._summarise(choice, resident, fired, est)


# --- prompt: the system prompt or tools changed at a compaction --------------------------------------

class NovaCodeCompactionNote(MyNovaCode):
    """After a compaction the system prompt carries a note of it ("the model should know its context
    was compacted"): the tools+system cache entry is lost at every compaction."""

    def _apply(self, choice, text, est, now, resident):
        done = super()._apply(choice, text, est, now, resident)
        if done:
            self.compactions_done = getattr(self, "compactions_done", 0) + 1
        return done

    def build_request(self, call):
        req = super().build_request(call)
        n = getattr(self, "compactions_done", 0)
        if not n:
            return req
        note = Block.text_block(f"Note: the conversation was compacted {n} time(s).")
        return replace(req, system=SystemPrompt((*req.system.blocks, note), req.system.opaque_tokens))


class ClaudeCodeToolsSortedAfterCompaction(ClaudeCode):
    """The compaction rebuilds the tool list sorted by name (from a dict of the tools it saw)."""

    def compact(self, call):
        done = super().compact(call)
        if done:
            self.sorted_tools = True
        return done

    def build_request(self, call):
        req = super().build_request(call)
        if getattr(self, "sorted_tools", False):
            return replace(req, tools=ToolSet(tuple(sorted(req.tools.tools, key=lambda t: t.name))))
        return req


class CutNoSummarySystemReordered(MyCutNoSummary):
    """At a cut the notice goes at the head of the system prompt ("the model must see it first")."""

    def _cut(self):
        done = super()._cut()
        if done:
            self.cuts = getattr(self, "cuts", 0) + 1
        return done

    def build_request(self, call):
        req = super().build_request(call)
        if getattr(self, "cuts", 0):
            note = Block.text_block("Earlier messages were removed.")
            return replace(req, system=SystemPrompt((note, *req.system.blocks), req.system.opaque_tokens))
        return req


# --- empty: boundaries on an all-empty results message -----------------------------------------------

class NovaCodeEmptyResultsAreNotResults(MyNovaCode):
    """N-COMP-7's flags from "a result with content" (``b.text`` truthy): a message of empty results
    counts as no results, so the tail may start on it, its tool_use summarised away."""

    def _maybe_compact(self, now, resident, force=False):
        hist = self.history
        real = rules.select_tail

        def select_tail(tokens, has, *a, **k):
            return real(tokens, [_with_content(m) for m in hist], *a, **k)
        with swapped(rules, "select_tail", select_tail):
            return super()._maybe_compact(now, resident, force)


class CutNoSummaryDropsEmpty(MyCutNoSummary):
    """The kept tail leaves out messages with no characters ("nothing to keep"): an empty results
    message goes, its tool_use stays."""

    def _cut(self):
        done = super()._cut()
        if done:
            self.history = History([m for m in self.history if m.chars > 0])
        return done


class CutNoSummaryEmptyResultsAreNotResults(MyCutNoSummary):
    """cut_no_summary's N-COMP-7 flags from "a result with content": a message of empty results can
    start the kept tail, its tool_use cut away."""

    def _cut(self):
        real = rules.select_tail
        hist = list(self.history)

        def select_tail(tokens, has, *a, **k):
            return real(tokens, [_with_content(m) for m in hist], *a, **k)
        with swapped(rules, "select_tail", select_tail):
            return super()._cut()


class CodexDropsEmptyResults(MyCodex):
    """Tool results with no output are not sent ("nothing to show the model")."""

    def on_tool_results(self, message):
        blocks = tuple(b for b in message.blocks if b.type != "tool_result" or b.text)
        super().on_tool_results(Message(message.role, blocks, message.meta))


# --- epoch: a date from the strategy's own clock -------------------------------------------------------

class NovaCodeDateInSystemFromEpoch(MyNovaCode):
    """Today's date, from the strategy's own epoch, appended to the system prompt of every request."""

    def build_request(self, call):
        req = super().build_request(call)
        day = dt.datetime.fromtimestamp(self.config.environment_epoch_s + call.now, dt.UTC).date().isoformat()
        return replace(req, system=SystemPrompt((*req.system.blocks, Block.text_block(f"Today: {day}")),
                                                req.system.opaque_tokens))


# --- estimate: after a clearing ------------------------------------------------------------------------

class CEEstimateFixedRate(ClearingAssistant):
    """Issue #45's bug 7 as it was: the cleared text taken away at chars_per_token from the anchored
    estimate (which counted it at its true density)."""

    def _per_request(self):
        self._sync_view()
        cpt = self.config.chars_per_token
        base = self._view if self._cleared else self.history
        full = self.anchor.estimate(base, self.env.system, self.env.tools) + int(self._cleared_chars / cpt)
        req = super()._per_request()
        return replace(req, estimated_tokens=full - int(self._cleared_chars / cpt) if self._cleared else full)


class CEEpisodicEstimateFixedRate(ClearingEpisodic):
    """episodic: the estimate after an episode is the old one minus what it freed at 4 chars/token."""

    def set_history(self, history, *, estimate=None):
        if estimate is not None:
            old = self.estimate()
            freed = sum(m.chars for m in self.history) - sum(m.chars for m in history)
            estimate = old - chars_to_tokens(max(0, freed), self.config.chars_per_token)
        super().set_history(history, estimate=estimate)


# --- other: new code of #46 and the API's rules ----------------------------------------------------------

class CEClearsInputsInPlace(ClearingInputsOfReads):
    """A cleared tool use's input emptied in place (``b.input.clear()``): the trace's own dict."""

    def _clear_in_view(self, ids):
        for tid in ids:
            if tid in self._uses:
                for b in self._view[self._uses[tid]].blocks:
                    if b.type == "tool_use" and b.id == tid and isinstance(b.input, dict) \
                            and (self._names.get(tid) in ("Read", "Bash")):
                        b.input.clear()
        return super()._clear_in_view(ids)


class CEThinkingKeepOffByOne(ClearingThinking):
    """keep N clears the turns up to and including the oldest kept one (``<=`` for ``<``): with keep 1
    the open tool loop loses its thinking."""

    def _clear_thinking(self):
        keep = self._thinking_keep
        if not self.config.clear_thinking or keep is None or len(self._turns) <= keep - 1:
            return 0
        oldest_kept = self._turns[-keep]
        n = 0
        while self._thinking_done < len(self._thinking) and self._thinking[self._thinking_done][1] <= oldest_kept:
            mi = self._thinking[self._thinking_done][0]
            self._thinking_done += 1
            m = self._view[mi]
            blocks = tuple(b for b in m.blocks if b.type != "thinking")
            if blocks:
                self._thinking_chars += self._replace_in_view(mi, Message(m.role, blocks, m.meta))
                n += 1
        return n


class CEThinkingUndeclared(ClearingThinking):
    """Thinking cleared without declaring the rewrite ("it is not a tool result")."""

    def _per_request(self):
        before = self._thinking_done
        cleared_before = len(self._cleared)
        req = super()._per_request()
        if self._thinking_done > before and len(self._cleared) == cleared_before:
            req = replace(req, rewrite=False)
        return req


class CodexSummaryFirst(MyCodex):
    """The handoff summary goes in first, as the model's own message, the user messages after it."""

    def set_history(self, history, *, estimate=None):
        msgs = list(history)
        if msgs and msgs[-1].meta.get("origin") == "summary":
            s = msgs.pop()
            msgs.insert(0, Message("assistant", s.blocks, s.meta))
        super().set_history(History(msgs), estimate=estimate)


class NovaCodeSpillNamedByTool(MyNovaCode):
    """Spill files named by the tool ("Read.txt", "Bash.txt"): a later spill of one tool overwrites
    the file an earlier placeholder names."""

    def _spill(self, message):
        from ctxsim.strategies.novacode import spill as sp

        names = {b.id: (b.name or "tool") for m in self.history for b in m.blocks if b.type == "tool_use"}
        real = sp.spill_file_name

        def spill_file_name(tool_use_id):
            return real(names.get(tool_use_id, "tool"))
        with swapped(sp, "spill_file_name", spill_file_name):
            return super()._spill(message)
