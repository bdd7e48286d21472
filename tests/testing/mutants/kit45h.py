"""Issue #45, eighth round: what a compaction keeps besides its summary. Blind sets 19, 21 and 22, written apart,
each changed the verbatim tail a compaction keeps and nothing the kit held: cline's preserved tokens summed in
the characters of each message's JSON (about a third of the tail kept, blind set 21), its cut clamped past the
latest typed prompt (``max`` for ``min``: the prompt in hand summarised away, blind set 19), gemini-cli's split
point given the preserved fraction where it takes the compressed one (seven tenths kept, blind set 19). Each
strategy now declares its tail (``compaction_tail``), held by ``kept_tail``; each mutant beside its correct twin,
the registered base. The cut with no summary is held to it too: cut_no_summary's minimums passed the wrong way
round grow its tail to the cap (blind set 23: ``compaction_tail_shortest``). And goose's flag that a reply began
never cleared, so it compacts between the calls of a turn (blind set 23: ``compacts_only_at_turns``); NovaCode's
spill threshold read as tokens, spilling what should go whole (blind set 23: ``keeps_results_whole``); truncate's
head given the whole byte budget, the tail left nothing (blind sets 19 and 24: ``cut_keeps_head``). And, from blind
sets 25 and 26: Claude Code's count of failed summaries never reset by a good one, so its breaker stops compacting
early (``compaction_breaker``); SWE-agent's masked count carried into an isolated sub-agent, whose results then go
unmasked (``clears_above`` 0, held in a sub-agent's own conversation); the amortized halving's tail forgetting to
leave room for the first events (the cut with no note, after its gap). And, from blind sets 27 and 28: Codex's
kept user messages walked from the oldest (``keeps_newest_user_messages``). NovaCode's tail sized at the seed's rate where it takes the calibrated one (blind set 22)
declares the same way and is still not seen: on the kit's text (2.9 characters a token) the cap it overruns by
3.5 / 2.9 is within the quarter a tail sized at an estimate is given."""

from __future__ import annotations

from contextlib import contextmanager

from ctxsim.strategies import amortized_forgetting as af
from ctxsim.strategies import cline as cl
from ctxsim.strategies import codex as cx
from ctxsim.strategies import gemini_cli as gc
from ctxsim.strategies import truncate as tc
from ctxsim.strategies.amortized_forgetting import AmortizedForgetting
from ctxsim.strategies.claude_code import ClaudeCode
from ctxsim.strategies.cline import Cline
from ctxsim.strategies.codex import Codex
from ctxsim.strategies.cut_no_summary import CutNoSummary
from ctxsim.strategies.gemini_cli import GeminiCli
from ctxsim.strategies.goose import Goose
from ctxsim.strategies.novacode.strategy import NovaCode
from ctxsim.strategies.observation_masking import ObservationMasking
from ctxsim.strategies.truncate import Truncate


@contextmanager
def _swapped(module, name: str, replacement):
    """``module.name`` is ``replacement(original)`` while the block runs (the mutant's one changed call)."""
    original = getattr(module, name)
    setattr(module, name, replacement(original))
    try:
        yield
    finally:
        setattr(module, name, original)


class ClineKeepsInCharacters(Cline):
    """The preserved tokens compared with each message's JSON characters: a third of the tail kept."""

    name = "cline_keeps_in_characters"

    def compact(self, call):
        with _swapped(cl, "safe_cut", lambda cut: lambda messages, preserve, cpt: cut(messages, preserve, 1.0)):
            return super().compact(call)


def _cut_past_prompt(messages, preserve_tokens, cpt):
    """``safe_cut`` with ``max`` where it clamps to the latest typed prompt."""
    total, cut = 0, len(messages)
    for i in range(len(messages) - 1, -1, -1):
        total += cl.chars_to_tokens(cl.message_json_chars(messages[i]), cpt)
        cut = i
        if total >= preserve_tokens:
            break
    if cut <= 0:
        return 0
    last_turn = max((i for i, m in enumerate(messages) if cl.is_plain_user(m)), default=0)
    if last_turn > 0:
        cut = max(cut, last_turn)
    while cut > 0 and not (messages[cut].role == "assistant" or cl.is_plain_user(messages[cut])):
        cut -= 1
    return cut


class ClineCutPastPrompt(Cline):
    """The cut clamped forward to the latest typed prompt: the tail shorter than preserved."""

    name = "cline_cut_past_prompt"

    def compact(self, call):
        with _swapped(cl, "safe_cut", lambda cut: _cut_past_prompt):
            return super().compact(call)


class GeminiPreservedFractionAsSplit(GeminiCli):
    """The split point given the preserved fraction (0.3), not the compressed one: seven tenths kept."""

    name = "gemini_preserved_fraction_as_split"

    def compact(self, call):
        with _swapped(gc, "compress_split_point", lambda split: lambda messages, fraction: split(messages, 1 - fraction)):
            return super().compact(call)


class CutTailToTheCap(CutNoSummary):
    """The tail's minimum in tokens passed its cap: every cut keeps the most it may, not the least it needs."""

    name = "cut_tail_to_the_cap"

    def _cut(self) -> bool:
        c = self.config
        self.config = c.model_copy(update={"tail_min_tokens": c.tail_max_tokens})
        try:
            return super()._cut()
        finally:
            self.config = c


class GooseCompactsMidTurn(Goose):
    """The flag that a reply began is never cleared: the threshold is checked between the calls of a turn."""

    name = "goose_compacts_mid_turn"

    def should_compact(self, call) -> bool:
        started = self.reply_started
        out = super().should_compact(call)
        self.reply_started = started or self.reply_started
        return out


class NovaCodeSpillsInTokens(NovaCode):
    """The spill threshold and budget, in characters, divided by four as if tokens: results spill that should go
    whole."""

    name = "novacode_spills_in_tokens"

    def _spill(self, message):
        c = self.config
        self.config = c.model_copy(update={"spill_threshold_chars": max(1, c.spill_threshold_chars // 4),
                                           "spill_budget_chars": max(1, c.spill_budget_chars // 4)})
        try:
            return super()._spill(message)
        finally:
            self.config = c


def _head_takes_all(cut, text, max_bytes, max_lines, head_lines, tail_lines):
    """``cut`` (``truncate_head_tail``) with the head limited to the whole budget, not half of it."""
    if len(text.encode("utf-8", "surrogatepass")) <= max_bytes and len(text.splitlines()) <= max_lines:
        return text
    return cut(text, 2 * max_bytes, max_lines, head_lines, tail_lines)[:max_bytes]


class TruncateHeadTakesAll(Truncate):
    """The head of a cut given the whole byte budget: the output's end, where errors are, cut away."""

    name = "truncate_head_takes_all"

    def on_tool_results(self, message):
        with _swapped(tc, "truncate_head_tail", lambda cut: lambda *a: _head_takes_all(cut, *a)):
            return super().on_tool_results(message)


class ClaudeCodeBreakerNeverReset(ClaudeCode):
    """The count of failed summaries not reset by a good one: the breaker opens on three failures in a session."""

    name = "claude_code_breaker_never_reset"

    def compact(self, call):
        failures = self.failures
        done = super().compact(call)
        if done:
            self.failures = failures
        return done


class MaskingCountIntoSubagent(ObservationMasking):
    """The masked count carried into an isolated sub-agent (set aside, not zeroed): its results go unmasked."""

    name = "masking_count_into_subagent"

    def on_subtask_start(self, id, description, isolated):
        masked = self.masked
        super().on_subtask_start(id, description, isolated)
        if isolated:
            self.masked = masked


class AmortizedTailForgetsTheHead(AmortizedForgetting):
    """The tail kept at ``max_size // 2`` events, the first events not taken off it."""

    name = "amortized_tail_forgets_the_head"

    def compact(self, call):
        def cut(original):
            return lambda messages, keep_first, max_size, slot, head_len=None: (
                original(messages, keep_first, max_size, slot, head_len)[0],
                original(messages, 0, max_size, slot, 0)[1])
        with _swapped(af, "halving_cut", cut):
            return super().compact(call)


class CodexKeepsOldestUsers(Codex):
    """The user messages kept across a compaction walked from the oldest within the budget: the newest dropped."""

    name = "codex_keeps_oldest_users"

    def compact(self, call):
        def oldest_first(select):
            return lambda texts, max_tokens, cpt: list(reversed(select(list(reversed(texts)), max_tokens, cpt)))
        with _swapped(cx, "select_user_messages", oldest_first):
            return super().compact(call)
