"""Issue #45, ninth round: what blind sets 23 to 33 changed that the kit did not hold, each now declared. Five blind sets of eight (23, 24, 27, 28, 29), written apart,
changed sliding_window's choice between keeping half of what follows its first pair and a quarter (the whole total
compared where half of it is meant, or the two branches swapped) and nothing else the kit held: more history dropped
at every cut, the request still under the window. The strategy now declares the share a cut keeps and when it may
keep less (``cut_keeps_share``), held by ``kept_tail``; the mutant beside its correct twin, the registered base. Two
sets (27, 29) put cline's trigger on the whole window where it takes the usable input (nine tenths of it): it compacts
late. Cline's trigger was not declared, as its cut, which never passes the latest typed prompt, may find nothing to
summarise; it now declares it with that exception (``summarises_before_latest_prompt``). Claude Code's idle gap
taken in milliseconds clears at every pause (blind set 30): it now declares that it changes a result it sent only in
its time-based microcompact (``replaces_only_when_idle``). opencode's prune guard counted one turn long (blind set
32) prunes later and less, what the kit held as a least only: it now declares what a prune takes
(``clears_all_beyond``). OpenHands counting one event per message (blind set 32, and earlier sets) condenses late:
it now declares its events trigger (``compacts_above_events``). opencode's tail tried from one turn up (blind set
27) keeps only the newest turn: it now declares the turns it keeps (``compaction_tail`` in turns, with its budget in
characters). OpenHands' cut points looked up past an exact match (blind set 33) keep a turn more at the head and
one fewer in the tail: it now declares its tail in events (``compaction_tail``, the token requirement apart).
NovaCode's budget spilled smallest first (blind set 35) showed on no session the kit made: a message of results each
under the spill threshold and over the budget together was never sent; the parallel_results scenario now sends one,
and NovaCode declares the order (``spills_largest_first``, N-SPILL-2)."""

from __future__ import annotations

from bisect import bisect_right

from ctxsim.strategies import opencode as oc
from ctxsim.strategies import openhands as oh
from ctxsim.strategies.claude_code import ClaudeCode
from ctxsim.strategies.cline import Cline
from ctxsim.strategies.novacode import spill as sp
from ctxsim.strategies.novacode.strategy import NovaCode
from ctxsim.strategies.opencode import OpenCode
from ctxsim.strategies.openhands import OpenHands
from ctxsim.strategies.sliding_window import SlidingWindow
from ctxsim.strategies.templates import is_plain_user

from tests.testing.mutants.kit45h import _swapped


class SlidingWindowAlwaysQuarter(SlidingWindow):
    """keep "auto" cuts to a quarter whatever the total: half of it is never compared with the allowed size."""

    name = "sliding_window_always_quarter"

    def _cut_assistant(self, keep):
        return super()._cut_assistant("quarter")


class ClineTriggerOnTheWindow(Cline):
    """The trigger taken as a share of the whole window, not of the usable input: it fires a tenth late."""

    name = "cline_trigger_on_the_window"

    def trigger(self) -> float:
        return self.env.window * self.config.trigger_ratio


class ClaudeCodeIdleInMilliseconds(ClaudeCode):
    """The idle gap taken in milliseconds against a limit in seconds: a pause of a few seconds clears old results,
    the cache still warm (blind set 30; the other way round, never clearing, was caught before)."""

    name = "claude_code_idle_in_milliseconds"

    def prepare(self, call):
        saved = self.last_answer_at
        if saved is not None:
            self.last_answer_at = call.now - (call.now - saved) * 1_000
        try:
            super().prepare(call)
        finally:
            self.last_answer_at = saved


class OpenCodePruneGuardsOneTurnMore(OpenCode):
    """The prune's guard on the last turns compared with ``<=``: three turns are never pruned, not two."""

    name = "opencode_prune_guards_one_turn_more"

    def prune(self) -> int:
        with _swapped(oc, "PRUNE_TURNS", lambda turns: turns + 1):
            return super().prune()


class OpenHandsEventPerMessage(OpenHands):
    """Every message counted as one event: parallel tool calls and their results as one each, so it condenses late."""

    name = "openhands_event_per_message"

    def should_compact(self, call):
        with _swapped(oh, "events_of", lambda events_of: lambda m: 1):
            return super().should_compact(call)


class OpenCodeTailFromOneTurn(OpenCode):
    """The kept turns tried from one upwards, the first that fits taken: only the newest turn is ever kept."""

    name = "opencode_tail_from_one_turn"

    def _tail(self, msgs):
        budget = oc.tail_budget(self.usable())
        starts = [i for i, m in enumerate(msgs) if is_plain_user(m)]
        for k in range(1, min(self.config.tail_turns, len(starts)) + 1):
            if self.tokens_of(msgs[starts[-k]:]) <= budget:
                return msgs[starts[-k]:]
        return []


class OpenHandsCutPointPastMatch(OpenHands):
    """The forgotten range's cut points found with ``bisect_right``: one that starts exactly at the wanted event is
    passed for the next, so the tail loses a turn."""

    name = "openhands_cut_point_past_match"

    def _forgotten(self, starts, reasons):
        with _swapped(oh, "bisect_left", lambda _: bisect_right):
            return super()._forgotten(starts, reasons)


class NovaCodeSpillsSmallestFirst(NovaCode):
    """N-SPILL-2's order turned round: a message over its budget spills its smallest results first, the largest,
    which broke the budget, left whole (blind set 35)."""

    name = "novacode_spills_smallest_first"

    def _spill(self, message):
        sp.sorted = lambda items, key: sorted(items, key=lambda i: (-key(i)[0], key(i)[1]))
        try:
            return super()._spill(message)
        finally:
            del sp.sorted
