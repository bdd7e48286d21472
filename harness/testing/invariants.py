"""The invariants every context strategy must keep, as plain functions.

Each invariant has a name (the ``invariant`` of a :class:`Violation`) and a reason:

``api``            every request (main and side calls) is one the Messages API accepts: at most 4
                   cache breakpoints, each on a block that exists; no empty text or thinking block,
                   no empty message; a user turn's ``tool_result`` blocks come first; the first
                   message is the user's; with thinking, the open tool loop keeps its thinking
                   block (:mod:`ctxsim.harness.testing.api_rules`, sources there).
``pairing``        every request is pairing-valid: a split tool_use/tool_result pair is a 400, and
                   every later request of the session is a 400 too until the history is repaired.
``window``         a strategy that claims to manage the window (``Strategy.manages_window``) never
                   gives up on an overflow (a 400, "prompt is too long": the session ends there) and
                   never sends a request its own estimate puts over the window. An overflow it could
                   not foresee (text denser in tokens than its estimate assumes) is exercised on
                   purpose: ``on_rejected`` must recover from it (reactive compaction, truncation)
                   within the engine's attempts. Excused: sending the request right after a side
                   call that failed by injection (a strategy cannot summarise without its model),
                   and giving up when its reaction's own side call failed so; a reaction that does
                   not try is judged as any give-up, and a summary request the API refused as too
                   long is no excuse (that is its own doing).
``stable_prefix``  the bytes before each cache breakpoint of a request are unchanged in the next
                   request of the same conversation, unless the strategy declared a rewrite at that
                   call (``Request.rewrite``): an undeclared change silently multiplies the bill. The
                   tools array is compared by value (an in-place edit keeps a memoised digest). A
                   declared rewrite excuses the messages only: the tools and the system prompt stay
                   as they were unless the strategy declares that its rewrites change them too
                   (``Strategy.rewrites_also``; a compaction need not touch them, and a change loses
                   their cache entry). The first request of a launch or a sub-agent is not judged so.
``false_rewrite``  a declared rewrite rewrote something: requests that only append to the
                   previous one of their conversation and declare a rewrite disable the
                   stable-prefix check and count compactions that did not happen. Judged on the
                   second such request in a row (a compaction that dropped only what had not been
                   sent yet leaves the last request a prefix of the next: once is no defect); a
                   request identical to the previous one and the first request of a launch (a
                   resumed history may differ in what was not persisted) are not judged.
``is_error``       a tool result is sent with the ``is_error`` flag the tool returned it with.
``estimate``       a strategy that gives an estimate of its request (``Request.estimated_tokens``)
                   keeps it near the truth: within a factor of :data:`ESTIMATE_FACTOR` of the true
                   count, on requests of at least :data:`ESTIMATE_MIN_SHARE` of the window, and on
                   smaller ones when the error is at least :data:`ESTIMATE_MIN_GAP` of the window.
                   One that declares its estimate is the whole request's size (``Strategy.estimates_whole``:
                   cline's JSON over 3) is held to it within :data:`ESTIMATE_WHOLE_SLACK`; one that declares
                   it anchors on the last answered request's usage (``Strategy.estimates_from_usage``:
                   NovaCode's N-COMP-5) is held, on a request that continues that one, to the usage and
                   what came after the answer at its rate, within a token.
``path_back``      nothing leaves the window without a summary or a path back (NovaCode's principle,
                   spec/novacode.md): a tool result replaced on its way in names a file that holds
                   it whole (N-SPILL-1, N-SPILL-5), and that file keeps holding it for as long as the
                   placeholder is in the window; a message of the session dropped from the window
                   was in the input of a summary whose text the request holds, or a file named in
                   the request holds it. Text the strategy adds per request (a reminder, a date)
                   never entered the session and is not held to it; a placeholder re-rendered with
                   its file still holding the result is no loss. Every strategy, promise or not, is
                   held to the paths back its placeholders claim: a tool result sent replaced whose
                   text names a file in the run's directory names one that exists and holds it whole
                   for as long as the placeholder is sent (a notice naming a file never written, or
                   one deleted or overwritten while it is named).
``no_respill``     a spill is never spilled again (N-SPILL-3): the result of a call that reads back
                   a spilled file (by its absolute path or a relative one) enters the window as it is.
``replaced_once``  a strategy that sets ``keeps_replacements`` (its clearings and maskings are made once:
                   observation_masking, context_editing, opencode): a tool result the main conversation sent
                   replaced (cleared, masked, pruned) is sent with
                   that replacement for as long as it is sent replaced: a replacement made again from its own
                   placeholder (a count of what was masked reset, so the masked are masked again) rewrites the
                   cache from there and tells the model the placeholder's size for the result's.
``boundary_pairs`` a compaction boundary never splits a pair: after a declared rewrite, every
                   tool_use in the request has its tool_result in it and vice versa (N-COMP-7).
``resume_pairing`` a resumed transcript sends a pairing-valid first request (N-TRANS-5): the
                   calls a crash left unanswered are completed before the next request.
``clear_minimum``  a strategy that declares a minimum for its clearings (``Strategy.clear_minimum``,
                   e.g. context_editing's ``clear_at_least``, opencode's ``prune_minimum_tokens``) honours
                   it: the tool results (and inputs) a request sends replaced by a placeholder free at
                   least that many true tokens, counted per request (all it clears) or per clearing
                   (what it clears beyond the request before it, of what that request held: a cut on
                   the way in is no clearing), within :data:`ESTIMATE_FACTOR` (the strategy decides on
                   its own estimate).
``result_limit``   a strategy that declares the size it cuts tool results to (``Strategy.result_limits``:
                   truncate's 10 KiB and 256 lines, in bytes, characters or lines) sends no tool
                   result larger, beyond :data:`RESULT_NOTICE_SLACK` for the notices a cut adds
                   (multibyte text is where a limit tested in characters instead of bytes shows), and
                   cuts none that fits: a result within every declared limit enters as the tool
                   returned it (a budget counted in another unit cuts below the declared size). A strategy
                   that cuts per tool (``Strategy.result_cuts``: tiered_budget's tiers) lets no result of
                   those tools past the declared characters enter whole (a budget that reaches only the first
                   result of a message), nor keep more of its start or its end than the declared shares (by
                   :data:`RESULT_NOTICE_SLACK`: shares the wrong way round); a guard of its own may shorten it.
``recent_kept``    a strategy that declares how many of the newest tool uses it never clears
                   (``Strategy.keeps_recent_tool_uses``: context_editing's ``keep``, observation_masking's
                   ``n``, claude_code's ``microcompact_keep``) sends the results of that many newest tool
                   uses of the main conversation as they entered the window (newest both by call and by
                   where the result stands: parallel results may come back in another order). One that
                   declares a budget of the newest tool output instead (``Strategy.keeps_recent_tool_chars``:
                   opencode's prune protection, 4 characters per token) sends the results that budget
                   reaches, walking back from the newest by where each stands (each counted as it entered),
                   as they entered: a protection counted in another unit clears what it promised to keep.
                   One that declares its newest results of some tools (``Strategy.keeps_recent_reads``:
                   on_demand_reading's newest reads) sends that many newest of them that entered at the
                   declared characters or more, by where each stands, as they entered.
                   And one that declares a clearing takes every older result (``Strategy.clears_all_but_recent``:
                   context_editing) sends none of them whole when a request newly clears: a keep
                   counted in turns, not tool uses, keeps more than declared.
``idle_clear``     a strategy that declares it clears old tool results once the conversation has been idle
                   (``Strategy.clears_when_idle``: Claude Code's time-based microcompact, past the
                   cache's TTL) does: the first main request after a gap longer than the declared one
                   (by :data:`IDLE_SLACK_S`, on the trace's clock, since the last main-line request) does
                   not send every old result of the declared tools as it entered, when the request
                   before held one beyond the newest ``keeps_recent_tool_uses`` (newest by call or by
                   where it stands). A rule that never fires (a gap read on the wall clock, or in the
                   wrong unit, or forgotten at a resume) breaks nothing else. Judged at a resume's first
                   request too (the same conversation), not at a new launch's. The other way, a strategy
                   that changes results only once the cache is cold (``Strategy.replaces_only_when_idle``:
                   on_demand_reading's ``cold_cache_s``) changes none its main conversation's request before
                   sent whole at a request less than half that gap after it (an idle clock read from the
                   wrong call rewrites a warm cache).
``cache_marks``    a strategy that declares where it puts cache breakpoints (``Strategy.cache_marks``:
                   NovaCode's tools, system and last user message, N-CACHE-1; the peers' system prompt
                   and last message) puts them there on every request of the conversation (main and
                   sub-agent): a marker one message early (an index taken on the history where the
                   request holds more) re-writes the newest turn at every call, and nothing else shows it.
``reinjected``     a strategy that declares messages of its own a compaction sends again
                   (``Strategy.reinjects_after_compaction``: NovaCode's memories, N-COMP-12) holds one of each
                   declared origin the conversation was sent before on the first request after a compaction.
``restored``       a strategy that declares its compaction restores the files read most recently
                   (``Strategy.restores_recent_reads``: NovaCode's attachment, N-COMP-11) names, in the
                   attachment the first request after a compaction holds, the file the main conversation
                   read last (a read answered without an error), wherever it names another file read:
                   a tracker that keeps a re-read file at its first read restores stale files; and no file only an
                   isolated sub-agent read (a sub-agent writing to the parent's tracker).
``cadence``        a strategy that declares a side call every n answered requests (``Strategy.writes_every``:
                   structured_state's todo list) makes it after exactly n answered main requests since the last
                   one, sooner only where the user typed a message since, until an answer calls the declared tool.
``compaction_trigger`` a strategy that declares its auto-compaction trigger (``Strategy.compacts_above``:
                   Claude Code's threshold, Codex's auto-compact limit, the API's compaction trigger)
                   asks for a summary before sending a request of the main conversation it estimates
                   past it (by :data:`TRIGGER_SLACK`): a trigger compared in another unit, against a
                   constant or never reached leaves these strategies to overflow, which they do not
                   promise to avoid. Not judged at a launch's first request, nor once a side call has
                   failed or been refused (a breaker may stop trying). The other way too: a
                   compaction's first summary call on the main conversation (a retry after a refusal
                   may be trimmed; a reaction to a refused request is excused) is not made on a
                   conversation under the trigger by more than :data:`ESTIMATE_FACTOR`, its size taken
                   as the strategy saw it when its last estimate ran high (dense text): a trigger
                   compared in another unit fires early, a summary and a cache break at every turn.
                   A strategy whose summary takes only what stands before the user's latest typed
                   message and its kept tail (``Strategy.summarises_before_latest_prompt``: cline) is
                   not held where nothing but a summary stands before them: it has nothing to summarise.
                   A strategy that declares a trigger on the count of events (``Strategy.compacts_above_events``:
                   OpenHands V1, each tool call and each result an event) sends no request of more
                   events with no summary asked for since its last request.
                   A strategy that compacts only as a user turn begins (``Strategy.compacts_at_turns``:
                   goose) is judged at the first request after the user's message: when the request
                   before held more input than the trigger (by :data:`TRIGGER_SLACK`), a summary is
                   asked for first. A strategy that declares a clearing trigger (``Strategy.clears_above``:
                   context_editing, as the API edits each request) is judged on the whole prompt, its
                   results as they entered (by :data:`CLEAR_TRIGGER_SLACK`): past it, no older result
                   than the newest kept goes whole. A trigger measured on the prompt an earlier clearing
                   left clears in episodes where the API clears each time.
``summary_keeps``  a strategy that declares what its summaries keep (``Strategy.summary_keeps``: the
                   sections its prompt promises) keeps it in every summary: the summary request's
                   instructions name each item, the answer holds each, and the request that uses the
                   summary still holds each.
``summarised``     a strategy that declares everything it drops from the main window goes into a summary
                   first (``Strategy.summarises_dropped``: Claude Code's, Codex's, gemini-cli's, goose's, opencode's,
                   OpenHands' and the API's compactions) drops nothing unsummarised: a user's or the model's text the
                   session fed, a summary, or a tool call's result (its id gone from the request: a result
                   cleared to a placeholder stays) that leaves the main window was in the input of a summary
                   whose text the request holds (as a block, by its id, or its opening in a transcript
                   rendered for it). An off-by-one between what is summarised and what is kept
                   loses a message and nothing else shows it. Not judged at a launch's first request, nor
                   on a request after a side call failed or was refused since the last main one (a
                   strategy may cut to fit then).
``superseded``     a strategy that replaces a read because a later read of the same file stands in the request
                   (``Strategy.supersedes_reads``, the text it replaces it by: sliding_window, Cline's duplicate
                   file reads) sends every result so replaced before a later call of the same tool on that
                   file (the same path, or one ending in it) whose result goes, not replaced so: a dedup that
                   keeps the first read and replaces the latest leaves the model the stale one.
``summary_used``   a summary is used by the rewrite it was made for, and once in the main window leaves it only
                   into a later summary (a request that no longer holds it follows a summary request
                   that took it in, or a side call refused as too long made the strategy trim it):
                   when the next main-line request
                   drops text or tool calls the summary took in (as messages, or a text's opening in
                   the transcript its request rendered), it holds a piece of the summary's
                   text (its opening, middle or end), or a later summary request took it in. Not
                   judged when a side call after it failed (its pipeline broke off), when it is no
                   shorter than its input (discarding it loses nothing: gemini-cli's inflation
                   check), or when the request holds a recorded agent's own summary instead.
                   And a summary request takes in an earlier summary's whole text once at most: a fold
                   that starts at the previous summary, passed apart too, summarises it twice.
``subagent_report`` a summary asked for when a sub-agent ends, before the next main-line request or
                   span, whose text the parent's next request holds in a new tool result (its report),
                   takes in the sub-agent's own work: a message or tool result of the sub-agent's last
                   request that the parent's did not hold (as a block, or its opening rendered into a
                   transcript), or the sub-agent's conclusion. A report asked of the parent's context
                   summarises the wrong conversation; a summary the parent installs (its own
                   compaction at that point) is not a report.
``call_model``     a strategy that declares the model a kind of call goes to (``Strategy.call_models``:
                   goose's and aider's summaries on their summary model; the calls and report of a
                   sub-agent subagent_isolation starts itself on its ``subagent_model``) sends every such
                   call on it (a request with no model of its own goes on the run's).
``fresh_launch``   the first main request of a new launch (not a resume) holds no tool_use or
                   tool_result id, no text fed in an earlier conversation and no summary made of one
                   (its opening, or two of its pieces) (a launch and its
                   resumes are one conversation): a new conversation does not continue the old one.
``run_dir``        a strategy writes, renames and removes files only in its run's directory
                   (``Environment.session_dir``): a file written in the working directory, the home
                   directory, a fixed temporary path or beside the run's directory is shared by every
                   run that writes it and left behind (seen by an audit hook:
                   :mod:`ctxsim.harness.testing.writes`; reported at the request it came after, once
                   per file).
``resume_estimate`` the first request after a resume is estimated as well as the last one before the
                   crash: an estimate within :data:`ESTIMATE_FACTOR` of the truth there and off by more
                   than it here (of a request :func:`estimate_error` judges) lost what the strategy had
                   measured (a rate of characters per token, a usage anchor) when its launch resumed
                   (not judged when a rewrite came between, a summary was just made or the request is
                   smaller than that one: a cut or a condensation changed what is estimated). Judged on
                   dense text too, where ``estimate`` is not (a fixed rate is rightly far off
                   there, before the crash as after).
``latest_request`` a strategy that declares it keeps the request in hand (``Strategy.keeps_latest_request``:
                   goose re-sends the user's most recent message after a compaction, Codex keeps
                   the recent user messages) holds, after every declared rewrite of the main
                   conversation, the user's latest message as the user wrote it (its opening, the
                   first :data:`LATEST_OPENING` characters: a cut to a budget keeps that); a summary
                   of it is not the promise, and a compaction that keeps another message instead
                   leaves the agent on an old request.
``user_messages``  a strategy that declares the user messages it keeps across a compaction are the user's own
                   (``Strategy.keeps_user_messages``: Codex re-sends the newest user messages beside its
                   handoff summary) sends, after every declared rewrite of the main conversation, no plain
                   user message (no tool results, no origin of the strategy's own) whose text is not one the
                   user wrote in this conversation (its opening, :data:`USER_OPENING` characters: a cut keeps
                   the head): a previous summary or a note kept as if the user had typed it grows every
                   compaction and nothing else shows it.
``goal``           the user's first request of the conversation (its goal) is in the window after
                   every declared rewrite of the main conversation: verbatim, or in a summary whose
                   input held it (or held a summary that did). A path back to the transcript is not
                   enough here (path_back accepts it): a compaction that drops the goal leaves the
                   agent working without knowing what it was asked. Held by the strategies that keep
                   a path back, and by any that sets ``keeps_goal``.

Two more are checked by the state machine (:mod:`ctxsim.harness.testing.machine`), which replays each
session twice: ``inputs`` (the strategy never changes the trace's dicts or the shared tool schemas
in place, nor the input of a tool_use it made once sent, :mod:`ctxsim.harness.testing.inputs`) and ``deterministic`` (the second run sends the same
requests byte for byte, :mod:`ctxsim.harness.testing.determinism`); a strategy raising is ``crash``.

Use :func:`check` on a :class:`~ctxsim.harness.testing.recording.Recording` (from ``record`` or a
``Stepper``), or :class:`Checker` to check entries as they come. Each check is also a function of
one or two requests (:func:`pairing_violation`, :func:`prefix_change`, :func:`split_pairs`,
:func:`ctxsim.harness.testing.api_rules.api_errors`) usable on hand-built requests.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from ctxsim.harness.llm.services import SUMMARY
from ctxsim.harness.model.conversation import Block, Breakpoint, Message, Request
from ctxsim.harness.provider import protocol
from ctxsim.harness.replay.rundirs import home_and_project
from ctxsim.harness.testing.api_rules import api_errors
from ctxsim.harness.testing.declared import Declared, result_size
from ctxsim.harness.testing.recording import Mark, Recording, Sent

INVARIANTS = ("api", "pairing", "window", "stable_prefix", "false_rewrite", "is_error", "estimate", "path_back",
              "goal", "latest_request", "user_messages", "no_respill", "replaced_once", "boundary_pairs", "resume_pairing", "clear_minimum",
              "result_limit", "recent_kept", "idle_clear", "cache_marks", "compaction_trigger", "summary_keeps",
              "summarised", "superseded", "kept_tail", "summary_used", "subagent_report", "call_model", "fresh_launch", "run_dir", "resume_estimate", "inputs", "deterministic",
              "cadence", "reinjected", "restored")
# every strategy is held to these; window, path_back, goal, latest_request and user_messages are promises (promises())
ALWAYS = frozenset(INVARIANTS) - {"window", "path_back", "goal", "latest_request", "user_messages", "replaced_once"}

# An estimate is a strategy's own measure of its request; the engine measures its error. Real
# agents' character rules (3.5-4 characters per token, plus a usage anchor) run within about 20% of
# the truth on the kit's sessions, and NovaCode's runs 18% low at worst on crash-and-resume chains
# (issue #17); a factor of 1.6 either way leaves room for any reasonable rule of thumb and catches
# an estimate in the wrong unit or one that counts the history twice. # assumed
ESTIMATE_FACTOR = 1.6
ESTIMATE_MIN_SHARE = 0.25  # judged on requests of at least this share of the window (small ones are mostly framing) # assumed
# ... or on a smaller request when the error itself is at least this share of the window: an eighth (4,000 tokens
# at the kit's 32k) moves any threshold a strategy sets, and an estimate that counts what it cleared in
# characters or a sub-agent's usage for the parent's is off by that much on small requests (issue #45) # assumed
ESTIMATE_MIN_GAP = 0.125
# what a strategy that estimates a result's tokens rounds up adds to it, in characters (opencode: ceil(chars / 4)
# per result, so 4 characters at most), counted per result walking back from the newest (keeps_recent_tool_chars)
RECENT_CHARS_SLACK = 4
# what a cut's notices may add to a declared result limit (truncate's: a "Total output lines: N" line and
# a blank one, the omission marker and the blank lines around it: 5 lines, 30-odd bytes) # assumed
RESULT_NOTICE_SLACK = {"bytes": 64, "chars": 64, "lines": 8}
# how far past its declared idle gap a request is judged (``idle_clear``): the kit's answers take seconds, so a
# gap this much longer is past the declared one however the strategy measures it (from the request before or
# from its answer) # assumed
IDLE_SLACK_S = 600.0
# how far past its declared trigger a request's own estimate is judged (``compaction_trigger``): a strategy
# compares its estimate with ``>`` or ``>=``, a moment before the request is built # assumed
TRIGGER_SLACK = 1.02
# how far past its declared clearing trigger the whole prompt is judged (``clears_above``): taken at the strategy's
# own estimate of the request it sent over that request's truth, the whole prompt's density may still differ from
# what was sent (cleared results are placeholders of prose; the kit's sessions mix dense code and prose): 15% let a
# correct context_editing twin be reported in 1 run of 3; a trigger read on the cleared prompt lets the whole grow
# far past it (the cleared results' size) # assumed
CLEAR_TRIGGER_SLACK = 1.5
# how far a compaction's kept tail may stray from what the strategy declares (``kept_tail``), by unit: a tail in
# tokens is sized at the strategy's own estimate: a least judged in true tokens by the kit's factor for estimates,
# a cap (and a tail longer than it needed) by what any estimate counts at the least, its characters at TAIL_MAX_CPT
# a token (the true tokens ran 1.9 times a correct NovaCode's cap, its calibrated rate under a denser tail); JSON
# characters a strategy counts to tokens rounding each message up lose a few per message: a tenth  # assumed
TAIL_LEAST_SLACK = {"tokens": ESTIMATE_FACTOR, "json_chars": 1 / 0.9, "chars": 1 / 0.9, "messages": 1.0, "turns": 1.0,
                    "events": 1.0, "share": 1.0}
API_DEFAULT_TTL = "5m"  # a cache_control with no ttl: docs.anthropic.com prompt caching (read 2026-12): "5 minutes by default"
TAIL_MAX_CPT = 4.0  # the most characters a token any estimator here counts (Claude Code's, opencode's rule) # assumed
# how far a tail whose tokens are counted at the conversation's measured rate (``compaction_tail_calibrated``) may pass
# its cap at that rate as the kit measures it: the strategy's count of a request's characters (an anchored count, its
# resident messages as they were) strays a little from the kit's  # assumed
TAIL_CALIBRATED_SLACK = 1.1
TAIL_MOST_SLACK = {"tokens": 1.02, "json_chars": 1.02, "chars": 1.02, "messages": 1.0, "turns": 1.0, "events": 1.0,
                   "share": 1.0}
# how far the kit's reckoning of a strategy's estimate may stray when it judges a share a cut keeps (``cut_keeps_share``):
# taken at the rate (tokens a character) of the strategy's own estimate of the request the cut sent, as an anchored
# estimate rebased by characters carries it (sliding_window's); a system prompt's opaque tokens and a result the
# cut repaired move it a little # assumed
CUT_RATE_SLACK = 1.1
# how far the run's first estimate may stray from the whole request at the declared rate (estimates_from_usage): a
# line a subclass adds to the request after estimating it (a date stamped in the system prompt) is counted by the
# next usage, not by the first estimate; a wrong rate or a part left out strays further # assumed
FIRST_ESTIMATE_SLACK = 0.05
# the characters a cut result may end with as its output does by chance (a newline, a closing bracket) # assumed
CUT_TAIL_SLACK = 16
# how far an estimate declared to be the whole request's size may stray from it: the same characters rounded per
# message or once (assumed)
ESTIMATE_WHOLE_SLACK = 0.01
# the least characters a main request must have grown by since the one before for its growth to show the densest rate
# a strategy that calibrates on the usage it is given may count text at (a few characters carry the messages' own
# tokens) # assumed
DENSE_MIN_CHARS = 2_000
LATEST_OPENING = 200  # characters of the latest request that must stay (a cut to a budget keeps the head) # assumed
USER_OPENING = 40  # characters of a kept user message that must open one the user wrote (a middle cut keeps them) # assumed
# the characters of the notice a middle cut of a kept user message puts in place of its middle (Codex's
# "…N tokens truncated…") # assumed
USER_CUT_NOTICE = 64


@dataclass(frozen=True)
class Violation:
    invariant: str
    call: int      # row of RunResult.calls (the engine's call index)
    kind: str      # kind of the request (main, readback, subagent, summary...)
    detail: str
    where: str = ""  # the session's state: launch, resumes, compactions so far

    def __str__(self) -> str:
        at = f"request {self.call}" if self.call >= 0 else "the run"
        ctx = "; ".join(x for x in (self.kind, self.where) if x)
        return f"[{self.invariant}] {at}{f' ({ctx})' if ctx else ''}: {self.detail}"


class InvariantViolation(AssertionError):
    """Raised by :func:`assert_holds`; carries the violations."""

    def __init__(self, violations: list[Violation]) -> None:
        self.violations = violations
        super().__init__("\n".join(str(v) for v in violations))


def promises(cls) -> frozenset[str]:
    """The invariants a strategy class is held to: every one but two (:data:`ALWAYS`); ``window``
    holds a strategy that sets ``manages_window``, ``path_back`` one that sets ``keeps_path_back``
    (NovaCode does)."""
    out = set(ALWAYS)
    if getattr(cls, "manages_window", False):
        out.add("window")
    if getattr(cls, "keeps_path_back", False):
        out.add("path_back")
    if getattr(cls, "keeps_goal", getattr(cls, "keeps_path_back", False)):
        out.add("goal")
    if getattr(cls, "keeps_latest_request", False):
        out.add("latest_request")
    if getattr(cls, "keeps_user_messages", False):
        out.add("user_messages")
    if getattr(cls, "keeps_replacements", False):
        out.add("replaced_once")
    return frozenset(out)


# --- one-request and two-request checks ------------------------------------------------------------

def pairing_violation(request: Request) -> str:
    """The API's complaint about unpaired tool_use/tool_result blocks, or ``""``."""
    return protocol.pairing_error(request)


def _short(text: str, n: int = 60) -> str:
    text = text.replace("\n", "⏎")
    return text if len(text) <= n else text[:n] + f"…({len(text):,} chars)"


def _blocks_through(req: Request, last_message: int) -> list[tuple[str, Block]]:
    out = []
    for m in req.messages[: last_message + 1]:
        out.extend((m.role, b) for b in m.blocks)
    return out


def _first_difference(before: list[tuple[str, Block]], after: list[tuple[str, Block]]) -> str:
    for k, ((r0, b0), (r1, b1)) in enumerate(zip(before, after)):
        if r0 != r1 or b0.digest != b1.digest:
            return (f"block {k} ({r0} {b0.type}) changed: {_short(b0.payload)!r} -> "
                    f"({r1} {b1.type}) {_short(b1.payload)!r}")
    if len(after) < len(before):
        return f"the request holds {len(after)} blocks where the cached prefix had {len(before)}"
    return ""


def _tools_value(req: Request) -> str:
    return json.dumps([t.to_api() for t in req.tools.tools], sort_keys=True, ensure_ascii=False, default=str)


def prefix_change(before: Request, after: Request, tools_before: str | None = None,
                  tools_after: str | None = None) -> str:
    """How ``after`` changed the bytes before one of ``before``'s cache breakpoints, or ``""``.

    Compared in the API's prefix order (tools, system, messages) and block by block, so a message
    that only gained blocks after the breakpoint, or consecutive messages of one role split or
    merged differently, are not changes: the API sees the same bytes. The tools arrays are compared
    by value: ``tools_before`` / ``tools_after`` are their JSON as sent (recorded at send time),
    else taken now.
    """
    bps: tuple[Breakpoint, ...] = before.breakpoints
    if not bps:
        return ""
    tb = tools_before if tools_before is not None else _tools_value(before)
    ta = tools_after if tools_after is not None else _tools_value(after)
    if tb != ta:
        return "the tools array changed"
    if any(b.at != "tools" for b in bps) and before.system.digest != after.system.digest:
        return "the system prompt changed"
    at = [b.at for b in bps if isinstance(b.at, int)]
    if not at:
        return ""
    i = max(at)
    if i >= len(before.messages):
        return ""  # a breakpoint on no block caches nothing (the api invariant names it)
    if i < len(after.messages) and after.messages.prefix_digest(i) == before.messages.prefix_digest(i):
        return ""
    old = _blocks_through(before, i)
    new: list[tuple[str, Block]] = []
    for m in after.messages:
        if len(new) >= len(old):
            break
        new.extend((m.role, b) for b in m.blocks)
    diff = _first_difference(old, new[: len(old)])
    return f"before the breakpoint at message {i}: {diff}" if diff else ""


def prompt_change(before: Request, after: Request, tools_before: str | None = None, tools_after: str | None = None,
                  allowed: frozenset[str] = frozenset()) -> str:
    """How ``after`` changed the tools or the system prompt that ``before`` cached (a breakpoint on
    them or after them), leaving out the parts in ``allowed`` (``"tools"``, ``"system"``); ``""``."""
    bps = before.breakpoints
    if not bps:
        return ""
    if "tools" not in allowed:
        tb = tools_before if tools_before is not None else _tools_value(before)
        ta = tools_after if tools_after is not None else _tools_value(after)
        if tb != ta:
            return "the tools array"
    if ("system" not in allowed and any(b.at != "tools" for b in bps)
            and before.system.digest != after.system.digest):
        old = [b.text for b in before.system.blocks]
        new = [b.text for b in after.system.blocks]
        if sorted(old) == sorted(new):
            return "the system prompt (its blocks reordered)"
        k = next((i for i, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old), len(new)))
        what = (f"block {k}: {_short(old[k])!r} -> {_short(new[k])!r}" if k < min(len(old), len(new))
                else f"{len(old)} blocks -> {len(new)}")
        return f"the system prompt ({what})"
    return ""


def extends(before: Request, after: Request, tools_before: str | None = None, tools_after: str | None = None) -> bool:
    """``after`` only appends messages to ``before`` (same system and tools, same messages first)."""
    n = len(before.messages)
    tb = tools_before if tools_before is not None else _tools_value(before)
    ta = tools_after if tools_after is not None else _tools_value(after)
    if tb != ta or before.system.digest != after.system.digest or len(after.messages) < n:
        return False
    return n == 0 or after.messages.prefix_digest(n - 1) == before.messages.prefix_digest(n - 1)


def split_pairs(request: Request) -> str:
    """A tool_use without its tool_result in the request, or a tool_result without its tool_use."""
    uses: set[str] = set()
    results: set[str] = set()
    for m in request.messages:
        for b in m.blocks:
            if b.type == "tool_use" and b.id:
                uses.add(b.id)
            elif b.type == "tool_result" and b.id:
                results.add(b.id)
    orphans = sorted(results - uses)
    if orphans:
        return f"tool_result {', '.join(orphans)} kept but its tool_use dropped"
    dangling = sorted(uses - results)
    if dangling:
        return f"tool_use {', '.join(dangling)} kept but its tool_result dropped"
    return ""


def estimate_error(estimated: int | None, tokens: int, window: int) -> str:
    """The strategy's estimate is off by more than :data:`ESTIMATE_FACTOR` (or ``""``), on a request of at
    least :data:`ESTIMATE_MIN_SHARE` of the window, or on a smaller one when the error itself is at least
    :data:`ESTIMATE_MIN_GAP` of the window (enough to move any threshold a strategy sets)."""
    if estimated is None or tokens <= 0:
        return ""
    if tokens < ESTIMATE_MIN_SHARE * window and abs(estimated - tokens) < ESTIMATE_MIN_GAP * window:
        return ""
    ratio = estimated / tokens
    if 1 / ESTIMATE_FACTOR <= ratio <= ESTIMATE_FACTOR:
        return ""
    return (f"the strategy estimated {estimated:,} tokens, the API counts {tokens:,} "
            f"({(ratio - 1) * 100:+.0f}%; a factor of {ESTIMATE_FACTOR} either way is allowed)")


def _clock_note(t0: float, t1: float, more: Iterable = ()) -> str:
    """The clock's edges crossed between two requests (a date or a time stamped per request changes
    there); ``more``: the edges of the strategy's own clock (:func:`clock.own_edges`)."""
    from ctxsim.harness.testing.clock import crossed

    edges = crossed(t0, t1, more)
    if edges:
        return (f" (the clock crossed {' and '.join(e.label for e in edges)} between the two requests: a date or "
                "time stamped per request?)")
    if t1 - t0 >= 3_600:  # no edge the kit knows: a midnight on a clock the strategy does not declare?
        return (f" ({(t1 - t0) / 3_600:.1f} hours passed between the two requests: a date or time stamped per request, "
                "on a clock the strategy does not declare in clock_epochs?)")
    return ""


def _estimate_cause(req: Request, tokens: int) -> str:
    """What an estimate that is off seems to leave out (or count twice), when one part of the
    request accounts for the gap: the system prompt and tools, or the opaque prefix."""
    from ctxsim.harness.provider.tokenizer import get_tokenizer

    if req.estimated_tokens is None:
        return ""
    gap = tokens - req.estimated_tokens
    t = get_tokenizer()
    prompt = t.system(req.system) + t.tools(req.tools) + req.system.opaque_tokens
    for size, what in ((prompt, "the system prompt and tools"), (req.system.opaque_tokens, "the opaque prefix")):
        # the gap is that part's size, or counting it in (out) would take away most of the error: the rest of
        # the estimate is a rate of characters per token, off by a few percent either way
        fixed = abs(gap - size if gap > 0 else gap + size)
        if size and (abs(abs(gap) - size) <= 0.15 * size or fixed <= 0.25 * abs(gap)):
            return (f"; the gap ({abs(gap):,}) is about the size of {what} ({size:,} tokens): "
                    f"{'left out of' if gap > 0 else 'counted twice in'} the estimate?")
    return ""


# --- files named in a request (paths back) ---------------------------------------------------------

_PATHS = re.compile(r"(?:[A-Za-z]:)?[\w.~-]*(?:[\\/][\w.\-~+@=,]+)+")
_FILE_NAMES = re.compile(r"(?<![\w./\\-])[\w][\w.\-+@=,]*\.[A-Za-z0-9]{1,8}\b")   # a bare file name with an extension


def _json_strings(value) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _json_strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _json_strings(v)


class Files:
    """Reads the files a request names; a JSONL file (a transcript) is also searched through the
    strings it holds, so text stored JSON-escaped is found. Reads are cached by the file's inode,
    size and modification time, so a file rewritten in place is read again."""

    def __init__(self, session_dir: Path | None) -> None:
        self.session_dir = session_dir
        self._cache: dict[Path, tuple[tuple[int, int, int], str]] = {}

    def resolve(self, name: str) -> Path | None:
        p = Path(name)
        candidates = [p] if p.is_absolute() else ([self.session_dir / p] if self.session_dir else [])
        for c in candidates:
            try:
                if c.is_file():
                    return c
            except OSError:
                continue
        return None

    def text(self, path: Path) -> str:
        st = path.stat()
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        hit = self._cache.get(path)
        if hit and hit[0] == key:
            return hit[1]
        raw = path.read_text(encoding="utf-8", errors="surrogatepass")
        text = raw
        if path.suffix == ".jsonl" or raw.startswith("{"):
            parts = [raw]
            for line in raw.splitlines():
                try:
                    parts.extend(_json_strings(json.loads(line)))
                except (json.JSONDecodeError, ValueError):
                    continue
            text = "\n".join(parts)
        self._cache[path] = (key, text)
        return text

    def named_in(self, text: str) -> list[Path]:
        out = []
        for m in _PATHS.finditer(text):
            p = self.resolve(m.group(0).rstrip(".,;:)"))
            if p is not None and p not in out:
                out.append(p)
        return out

    def holding(self, content: str, paths: Iterable[Path]) -> Path | None:
        for p in paths:
            try:
                if content in self.text(p):
                    return p
            except OSError:
                continue
        return None

    def still_holds(self, path: Path, content: str) -> str:
        """``""`` when ``path`` still holds ``content``, else why not."""
        try:
            return "" if content in self.text(path) else "it was overwritten"
        except FileNotFoundError:
            return "it is gone"
        except OSError as e:
            return f"it cannot be read ({e.strerror or e})"


def holds_item(text: str, item: str) -> bool:
    """``text`` names ``item`` as an item of its own: at the start of a line (after a heading or list
    mark, an XML tag's ``<``, or bold) or after a separator of a list written inline (``:``, ``;``,
    ``,``, ``|``), in any case: "Sections: Active task; Progress so far" and "## Active task" hold "Active task";
    "Next steps (active task only)" and "the single active task" do not."""
    pattern = _ITEM_PATTERNS.get(item)
    if pattern is None:
        pattern = _ITEM_PATTERNS[item] = re.compile(
            r"(?:^[ \t>]*(?:#{1,6}|[-*+•]|\d+[.)]|</?)?[ \t]*(?:\*\*|__)?|[:;,|][ \t]*(?:\*\*|__)?)" + re.escape(item),
            re.IGNORECASE | re.MULTILINE)
    return pattern.search(text) is not None


_ITEM_PATTERNS: dict[str, re.Pattern[str]] = {}


def _items(items) -> str:
    return ", ".join(repr(i) for i in items)


def _continues(before: Request, req: Request) -> bool:
    """``before``'s messages are a prefix of ``req``'s (or it has none): nothing left the window."""
    n = len(before.messages)
    return n == 0 or (len(req.messages) >= n and req.messages.prefix_digest(n - 1) == before.messages.prefix_digest(n - 1))


def _summary_probe(text: str) -> str:
    """A piece of a summary's text that a request using the summary holds verbatim."""
    t = text.strip()
    if t.startswith("<summary>"):
        t = t[len("<summary>"):]
    t = t.strip()
    return t[:60]


# --- the checker -----------------------------------------------------------------------------------

@dataclass
class _Summary:
    inputs: set[bytes]
    text: str = ""
    carries_goal: bool = False  # its input held the goal (verbatim, or in a summary that carried it)
    call: int = -1  # the summary request
    chained: bool = False  # a later summary request's input held it (a summary of summaries uses it so)
    excused: bool = False  # a side call after it failed (the strategy's pipeline broke off: not used, rightly)
    input_chars: int = 0  # the characters of what it summarised (a summary no shorter is rightly thrown away)
    input_text: str = ""  # the text of its request (a strategy may send the history rendered as one transcript)
    result_ids: frozenset[str] = frozenset()  # the tool results its request held, by id (in whatever form)
    sent_twice: bool = False  # a later summary request took its whole text in twice (reported once)

    def took_in(self, b: Block, results: bool = False) -> bool:
        """Whether its request took ``b`` in: the block itself, or (a text block) its opening inside the
        transcript the strategy rendered for the summariser; ``results``: a tool result too, by its id (in
        whatever form the strategy sent it) or its opening."""
        if b.digest in self.inputs or (results and b.type == "tool_result" and b.id in self.result_ids):
            return True
        probe = b.text.strip()[:_TAKEN_PROBE] if b.type == "text" or results else ""
        return len(probe) >= _TAKEN_MIN and probe in self.input_text


_SUMMARY_FRAME = 200  # characters a strategy may wrap a summary in (a tag, an acknowledgement)  # assumed
# a text block's opening found in a summary request's rendered transcript means the summary took it in:
# 60 characters, from 16 up (a shorter text, "ok", "done", is in any transcript)  # assumed
_TAKEN_PROBE, _TAKEN_MIN = 60, 16


def _texts(req: Request, results: bool = True) -> list[str]:
    """The texts a request sends that a summary can stand in: its messages' text and (``results``) tool
    results, and its system blocks."""
    kinds = ("text", "tool_result") if results else ("text",)
    return [b.text for m in req.messages for b in m.blocks if b.type in kinds] + [b.text for b in req.system.blocks]


# a summary this long sent whole twice in one summary request is no coincidence of short texts (assumed)
SUMMARY_TWICE_CHARS = 40
def _prompt_chars(req: Request) -> int:
    """The characters of ``req``'s system prompt and tool definitions, as sent."""
    return sum(len(b.payload) for b in req.system.blocks) + sum(len(t.payload) for t in req.tools.tools)


def _estimate_rate(req: Request, text_only: bool = False) -> float:
    """The tokens a character of ``req`` at the strategy's own estimate of it (its prompt and messages; 0 without one):
    what the kit sizes a part of the request by, as the strategy would; ``text_only``: the opaque prefix's tokens
    (no characters in hand) left out of the estimate, the rate its text alone is counted at."""
    if not req.estimated_tokens:
        return 0.0
    tokens = req.estimated_tokens - (req.system.opaque_tokens if text_only else 0)
    return tokens / max(1, _prompt_chars(req) + sum(m.chars for m in req.messages))


def _on_a_line(path: str, text: str) -> bool:
    """Whether ``text`` ends a line with ``path`` (a section's heading naming the file, not a mention in its text)."""
    return re.search(rf"(?m){re.escape(path)}[ \t`*:]*$", text) is not None


def _tool_names(req: Request) -> dict[str, str]:
    """The tool each tool_use of ``req`` calls, by id."""
    return {b.id: b.name or "" for m in req.messages if m.role == "assistant" for b in m.blocks if b.type == "tool_use"}


REPORT_OPENING = 60   # characters of a block's text that stand for it in a rendered transcript (assumed)


class _OwnWork(NamedTuple):
    """What only a sub-agent that just ended saw (its report should take some of it in)."""

    sub_call: int                 # its last request
    digests: frozenset[bytes]     # the blocks of that request the parent's did not hold
    openings: tuple[str, ...]     # their openings, and its conclusion's (a transcript renders them)
    parent: str                   # the parent's stream, whose next request shows where the report landed


class _Report(NamedTuple):
    """A summary asked for as a sub-agent ended: judged once the parent's next request shows it landed."""

    summary: _Summary
    took_in: bool                 # its request held some of the sub-agent's own work
    work: _OwnWork
    call: int
    where: str


def _own_work(sub: Sent, parent: Sent | None, parent_stream: str, conclusion: str) -> _OwnWork | None:
    """What only the sub-agent saw: the text and tool results of its last request that the parent's last
    request did not hold (by digest), with their openings, and its conclusion's. None when there is
    nothing of its own to look for."""
    theirs = {b.digest for m in parent.request.messages for b in m.blocks} if parent is not None else set()
    own = [b for m in sub.request.messages for b in m.blocks
           if b.type in ("text", "tool_result") and b.digest not in theirs and len(b.text.strip()) >= 20]
    openings = [b.text.strip()[:REPORT_OPENING] for b in own]
    if len(conclusion.strip()) >= 20:
        openings.append(conclusion.strip()[:REPORT_OPENING])
    if not own and not openings:
        return None
    return _OwnWork(sub.call, frozenset(b.digest for b in own), tuple(openings), parent_stream)


def _answers_or_calls(m: Message) -> bool:
    """``m`` makes or answers tool calls (a result the strategy made up for a call is the conversation's)."""
    return any(b.type in ("tool_use", "tool_result") for b in m.blocks)


def _message_key(m: Message) -> tuple:
    """A message of the conversation, found again if a result in it was cut or cleared since: by its calls' ids
    where it makes or answers calls, else by its digest."""
    ids = tuple(b.id for b in m.blocks if b.type in ("tool_use", "tool_result"))
    return (m.role, ids) if ids else (m.role, m.digest)


class _Tail(NamedTuple):
    """What a compaction kept verbatim (``kept_tail``)."""

    messages: list[Message]   # the tail, as the request holds it
    conversation: list[Message]   # the conversation it was kept from
    start: int   # where the tail starts in it
    after: str   # what it stands after: "its summary", "its note of the cut"


def _payload(b: Block) -> str:
    """What a tool result or tool use sends: its text, or its input as JSON."""
    if b.type == "tool_use":
        return json.dumps(b.input or {}, sort_keys=True, ensure_ascii=False, default=str)
    return b.text


FILE_KEYS = ("file_path", "path", "notebook_path", "filename", "file")  # a tool input naming the file it reads


def _file_of(tool_input) -> str:
    """The file a tool call's input names (``""``: none)."""
    if not isinstance(tool_input, dict):
        return ""
    return next((v for k in FILE_KEYS if isinstance(v := tool_input.get(k), str) and v.strip()), "")


def _same_file(a: str, b: str) -> bool:
    """Two paths of one file: equal, or one ends in the other at a folder boundary (a relative path read again
    by its absolute one)."""
    pa, pb = Path(a).parts, Path(b).parts
    n = min(len(pa), len(pb))
    return pa == pb or (n > 0 and pa[-n:] == pb[-n:] and (not Path(a).is_absolute() or not Path(b).is_absolute()))


def _summary_pieces(text: str) -> list[str]:
    """Pieces of a summary's text a request that uses it holds verbatim (any one is proof): its opening
    (:func:`_summary_probe`), a slice of its middle and its end. Several, since a strategy may cut its
    head (an analysis part, a greedy pattern) or its end, or wrap it in its own words."""
    t = text.strip().removesuffix("</summary>").strip()
    if len(t) < 24:
        return [t] if t else []
    mid = len(t) // 2
    return [p for p in (_summary_probe(text), t[mid - 30: mid + 30].strip(), t[-40:].strip()) if len(p) >= 12]


def _with_appended(before: Request, appended: list[Message]) -> list[Message]:
    """The conversation: ``before``'s messages and those the engine gave the strategy since, each once (a message
    alike an earlier one, a repeated answer, is the conversation's all the same)."""
    sent = {id(m) for m in before.messages}
    return [*before.messages, *(m for m in appended if id(m) not in sent)]


def _in_a_row(msgs: list[Message], conv: list[Message]) -> int:
    """How many of the newest messages of ``msgs`` the conversation ``conv`` holds in a row, wherever the run ends (two
    messages alike, a repeated answer, share a key: each place the newest stands is tried)."""
    keys, want = [_message_key(m) for m in conv], [_message_key(m) for m in msgs]
    best = 0
    for p in (p for p, k in enumerate(keys) if want and k == want[-1]):
        n = 0
        while n < len(want) and n <= p and keys[p - n] == want[-1 - n]:
            n += 1
        best = max(best, n)
    return best


def _typed(m: Message) -> bool:
    """A message the user typed: the user's, with no tool result and no origin of the strategy's own."""
    return m.role == "user" and not m.has_tool_result and not m.meta.get("origin")


def _message_events(m: Message) -> int:
    """The events a message stands for as OpenHands V1 counts them: an assistant message one per tool call (one with
    none), a message of results one per result, any other one."""
    if m.role == "assistant":
        return max(1, sum(1 for b in m.blocks if b.type == "tool_use"))
    return sum(1 for b in m.blocks if b.type == "tool_result") or 1


def _events(req: Request) -> int:
    """The events of ``req``'s view (``compacts_above_events``): the system prompt one, and each message's."""
    return 1 + sum(_message_events(m) for m in req.messages)


@dataclass
class Checker:
    """Checks entries in order and keeps what the checks compare across requests.

    ``originals`` maps a tool_use id to the result the trace fed the strategy, ``errors`` to that
    result's ``is_error``, ``thinking`` to the thinking of the answer that made the call, and
    ``trace_digests`` holds the digests of the text the trace fed (user messages, the model's
    text): live mappings, a state machine adds to them as it goes (:meth:`for_recording`).
    ``spills`` collects the files found to hold a replaced result (path -> tool_use id): the state
    machine reads them back.
    """

    promised: frozenset[str]
    originals: Mapping[str, str]
    session_dir: Path | None = None
    errors: Mapping[str, bool] = field(default_factory=dict)
    thinking: Mapping[str, str] = field(default_factory=dict)
    trace_digests: set[bytes] = field(default_factory=set)
    goals: Mapping[str, str] = field(default_factory=dict)  # launch id -> its conversation's goal (live)
    declared: Declared = field(default_factory=Declared)  # what the strategy declares (summary items, clear minimum...)
    inputs: Mapping[str, object] = field(default_factory=dict)  # tool_use id -> its input as the trace fed it (live)
    edges: tuple = ()  # the edges of the strategy's own clock (clock.own_edges), named when crossed
    conversation: Mapping[str, str] = field(default_factory=dict)  # launch id -> its conversation (live)
    conv_ids: Mapping[str, set[str]] = field(default_factory=dict)  # conversation -> tool_use ids fed in it (live)
    conv_texts: Mapping[str, set[bytes]] = field(default_factory=dict)  # conversation -> digests of its text (live)
    recorded_summaries: set[str] = field(default_factory=set)  # the recorded agent's own summaries (live)
    violations: list[Violation] = field(default_factory=list)
    spills: dict[str, str] = field(default_factory=dict)
    _prev: dict[str, Sent] = field(default_factory=dict)
    _fresh: set[str] = field(default_factory=set)  # streams whose next request is the first of a launch or span
    _idle_rewrites: dict[str, int] = field(default_factory=dict)  # stream -> declared rewrites in a row that only appended
    _entered: set[str] = field(default_factory=set)  # tool results seen entering the window
    _held: dict[str, Path] = field(default_factory=dict)  # replaced tool result -> the file that holds it
    _lost: set[str] = field(default_factory=set)  # placeholders already reported
    _claims: dict[tuple[str, bytes], tuple[Path, ...]] = field(default_factory=dict)  # (tool_use id, text digest) -> run files its text names
    _run_roots: tuple[str, ...] = ()  # the run directory, given and resolved (_roots)
    _spans: list[bool] = field(default_factory=list)  # open sub-task spans: isolated or not
    _summaries: list[_Summary] = field(default_factory=list)  # successful summary calls since the last main request
    _in_window: list[tuple[_Summary, int]] = field(default_factory=list)  # summaries the main conversation holds (since which request)
    _summary_too_long: bool = False  # a summary side call refused as too long since the last accepted request
    _attempts: int = 0  # rejected main-line requests in a row (the attempts of the call being sent)
    _overflow: tuple[Sent, str, bool, int, str] | None = None  # a rejected overflow awaiting the strategy's reaction (sent, where, excused, attempt, cause)
    _after_subagent: bool = False  # a sub-agent returned since the main conversation's last request
    run_model: str = ""  # the run's model (a request with no model of its own goes on it)
    _span_ended: bool = False  # a sub-agent ended since the last main-line request (its report is due)
    _in_sub: bool = False  # the last main-line request was a sub-agent's (side calls since are inside it)
    _wrong_model: set[str] = field(default_factory=set)  # kinds of call reported on another model
    _span_launches: list[int] = field(default_factory=list)  # the launch each open span began in
    _report_due: _OwnWork | None = None  # a sub-agent ended since the last main-line request: what only it saw
    _reports: list[_Report] = field(default_factory=list)  # the summaries asked for since, awaiting the parent's request
    _resumed: bool = False
    _side_failed: bool = False  # a side call failed by injection since the last main-line request
    _reaction_failed: bool = False  # a side call failed by injection while the strategy reacted to the overflow
    _reaction_summarised: bool = False  # a summary side call succeeded while it reacted
    _session: str = ""
    _launches: int = 0
    _resumes: int = 0
    _resume_no: int = 0  # the resume this launch is (0: a fresh start)
    _rewrites: int = 0  # declared rewrites of the main conversation since its last fresh start
    _files: Files | None = None
    _goal_probes: list[str] = field(default_factory=list)  # probes of the summaries that carry the goal
    _goal_lost: bool = False  # reported once per conversation
    _latest_lost: bool = False  # reported once per conversation
    _over_limit: set[str] = field(default_factory=set)  # tool results reported over (or cut under) the declared limit
    _limit_seen: set[str] = field(default_factory=set)  # tool results seen entering (result_limit judges a cut there)
    _as_entered: dict[str, bytes] = field(default_factory=dict)  # tool_use id -> its result's digest as it entered (main)
    _entered_chars: dict[str, int] = field(default_factory=dict)  # tool_use id -> its result's characters as it entered (main)
    _changed_before: dict[str, frozenset[str]] = field(default_factory=dict)  # stream -> the results its last request sent changed
    _reinject_seen: set[str] = field(default_factory=set)  # declared origins the conversation was sent (reinjected)
    _left_after: int | None = None  # the true input of the main conversation's last answered request (whole_left)
    _every_since: int | None = None  # answered main requests since the last declared periodic side call (writes_every)
    _usage_of: Request | None = None  # the main request whose answer's usage is awaited (estimates_from_usage)
    _usage_anchor: tuple[Request, int] | None = None  # ... and, answered, with its usage: input and output tokens
    _measured_cpt: float | None = None  # characters a token of the main conversation's last answered request, answer too
    _read_calls: dict[str, str] = field(default_factory=dict)  # read tool_use id -> its path (restores_recent_reads)
    _read_paths: set[str] = field(default_factory=set)  # the paths read in this launch's main conversation
    _sub_read_paths: set[str] = field(default_factory=set)  # ... and those read only in an isolated sub-agent of it
    _span_reads: dict[str, tuple[str, bool]] = field(default_factory=dict)  # read id in a span -> (path, isolated)
    _last_read: str | None = None  # the path the main conversation read last (None: not known)
    _last_read_id: str | None = None  # ... the tool_use id of that read
    _main_sent: bool = False  # a request of the main conversation was sent (the run's first is estimated unanchored)
    _every_user: bool = False  # the user typed a message since it
    _every_stopped: bool = False  # an answer called the declared tool: the recorded agent keeps its own
    _reads_replaced: set[str] = field(default_factory=set)  # tracked reads seen replaced (replaces_reads_to)
    _recent_lost: set[str] = field(default_factory=set)  # newest tool uses reported changed
    _marks_lost: set[str] = field(default_factory=set)  # declared breakpoint places reported missing
    _asked_since_main: bool = False  # a side call was sent since the last main-line request (compaction_trigger)
    _side_ever_failed: bool = False  # a side call failed or was refused in this run (compaction_trigger)
    _other_side_failed: bool = False  # ... a side call other than a summary (compaction_trigger, with a declared breaker)
    _summary_fails: int = 0  # summaries failed in a row (refused, failed, answered empty) since a good one or a new launch
    _summary_pending: bool = False  # a summary sent whose answer is still to come
    _side_failed_since_main: bool = False  # ... since the last main-line request (summarised)
    _since_accepted: list[_Summary] = field(default_factory=list)  # summaries made since the last accepted main request
    _trigger_missed: bool = False  # reported once a run
    _clear_trigger_reported: bool = False  # clears_above: reported once a run
    _replaced: dict[str, tuple[bytes, str]] = field(default_factory=dict)  # tool_use id -> its first replacement (digest, text)
    _replaced_lost: set[str] = field(default_factory=set)  # replaced_once: reported
    _warm_changed: frozenset[str] = frozenset()  # results the main conversation's last request sent changed (cold_only)
    _warm_sent: frozenset[str] = frozenset()  # and the results it sent
    _main_at: float | None = None  # when the main conversation's last request was sent (cold_only)
    _cut_seen: set[str] = field(default_factory=set)  # tool results judged against the declared cuts as they entered
    _superseded_lost: set[str] = field(default_factory=set)  # tool uses reported replaced with no later read (superseded)
    _early_reported: bool = False  # a summary asked for under the trigger, reported once a run
    _user_since_main: bool = False  # the user wrote (outside a sub-agent) since the last main request
    _line_at: float | None = None  # when the last main-line request (of any conversation) was sent (idle_clear)
    _latest_text: str = ""  # the user's latest message in the main conversation (its ``user`` marks)
    _user_texts: list[str] = field(default_factory=list)  # the user's messages of the main conversation (user_messages)
    _users_reported: bool = False  # user_messages reported once a launch
    _cleared: dict[str, frozenset[str]] = field(default_factory=dict)  # stream -> ids its last request sent cleared
    _summary_call: int = -1  # the last summary request (its answer is judged with it)
    _tokens: dict[str, int] = field(default_factory=dict)  # text -> true tokens (clear_minimum)
    _densest: float = 0.0  # the most true tokens a character the main conversation grew by between two requests (kept_tail)
    _new_launch: str = ""  # a new (not resumed) launch whose first main request is still to come
    _last_call: int = -1  # the engine's index of the last request seen
    _outside: set[str] = field(default_factory=set)  # files reported written outside the run's directory
    _conv_summaries: dict[str, list[str]] = field(default_factory=dict)  # conversation -> the summaries answered in it
    _main_ratio: float | None = None  # estimate / truth of the main conversation's last request
    _last_main: int = -1  # that request
    _main_tokens: int = 0  # and its true size
    _pre_resume: tuple[int, float, int, int] | None = None  # (call, ratio, rewrites so far, tokens) of the last main request before a resume
    _appended: list[Message] = field(default_factory=list)  # messages the main conversation got since its last request (kept_tail)
    _appended_mixed: bool = False  # ... with a span's messages among them (or left out: an isolated sub-agent's)

    def __post_init__(self) -> None:
        self._files = Files(self.session_dir)

    @classmethod
    def for_recording(cls, promised: Iterable[str], recording: Recording) -> Checker:
        from ctxsim.harness.testing.clock import own_edges
        from ctxsim.harness.testing.declared import declared

        d = declared(recording.strategy, recording.params, recording.window, recording.max_output)
        return cls(frozenset(promised), recording.originals, recording.session_dir, recording.errors,
                   recording.thinking, recording.trace_digests, recording.goals, d, recording.inputs,
                   own_edges(d.epochs), recording.conversation, recording.conv_ids, recording.conv_texts,
                   recording.recorded_summaries, run_model=recording.model)

    def feed(self, entries: Iterable[Sent | Mark]) -> list[Violation]:
        """Check ``entries``; returns the violations they add (also kept in ``violations``)."""
        new: list[Violation] = []
        for e in entries:
            if isinstance(e, Mark):
                if e.what == "on_rejected":
                    new.extend(self._reacted(e))
                else:
                    new.extend(self._mark(e))
            else:
                new.extend(self._sent(e))
        # the engine asks nothing once a call has had all its attempts: the session failed there
        new.extend(self._reacted(None))
        self.violations.extend(new)
        return new

    def _reacted(self, m: Mark | None) -> list[Violation]:
        """The strategy's reaction to the overflow it sent last: a retry (``m.retried``), giving up,
        or nothing (``m`` None: the attempts ran out)."""
        pending, self._overflow = self._overflow, None
        if pending is None or "window" not in self.promised:
            return []
        s, where, excused, attempt, cause = pending
        est = s.request.estimated_tokens
        seen = "" if est is None else f" (its estimate, {est:,}, was {'over' if est > s.window else 'under'} it)"
        over = f"{s.tokens:,} tokens > window {s.window:,}{seen}"
        at = f" [{cause}]" if cause else ""
        if m is not None and m.retried:
            if est is not None and est > s.window and not excused:
                return [Violation("window", s.call, s.kind, f"{over}: it sent a request it knew was too long "
                                  f"(it recovered on retry){at}", where)]
            return []
        if self._reaction_failed:  # its reaction's own side call failed by injection: not its defect
            return []
        why = ("and it gave up (on_rejected returned False): the session ends there" if m is not None else
               f"and it was still over after {attempt} attempt(s): the session ends there")
        if self._summary_too_long:
            why += "; its summary request was refused as too long"
        elif self._reaction_summarised:
            why += "; after a summary made in its reaction"
        return [Violation("window", s.call, s.kind, f"{over} {why}{at}", where)]

    def where(self) -> str:
        """Where the session is, for a report: the launch, the resume it is, compactions so far."""
        parts = []
        if self._session:
            parts.append(f"session {self._session}" + (f" after resume #{self._resume_no}" if self._resume_no else ""))
        if self._rewrites:
            parts.append(f"after {self._rewrites} rewrite{'s' if self._rewrites > 1 else ''}")
        if self._spans:
            parts.append("in a sub-agent" if any(self._spans) else "in a sub-task span")
        return ", ".join(parts)

    def _stream(self, s: Sent) -> str:
        """Which conversation a main-line request belongs to: the main one, or a sub-agent's.
        Inside a span the engine ran isolated, every call is the sub-agent's whatever its kind label
        (so a strategy that labels them "main" is still compared fairly); inside any span, a call a
        strategy labels "subagent" is its own sub-agent's (a strategy may isolate spans itself)."""
        depth = len(self._spans)
        if depth and (any(self._spans) or s.kind == "subagent"):
            return f"subagent:{depth}"
        return "main"

    def _mark(self, m: Mark) -> list[Violation]:
        if m.what in ("user", "message") and m.message is not None:
            # inside a span the main conversation's messages are not told apart from a sub-agent's (a strategy may run
            # one of its own for a span the log ran in its main context): those of a span run in the main context count
            # to its size, and no tail is judged against them
            self._appended_mixed = self._appended_mixed or bool(self._spans)
            if not any(self._spans):
                self._appended.append(m.message)
        if self.declared.writes_every is not None:
            self._every_mark(m)
        if self.declared.restores is not None:
            self._track_read(m)
        if m.what == "message" and m.usage is not None and self._usage_of is not None and not self._spans:
            req = self._usage_of
            self._usage_anchor = (req, m.usage.input_total + m.usage.output)
            if self.declared.tail_calibrated:   # the whole request's characters: counted only where a cap is held to them
                text = m.usage.input_total + m.usage.output - req.system.opaque_tokens
                chars = _prompt_chars(req) + sum(x.chars for x in req.messages) + m.message.chars
                self._measured_cpt = chars / text if text > 0 and chars > 0 else self._measured_cpt
            self._usage_of = None
        elif m.what not in ("user", "message"):
            self._usage_of = self._usage_anchor = None   # a launch, a span, a side result: the anchor is the strategy's
        if m.what in ("session_start", "subtask_start", "subtask_end"):
            self._left_after = None   # the strategy's last usage is its own to restore
        if m.what == "session_start":
            self._measured_cpt = None   # a new process: measured again (a resume's measure of its transcript not known)
            self._report_due, self._reports = None, []   # a report is judged within its launch
            self._launches += 1
            self._session = m.id
            if m.resume:
                self._resumes += 1
                self._resume_no = self._resumes
                self._pre_resume = ((self._last_main, self._main_ratio, self._rewrites, self._main_tokens)
                                    if self._main_ratio is not None else None)
            else:
                self._summary_fails = 0   # a new launch: its breaker closed
                self._prev.clear()  # a new launch: a new conversation, nothing to compare with
                self._main_ratio = None
                self._cleared.clear()
                self._spans.clear()
                self._span_launches.clear()
                self._resume_no = 0
                self._rewrites = 0
                self._goal_probes.clear()
                self._goal_lost = False
                self._latest_lost = False
                self._latest_text = ""
                self._user_texts, self._users_reported = [], False
                self._in_window = []
                self._reinject_seen = set()
                self._new_launch = m.id
            self._fresh.add("main")
            self._resumed = m.resume
        elif m.what == "user":
            if not self._spans:   # a sub-agent's prompt is not the user's request
                self._latest_text = m.text.strip()
                self._user_texts.append(self._latest_text)
                self._user_since_main = True
        elif m.what == "subtask_start":
            self._report_due = None
            self._span_ended = self._in_sub = False
            self._spans.append(m.isolated)
            self._span_launches.append(self._launches)
            self._prev.pop(f"subagent:{len(self._spans)}", None)
            self._cleared.pop(f"subagent:{len(self._spans)}", None)
            self._fresh.add(f"subagent:{len(self._spans)}")
        elif m.what == "subtask_end" and self._spans:
            depth = len(self._spans)
            sub = self._prev.pop(f"subagent:{depth}", None)
            parent_stream = "main" if depth == 1 else f"subagent:{depth - 1}"
            isolated = self._spans.pop()
            if self._span_launches:
                self._span_launches.pop()
            # a report of a sub-agent the strategy started itself (a span the log ran in its main context)
            self._span_ended, self._in_sub = sub is not None and not isolated, False
            self._report_due = (_own_work(sub, self._prev.get(parent_stream), parent_stream, m.text)
                                if sub is not None else None)
            self._after_subagent = self._after_subagent or isolated
        elif m.what == "outside_write":
            if m.id in self._outside or "run_dir" not in self.promised:
                return []
            self._outside.add(m.id)
            when = "before the first request" if self._last_call < 0 else "after this request"
            return [Violation("run_dir", self._last_call, "", f"wrote {m.id} outside the run's directory ({m.text}, "
                              f"{when}): a strategy's files belong in Environment.session_dir (elsewhere every run "
                              "shares them and they are left behind)", self.where())]
        elif m.what == "side_result" and m.id == SUMMARY and m.text.strip():
            conv = self.conversation.get(self._session, self._session)
            self._conv_summaries.setdefault(conv, []).append(m.text)
        if m.what == "side_result" and m.id == SUMMARY and self._summary_pending:
            self._summary_pending = False
            self._summary_fails = 0 if m.text.strip() else self._summary_fails + 1
        if m.what == "side_result" and m.id == SUMMARY and self._summaries and not self._summaries[-1].text:
            self._summaries[-1].text = m.text
            missing = self._missing_items(m.text)
            if missing and "summary_keeps" in self.promised:
                return [Violation("summary_keeps", self._summary_call, SUMMARY,
                                  f"the summary it received lacks {_items(missing)} (declared kept: "
                                  f"{_items(self.declared.summary_items)})", self.where())]
        return []

    def _conversation_at_least(self, s: Sent) -> int:
        """The main conversation's size a summary request ``s`` is asked on, at the least: the summary request, or
        the conversation's last request and the messages the engine gave the strategy since."""
        return max(s.tokens, self._main_tokens + sum(self._count(m.text) for m in self._appended))

    def _breaker_may_be_open(self) -> bool:
        """A failed side call may have stopped the strategy from summarising: with a declared breaker, the summaries
        failed in a row reached it (or another side call failed); without one, any side call failed."""
        if self.declared.breaker is None:
            return self._side_ever_failed
        return self._other_side_failed or self._summary_fails >= self.declared.breaker

    def _misreported(self, req: Request, before: Sent | None) -> list[Violation]:
        """The summaries asked for as a sub-agent ended whose text the parent's next request holds in a
        tool result new to it (the report, not a compaction of the parent, whose summary may quote older
        results) and that took in none of its work."""
        reports, self._reports = self._reports, []
        old = {b.id for m in before.request.messages for b in m.blocks if b.type == "tool_result"} if before else set()
        results = [b.text for m in req.messages for b in m.blocks if b.type == "tool_result" and b.id not in old]
        return [Violation("subagent_report", r.call, SUMMARY, f"the report the parent received (the summary asked for "
                          f"when the sub-agent ended) takes in none of the sub-agent's work (its last request, call "
                          f"{r.work.sub_call}, nor its conclusion): it summarises another conversation", r.where)
                for r in reports
                if not r.took_in and r.summary.text and "subagent_report" in self.promised
                and any(p in t for p in _summary_pieces(r.summary.text) for t in results)]

    def _call_model(self, s: Sent) -> str:
        """The call goes to another model than the strategy declares for its kind (once per kind)."""
        own = bool(self._spans) and not self._spans[-1] and self._span_launches[-1:] == [self._launches]
        if s.main_line and s.kind != "subagent":
            key = s.kind
        elif s.kind == "subagent" or (s.kind == SUMMARY and self._in_sub):
            # a sub-agent the strategy started itself, in this launch (a recorded sub-agent runs on the log's
            # model; one a resume went on with died with its launch)
            if not own:
                return ""
            key = "subagent" if s.kind == "subagent" else "subagent:summary"
        elif s.kind == SUMMARY and self._span_ended:
            key = "report"
            self._span_ended = False   # the first summary after it: a compaction of the parent may follow
        else:
            key = s.kind
        want = dict(self.declared.call_models).get(key)
        sent_on = s.request.model or self.run_model
        if want is None or sent_on == want or key in self._wrong_model:
            return ""
        self._wrong_model.add(key)
        what = {"report": "the report asked for as a sub-agent ended", "subagent:summary": "a summary inside a sub-agent",
                "subagent": "a sub-agent's call"}.get(key, f"a {key} call")
        return f"{what} was sent on {sent_on}; the strategy declares {want} for it (call_models)"

    def _missing_items(self, text: str) -> list[str]:
        return [i for i in self.declared.summary_items if not holds_item(text, i)]

    def _sent(self, s: Sent) -> list[Violation]:
        out: list[Violation] = []
        self._last_call = s.call
        req = s.request
        where = self.where()

        def v(name: str, detail: str) -> None:
            if name in self.promised:
                out.append(Violation(name, s.call, s.kind, detail, where))

        for e in api_errors(req, self.thinking if s.main_line else None):
            v("api", e)
        err = pairing_violation(req)
        if err:
            v("pairing", err)
        if self.declared.call_models and "call_model" in self.promised:
            detail = self._call_model(s)
            if detail:
                v("call_model", detail)
        if not s.main_line:
            if self.declared.writes_every is not None and s.kind == self.declared.writes_every[0]:
                detail = self._every_side()
                if detail and "cadence" in self.promised:
                    v("cadence", detail)
            first_side, self._asked_since_main = not self._asked_since_main, True
            if (s.kind == SUMMARY and first_side and self.declared.on_usage is not None and self._usage_anchor
                    and self.declared.compacts_above is None and "compaction_trigger" in self.promised
                    and not self._in_sub and not self._spans and not self._attempts and not self._early_reported
                    and self._usage_anchor[1] < self.declared.on_usage):
                self._early_reported = True
                v("compaction_trigger", f"a summary asked for after request {self._prev['main'].call} of the main "
                                        f"conversation used {self._usage_anchor[1]:,} tokens (input and output), under "
                                        f"the {self.declared.on_usage:,} at which the strategy declares it summarises "
                                        "(compacts_on_usage), and not after a refused request: the trigger fired early "
                                        "(compared in another unit?)")
            self._side_ever_failed = self._side_ever_failed or s.rejected or bool(s.error)
            if s.kind == SUMMARY:
                self._summary_pending = not (s.rejected or s.error)
                self._summary_fails += 0 if self._summary_pending else 1
            else:
                self._other_side_failed = self._other_side_failed or s.rejected or bool(s.error)
            self._side_failed_since_main = self._side_failed_since_main or s.rejected or bool(s.error)
            if s.rejected:
                # a side call refused (too long: codex then trims the oldest items, a summary among them)
                for sm in [*self._summaries, *(w for w, _ in self._in_window)]:
                    sm.excused = True
            if s.rejected and s.error.startswith("injected"):
                self._side_failed = True
                self._reaction_failed = self._overflow is not None
            elif s.rejected and s.kind == SUMMARY and "too long" in s.error:
                self._summary_too_long = True
            if s.kind == SUMMARY and self.declared.summary_items:
                self._summary_call = s.call
                last = req.messages[len(req.messages) - 1] if len(req.messages) else None
                if last is not None and last.meta.get("origin") == "instruction":
                    # the instructions, and the summary request's system prompt (where some agents put
                    # the format: gemini-cli's compression prompt)
                    asked = "\n".join([*(b.text for b in last.blocks), *(b.text for b in req.system.blocks)])
                    missing = self._missing_items(asked)
                    if missing:
                        v("summary_keeps", f"the summary request's instructions do not ask for {_items(missing)} "
                                           f"(declared kept: {_items(self.declared.summary_items)})")
            if (s.kind == SUMMARY and self.declared.compacts_above is not None and "compaction_trigger" in self.promised
                    and first_side and not self._in_sub and not self._attempts and not self._early_reported
                    and self._conversation_at_least(s) * max(1.0, self._main_ratio or 1.0) * ESTIMATE_FACTOR
                    < self.declared.compacts_above):
                # the first call of a compaction (a retry after a refused summary is trimmed: Codex drops the oldest
                # items) asked for on the main conversation, not in reaction to a refused request, while the
                # conversation it summarises is well under the trigger, as the strategy itself measures it (its
                # last main request's estimate over the truth: a fixed rate runs high on dense text); the
                # conversation is at least what its last main request sent (a summary request may leave out the
                # agent's system prompt and tools: Roo Code's has a prompt of its own) and what came since (a summary
                # request may send its results cut: Cline renders them to 2,000 characters)
                self._early_reported = True
                seen = ("" if not self._main_ratio or self._main_ratio <= 1 else
                        f", {self._main_ratio:.2f} times that by the strategy's own last estimate")
                v("compaction_trigger", f"a summary asked for on {self._conversation_at_least(s):,} tokens of the "
                                        f"conversation{seen}, under "
                                        f"the {self.declared.compacts_above:,} at which the strategy declares it "
                                        f"summarises (compacts_above; a factor of {ESTIMATE_FACTOR} allowed for its "
                                        "estimate), and not after a refused request: the trigger fired early "
                                        "(compared in another unit?)")
            if (s.kind == SUMMARY and self.declared.only_at_turns and "compaction_trigger" in self.promised and first_side
                    and not self._in_sub and not self._attempts and not self._user_since_main and not self._early_reported
                    and "main" in self._prev and "main" not in self._fresh):
                self._early_reported = True
                v("compaction_trigger", f"a summary asked for after request {self._prev['main'].call} of the main "
                                        "conversation, "
                                        "between the calls of a user turn (no user message since, no refused request): "
                                        "the strategy declares it summarises only as a user turn begins "
                                        "(compacts_only_at_turns: a flag that a turn began, never cleared?)")
            if s.kind == SUMMARY and not s.rejected and not s.error:
                self._reaction_summarised = self._reaction_summarised or self._overflow is not None
                if "summary_used" in self.promised and (self._summaries or self._in_window):
                    detail = self._summary_twice(req)
                    if detail:
                        v("summary_used", detail)
                carries = "goal" in self.promised and self._holds_goal(req)
                if self._summaries or self._in_window:
                    texts = _texts(req)
                    for sm in [*self._summaries, *(w for w, _ in self._in_window)]:
                        if sm.text and any(p in t for p in _summary_pieces(sm.text) for t in texts):
                            sm.chained = True
                made = _Summary({b.digest for m in req.messages for b in m.blocks}, carries_goal=carries, call=s.call,
                                input_chars=sum(len(b.payload) for m in req.messages for b in m.blocks),
                                input_text="\n".join(_texts(req)),
                                result_ids=frozenset(b.id for m in req.messages for b in m.blocks
                                                     if b.type == "tool_result"))
                self._summaries.append(made)
                self._since_accepted.append(made)
                if (work := self._report_due) is not None:
                    # judged when the parent's next request shows what it was: a report lands in a tool result
                    sm = self._summaries[-1]
                    took = bool(sm.inputs & work.digests) or any(o in t for o in work.openings for t in _texts(req))
                    self._reports.append(_Report(sm, took, work, s.call, where))
            return out
        stream = self._stream(s)
        self._report_due = None   # a report comes before the next main-line request, of any conversation
        if self.declared.writes_every is not None and stream == "main" and not self._spans:
            detail = self._every_main(s)
            if detail and "cadence" in self.promised:
                v("cadence", detail)
        self._span_ended, self._in_sub = False, stream != "main"
        if self._reports and stream == self._reports[0].work.parent:
            out.extend(self._misreported(req, self._prev.get(stream)))
        fresh = stream in self._fresh
        self._fresh.discard(stream)
        # what the request follows, for a report of an overflow: the defect is often there
        cause = ""
        if stream != "main":
            cause = "in a sub-agent's own context" + (" (its first request)" if fresh else "")
        elif self._resumed:
            cause = f"the first request after resume #{self._resume_no} (the history the strategy resumed)"
        elif self._after_subagent:
            cause = "the first request after a sub-agent returned (the parent's context, restored)"
        if stream == "main":
            self._after_subagent = False
        e = estimate_error(req.estimated_tokens, s.tokens, s.window)
        if not e and stream == "main" and self.declared.estimates_whole is not None:
            e = self._not_whole(req)
        usage_anchor = None
        if stream == "main":
            # the request after a side call, or in a span, is not judged on the anchor
            usage_anchor = None if self._asked_since_main or self._spans else self._usage_anchor
            self._usage_anchor = None
            self._usage_of = req if not s.rejected and not self._spans else None
            first_main, self._main_sent = not self._main_sent, True
            if self.declared.from_usage is not None and not e:
                e = self._not_from_usage(req, usage_anchor, first_main)
        resume_first = self._resumed and stream == "main"   # the same conversation, picked up by a new launch
        if resume_first:
            self._resumed = False
            if err:
                v("resume_pairing", f"first request after resume: {err}")
            pre, self._pre_resume = self._pre_resume, None
            # a cut, a summary or a condensation at the resume (a smaller request, a summary just made) or before
            # it changes what is estimated: not judged then (a resume that re-renders the history and repairs it,
            # a declared rewrite that only adds, is)
            if (e and pre is not None and 1 / ESTIMATE_FACTOR <= pre[1] <= ESTIMATE_FACTOR and pre[2] == self._rewrites
                    and s.tokens >= pre[3] and not self._summaries):
                v("resume_estimate", f"{e}, where request {pre[0]}, the last before the crash, was estimated "
                                     f"{(pre[1] - 1) * 100:+.0f}%: the resumed launch lost what it had measured (a "
                                     "rate of characters per token, a usage anchor)?")
        if stream == "main" and not s.rejected and req.estimated_tokens is not None and s.tokens > 0:
            self._main_ratio, self._last_main, self._main_tokens = req.estimated_tokens / s.tokens, s.call, s.tokens
        after_refusal = self._attempts > 0   # a reaction to a refused request may cut as it must
        self._attempts = self._attempts + 1 if s.rejected else 0
        if not s.rejected:
            self._summary_too_long = False
        if s.tokens > s.window:
            if s.rejected:  # the engine refused it: judged on what the strategy does next
                self._overflow = (s, where, self._side_failed, self._attempts, cause)
                self._reaction_failed = self._reaction_summarised = False
            elif not self._side_failed:  # a request over the window that went through (a recorded log's)
                v("window", f"{s.tokens:,} tokens > window {s.window:,}{f' [{cause}]' if cause else ''}")
        self._side_failed = False
        if e:
            v("estimate", e + _estimate_cause(req, s.tokens))
        prev = self._prev.get(stream)
        if (stream == "main" and prev is not None and not s.rejected and not prev.rejected and s.tokens > prev.tokens
                and _continues(prev.request, req)):
            grown = sum(m.chars for m in req.messages[len(prev.request.messages):])
            if grown >= DENSE_MIN_CHARS:
                self._densest = max(self._densest, (s.tokens - prev.tokens) / grown)
        if prev is not None and not req.rewrite:
            change = prefix_change(prev.request, req, prev.tools_json or None, s.tools_json or None)
            if change:
                v("stable_prefix", f"undeclared change since request {prev.call}: {change}"
                  + _clock_note(prev.now, s.now, self.edges))
        elif prev is not None and not fresh:
            change = prompt_change(prev.request, req, prev.tools_json or None, s.tools_json or None,
                                   self.declared.rewrites_also)
            if change:
                v("stable_prefix", f"a rewrite declared for the messages also changed {change} since request "
                                   f"{prev.call}: a compaction need not touch them, and their cache entry is lost "
                                   "(a strategy whose rewrites must change them declares rewrites_also)"
                  + _clock_note(prev.now, s.now, self.edges))
        if self.declared.clear_minimum is not None and "clear_minimum" in self.promised:
            detail = self._clear_minimum(stream, req)
            if detail:
                v("clear_minimum", detail)
        idle = (prev is not None and req.rewrite and not fresh and len(req.messages) > len(prev.request.messages)
                and extends(prev.request, req, prev.tools_json or None, s.tools_json or None))
        self._idle_rewrites[stream] = self._idle_rewrites.get(stream, 0) + 1 if idle else 0
        if self._idle_rewrites[stream] >= 2:
            v("false_rewrite", f"declares a rewrite, but only appends to request {prev.call} "
                               f"({self._idle_rewrites[stream]} such requests in a row)")
        if req.rewrite:
            split = split_pairs(req)
            if split:
                v("boundary_pairs", split)
        new_blocks = list(self._new_blocks(prev.request if prev else None, req))
        if self.declared.result_limits and "result_limit" in self.promised:
            for _m, b in new_blocks:
                if b.type == "tool_result" and b.id not in self._over_limit:
                    over = [(n, unit, size) for n, unit in self.declared.result_limits
                            if (size := result_size(b.text, unit)) > n + RESULT_NOTICE_SLACK[unit]]
                    if over:
                        self._over_limit.add(b.id)
                        n, unit, size = over[0]
                        v("result_limit", f"tool_result {b.id} sent at {size:,} {unit}, over the {n:,} {unit} the "
                                          "strategy declares it cuts every result to (result_limits)")
                    elif b.id in self.originals and b.id not in self._limit_seen and b.text != self.originals[b.id] \
                            and all(result_size(self.originals[b.id], unit) <= n for n, unit in self.declared.result_limits):
                        self._over_limit.add(b.id)
                        sizes = " and ".join(f"{result_size(self.originals[b.id], unit):,} {unit}"
                                             for _, unit in self.declared.result_limits)
                        v("result_limit", f"tool_result {b.id} entered changed ({_short(b.text)!r}) though it was "
                                          f"within the limits the strategy declares ({sizes}; result_limits): a cut "
                                          "below the declared size (counted in another unit?)")
                if b.type == "tool_result":
                    self._limit_seen.add(b.id)   # judged as it first enters; a later clearing is no cut
        # the trace's results entering for the first time, each judged once against the cuts the strategy declares
        entering = [(m, b) for m, b in new_blocks
                    if b.type == "tool_result" and b.id in self.originals and b.id not in self._cut_seen]
        self._cut_seen.update(b.id for _m, b in entering)
        if entering and "result_limit" in self.promised:
            details = []
            if self.declared.head_at_most:
                details += [self._head_over(b) for _m, b in entering]
            if self.declared.whole_left is not None and stream == "main":
                names = _tool_names(req)
                details += [self._changed_within_left(s, b, names.get(b.id, "")) for _m, b in entering]
            if self.declared.whole_under is not None:
                details += [self._changed_under(m, b) for m, b in entering]
            if self.declared.largest_first:
                details += self._spilled_not_largest(entering)
            if self.declared.result_cuts:
                names = _tool_names(req)
                details += [self._cut_wrong(b, names.get(b.id, "")) for _m, b in entering]
            for detail in details:
                if detail:
                    v("result_limit", detail)
        # the main conversation's results, each noted as it first entered (recent_kept, idle_clear): once a request
        # (a sub-agent's own conversation is held to what the strategy declares of what a clearing keeps and takes)
        kept_promised = (self.declared.recent_kept or self.declared.clears_all_but is not None
                         or self.declared.clears_above is not None or self.declared.clears_beyond is not None)
        results = (self._results(req) if kept_promised or stream == "main" and (
            self.declared.idle_clear or self.declared.recent_chars or self.declared.recent_turns or self.declared.recent_reads
            or self.declared.cold_only is not None or "replaced_once" in self.promised) else {})
        if self.declared.recent_kept and "recent_kept" in self.promised:
            for detail in self._recent_changed(req, results):
                v("recent_kept", detail)
        changed = frozenset(i for i, b in results.items() if b.digest != self._as_entered[i])   # sent changed
        if self.declared.recent_chars and "recent_kept" in self.promised and stream == "main":
            for detail in self._recent_chars_changed(results):
                v("recent_kept", detail)
        if "replaced_once" in self.promised and stream == "main":
            for detail in self._replaced_again(results, changed):
                v("replaced_once", detail)
        if self.declared.recent_turns and "recent_kept" in self.promised and stream == "main":
            for detail in self._recent_turns_changed(req, results):
                v("recent_kept", detail)
        if self.declared.recent_reads and "recent_kept" in self.promised and stream == "main":
            # a compaction (a side call since the last main request) or a reaction to a refusal may cut what its tail
            # keeps: the promise is of what the strategy's own clearing takes
            for detail in self._recent_reads_changed(req, results, after_refusal or self._asked_since_main):
                v("recent_kept", detail)
            if self.declared.reads_to is not None:
                # reads a compaction or a reaction to a refusal cut are noted, not judged: the next round is
                detail = self._reads_left_over(req, results, changed, after_refusal or self._asked_since_main)
                if detail:
                    v("recent_kept", detail)
        if (self.declared.clears_above is not None and "compaction_trigger" in self.promised
                and not fresh and not s.rejected and not self._clear_trigger_reported):
            detail = self._clear_trigger(s, results)
            if detail:
                self._clear_trigger_reported = True
                v("compaction_trigger", detail)
        if (self.declared.clears_all_but is not None or self.declared.clears_beyond is not None) and "recent_kept" in self.promised:
            detail = self._cleared_short(stream, req, results, changed)
            if detail:
                v("recent_kept", detail)
        if self.declared.superseded and "superseded" in self.promised:
            for detail in self._superseded_alone(req):
                v("superseded", detail)
        if self.declared.cache_marks and "cache_marks" in self.promised:
            detail = self._marks_missing(req)
            if detail:
                v("cache_marks", detail)
        by_cut = self.declared.by_cut

        def cut_instead() -> bool:
            """A cut stands for the summary (``compacts_by_cut``): made, or none would drop anything."""
            return by_cut is not None and (req.rewrite or not by_cut(list(req.messages)))

        if (self.declared.compacts_above is not None and "compaction_trigger" in self.promised and stream == "main"
                and not self.declared.above_finished
                and not fresh and not (self._asked_since_main or self._breaker_may_be_open() or self._trigger_missed)
                and req.estimated_tokens is not None
                and req.estimated_tokens > self.declared.compacts_above * TRIGGER_SLACK
                and not (self.declared.before_prompt and self._nothing_before_prompt(req)) and not cut_instead()):
            self._trigger_missed = True
            done = ("nothing was cut (compacts_by_cut)" if self.declared.by_cut is not None else
                    "no summary was asked for")
            v("compaction_trigger", f"estimated at {req.estimated_tokens:,} tokens by the strategy itself, past the "
                                    f"{self.declared.compacts_above:,} at which it declares it "
                                    f"{'cuts' if self.declared.by_cut is not None else 'summarises'} before "
                                    f"sending (compacts_above), and {done}: the trigger did not "
                                    "fire (compared in another unit, against a constant, a part of it left out?)")
        events = _events(req) if self.declared.above_events is not None else 0
        if (self.declared.above_events is not None and "compaction_trigger" in self.promised and stream == "main"
                and not fresh and not (self._asked_since_main or self._breaker_may_be_open() or self._trigger_missed)
                and events > self.declared.above_events):
            self._trigger_missed = True
            v("compaction_trigger", f"the request holds {events} events (the system prompt, each tool call and each "
                                    "result one; any other message one), past the "
                                    f"{self.declared.above_events} at which the strategy declares it summarises before "
                                    "sending (compacts_above_events), and no summary was asked for: events counted "
                                    "another way (a message as one)?")
        turn_began = stream == "main" and self._user_since_main
        if stream == "main":
            self._user_since_main = False
        at_turns = self.declared.compacts_at_turns
        if (at_turns is not None and "compaction_trigger" in self.promised and turn_began and not fresh
                and prev is not None and not (self._asked_since_main or self._breaker_may_be_open() or self._trigger_missed)
                and prev.tokens > at_turns * TRIGGER_SLACK):
            self._trigger_missed = True
            v("compaction_trigger", f"a user turn began after request {prev.call} held {prev.tokens:,} tokens, past the "
                                    f"{at_turns:,} at which the strategy declares it summarises as a turn begins "
                                    "(compacts_at_turns), and no summary was asked for: the trigger did not fire "
                                    "(a window or a unit of its own?)")
        on_usage = self.declared.on_usage
        if (on_usage is not None and "compaction_trigger" in self.promised and usage_anchor is not None and not fresh
                and (turn_began or not self.declared.only_at_turns) and usage_anchor[1] >= on_usage
                and not (self._asked_since_main or self._breaker_may_be_open() or self._trigger_missed)
                and not cut_instead()):
            self._trigger_missed = True
            v("compaction_trigger", f"request {prev.call if prev is not None else '?'} of the main conversation used "
                                    f"{usage_anchor[1]:,} tokens (input and output), at or past the {on_usage:,} at "
                                    "which the strategy declares it summarises before its next request "
                                    f"(compacts_on_usage{', as a user turn begins' if self.declared.only_at_turns else ''}), "
                                    f"and {'nothing was cut' if by_cut is not None else 'no summary was asked for'}: the "
                                    "trigger did not fire (a part of the usage left out?)")
        self._asked_since_main = False
        if stream == "main" and not self._spans and not s.rejected and not s.error:
            self._left_after = s.tokens
        if (self.declared.reads_above is not None and self.declared.recent_reads and "idle_clear" in self.promised
                and stream == "main" and not self._spans and not (fresh or after_refusal or s.rejected)):
            detail = self._reads_not_replaced(s, results, changed)
            if detail:
                v("idle_clear", detail)
        if self.declared.cold_only is not None and "idle_clear" in self.promised and stream == "main":
            detail = self._changed_warm(s, results, changed, fresh or after_refusal)
            if detail:
                v("idle_clear", detail)
        line_at, self._line_at = self._line_at, s.now
        if (self.declared.idle_clear is not None and "idle_clear" in self.promised and stream == "main"
                and (not fresh or resume_first) and prev is not None and not prev.rejected and line_at is not None
                and s.now - line_at > self.declared.idle_clear[0] + IDLE_SLACK_S):
            detail = self._idle_not_cleared(prev, results, s.now - line_at)
            if detail:
                v("idle_clear", detail)
        if self.errors:
            for _m, b in new_blocks:
                if b.type == "tool_result" and b.id in self.errors and b.is_error != self.errors[b.id]:
                    v("is_error", f"tool_result {b.id} sent with is_error={b.is_error}; the tool returned it "
                                  f"with is_error={self.errors[b.id]}")
        if "path_back" not in self.promised:
            for detail in self._claimed_files(req):
                out.append(Violation("path_back", s.call, s.kind, detail, where))
        if "path_back" in self.promised or "no_respill" in self.promised:
            for name, detail in self._spill_checks(req, new_blocks):
                v(name, detail)
            if "path_back" in self.promised:
                for detail in self._placeholders_hold(req):
                    v("path_back", detail)
                if prev is not None:
                    for detail in self._left_window(prev.request, req):
                        v("path_back", detail)
        if (self.declared.summarises_dropped and "summarised" in self.promised and stream == "main"
                and prev is not None and not fresh and not self._side_failed_since_main):
            for detail in self._unsummarised(prev, req):
                v("summarised", detail)
        if (self.declared.tail and "kept_tail" in self.promised and stream == "main" and prev is not None and not fresh
                and req.rewrite and not s.rejected and not after_refusal and not self._side_failed_since_main):
            detail = self._tail_wrong(prev.request, s)
            if detail:
                v("kept_tail", detail)
        if (self.declared.cut_share and "kept_tail" in self.promised and stream == "main" and prev is not None
                and not fresh and req.rewrite and not s.rejected and not after_refusal and not self._appended_mixed
                and not self._summaries):
            detail = self._cut_short(prev.request, req)
            if detail:
                v("kept_tail", detail)
        if stream == "main":
            self._appended, self._appended_mixed, self._side_failed_since_main = [], False, False
        if req.rewrite and stream == "main":
            self._rewrites += 1
            texts = [b.text for m in req.messages for b in m.blocks if b.type in ("text", "tool_result")]
            if "goal" in self.promised:
                for sm in self._summaries:
                    probe = _summary_probe(sm.text)
                    if sm.carries_goal and probe and any(probe in t for t in texts):
                        self._goal_probes.append(probe)
                if not self._goal_lost and self._goal() and not self._holds_goal(req):
                    self._goal_lost = True
                    v("goal", f"the user's first request ({_short(self._goal())!r}) is neither in the window nor in a "
                              "summary the request holds after this rewrite (a path back to the transcript does not "
                              "tell the model what it was asked)")
            latest = self._latest_text
            if "latest_request" in self.promised and latest and not self._latest_lost:
                opening = latest[:LATEST_OPENING]
                if not any(opening in t for t in texts):
                    self._latest_lost = True
                    v("latest_request", f"the user's latest request ({_short(latest)!r}) is not in the window after "
                                        "this rewrite (the strategy declares it keeps the request in hand as the user "
                                        "wrote it: keeps_latest_request)")
            if "user_messages" in self.promised and not self._users_reported:
                detail = self._not_the_users(req)
                if detail:
                    self._users_reported = True
                    v("user_messages", detail)
        if self.declared.summary_items and self._summaries and "summary_keeps" in self.promised:
            for detail in self._summary_used(req, prev.request if prev is not None else None):
                v("summary_keeps", detail)
        if (self.declared.restores is not None and stream == "main" and not self._spans and self._summaries
                and req.rewrite and not s.rejected and "restored" in self.promised):
            detail = self._not_restored(req)
            if detail:
                v("restored", detail)
        if self.declared.reinjects and stream == "main" and not self._spans:
            detail = self._not_reinjected(req, bool(self._summaries) and req.rewrite and not s.rejected)
            if detail and "reinjected" in self.promised:
                v("reinjected", detail)
        if self._summaries and req.rewrite and prev is not None and "summary_used" in self.promised:
            detail = self._summary_dropped(prev.request, req)
            if detail:
                v("summary_used", detail)
        if stream == "main" and not s.rejected:
            for detail in self._summary_left(req, s.call):
                v("summary_used", detail)
        if self._new_launch and stream == "main":
            detail = self._carried_over(req)
            self._new_launch = ""
            if detail:
                v("fresh_launch", detail)
        self._summaries.clear()
        if not s.rejected:  # a refused request wrote no cache: the next is compared with the last accepted
            self._prev[stream] = s
            if stream == "main":
                self._since_accepted = []
        return out

    # --- what the strategy declares it keeps ---------------------------------------------------------
    def _summary_used(self, req: Request, before: Request | None = None) -> list[str]:
        """The summaries this request uses keep every declared item they held. A block uses a summary
        when it holds its opening; failing that, a message the strategy marks as a summary (origin
        "summary") holding its end: a strategy that cuts the summary's head (a greedy pattern that
        strips everything before its last section) still uses the rest of it. (The end alone is no
        proof elsewhere: a summary often ends quoting a user message the request also holds.) When no
        block uses one, a rewrite that puts in a new message it marks as a summary (not in ``before``)
        has that message hold the items the summary held: what stands in for the summary keeps its
        promise too (a verifier's reply kept in place of the snapshot does not)."""
        out: list[str] = []
        for sm in self._summaries:
            probe = _summary_probe(sm.text)
            if not probe:
                continue
            tail = sm.text.strip().removesuffix("</summary>").strip()[-40:]
            held = [i for i in self.declared.summary_items if holds_item(sm.text, i)]
            blocks = [(m, b) for m in req.messages for b in m.blocks if b.type in ("text", "tool_result")]
            use = next((b for _, b in blocks if probe in b.text), None) or next(
                (b for m, b in blocks if m.meta.get("origin") == "summary" and tail and tail in b.text), None)
            if use is not None:
                lost = [i for i in held if not holds_item(use.text, i)]
                if lost:
                    out.append(f"the request uses a summary but has dropped {_items(lost)} from it "
                               f"(declared kept: {_items(self.declared.summary_items)})")
                return out
        if req.rewrite and self._summaries:
            old = {b.digest for m in before.messages for b in m.blocks} if before is not None else set()
            held = [i for i in self.declared.summary_items if any(holds_item(sm.text, i) for sm in self._summaries)]
            for m in req.messages:
                if m.meta.get("origin") != "summary":
                    continue
                for b in m.blocks:
                    if b.type in ("text", "tool_result") and b.digest not in old:
                        lost = [i for i in held if not holds_item(b.text, i)]
                        if lost:
                            out.append(f"the message it marks as the summary ({_short(b.text)!r}) is not the summary "
                                       f"it was given and lacks {_items(lost)} (declared kept: "
                                       f"{_items(self.declared.summary_items)})")
                        return out
        return out

    def _summary_dropped(self, before: Request, req: Request) -> str:
        """The summaries made since the last main-line request that this request does not hold (no
        piece of their text in it) and that no later summary took in, though the request dropped text
        or tool calls they summarised (the rewrite they were made for): made and thrown away. A rewrite
        that dropped none of their input (a masking of tool output beside a summary discarded) is not
        judged."""
        now = {b.digest for m in req.messages for b in m.blocks}
        dropped = [b for m in before.messages for b in m.blocks if b.type in ("text", "tool_use") and b.digest not in now]
        if not dropped:
            return ""
        texts = _texts(req)
        if any(r in t for r in self.recorded_summaries for t in texts):
            return ""  # the recorded agent's own summary in its place (a strategy that re-enacts a log)
        for sm in self._summaries:
            pieces = _summary_pieces(sm.text)
            if not pieces or sm.chained or sm.excused or not any(sm.took_in(b) for b in dropped) \
                    or any(p in t for p in pieces for t in texts):
                continue
            if len(sm.text) + _SUMMARY_FRAME >= sm.input_chars:
                continue  # no shorter than what it summarised: discarding it loses nothing (gemini-cli's check)
            return (f"the summary answered to request {sm.call} ({_short(sm.text)!r}) is neither in this request nor "
                    "in the input of a later summary: a summary made and thrown away (the model never sees it, "
                    "what it replaced is lost)")
        return ""

    def _summary_left(self, req: Request, call: int) -> list[str]:
        """A summary the main conversation held leaves it only into a later summary: one a request no
        longer holds (no piece of its text) that no summary request since took in is reported once
        (a second compaction that leaves the first summary out of its input loses what it held).
        The summaries made since the last request join the ones held when this request holds them as
        message text (a sub-agent's report handed back as a tool result is tool output, cleared like any)."""
        texts = _texts(req, results=False)
        every = [sm for sm, _ in self._in_window] + self._summaries

        def holds(sm: _Summary) -> bool:
            # by the pieces no other summary shares (a summariser's fixed opening is in all of them)
            pieces = _summary_pieces(sm.text)
            own = [p for p in pieces if not any(p in o.text for o in every if o is not sm)] or pieces
            return any(p in t for p in own for t in texts)

        out, kept = [], []
        for sm, since in self._in_window:
            if holds(sm):
                kept.append((sm, since))
            elif not sm.chained and not sm.excused:
                out.append(f"the summary answered to request {sm.call} ({_short(sm.text)!r}), in the window since "
                           f"request {since}, is gone from it and no summary request since took it in: what it "
                           "held is lost")
        kept += [(sm, call) for sm in self._summaries if sm.text and _summary_pieces(sm.text) and holds(sm)]
        self._in_window = kept
        return out

    def _carried_over(self, req: Request) -> str:
        """What the first request of a new (not resumed) launch holds of an earlier conversation: its
        tool calls (by id) or its text (user messages, the model's answers)."""
        conv = self.conversation.get(self._new_launch, self._new_launch)
        own_ids = self.conv_ids.get(conv, set())
        own_texts = self.conv_texts.get(conv, set())
        other_ids = set().union(*(ids for c, ids in self.conv_ids.items() if c != conv)) - own_ids
        other_texts = set().union(*(t for c, t in self.conv_texts.items() if c != conv)) - own_texts
        for i, m in enumerate(req.messages):
            for b in m.blocks:
                if b.type in ("tool_use", "tool_result") and b.id in other_ids:
                    return (f"the first request of a new launch (not a resume) holds {b.type} {b.id} of an earlier "
                            f"conversation (message {i}): a new conversation carries the old one in")
                if b.type == "text" and b.digest in other_texts:
                    return (f"the first request of a new launch (not a resume) holds {m.role} text of an earlier "
                            f"conversation (message {i}: {_short(b.text)!r}): a new conversation carries the old one in")
        texts = [(i, b.text) for i, m in enumerate(req.messages) for b in m.blocks if b.type == "text"]
        for c, summaries in self._conv_summaries.items():
            if c == conv:
                continue
            for sm in summaries:
                # its opening (the summariser's own heading), or two of its pieces: one piece alone may be a
                # user's request the summary quotes, which a memory of the user's requests holds too
                pieces = _summary_pieces(sm)
                hit = next((i for i, t in texts if (pieces and pieces[0] in t) or sum(p in t for p in pieces) >= 2),
                           None)
                if hit is not None:
                    return (f"the first request of a new launch (not a resume) holds the summary of an earlier "
                            f"conversation (message {hit}: {_short(sm)!r}): a new conversation carries the old one in")
        return ""

    def _count(self, text: str) -> int:
        n = self._tokens.get(text)
        if n is None:
            from ctxsim.harness.provider.tokenizer import get_tokenizer

            n = self._tokens[text] = get_tokenizer().count(text)
        return n

    def _freed(self, req: Request) -> dict[str, int]:
        """The tokens ``req`` no longer sends of each tool call it sends shorter than the trace fed it (its result
        cleared or cut, its input cleared), by tool_use id."""
        freed: dict[str, int] = {}
        for m in req.messages:
            for b in m.blocks:
                if b.type == "tool_result" and b.id in self.originals:
                    original = self.originals[b.id]
                    if b.text != original and len(b.text) < len(original):
                        freed[b.id] = freed.get(b.id, 0) + max(0, self._count(original) - self._count(b.text))
                elif b.type == "tool_use" and b.id in self.inputs and b.input != self.inputs[b.id]:
                    before = json.dumps(self.inputs[b.id], sort_keys=True, ensure_ascii=False, default=str)
                    after = _payload(b)
                    if len(after) < len(before):
                        freed[b.id] = freed.get(b.id, 0) + max(0, self._count(before) - self._count(after))
        return freed

    def _clear_minimum(self, stream: str, req: Request) -> str:
        """The clearing this request makes frees fewer tokens than declared (``""`` otherwise)."""
        minimum, per = self.declared.clear_minimum  # type: ignore[misc]
        freed = self._freed(req)
        prev = self._cleared.get(stream, frozenset())
        self._cleared[stream] = frozenset(freed)
        if per == "clearing":
            # beyond the request before: what it sent longer, measured from there (a result cut on its way
            # in, opencode's truncation, is new content, not a clearing; pruning it later is one)
            before = self._prev.get(stream)
            was = {(b.type, b.id): _payload(b) for m in before.request.messages for b in m.blocks
                   if b.type in ("tool_result", "tool_use")} if before is not None else {}
            new: dict[str, int] = {}
            for m in req.messages:
                for b in m.blocks:
                    old = was.get((b.type, b.id))
                    # newly cleared (a result and its input), or a result cleared again shorter (a cut one pruned)
                    if b.id in freed and old is not None and len(_payload(b)) < len(old) \
                            and (b.id not in prev or b.type == "tool_result"):
                        new[b.id] = new.get(b.id, 0) + max(0, self._count(old) - self._count(_payload(b)))
            what = f"{len(new)} result(s) cleared beyond the request before"
        else:
            new = freed
            what = f"{len(new)} result(s) cleared in all"
        if not new:
            return ""
        total = sum(new.values())
        if total * ESTIMATE_FACTOR >= minimum:
            return ""
        return (f"{what} free {total:,} tokens; the strategy declares at least {minimum:,} per {per} "
                f"(a factor of {ESTIMATE_FACTOR} allowed for its estimate): {', '.join(sorted(new)[:4])}"
                + ("…" if len(new) > 4 else ""))

    # --- spills and read-backs ------------------------------------------------------------------
    def _new_blocks(self, prev: Request | None, req: Request) -> Iterable[tuple[Message, Block]]:
        start = 0
        if prev is not None:
            n = min(len(prev.messages), len(req.messages))
            # longest common message prefix (prefix digests chain, so equality is monotone)
            lo, hi = 0, n
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if req.messages.prefix_digest(mid - 1) == prev.messages.prefix_digest(mid - 1):
                    lo = mid
                else:
                    hi = mid - 1
            start = lo
        for m in req.messages[start:]:
            for b in m.blocks:
                yield m, b

    def _spill_checks(self, req: Request, new_blocks) -> list[tuple[str, str]]:
        out = []
        inputs = None
        for _m, b in new_blocks:
            if b.type != "tool_result" or b.id not in self.originals or b.id in self._entered:
                continue
            self._entered.add(b.id)  # judged as it enters; a later rewrite is a departure (_left_window)
            original = self.originals[b.id]
            if b.text == original:
                continue
            if inputs is None:
                inputs = {x.id: x.input for m in req.messages for x in m.blocks if x.type == "tool_use"}
            spilled_from = self._reads_spill(inputs.get(b.id))
            if spilled_from is not None:
                out.append(("no_respill", f"tool_result {b.id} reads back spilled file {spilled_from} "
                                          f"but entered the window replaced ({len(original):,} -> {len(b.text):,} chars): "
                                          f"{_short(b.text)!r}"))
            holder = self._files.holding(original, self._files.named_in(b.text))
            if holder is not None:
                self.spills[str(holder)] = b.id
                self._held[b.id] = holder
            else:
                out.append(("path_back", f"tool_result {b.id} replaced ({len(original):,} -> {len(b.text):,} chars) "
                                         f"and no file it names holds the original: {_short(b.text)!r}"))
        return out

    def _roots(self) -> tuple[str, ...]:
        """The run directory as a strategy may name it (as given, and resolved), worked out once."""
        if not self._run_roots and self.session_dir is not None:
            self._run_roots = tuple({str(self.session_dir), str(self.session_dir.resolve())})
        return self._run_roots

    def _results(self, req: Request) -> dict[str, Block]:
        """``req``'s tool results by tool_use id, each noted as it first entered (a conversation: the main one, a
        sub-agent's)."""
        results = {b.id: b for m in req.messages if m.role == "user" for b in m.blocks if b.type == "tool_result"}
        for i, b in results.items():
            if i not in self._as_entered:
                self._as_entered[i], self._entered_chars[i] = b.digest, len(b.text)
        return results

    def _marks_missing(self, req: Request) -> str:
        """The places the strategy declares a breakpoint on that ``req`` leaves unmarked (each reported once)."""
        n = len(req.messages)
        at = {b.at % n if isinstance(b.at, int) and n else b.at for b in req.breakpoints}
        last_user = next((i for i in range(n - 1, -1, -1) if req.messages[i].role == "user"), None)
        where = {"tools": ("tools", bool(req.tools.tools), "the end of the tools array"),
                 "system": ("system", bool(req.system.blocks) or req.system.opaque_tokens > 0, "the system prompt"),
                 "last": (n - 1, n > 0, f"the last message ({n - 1})"),
                 "last_user": (last_user, last_user is not None, f"the last user message ({last_user})")}
        missing = [(p, what) for p in self.declared.cache_marks if p not in self._marks_lost
                   for key, present, what in (where[p],) if present and key not in at]
        ttl = self.declared.marks_ttl
        if not missing and ttl not in (None, API_DEFAULT_TTL) and "ttl" not in self._marks_lost:
            # a mark written with no TTL at all, at the API's default: one given another TTL on purpose (a subclass that
            # buys the stable prefix for an hour and the conversation for five minutes) is the strategy's choice
            keys = {where[p][0] for p in self.declared.cache_marks if where[p][1]}
            bare = [b for b in req.breakpoints if (b.at % n if isinstance(b.at, int) and n else b.at) in keys
                    and b.ttl is None]
            if bare:
                self._marks_lost.add("ttl")
                return (f"a cache breakpoint on {bare[0].at!r} written with no TTL (the API's default, {API_DEFAULT_TTL}), "
                        f"where the strategy declares its marks at {ttl} (cache_marks_ttl: a TTL not passed on?)")
        if not missing:
            return ""
        self._marks_lost.update(p for p, _ in missing)
        marked = ", ".join(str(a) for a in sorted(at, key=str)) or "nothing"
        return (f"no cache breakpoint on {' or '.join(w for _, w in missing)}, where the strategy declares one on "
                f"every request (cache_marks: {', '.join(self.declared.cache_marks)}); it marks {marked} "
                f"of {n} messages")

    def _idle_not_cleared(self, prev: Sent, now: dict[str, Block], gap: float) -> str:
        """After an idle gap past the declared one: the request whose results are ``now`` sends every result the
        rule clears as it entered, though ``prev`` held some (the declared tools' results beyond the newest kept)."""
        seconds, tools = self.declared.idle_clear or (0.0, ())
        names = _tool_names(prev.request)
        before = self._results(prev.request)
        n = self.declared.recent_kept
        mine = [i for i in before if not tools or names.get(i, "") in tools]
        # the newest kept counted among all results or among the declared tools' only, by call or by place
        kept = (set(list(before)[-n:]) | set(list(names)[-n:]) | set(mine[-n:])
                | set([i for i in names if i in mine][-n:])) if n else set()
        old = [i for i in mine if i not in kept and before[i].digest == self._as_entered[i]]
        if not old:
            return ""
        if any(i not in now or now[i].digest != self._as_entered[i] for i in old):
            return ""
        what = ", ".join(tools) if tools else "any tool"
        return (f"{len(old)} old result(s) of {what} sent as they entered after {gap:,.0f} s idle since request "
                f"{prev.call}, past the {seconds:,.0f} s after which the strategy declares it clears them "
                f"(clears_when_idle; beyond the newest {n} kept): the rule did not fire (an idle gap read on "
                "another clock, or in another unit?)")

    def _not_the_users(self, req: Request) -> str:
        """A plain user message of ``req`` (no tool results, no origin of the strategy's own) whose text opens
        no message the user wrote in this conversation (``user_messages``); with ``keeps_newest_user_messages``,
        kept ones that are not the newest the user wrote, in order; or ``""``."""
        openings = []
        for m in req.messages:
            if m.role != "user" or m.has_tool_result or m.meta.get("origin"):
                continue
            for b in m.blocks:
                opening = b.text.strip()[:USER_OPENING] if b.type == "text" else ""
                if len(opening) < _TAKEN_MIN:
                    continue
                if not any(u.startswith(opening) for u in self._user_texts):
                    cut = self._user_cut_from(b.text.strip())
                    if cut is None:
                        return (f"a user message sent after this rewrite ({_short(b.text)!r}) is none the user wrote "
                                "in this conversation (the strategy declares the user messages it keeps are the user's "
                                "own: keeps_user_messages): a summary or a note kept as if the user had typed it?")
                    opening = cut[:USER_OPENING]
                openings.append(opening)
        if self.declared.newest_users and openings:
            # walking back together: the newest kept is the user's newest, the one before it the one before, ...
            written = [u for u in self._user_texts if len(u) >= _TAKEN_MIN]
            for k, opening in enumerate(reversed(openings)):
                if k >= len(written) or not written[len(written) - 1 - k].startswith(opening):
                    theirs = _short(written[len(written) - 1 - k]) if k < len(written) else "none"
                    return (f"the user messages kept after this rewrite are not the newest the user wrote, in order: "
                            f"counting from the newest, kept message {k + 1} opens {opening!r} where the user's message "
                            f"{k + 1} is {theirs!r} (keeps_newest_user_messages: the walk from the oldest, or the kept "
                            "ones reversed?)")
        return ""

    def _user_cut_from(self, text: str) -> str | None:
        """The message the user wrote that ``text`` is, cut in its middle (its start and its end around a notice of
        USER_CUT_NOTICE characters at most: Codex cuts the oldest message it keeps to what its budget has left), or
        None."""
        for u in self._user_texts:
            head = len(os.path.commonprefix([text, u]))
            tail = len(os.path.commonprefix([text[head:][::-1], u[head:][::-1]]))
            if head and tail and len(text) - head - tail <= USER_CUT_NOTICE and head + tail < len(u):
                return u
        return None

    def _older_whole(self, req: Request, results: dict[str, Block]) -> list[str]:
        """The results (by tool_use id) older than the newest declared tool uses, of tools a clearing does not
        exclude, that ``req`` sends whole (as the tool returned them: one may enter already cleared, after a
        resume), of more than a placeholder's characters. Older both by call and by where the result stands: parallel results may come back in another
        order than their calls (context_editing counts calls, SWE-agent's masking the results as they stand)."""
        uses = [(b.id, b.name or "") for m in req.messages if m.role == "assistant" for b in m.blocks if b.type == "tool_use"]
        n, excluded = self.declared.recent_kept, set(self.declared.clears_all_but or ())
        newest = set(list(results)[-n:]) if n else set()
        # a result too short to free anything by clearing (empty: a placeholder is longer) is not judged
        return [i for i, name in (uses[:-n] if n else uses) if name not in excluded and i in results and i not in newest
                and i in self.originals and results[i].text == self.originals[i]
                and len(self.originals[i]) > RESULT_NOTICE_SLACK["chars"]]

    def _cleared_short(self, stream: str, req: Request, results: dict[str, Block], changed: frozenset[str]) -> str:
        """At a request that newly clears results: the older results (beyond the newest declared tool uses by
        call, of tools not excluded) it still sends as they entered, or ``""`` (``clears_all_but_recent``)."""
        fresh_clear = bool(changed - self._changed_before.get(stream, frozenset()))
        self._changed_before[stream] = changed
        if not fresh_clear:
            return ""
        if self.declared.clears_all_but is not None:
            n, old = self.declared.recent_kept, self._older_whole(req, results)
            if old:
                return (f"{len(old)} result(s) older than the newest {n} tool uses (of tool use {old[0]} on) sent whole "
                        f"at a request that clears others: the strategy declares a clearing takes every older one "
                        f"(clears_all_but_recent; keeps_recent_tool_uses {n}): a keep counted in another unit?")
        if self.declared.clears_beyond is not None:
            turns, chars, _ = self.declared.clears_beyond
            old = self._beyond_whole(req, results)
            if old:
                i, before = old[0]
                return (f"{len(old)} result(s) older than the newest {turns} user turns and than the newest {chars:,} "
                        f"characters of tool output before them sent whole at a request that clears others (tool use "
                        f"{i}, with {before:,} characters of whole output between it and those turns): the strategy "
                        "declares a clearing takes every one (clears_all_beyond): a protection counted one turn long, "
                        "or in another unit?")
        return ""

    def _beyond_whole(self, req: Request, results: dict[str, Block]) -> list[tuple[str, int]]:
        """The results ``req`` sends as they entered beyond what the declared clearing leaves (``clears_all_beyond``):
        older than the newest declared user turns (after the Nth newest message the user typed) and than the
        declared characters of whole tool output before them, walking back to the first result already replaced
        (those before it were replaced by an earlier clearing) or a summary, with the characters of whole output between each and
        those turns. A result whose own characters carry the walk past the budget is not judged."""
        turns, chars, excluded = self.declared.clears_beyond
        typed = [k for k, m in enumerate(req.messages) if _typed(m)]
        if turns and len(typed) < turns:
            return []
        start = typed[-turns] if turns else len(req.messages)
        names = _tool_names(req)
        older: list[str] = []   # newest first, back to a summary (what stands before it is not walked)
        for m in reversed(req.messages[:start]):
            if m.meta.get("origin") == "summary":
                break
            older += [b.id for b in reversed(m.blocks) if b.type == "tool_result" and b.id in results]
        total, out = 0, []
        for i in older:
            if names.get(i, "") in excluded or i not in self._as_entered:
                continue
            if results[i].digest != self._as_entered[i]:
                break
            if total > chars and self._entered_chars[i] > RESULT_NOTICE_SLACK["chars"]:
                out.append((i, total))
            total += self._entered_chars[i]
        return out

    def _clear_trigger(self, s: Sent, results: dict[str, Block]) -> str:
        """Against the declared clearing trigger (``clears_above``), judged on the whole prompt (``s``'s true
        tokens with every result and input as it entered, scaled by the strategy's own estimate of ``s`` over its
        truth: what it would estimate the whole prompt at): past it by :data:`CLEAR_TRIGGER_SLACK`, a request that
        still sends an older result (beyond the newest declared tool uses, of a tool not excluded) whole, or
        ``""``."""
        req, trigger = s.request, self.declared.clears_above or 0
        freed = self._freed(req)
        full = s.tokens + sum(freed.values())
        n, old = self.declared.recent_kept, self._older_whole(req, results)
        # as the strategy measures: its estimate of this request over the truth, applied to the whole prompt
        ratio = req.estimated_tokens / s.tokens if req.estimated_tokens and s.tokens else 1.0
        seen = round(full * ratio)
        how = f"{full:,} tokens ({seen:,} as the strategy estimates)" if seen != full else f"{full:,} tokens"
        if seen > trigger * CLEAR_TRIGGER_SLACK and old:
            minimum = self.declared.clear_minimum
            if minimum and not freed and sum(self._count(self.originals[i]) for i in old) < minimum[0] * ESTIMATE_FACTOR:
                return ""   # maybe too little to clear yet, as the strategy estimates it: a clearing is held to its minimum
            if not trigger:
                return (f"{len(old)} result(s) older than the newest {n} tool uses go whole (of tool use {old[0]} on), "
                        f"where the strategy declares every request clears all but the newest {n} (clears_above 0): a "
                        "count of what was cleared carried over from another conversation, or one short?")
            return (f"the whole prompt is {how} (every result as it entered), past the {trigger:,} at which "
                    f"the strategy declares every request clears all but the newest {n} tool uses (clears_above; a "
                    f"factor of {CLEAR_TRIGGER_SLACK} allowed for its estimate), and {len(old)} older result(s) go "
                    f"whole (of tool use {old[0]} on): a trigger measured on the prompt an earlier clearing left, or "
                    "in another unit?")
        # not judged the other way (a clearing under the trigger): the estimate of a request that clears prices its
        # placeholders at the density of what they replaced, and the one before may have had no usage to go by
        # (a correct twin was reported in 2 runs of 3)
        return ""

    def _superseded_alone(self, req: Request) -> list[str]:
        """The results ``req`` sends replaced by the declared "superseded" text with no later call of the same tool
        on the same file whose result goes (not replaced by that text too: as it entered, or as the session answered a
        call it cut off); each tool use reported once."""
        notice = (self.declared.superseded or "").strip()
        reads = [(b.id, b.name, path) for m in req.messages if m.role == "assistant" for b in m.blocks
                 if b.type == "tool_use" and (path := _file_of(b.input))]
        sent = {b.id: b.text for m in req.messages if m.role == "user" for b in m.blocks if b.type == "tool_result"}
        out = []
        for k, (i, name, path) in enumerate(reads):
            if i in self._superseded_lost or sent.get(i, "").strip() != notice:
                continue
            later = [j for j, other, p in reads[k + 1:] if other == name and _same_file(p, path)
                     and j in sent and sent[j].strip() != notice]
            if not later:
                self._superseded_lost.add(i)
                out.append(f"the result of tool use {i} ({name} {path}) is replaced by the text the strategy sends for a "
                           "read a later one supersedes (supersedes_reads), but every later read of that file is replaced "
                           "too, or there is none: the newest read replaced, an older one kept?")
        return out

    def _replaced_again(self, results: dict[str, Block], changed: frozenset[str]) -> list[str]:
        """The results (of ``changed``, those sent changed) sent replaced before and now replaced by another text
        (each reported once)."""
        out = []
        for i, b in results.items():   # in the order they stand (a set's order is the process's hash seed's)
            if i not in changed:
                continue
            first = self._replaced.setdefault(i, (b.digest, b.text))
            if first[0] != b.digest and i not in self._replaced_lost:
                self._replaced_lost.add(i)
                out.append(f"the result of tool use {i}, sent replaced as {_short(first[1])!r}, is now sent replaced as "
                           f"{_short(b.text)!r}: a replacement made again from its own placeholder?")
        return out

    def _changed_warm(self, s: Sent, results: dict[str, Block], changed: frozenset[str], fresh: bool) -> str:
        """A request of the main conversation that changes a result the request before sent as it entered, sooner
        after that request than the declared idle gap (``replaces_only_when_idle``; by half: the cache still
        warm however the gap is read), or ``""``. The first request of a launch is not judged (``fresh``), nor a
        reaction to a refused request (the caller's ``fresh`` too: a request over the window must shrink)."""
        before, self._warm_changed = self._warm_changed, changed
        sent, self._warm_sent = self._warm_sent, frozenset(results)
        at, self._main_at = self._main_at, s.now
        if fresh or at is None or s.rejected:
            return ""
        new = [i for i in changed - before if i in sent]
        gap, cold = s.now - at, self.declared.cold_only or 0.0
        if not new or gap * 2 >= cold:
            return ""
        return (f"changes {len(new)} result(s) it sent before as they entered (tool use {sorted(new)[0]}) {gap:,.0f} s "
                f"after the main conversation's last request, where the strategy declares it changes none before "
                f"{cold:,.0f} s idle (replaces_only_when_idle: the cache is warm, and everything after the first change "
                "is written again): an idle gap measured from the wrong call?")

    def _reads_not_replaced(self, s: Sent, results: dict[str, Block], changed: frozenset[str]) -> str:
        """A request of the main conversation, past the declared idle gap since the one before (``replaces_only_when_idle``:
        twice it, however the gap is read; any gap where none is declared), whose tracked reads sent as they entered
        (``keeps_recent_reads``) come to the declared tokens (``replaces_reads_above``; at the strategy's own rate of
        its text, within CUT_RATE_SLACK) with more of them than the newest it keeps, and that replaces none of them:
        a round that never ran (a gap read in another unit?), or ``""``."""
        at = self._main_at
        cold = self.declared.cold_only or 0.0
        if at is None or s.now - at <= 2 * cold:
            return ""
        req = s.request
        reads = self._tracked_reads(req, results)
        if any(i in changed and i not in self._reads_replaced for i in reads):
            return ""   # a round replaced some
        whole = [i for i in reads if i not in changed]
        n = self.declared.recent_reads[0]
        held = _estimate_rate(req, text_only=True) * sum(len(results[i].text) for i in whole)
        if len(whole) <= n or held <= self.declared.reads_above * CUT_RATE_SLACK:
            return ""
        return (f"request {s.call} of the main conversation comes {s.now - at:,.0f} s after the one before, past the "
                f"{cold:,.0f} s idle the strategy declares a round waits for, with {len(whole)} reads sent whole, about "
                f"{held:,.0f} tokens as it estimates them, past the {self.declared.reads_above:,} at which it declares a "
                "round replaces the oldest (replaces_reads_above), and none replaced: the round never ran (an idle gap "
                "read in another unit?)")

    def _cut_wrong(self, b: Block, tool: str) -> str:
        """How the result ``b`` of ``tool`` entered against the declared cut of its tool (``result_cuts``): whole
        though longer than the cut's characters, or keeping more of what the tool returned from its start or its end
        than the declared shares; ``""`` when as declared (or a read of the strategy's own file). A guard of the
        strategy's own may shorten a result further: only keeping more is judged."""
        cuts = self.declared.result_cuts
        cut = next((c for c in cuts if tool in c[0]), None) or next((c for c in cuts if not c[0]), None)
        original = self.originals[b.id]
        if cut is None or b.text == original and len(original) <= cut[1]:
            return ""
        inp = self.inputs.get(b.id)
        if self._reads_spill(inp) or any(r and r in s for s in _json_strings(dict(inp or {})) for r in self._roots()):
            return ""   # a read of the strategy's own file stays whole (N-SPILL-3)
        tools, n, share = cut
        where = f"tool_result {b.id} ({tool or 'a tool'}, {len(original):,} characters as returned)"
        if len(original) <= n:
            return ""   # a guard of the strategy's own (a cap on a message's results) may still shorten it
        if b.text == original:
            return (f"{where} entered whole, past the {n:,} characters at which the strategy declares it cuts results of "
                    "that tool (result_cuts): a result it did not reach (one of several in a message?)")
        head = int(n * share)
        tail, slack = n - head, RESULT_NOTICE_SLACK["chars"]
        # how much of the returned text's start and end the result keeps (a start may follow a note of the cut's
        # own; a guard of the strategy's may shorten either, never lengthen it)
        at = b.text.find(original[:min(32, head)]) if head else -1
        kept_head = len(os.path.commonprefix([b.text[at:], original])) if at >= 0 else 0
        kept_tail = len(os.path.commonprefix([b.text[::-1], original[::-1]]))
        if kept_head > head + slack or kept_tail > tail + slack:
            return (f"{where} entered cut keeping the first {kept_head:,} and the last {kept_tail:,} characters as "
                    f"returned, where the strategy declares a cut keeps {head:,} from the start and {tail:,} from the "
                    f"end ({share:.0%} of {n:,}; result_cuts): the shares the wrong way round?")
        return ""

    def _head_over(self, b: Block) -> str:
        """A result entering cut that keeps more of the tool's output from its start than the strategy declares
        (``cut_keeps_head``), or ``""``: the head is the longest run of the output's opening that the result holds
        from where its first 64 characters first stand. Or one whose output has no more lines than the declared head
        takes, that keeps its end as well (a tail's lines counted from the whole output, not after the head's)."""
        original = self.originals[b.id]
        at = b.text.find(original[:64]) if original and b.text != original else -1
        if at < 0:
            return ""
        head = original[:len(os.path.commonprefix([b.text[at:], original]))]
        for n, unit in self.declared.head_at_most:
            kept = result_size(head, unit)
            if kept > n + RESULT_NOTICE_SLACK[unit]:
                return (f"tool_result {b.id} entered cut, keeping {kept:,} {unit} of the output's start, over the {n:,} "
                        f"{unit} the strategy declares a cut keeps from it (cut_keeps_head: the head given the "
                        "whole budget, or the shares swapped?)")
            if unit == "lines" and result_size(original, "lines") <= n:
                # the head's lines are every line of the output: a tail can only repeat them
                tail = len(os.path.commonprefix([b.text[::-1], original[::-1]]))
                if tail > CUT_TAIL_SLACK:
                    return (f"tool_result {b.id} entered cut, though its {result_size(original, 'lines'):,} lines are "
                            f"no more than the {n:,} the strategy declares its head takes (cut_keeps_head), and it also "
                            f"keeps the output's last {tail:,} characters: a tail taken from lines the head took (its "
                            "lines not counted after the head's?)")
        return ""

    def _changed_within_left(self, s: Sent, b: Block, tool: str) -> str:
        """A result of the declared tools entering changed though within the characters the strategy declares it keeps
        whole (``keeps_results_whole_left``): its cap, and the characters a token of the room the window had left after
        the main conversation's last answered request (not judged where that is unknown: a launch's first request, after
        a span)."""
        cap, cpt, tools = self.declared.whole_left  # type: ignore[misc]
        original = self.originals[b.id]
        if b.text == original or tools is not None and tool not in tools:
            return ""
        limit = cap
        if cpt is not None:
            if self._left_after is None:
                return ""
            limit = min(cap, int(cpt * max(0, s.window - self._left_after)))
        if len(original) > limit:
            return ""
        room = "" if cpt is None else (f" (the least of {cap:,} and {cpt:g} a token of the {s.window - self._left_after:,} "
                                       f"tokens the window had left after the last request's {self._left_after:,})")
        return (f"tool_result {b.id} ({tool or 'a tool'}, {len(original):,} characters) entered changed "
                f"({_short(b.text)!r}), though within the {limit:,} the strategy declares it keeps whole{room} "
                "(keeps_results_whole_left: a threshold converted the wrong way?)")

    def _changed_under(self, m: Message, b: Block) -> str:
        """A result entering changed though it and its message's results are within what the strategy declares it
        keeps whole (``keeps_results_whole``), or ``""``. The message's results count as they stand once those over
        the per-result size are replaced (NovaCode's N-SPILL-2 budget is met after N-SPILL-1 spilled them): a result
        over it at what it was sent as, the others as the tool returned them."""
        per_result, per_message = self.declared.whole_under  # type: ignore[misc]
        original = self.originals[b.id]

        def counted(x: Block) -> int:
            was = self.originals.get(x.id, x.text)
            return len(x.text) if len(was) > per_result else len(was)

        total = sum(counted(x) for x in m.blocks if x.type == "tool_result")
        if b.text == original or len(original) > per_result or total > per_message:
            return ""
        return (f"tool_result {b.id} entered changed ({_short(b.text)!r}), though its {len(original):,} characters and "
                f"its message's {total:,} (those over {per_result:,} as sent) are within the {per_result:,} and "
                f"{per_message:,} the strategy declares it keeps whole (keeps_results_whole: a threshold or a budget "
                "read in another unit, the budget counted before the results over the threshold were replaced?)")

    def _spilled_not_largest(self, entering: list[tuple[Message, Block]]) -> list[str]:
        """Per message, a result entering whole (a read of the strategy's own file apart) longer than one of the same
        message entering replaced (``spills_largest_first``), or nothing."""
        by_message: dict[int, list[Block]] = {}
        for m, b in entering:
            by_message.setdefault(id(m), []).append(b)
        out = []
        for blocks in by_message.values():
            replaced = [b for b in blocks if b.text != self.originals[b.id]]
            whole = [b for b in blocks if b.text == self.originals[b.id] and not self._reads_spill(self.inputs.get(b.id))]
            if not replaced or not whole:
                continue
            big = max(whole, key=lambda b: len(b.text))
            small = min(replaced, key=lambda b: len(self.originals[b.id]))
            if len(big.text) > len(self.originals[small.id]):
                out.append(f"tool_result {big.id} entered whole at {len(big.text):,} characters while {small.id} of the same "
                           f"message, {len(self.originals[small.id]):,}, entered replaced: the strategy declares a message "
                           "over its budget gives up its largest results first (spills_largest_first: sorted the wrong "
                           "way?)")
        return out

    def _recent_turns_changed(self, req: Request, results: dict[str, Block]) -> list[str]:
        """The results of the newest declared user turns (after the Nth newest message the user typed: no tool
        results, no origin of the strategy's own) that differ from what they were when they entered."""
        n = self.declared.recent_turns
        typed = [k for k, m in enumerate(req.messages) if _typed(m)]
        start = typed[-n] if len(typed) >= n else 0
        out = []
        for m in req.messages[start:]:
            for b in m.blocks:
                if b.type == "tool_result" and b.id in results and b.id not in self._recent_lost \
                        and b.digest != self._as_entered[b.id]:
                    self._recent_lost.add(b.id)
                    out.append(f"the result of tool use {b.id}, in one of the newest {n} user turns whose tool results the "
                               f"strategy declares it keeps (keeps_recent_turns), is sent changed ({_short(b.text)!r}): "
                               "the turns counted one short?")
        return out

    def _summary_twice(self, req: Request) -> str:
        """A summary request that takes in an earlier summary's whole text twice or more (a fold that starts at the
        previous summary where it passes it apart: it is summarised again, and the requests grow at each
        compaction). Each summary reported once."""
        joined = "\n".join(_texts(req))
        for sm in [*self._summaries, *(w for w, _ in self._in_window)]:
            t = sm.text.strip().removesuffix("</summary>").strip()
            if len(t) >= SUMMARY_TWICE_CHARS and not sm.sent_twice and joined.count(t) >= 2:
                sm.sent_twice = True
                return (f"the summary made at call {sm.call} ({_short(t)!r}) is sent {joined.count(t)} times in this "
                        "summary request: the messages folded in start at the previous summary, where it is passed "
                        "apart too (an off-by-one in the fold?)")
        return ""

    def _tracked_reads(self, req: Request, results: dict[str, Block]) -> list[str]:
        """The results of ``req`` (by tool_use id, where each stands) of the tools the strategy declares it tracks
        (``keeps_recent_reads``) that entered at its least characters or more."""
        _, tools, least = self.declared.recent_reads
        names = _tool_names(req)
        return [i for i in results if (tools is None or names.get(i, "") in tools) and self._entered_chars[i] >= least]

    def _reads_left_over(self, req: Request, results: dict[str, Block], changed: frozenset[str], excused: bool) -> str:
        """A request that newly replaced tracked reads (``replaces_reads_to``) and still sends some older than the
        newest it keeps whole, while the whole ones come to more than the declared tokens (at the rate of the
        strategy's own estimate of ``req``, by the kit's factor for estimates): the round stopped short. Or where the
        reads still whole and the newest it replaced come to no more than the declared tokens (at that rate, within
        CUT_RATE_SLACK): the round went on past its budget. Or where a read older than the newest it replaced, not among
        the newest it keeps, is still whole: the round did not take the oldest first."""
        n = self.declared.recent_reads[0]
        reads = self._tracked_reads(req, results)
        newly = [i for i in reads if i in changed and i not in self._reads_replaced]
        self._reads_replaced.update(i for i in reads if i in changed)
        if excused or not newly or not req.estimated_tokens:
            return ""
        whole = [i for i in reads if i not in changed]
        older = whole[:-n] if n else whole
        # the oldest first: a read older than the newest it replaced, not among the newest it keeps, still whole
        at = {i: k for k, i in enumerate(reads)}
        skipped = [i for i in older if at[i] < max(at[j] for j in newly)]
        if skipped:
            return (f"the request replaced {len(newly)} read(s), the newest {newly[-1]}, and sends {skipped[0]}, older and "
                    f"not among the newest {n} it keeps, whole: the strategy declares a round replaces the oldest "
                    "(replaces_reads_to: the reads walked newest first, or some it took left whole?)")
        rate = _estimate_rate(req)
        # the round replaces the oldest while what is left passes the budget: before it took the newest it replaced,
        # what was left (the reads still whole and that one) passed it
        last = newly[-1]
        needed = rate * (sum(len(results[i].text) for i in whole) + self._entered_chars[last])
        if needed * CUT_RATE_SLACK <= self.declared.reads_to:
            # sized at the strategy's own rate (one rate for all its text), within the slack a rebased rate moves by
            return (f"the request replaced {len(newly)} read(s), the newest {last}, and sends {len(whole)} whole: those "
                    f"and it come to about {needed:,.0f} tokens as the strategy estimates, within the "
                    f"{self.declared.reads_to:,} the strategy declares a replacement leaves (replaces_reads_to; "
                    f"{CUT_RATE_SLACK:g} times allowed for its rate): the round went on past its budget (what it took "
                    "never counted down?)")
        if not older:
            return ""
        left = rate * sum(len(results[i].text) for i in whole)
        if left <= self.declared.reads_to * ESTIMATE_FACTOR:
            return ""
        return (f"the request replaced {len(newly)} read(s) and sends {len(whole)} whole, about {left:,.0f} tokens as the "
                f"strategy estimates (of {older[0]} on, {len(older)} older than the newest it keeps), past the "
                f"{self.declared.reads_to:,} the strategy declares a replacement leaves (replaces_reads_to; a factor of "
                f"{ESTIMATE_FACTOR} allowed): reads it took as replaced still whole (one per message?)")

    def _recent_reads_changed(self, req: Request, results: dict[str, Block], excused: bool) -> list[str]:
        """The newest declared number of results (by where each stands) of the declared tools that entered at the
        declared characters or more, that differ from what they were when they entered (once per tool use; one
        changed in an ``excused`` request is not judged again)."""
        n, tools, least = self.declared.recent_reads
        reads = self._tracked_reads(req, results)
        out = []
        for i in reads[-n:] if n else ():
            b = results[i]
            if i not in self._recent_lost and b.digest != self._as_entered[i]:
                self._recent_lost.add(i)
                if excused:
                    continue
                out.append(f"the result of tool use {i}, one of the newest {n} results of {', '.join(tools) if tools else 'any tool'} "
                           f"of {least:,} characters or more the strategy declares it keeps (keeps_recent_reads), is sent "
                           f"changed ({_short(b.text)!r}): the oldest protected instead of the newest?")
        return out

    def _recent_chars_changed(self, results: dict[str, Block]) -> list[str]:
        """The results (by tool_use id, in the order they stand) within the declared characters of the newest
        tool output, walking back, that differ from what they were when they entered (once per tool use)."""
        budget, total, out = self.declared.recent_chars, 0, []
        for i in reversed(list(results)):
            total += self._entered_chars[i] + RECENT_CHARS_SLACK
            if total > budget:
                break
            b = results[i]
            if i not in self._recent_lost and b.digest != self._as_entered[i]:
                self._recent_lost.add(i)
                out.append(f"the result of tool use {i}, within the newest {budget:,} characters of tool output the "
                           f"strategy declares it keeps (keeps_recent_tool_chars; {total:,} from the newest through it), "
                           f"is sent changed ({_short(b.text)!r}): a protection counted in another unit?")
        return out

    def _recent_changed(self, req: Request, results: dict[str, Block]) -> list[str]:
        """The results (``results``, by tool_use id) of the newest declared number of tool uses in ``req`` that
        differ from what they were when they entered the main conversation (once per tool use)."""
        uses = [b.id for m in req.messages if m.role == "assistant" for b in m.blocks if b.type == "tool_use"]
        n = self.declared.recent_kept
        # "newest" in both orders: parallel results may come back in another order than their calls, and a
        # strategy may count either (context_editing counts calls; SWE-agent's masking and Claude Code's
        # microcompact count results as they stand): a result is held only where the two agree
        newest = set(list(results)[-n:])
        out = []
        for i in (u for u in uses[-n:] if u in newest):
            b = results.get(i)
            if b is not None and i not in self._recent_lost and b.digest != self._as_entered[i]:
                self._recent_lost.add(i)
                out.append(f"the result of tool use {i}, one of the newest {n} the strategy declares it keeps "
                           f"(keeps_recent_tool_uses), is sent changed ({_short(b.text)!r})")
        return out

    def _claimed_files(self, req: Request) -> list[str]:
        """A strategy that promises no path back is still held to the one its placeholders claim: a
        tool result sent replaced whose text names a file in the run's directory (its own files) names
        one that exists and holds the result whole, for as long as the placeholder is sent."""
        if self.session_dir is None:
            return []
        out = []
        roots = self._roots()
        for m in req.messages:
            if m.role != "user":
                continue
            for b in m.blocks:
                if b.type != "tool_result" or b.id in self._lost or b.id not in self.originals:
                    continue
                key = (b.id, b.digest)
                named = self._claims.get(key)
                if named is None:
                    original = self.originals[b.id]
                    named = () if b.text == original or not any(r in b.text for r in roots) else tuple(dict.fromkeys(
                        Path(x) for x in (mt.group(0).rstrip(".,;:)") for mt in _PATHS.finditer(b.text))
                        if x.startswith(roots) and (Path(x).suffix or Path(x).is_file())))
                    self._claims[key] = named
                    bare = None if named or b.text == original else self._bare_name(b.text, original)
                    if bare is not None:
                        self._lost.add(b.id)
                        out.append(f"tool_result {b.id} sent replaced ({len(original):,} -> {len(b.text):,} chars) "
                                   f"naming the file that holds it by its bare name {bare.name!r}, which the agent, "
                                   f"working in the project folder, cannot open (the file is {bare}): "
                                   f"{_short(b.text)!r}")
                        continue
                if not named:
                    continue
                original = self.originals[b.id]
                whys = [self._files.still_holds(f, original) for f in named]
                if all(whys):
                    self._lost.add(b.id)
                    out.append(f"tool_result {b.id} sent replaced ({len(original):,} -> {len(b.text):,} chars) naming "
                               f"{named[0]}, which does not hold the result: {whys[0]} ({_short(b.text)!r})")
        return out

    def _bare_name(self, text: str, original: str) -> Path | None:
        """A file of the run directory that holds ``original`` and that ``text`` names by its bare file
        name only, where the project folder (the agent's working folder) has no such file: a path back
        the agent cannot follow. Run once per placeholder (``_claims`` caches the rest)."""
        assert self.session_dir is not None
        names = {t for t in _FILE_NAMES.findall(text) if "/" not in t and "\\" not in t}
        if not names:
            return None
        project = home_and_project(self.session_dir)[1]   # the agent's working folder
        for p in sorted(self.session_dir.rglob("*")):
            # the project's own files (a source file a Read returned) are not the strategy's
            if p.name in names and project not in p.parents and p.is_file() and not (project / p.name).is_file() \
                    and self._files.holding(original, [p]) is not None:
                return p
        return None

    def _reads_spill(self, tool_input) -> str | None:
        if not tool_input or not self.spills:
            return None
        for s in _json_strings(dict(tool_input)):
            for path in self.spills:
                p = Path(path)
                tail = f"{p.parent.name}/{p.name}"
                t = s.replace("\\", "/")
                if s == path or t.endswith("/" + tail) or t == tail or t.endswith(" " + tail):
                    return path
        return None

    def _placeholders_hold(self, req: Request) -> list[str]:
        """A placeholder still in the window names a file that still holds its result."""
        if not self._held:
            return []
        out = []
        for m in req.messages:
            if m.role != "user":
                continue
            for b in m.blocks:
                if b.type != "tool_result" or b.id not in self._held or b.id in self._lost:
                    continue
                original = self.originals.get(b.id, "")
                if b.text == original:
                    continue
                why = self._files.still_holds(self._held[b.id], original)
                if why:
                    self._lost.add(b.id)
                    out.append(f"the placeholder of tool_result {b.id} is still in the window, but the file it "
                               f"names ({self._held[b.id]}) no longer holds the result: {why}")
        return out

    # --- what left the window ----------------------------------------------------------------------
    def _held_summaries(self, req: Request, every: bool = False) -> list[_Summary]:
        """The summaries made since the last main request whose text ``req`` holds (their probe); ``every``:
        those made since the last accepted one (a refused request between) and those already in the window too."""
        pool = ([*(w for w, _ in self._in_window), *self._since_accepted] if every else self._summaries)
        if not pool:
            return []
        texts = [b.text for m in req.messages for b in m.blocks if b.type in ("text", "tool_result")]
        return [sm for sm in pool if (probe := _summary_probe(sm.text)) and any(probe in t for t in texts)]

    def _unsummarised(self, prev: Sent, req: Request) -> list[str]:
        """What left the main window since ``prev`` with no summary ``req`` holds having taken it in
        (``summarised``): the session's texts, summaries, and tool results whose id is gone; taken in as
        a block, by its id (a result in whatever form the strategy sent it), or as its opening in the
        transcript the strategy rendered for the summariser."""
        before = prev.request
        if _continues(before, req):
            return []
        now = {b.digest for m in req.messages for b in m.blocks}
        ids = {b.id for m in req.messages for b in m.blocks if b.type in ("tool_use", "tool_result")}
        held = self._held_summaries(req, every=True)
        out = []
        for m in before.messages:
            for b in m.blocks:
                if b.digest in now or len(b.text.strip()) < _TAKEN_MIN:
                    continue   # a text this short is in any transcript: what took it in cannot be told
                if b.type == "tool_result" and b.id in self.originals and b.id not in ids:
                    what = f"the result of tool use {b.id}"
                elif b.type == "text" and (b.digest in self.trace_digests or m.meta.get("origin") == "summary"):
                    what = "a summary" if m.meta.get("origin") == "summary" else f"{m.role} text"
                else:
                    continue   # cleared in place, or text the strategy added to a request
                if any(sm.took_in(b, results=True) for sm in held):
                    continue
                out.append(f"{what} {_short(b.text)!r}, in request {prev.call}, left the main window and no summary "
                           "the request holds took it in (the strategy declares that what it drops goes into a summary "
                           "first: summarises_dropped)")
                if len(out) >= 3:
                    return out
        return out

    def _left_window(self, prev: Request, req: Request) -> list[str]:
        if _continues(prev, req):
            return []
        now = {b.digest for m in req.messages for b in m.blocks}
        results_now = {b.id: b for m in req.messages for b in m.blocks if b.type == "tool_result"}
        covered: set[bytes] = set()
        for sm in self._held_summaries(req):
            covered |= sm.inputs
        named: list[Path] | None = None
        out = []
        for m in prev.messages:
            for b in m.blocks:
                if b.digest in now or b.digest in covered or b.type not in ("text", "tool_result"):
                    continue
                if b.type == "tool_result":
                    if b.id not in self.originals:
                        continue  # a result the strategy made (a crash's synthetic answer)
                    content = self.originals[b.id]
                    kept = results_now.get(b.id)
                    if kept is not None and (kept.text == content or self._names_holder(kept.text, content)):
                        continue  # re-rendered, and what it names still holds the result
                elif b.digest in self.trace_digests or m.meta.get("origin") == "summary":
                    content = b.text
                else:
                    continue  # text the strategy added to a request; it never entered the session
                if not content.strip():
                    continue
                if named is None:
                    named = []
                    for rm in req.messages:
                        for rb in rm.blocks:
                            if rb.type in ("text", "tool_result"):
                                named.extend(p for p in self._files.named_in(rb.text) if p not in named)
                if self._files.holding(content, named) is not None:
                    continue
                if b.type == "tool_result" and b.text != content and self._files.holding(b.text, named) is not None \
                        and b.id in self._held and not self._files.still_holds(self._held[b.id], content):
                    continue  # a file named holds the placeholder, whose own file holds the result
                what = f"tool_result {b.id}" if b.type == "tool_result" else f"{m.role} text"
                out.append(f"{what} {_short(b.text)!r} left the window with no summary of it "
                           "and no file named in the request holding it")
                if len(out) >= 3:
                    return out
        return out

    def _kept_tail(self, before: Request, req: Request) -> _Tail | None:
        """What a compaction kept verbatim after the summary ``req`` holds (a cut with none: after the strategy's own
        last message of text, its note), or None where ``req`` is neither: the conversation's messages after it
        (those ``before`` sent, a result cut or cleared since found by its call, and those come since; a message the
        strategy added apart), in the conversation of ``before``'s messages and those come since (as the engine gave
        them, and as the tail holds them)."""
        probes = [p for sm in self._held_summaries(req) if (p := _summary_probe(sm.text))]
        msgs = list(req.messages)
        at = max((i for i, m in enumerate(msgs) for b in m.blocks
                  if b.type in ("text", "tool_result") and any(p in b.text for p in probes)), default=-1)
        if at < 0 and self._summaries:
            return None   # a summary made and not held (summary_used judges it)
        conv = _with_appended(before, self._appended)
        index = {_message_key(m): i for i, m in enumerate(conv)}
        after = "its summary"
        if at < 0:
            # a cut with no summary, where the request left some of the conversation out: what stands after the
            # strategy's own last message of text (its note of the cut; a result it made up for a call is no note);
            # with no note, after the gap: the newest messages it holds in a row as the conversation had them
            sent = {_message_key(m) for m in msgs}
            if all(_message_key(m) in sent for m in conv):
                return None
            after = "its note of the cut"
            at = max((i for i, m in enumerate(msgs) if m.meta.get("origin") and not _answers_or_calls(m)), default=-1)
            if at < 0:
                after, at = "the gap of the cut", len(msgs) - 1 - _in_a_row(msgs, conv)
                if at < 0:
                    return None
        tail: list[Message] = []
        for m in msgs[at + 1:]:
            key = _message_key(m)
            if m.meta.get("origin") and (key not in index or not _answers_or_calls(m)):
                continue   # the strategy's own (an attachment, a note, one it sent before): not the conversation's
            if key not in index:
                index[key] = len(conv)
                conv.append(m)
            tail.append(m)
        if not tail:
            return _Tail(tail, conv, len(conv), after)
        # where the tail starts: the newest place the conversation holds it in a row (two messages alike, a repeated
        # answer, share a key: the index alone names the later one)
        keys = [_message_key(m) for m in tail]
        start = next((p for p in range(len(conv) - len(tail), -1, -1)
                      if all(_message_key(conv[p + k]) == keys[k] for k in range(len(tail)))), index[keys[0]])
        return _Tail(tail, conv, start, after)

    def _tail_wrong(self, before: Request, s: Sent) -> str:
        """What a compaction kept verbatim (:meth:`_kept_tail`) strays from what the strategy declares
        (``compaction_tail``, ``compaction_tail_shortest``), or ``""``."""
        req = s.request
        found = self._kept_tail(before, req)
        if found is None:
            return ""
        tail, conv, start, after_what = found
        # the messages before the tail, back to one that answers no call (a pair stays whole), over the strategy's own
        # that make or answer none (memories it recalled between a call's results and the tail are never the tail)
        ext = start - 1
        while ext > 0 and (any(b.type == "tool_result" for b in conv[ext].blocks)
                           or conv[ext].meta.get("origin") and not _answers_or_calls(conv[ext])):
            ext -= 1
        wider = conv[max(ext, 0):start] + tail
        if self.declared.tail_under_window and self._tail_size(conv, "tokens") * ESTIMATE_FACTOR >= s.window:
            return ""   # a conversation near the window (its true tokens by the kit's factor for estimates) is cut to fit
        after = list(itertools.accumulate(self._tail_size([m], "json_chars") for m in reversed(conv)))[::-1]
        total = (after[0] if after else 0) or 1   # after[i]: the JSON characters of conv[i:]

        # tokens as the strategy sizes them are its own estimate: of a least, judged in true tokens by the kit's factor
        # for estimates (where it estimates this request higher than the truth, it may have seen the tail larger yet);
        # of a cap, and of a tail longer than it needed, by what any estimate counts at the least: its characters at
        # TAIL_MAX_CPT a token (a rate measured on the conversation runs far under a denser tail)
        ratio = req.estimated_tokens / s.tokens if req.estimated_tokens and s.tokens else 1.0

        def size(ms: list[Message], unit: str) -> float:
            return self._tail_size(ms, "json_chars") / total if unit == "share" else self._tail_size(ms, unit)

        def least_seen(ms: list[Message], unit: str) -> float:
            """What the strategy's own measure of ``ms`` is at least."""
            return sum(m.chars for m in ms) / TAIL_MAX_CPT if unit == "tokens" else size(ms, unit)

        def seen_over(ms: list[Message], unit: str, most: float) -> bool:
            """The strategy may have seen ``ms`` past ``most``: in tokens, by the kit's factor for estimates over its
            own estimate's ratio, or at the densest rate the conversation grew by (a rate calibrated on the growth
            between two usages counts a message at it: NovaCode's came to a token a character after a result of CJK
            text, and a tail of mixed text was then over its cap); or, counted at no more characters a token than the
            conversation measured (``compaction_tail_calibrated``), at that rate."""
            if unit != "tokens":
                return size(ms, unit) > most
            chars = sum(m.chars for m in ms)
            measured = chars / self._measured_cpt if self.declared.tail_calibrated and self._measured_cpt else 0.0
            return max(size(ms, unit) * ESTIMATE_FACTOR * max(1.0, ratio), chars * self._densest, measured) > most

        for least, most, unit in self.declared.tail:
            kept = size(tail, unit)
            shown = f"{kept:.0%} of the conversation's JSON characters" if unit == "share" else f"{kept:,.0f} {unit}"
            if least and unit == "turns":
                # the newest turns whole: where fewer are kept than the conversation holds (up to the least), the turns
                # wanted (from the least-th newest message the user typed) must leave something before them to
                # summarise, and fit every cap
                typed = [i for i, m in enumerate(conv) if _typed(m)]
                want = min(int(least), len(typed))
                need = typed[-want] if want else 0
                if kept < want and need > 0 and not self._appended_mixed and not any(
                        m is not None and seen_over(conv[need:], u, m) for _, m, u in self.declared.tail):
                    return (f"the compaction kept {len(tail)} messages verbatim after {after_what}, {kept} of the "
                            f"conversation's turns, under the {want} newest the strategy declares it keeps, which "
                            f"would have fit every cap it declares (compaction_tail: the turns tried the wrong way "
                            "round, one turn short?)")
                least = 0   # judged here
            if most is not None and least_seen(tail, unit) > most * TAIL_MOST_SLACK[unit]:
                if unit != "share" or any(m.role == "user" and not any(b.type == "tool_result" for b in m.blocks)
                                          and after[i] <= most * total for i, m in enumerate(conv)):
                    cap = f"{most:.0%}" if unit == "share" else f"{most:,.0f} {unit}"
                    if unit == "tokens":
                        shown = (f"{sum(m.chars for m in tail):,} characters (at least {least_seen(tail, unit):,.0f} "
                                 f"tokens at {TAIL_MAX_CPT:g} a token)")
                    return (f"the compaction kept {len(tail)} messages verbatim after {after_what}, {shown}, over the "
                            f"{cap} the strategy declares it keeps at most (compaction_tail)")
            if (most is not None and unit == "tokens" and self.declared.tail_calibrated and self._measured_cpt
                    and not self._spans and sum(m.chars for m in tail) / self._measured_cpt > most * TAIL_CALIBRATED_SLACK):
                chars = sum(m.chars for m in tail)
                return (f"the compaction kept {len(tail)} messages verbatim after {after_what}, {chars:,} characters: "
                        f"{chars / self._measured_cpt:,.0f} tokens at the {self._measured_cpt:.2f} characters a token the "
                        f"conversation measured on its last answered request, over the {most:,.0f} tokens the strategy "
                        "declares it keeps at most, counted at no more characters a token than that "
                        "(compaction_tail_calibrated: the tail sized at a fixed rate?)")
            if least and self.declared.tail_walked:
                detail = self._walk_strayed(req, tail, conv, ext, start, least, unit, after_what, seen_over)
                if detail:
                    return detail
                continue
            if least and kept * TAIL_LEAST_SLACK[unit] < least and start > 0 and not self._appended_mixed and not any(
                    m is not None and seen_over(wider, u, m) for _, m, u in self.declared.tail):
                return (f"the compaction kept {len(tail)} messages verbatim after {after_what}, {shown}, under the "
                        f"{least:,.0f} {unit} the strategy declares it keeps at least, though the conversation held "
                        f"{start} messages before them that no declared cap kept out (compaction_tail: a budget read "
                        "in another unit, a cut moved past the newest?)")
        if self.declared.tail_shortest and len(tail) > 1:
            # without its oldest message and the results that answer it, the tail still holds every least as any
            # estimate counts it: it kept more than it needed
            first = 1
            while first < len(tail) and any(b.type == "tool_result" for b in tail[first].blocks):
                first += 1
            shorter = tail[first:]
            if shorter and all(least_seen(shorter, unit) >= least for least, _, unit in self.declared.tail):
                held = ", ".join(f"{least_seen(shorter, u):,.0f} {u}" for _, _, u in self.declared.tail if u != "share")
                if any(u == "tokens" for _, _, u in self.declared.tail):
                    held += f"; tokens at {TAIL_MAX_CPT:g} characters a token"
                return (f"the compaction kept {len(tail)} messages verbatim after {after_what}, where the newest "
                        f"{len(shorter)} already hold every least it declares ({held}): the tail is declared the "
                        "shortest that holds them "
                        "(compaction_tail_shortest: a least read as another, the walk not stopped?)")
        return ""

    def _not_reinjected(self, req: Request, compacted: bool) -> str:
        """The first main request after a compaction (a summary made since the last one, used by a rewrite) holds no
        message of an origin the strategy declares it injects again (``reinjects_after_compaction``), though the
        conversation was sent one before; then the origins ``req`` holds noted."""
        held = {m.meta.get("origin") for m in req.messages} & set(self.declared.reinjects)
        missing = sorted(self._reinject_seen - held) if compacted else []
        self._reinject_seen |= held
        if not missing:
            return ""
        return (f"the first request after a compaction holds no message of origin {', '.join(map(repr, missing))}, which "
                "the conversation was sent before and the strategy declares a compaction injects again "
                "(reinjects_after_compaction: its markers not reset, N-COMP-12?)")

    def _track_read(self, m: Mark) -> None:
        """The main conversation's reads, for ``restores_recent_reads``: a read call's path (the first of the declared
        input keys), the last read answered without an error; a launch starts anew, a resume or a read in a span
        leaves the last unknown until the main conversation reads again."""
        if m.what == "session_start":
            self._read_calls.clear()
            if not m.resume:
                self._read_paths.clear()
                self._sub_read_paths.clear()
            self._last_read = None
            return
        if m.what != "message" or m.message is None:
            return
        _, tools, keys = self.declared.restores
        for b in m.message.blocks:
            if b.type == "tool_use" and b.name in tools and b.id:
                path = next((v for k in keys if isinstance(v := (b.input or {}).get(k), str) and v), None)
                if path and self._spans:   # in a span: an isolated sub-agent's read is not the parent's; one in the
                    self._span_reads[b.id] = (path, any(self._spans))   # main context is, the last one not known
                    self._last_read = None
                elif path:
                    self._read_calls[b.id] = path
            elif b.type == "tool_result" and b.id in self._read_calls:
                path = self._read_calls.pop(b.id)
                if not b.is_error:
                    self._last_read, self._last_read_id = path, b.id
                    self._read_paths.add(path)
                    self._sub_read_paths.discard(path)
            elif b.type == "tool_result" and b.id in self._span_reads:
                path, isolated = self._span_reads.pop(b.id)
                if b.is_error:
                    continue
                if not isolated:
                    self._read_paths.add(path)
                    self._sub_read_paths.discard(path)
                elif path not in self._read_paths:
                    self._sub_read_paths.add(path)

    def _not_restored(self, req: Request) -> str:
        """The first request after a compaction holds an attachment (a message of origin "restore") that names a file
        the main conversation read but not the one it read last (``restores_recent_reads``), or ``""``."""
        last = self._last_read
        attached = "\n".join(m.text for m in req.messages if m.meta.get("origin") == "restore")
        alien = sorted(p for p in self._sub_read_paths if _on_a_line(p, attached))
        if alien:
            return (f"the attachment after this compaction restores {alien[0]!r}, which only an isolated sub-agent read "
                    "(its own context, gone when it ended), where the strategy declares it restores the files the "
                    "conversation read most recently (restores_recent_reads: a sub-agent's reads kept by the parent's "
                    "tracker?)")
        if last is None or not attached:
            return ""
        if last in attached:
            return self._restored_short(last, attached)
        others = sorted(p for p in self._read_paths if p != last and p in attached)
        if not others:
            return ""
        n = self.declared.restores[0]
        return (f"the attachment after this compaction restores {others[0]!r}{f' and {len(others) - 1} more' if len(others) > 1 else ''} "
                f"but not {last!r}, the file the conversation read last, where the strategy declares it restores the "
                f"{n} read most recently (restores_recent_reads: a re-read file kept at its first read, a list walked "
                "the wrong way?)")

    def _restored_short(self, last: str, attached: str) -> str:
        """The attachment names the file read last on a line of its own (a section's heading) but does not hold the
        opening of what that read returned, to the least the strategy declares (``restores_file_chars``), or ``""``."""
        least = self.declared.restore_chars
        content = self.originals.get(self._last_read_id or "")
        if not least or not content or not _on_a_line(last, attached):
            return ""
        opening = content[:least]
        if opening in attached:
            return ""
        return (f"the attachment after this compaction names {last!r}, the file the conversation read last, without the "
                f"opening of what that read returned ({_short(opening, 60)!r}, the {len(opening):,} characters the "
                "strategy declares a restored file holds at least: restores_file_chars): a placeholder or a preview "
                "restored in place of the file?")

    def _every_mark(self, m: Mark) -> None:
        """What ends or suspends the count of a declared periodic side call (``writes_every``): a launch or a resume
        (the strategy's count is its own to restore), a span (a sub-agent counts apart), an answer that calls the
        declared tool (the recorded agent keeps its own); a message the user typed excuses one that comes early."""
        tool = self.declared.writes_every[2]
        if m.what in ("session_start", "subtask_start", "subtask_end"):
            self._every_since = None
        elif m.what == "user" and not self._spans:
            self._every_user = True
        elif (m.what == "message" and m.message is not None and m.message.role == "assistant"
              and any(b.type == "tool_use" and b.name == tool for b in m.message.blocks)):
            self._every_stopped = True

    def _every_side(self) -> str:
        """A declared periodic side call (``writes_every``) made before ``n`` answered main requests since the last
        one, no message typed since (early), or after more (late: judged at the main request, :meth:`_every_main`)."""
        kind, n, _ = self.declared.writes_every
        since, typed = self._every_since, self._every_user
        self._every_since, self._every_user = (None if self._spans else 0), False
        if since is None or self._every_stopped or self._spans or since >= n or typed:
            return ""
        return (f"a {kind} call after {since} answered request(s) of the main conversation since the last, none typed by "
                f"the user since: the strategy declares one every {n} (writes_every: a count reset at the wrong moment, "
                "or compared one off?)")

    def _every_main(self, s: Sent) -> str:
        """A main request sent after ``n`` answered ones since the declared periodic side call with none made (late),
        reported once a cycle; then this one counted, if answered."""
        kind, n, _ = self.declared.writes_every
        since = self._every_since
        if since is None or self._every_stopped:
            return ""
        if since >= n:
            self._every_since = None   # once a cycle: the next one is judged after the next call
            return (f"request {s.call} of the main conversation is sent after {since} answered since the last {kind} "
                    f"call, with none made: the strategy declares one every {n} (writes_every: compared one off, or a "
                    "count not reset?)")
        if not s.rejected and not s.error:
            self._every_since = since + 1
        return ""

    def _not_whole(self, req: Request) -> str:
        """An estimate the strategy declares is the whole request's size (``estimates_whole``) that is not, beyond
        ESTIMATE_WHOLE_SLACK (the same characters, rounded another way), or ``""``."""
        cpt, unit = self.declared.estimates_whole
        if req.estimated_tokens is None:
            return ""
        prompt = _prompt_chars(req)
        chars, want = self._whole_estimate(req, cpt, unit)
        if abs(req.estimated_tokens - want) <= max(ESTIMATE_WHOLE_SLACK * want, 2):
            return ""
        return (f"the strategy estimated {req.estimated_tokens:,} tokens where it declares its estimate is the whole "
                f"request's {chars:,} {'JSON characters' if unit == 'json_chars' else 'characters'} (system prompt and "
                f"tools {prompt:,}) over {cpt:g} a token{f' and {req.system.opaque_tokens:,} opaque' if req.system.opaque_tokens else ''}: "
                f"{want:,} (estimates_whole: a part left out, the text counted where the JSON is, a stale figure?)")

    def _whole_estimate(self, req: Request, cpt: float, unit: str) -> tuple[int, int]:
        """The whole request's characters (its system prompt and tools, its messages in ``unit``: characters or JSON
        characters) and an estimate of them at ``cpt`` a token, rounded up, with the opaque prefix's tokens."""
        chars = _prompt_chars(req) + self._tail_size(list(req.messages), unit)
        return chars, req.system.opaque_tokens + math.ceil(chars / cpt)

    def _not_from_usage(self, req: Request, anchor: tuple[Request, int] | None, first: bool) -> str:
        """An estimate the strategy declares is its last answered main request's usage (its input and the answer's
        output tokens) and the characters of the messages come after the answer over a rate (``estimates_from_usage``)
        that is not, by more than a token of rounding; judged on a request that continues that one (no rewrite, no
        launch, span or side call since), and on the run's first (the whole request at that rate, within
        FIRST_ESTIMATE_SLACK), or ``""``."""
        if req.estimated_tokens is None:
            return ""
        cpt = self.declared.from_usage
        if first and anchor is None:
            # the run's first request, nothing measured yet: the whole request at that rate
            chars, want = self._whole_estimate(req, cpt, "chars")
            if abs(req.estimated_tokens - want) <= max(1, FIRST_ESTIMATE_SLACK * want):
                return ""
            return (f"the strategy estimated {req.estimated_tokens:,} tokens where, with no usage yet, it declares its "
                    f"estimate is the whole request's {chars:,} characters (system prompt and tools "
                    f"{_prompt_chars(req):,}) over {cpt:g} a token"
                    f"{f' and {req.system.opaque_tokens:,} opaque' if req.system.opaque_tokens else ''}: {want:,} "
                    "(estimates_from_usage: a part left out, another rate?)")
        if anchor is None or req.rewrite:
            return ""
        before, tokens = anchor
        n = len(before.messages)
        if len(req.messages) <= n or req.messages[n].role != "assistant" or not _continues(before, req):
            return ""
        chars = sum(m.chars for m in req.messages[n + 1:])
        want = tokens + math.ceil(chars / cpt)
        if abs(req.estimated_tokens - want) <= 1:
            return ""
        return (f"the strategy estimated {req.estimated_tokens:,} tokens where it declares its estimate is the usage of "
                f"its last answered request ({tokens:,}: input and output) and the {chars:,} characters of the "
                f"{len(req.messages) - n - 1} message(s) after the answer over {cpt:g} a token: {want:,} "
                "(estimates_from_usage: the anchor taken before the answer entered, or a message counted twice?)")

    def _walk_strayed(self, req: Request, tail: list[Message], conv: list[Message], ext: int, start: int, least: float,
                    unit: str, after_what: str, seen_over: Callable[[list[Message], str, float], bool]) -> str:
        """A tail walked from the newest finished message while under ``least`` (``compaction_tail_walked``) that
        strayed from its walk: the finished messages it kept (before the latest message the user typed), with the
        messages before them back to one that answers no call, stay under ``least`` (the walk would have taken the
        next: it stopped early); or those after the first place in them a cut may fall (after an assistant message, not
        before results: where a split moved back to stops) reach it (the walk went past its bound). In tokens, at
        the rate of the strategy's own estimate of ``req`` (within CUT_RATE_SLACK). Not judged where it kept no
        finished message (the whole history summarised), but where that followed a round whose summary a later one
        took in (a recursion: the summary and its tail still over a budget), the first round's tail, the finished
        messages the later summary took in, is judged so."""
        typed = max((k for k, m in enumerate(tail) if _typed(m)), default=len(tail))
        done, before = tail[:typed], conv[max(ext, 0):start]
        if start <= 0 or self._appended_mixed:
            return ""
        if unit == "tokens":
            rate = _estimate_rate(req)
            if not rate:
                return ""

            def size(ms: list[Message]) -> float:
                return rate * sum(m.chars for m in ms)
            low, high = CUT_RATE_SLACK, CUT_RATE_SLACK
        else:
            def size(ms: list[Message]) -> float:
                return float(self._tail_size(ms, unit))
            low, high = TAIL_LEAST_SLACK[unit], TAIL_MOST_SLACK[unit]
        shown = ("about {:,.0f} " + unit + " (as the strategy estimates)") if unit == "tokens" else ("{:,.0f} " + unit)
        if not done:
            first = self._first_round_tail(conv[:start])
            cut = next((k for k in range(1, len(first)) if first[k - 1].role == "assistant"
                        and not first[k].has_tool_result), None)
            if cut is None or size(first[cut:]) <= least * high:
                return ""
            return (f"the compaction summarised every finished message in {len(self._summaries)} rounds; the first kept "
                    f"{len(first)} of them out of its summary for the next, the newest {len(first) - cut} of which, after "
                    f"the first place a cut may fall, come to {shown.format(size(first[cut:]))}, past the "
                    f"{least:,.0f} {unit} the strategy declares its walk from the newest stays under "
                    "(compaction_tail_walked): the walk went past its bound (a bound read as another?)")
        cut = next((k for k in range(1, len(done)) if done[k - 1].role == "assistant" and not done[k].has_tool_result), None)
        if cut is not None and size(done[cut:]) > least * high:
            return (f"the compaction kept {len(done)} finished messages verbatim after {after_what}, the newest "
                    f"{len(done) - cut} of them after the first place a cut may fall come to {shown.format(size(done[cut:]))}, "
                    f"past the {least:,.0f} {unit} the strategy declares its walk from the newest stays under "
                    "(compaction_tail_walked): the walk went past its bound (a bound read as another?)")
        reach = size(before + done)
        if reach * low >= least or any(m is not None and seen_over(before + done, u, m) for _, m, u in self.declared.tail):
            return ""
        return (f"the compaction kept {len(done)} finished messages verbatim after {after_what}, which with the "
                f"{len(before)} before them come to {shown.format(reach)}, under the "
                f"{least:,.0f} {unit} the strategy declares its walk from the newest stays under "
                "(compaction_tail_walked): the walk stopped early (the messages sized in another unit?)")

    def _first_round_tail(self, finished: list[Message]) -> list[Message]:
        """Where the summaries made for this request are a chain (the second took in the first's text), the newest
        messages of ``finished`` the first left out for the second round: those, back from the newest, whose text the
        second's request holds (its opening and its end, outside the first summary's text, which may quote them; a
        message too short to tell stands with its neighbours, not at the start); ``[]`` where they are no chain, or
        the first took in nothing of ``finished``."""
        if len(self._summaries) < 2:
            return []
        one, two = self._summaries[0], self._summaries[1]
        if not one.text.strip() or one.text.strip() not in two.input_text:
            return []
        rest = two.input_text.replace(one.text.strip(), "")

        first, pos = len(finished), len(rest)
        for k in range(len(finished) - 1, -1, -1):   # in order: each found before the newer one
            t = finished[k].text.strip()
            if len(t) < _TAKEN_MIN:
                continue
            at = rest.rfind(t[:_TAKEN_PROBE], 0, pos)
            if at < 0 or t[-_TAKEN_PROBE:] not in rest[at:pos]:
                break
            first, pos = k, at
        if first == 0 or not any(one.took_in(b) for m in finished[:first] for b in m.blocks if b.type == "text"):
            return []
        return finished[first:]

    def _nothing_before_prompt(self, req: Request) -> bool:
        """Nothing but a summary stands before the newest message of ``req`` the user typed (text the trace fed, no
        tool result), nor before the tail the strategy declares it keeps (``compaction_tail``'s leasts, walked back
        from the newest message counting no more than the strategy may, then back to a message that answers or makes
        no call): a strategy whose summary takes only what comes before both (``summarises_before_latest_prompt``:
        Cline's cut) has nothing to summarise."""
        msgs = list(req.messages)
        at = next((i for i in range(len(msgs) - 1, -1, -1) if msgs[i].role == "user"
                   and not any(b.type == "tool_result" for b in msgs[i].blocks)
                   and any(b.type == "text" and b.digest in self.trace_digests for b in msgs[i].blocks)), len(msgs))
        for least, _, unit in self.declared.tail:
            if not least or unit not in ("tokens", "json_chars", "chars", "messages"):
                continue
            i, held = len(msgs), 0.0
            while i > 0 and held < least:
                i -= 1
                held += self._tail_size([msgs[i]], unit) / TAIL_LEAST_SLACK[unit]
            while i > 0 and not (msgs[i].role == "assistant" or _typed(msgs[i])):
                i -= 1
            at = min(at, i)
        return all(m.meta.get("origin") == "summary" for m in msgs[:at])

    def _cut_short(self, before: Request, req: Request) -> str:
        """A cut with no summary that kept fewer of the conversation's messages than the share it declares
        (``cut_keeps_share``) where neither of its excuses held, or ``""``. The conversation is ``before``'s messages
        and those come since; the estimates are at the rate of the strategy's own estimate of ``req``, within
        CUT_RATE_SLACK."""
        share, head, over, under = self.declared.cut_share
        conv = _with_appended(before, self._appended)
        rest, kept = len(conv) - head, len(req.messages) - head
        least = math.ceil(share * rest - 1e-9)
        if not req.estimated_tokens or len(req.messages) >= len(conv) or kept >= least or self._held_summaries(req):
            return ""
        fixed, rate = _prompt_chars(req), _estimate_rate(req)
        whole = rate * (fixed + sum(m.chars for m in conv))
        if over is not None and whole * CUT_RATE_SLACK > over:
            return ""
        k = min(rest, least + 2)   # the share and the pair before it: a cut lands on a pair's boundary
        kept_est = rate * (fixed + sum(m.chars for m in req.messages[:head]) + sum(m.chars for m in conv[-k:]))
        if kept_est * CUT_RATE_SLACK >= under:
            return ""
        return (f"the cut kept {kept} of the {rest} messages after the first {head}, under the {share:.0%} ({least}) the "
                f"strategy declares it keeps (cut_keeps_share), though the conversation was estimated at about "
                f"{whole:,.0f} tokens{f' (at most {over:,.0f})' if over is not None else ''} and a request keeping "
                f"the newest {k} at about {kept_est:,.0f}, under the {under:,.0f} that would have it cut again "
                "(a choice between shares made the wrong way, a share read as another?)")

    def _tail_size(self, ms: list[Message], unit: str) -> int:
        if unit == "messages":
            return len(ms)
        if unit == "tokens":
            return sum(self._count(m.text) for m in ms)
        if unit == "chars":
            return sum(m.chars for m in ms)
        if unit == "turns":
            return sum(1 for m in ms if _typed(m))
        if unit == "events":
            return sum(_message_events(m) for m in ms)
        return sum(m.memo("kit:json_chars", Message.api_json_chars) for m in ms)

    def _goal(self) -> str:
        return self.goals.get(self._session, "")

    def _holds_goal(self, req: Request) -> bool:
        """``req`` holds the goal verbatim, or the text of a summary that carries it."""
        goal = self._goal().strip()
        if not goal:
            return False
        for m in req.messages:
            for b in m.blocks:
                if b.type in ("text", "tool_result") and (goal in b.text or any(p in b.text for p in self._goal_probes)):
                    return True
        return False

    def _names_holder(self, text: str, content: str) -> bool:
        return self._files.holding(content, self._files.named_in(text)) is not None


def check(recording: Recording, promised: Iterable[str] | None = None) -> list[Violation]:
    """Every violation in a recording, in order (``inputs`` changes last). ``promised`` defaults
    to the strategy's :func:`promises`."""
    held = frozenset(promised) if promised is not None else promises(recording.strategy)
    c = Checker.for_recording(held, recording)
    c.feed(recording.entries)
    out = list(c.violations)
    if "inputs" in held:
        out += [Violation("inputs", -1, "", d) for d in recording.input_changes]
    return out


def assert_holds(recording: Recording, promised: Iterable[str] | None = None) -> None:
    """Raise :class:`InvariantViolation` listing every violation, if any."""
    found = check(recording, promised)
    if found:
        raise InvariantViolation(found)
