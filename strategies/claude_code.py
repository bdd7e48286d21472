"""claude_code: Anthropic's Claude Code: auto-compact, the post-compaction restore and microcompact.

Claude Code is closed source: every rule here is **reported** (third-party analyses of its
behaviour and of the 2.1.x client, cited below) and checked against the real transcripts bundled in
``../shared/traces/real/claude-code/`` where they show it (``tests/strategies/test_claude_code.py``).

* **Auto-compact trigger** (reported: zhanghandong, "Harness engineering from Claude Code", ch. 9,
  ``MAX_OUTPUT_TOKENS_FOR_SUMMARY = 20_000``, ``AUTOCOMPACT_BUFFER_TOKENS = 13_000``; manavgup,
  "shipai" deep dive 06): effective window = window − min(the model's max output, 20,000); compact
  when the token count reaches effective − 13,000 (167,000 on 200k, 967,000 on a 1M window, where
  Claude Code runs extended-context models at their native 1M: CHANGELOG 2.1.117 "computing against a
  200K context window instead of Opus 4.7's native 1M" was fixed). Two settings move it, both
  documented (code.claude.com/docs, env vars): ``CLAUDE_CODE_AUTO_COMPACT_WINDOW`` (``auto_compact_window``;
  the ``autoCompactWindow`` setting, ``/autocompact``): "the context capacity in tokens used for
  auto-compaction calculations ... capped at the model's actual context window" (a 1M model compacting
  as if at 500k); ``CLAUDE_AUTOCOMPACT_PCT_OVERRIDE`` (``autocompact_pct_override``): "the percentage of
  context capacity (1-100) at which auto-compaction triggers ... Values above the default threshold have
  no effect", i.e. ``min(floor(effective × pct / 100), effective − 13,000)`` (the clamp as deobfuscated
  in anthropics/claude-code issue #31806, ``Math.min(userThreshold, defaultThreshold)``, reported).
  The count is the last usage the
  API reported (input, cache and output) plus a character estimate of what came since (4 characters
  per token padded by 4/3: 3 characters per token here). The bundled 2.1.39 transcript compacted at
  preTokens 167,094 right after a call that started under 167,000. ``release="2.0"``: the 2.0.x
  client reserved 45,000 tokens below the window (reported: /context's "Autocompact buffer 45.0k";
  buildthisnow.com / claudefa.st "Claude Code context buffer", 2026-01: 45K → 33K), which the bundled
  2.0.76 transcript matches (preTokens 155,979, the previous call under 155,000).
* **The compaction call** is the conversation itself with the summary instructions as a last user
  message: the same tools, system prompt and cache markers, so it reads the main loop's cached
  prefix (the bundled ``agent-acompact-*`` calls are ≈ 99% cache reads), output up to 20,000 tokens;
  a nine-section summary (reported: primary request and intent, key technical concepts, files and
  code sections, errors and fixes, problem solving, all user messages, pending tasks, current work,
  optional next step). After three consecutive failures auto-compact stops (reported: manavgup,
  "circuit breaker after 3 consecutive failures").
* **After compacting** the history is the summary in Claude Code's own message, as each release
  writes it (:func:`compaction_message`; measured on the development population's real compactions,
  ``ctxsim.strategies.claude_code.MESSAGE_OBSERVED``, and on the bundled 2.1.39 and 2.0.76 logs): the
  head "This session is being continued from a previous conversation that ran out of context." with
  "The conversation is summarized below:" (to 2.1.2) or "The summary below covers the earlier portion
  of the conversation." (from 2.1.7); from 2.1 the path back, "If you need specific details from before
  compaction (like exact code snippets, error messages, or content you generated), read the full
  transcript at: <path>", naming the session's transcript, which this strategy really writes in the
  run directory (``<home>/.claude/projects/<project>/<session>.jsonl``, one message a line, as Claude
  Code keeps it), so the pointer can be followed and its read billed; and for an automatic compaction
  the continuation directive of its release ("Please continue the conversation from where we left it
  off ..." to 2.1.19, "... where we left off ..." from 2.1.39, "Continue the conversation from where it
  left off ... Resume directly ..." from 2.1.69: CHANGELOG 2.1.69 "Changed resuming after compaction to
  no longer produce a preamble recap before continuing"). A release between two observed ones takes the
  older one's wording (the change is known to lie after it, not where), then what Claude Code
  re-attaches (documented, code.claude.com/docs/en/context-window; the rest reported, peers.md): up
  to 5 files read or edited, most recently modified first, one over 5,000 tokens as a path reference
  only, 50,000 in all (an earlier release: what its bundle re-attached, ``reattach.RELEASE_CAPS``), the
  plan, the invoked skills (5,000 tokens each, 25,000 in all) and the latest todo list,
  budgeted in its 4-characters-per-token estimate and rendered as its ``<system-reminder>`` meta
  messages. The tracking and the rendering are :mod:`ctxsim.strategies.reattach`, the module the
  recorded replay re-attaches with (one reading of Claude Code for both); reads inside a sub-agent
  are not tracked (the sub-agent's context is its own). A thrashing detector is reported without
  numbers; it is not modelled.
* **Microcompact** (reported: zhanghandong ch. 11; Hacker News item 47614091): the time-based path
  clears the results of compactable tools (Read, Bash, Grep, Glob, Edit, Write, WebFetch,
  WebSearch, NotebookEdit) but the newest 5 to "[Old tool result content cleared]" when the gap since
  the last assistant message passes the cache TTL (the cache is cold then, so clearing costs no extra
  write). One report says it sits behind a server-side flag; ``microcompact="off"`` turns it off. The
  count-based ``cache_edits`` path edits the server's cache and is not modelled.
* **Startup files** (documented, code.claude.com/docs/en/context-window): the CLAUDE.md files and
  the auto-memory index (first 200 lines / 25 KB of ``MEMORY.md``) load before the first prompt, and
  after a compaction the project-root CLAUDE.md and auto memory are "re-injected from disk" ("What
  survives compaction"): the block is read again and put ahead of the summary
  (:mod:`ctxsim.strategies.startup_files`; on a synthetic trace, its instruction and memory files; on an
  imported log that content is part of the recorded prompt's opaque size). ``startup_files=False``
  is this module before 2026-12 (neither sent); ``startup_after_compaction=False`` loses it at a
  compaction.
* 1-hour cache writes on the system prompt and the last message (``ephemeral_1h_input_tokens`` in
  the bundled transcripts).
* **A rejected request** ("prompt is too long") is compacted reactively and retried once; if that
  fails the turn errors (reported, peers.md).
* **A resumed launch** (``claude --continue``/``--resume``: a ``session_start`` with ``resume``) sends
  the conversation re-serialised from its transcript, and its first messages differ in bytes from
  what the earlier launch sent: the messages' cache is lost, the tools and system prompt stay cached
  (reported and measured: :data:`ctxsim.strategies.recorded.RESUME_EVIDENCE`; ``resume_resends_messages``).

``release`` is a Claude Code version: ``"2.1"`` (the default: the newest 2.1 reading), ``"2.0"``,
``"1.0"``, or a full ``"X.Y.Z"`` such as a log's own ``version`` field (``"2.1.39"``), which picks
the trigger (45,000 below the window before 2.1, assumed for 1.0.x too) and the message of that release.
On an imported Claude Code log the default is the log's own version (``header.recorded.agent_version``),
unless the run sets ``release``.

Not modelled, for want of a source: a background "precompute" compaction (a summary prepared ahead of
the threshold so that compacting costs no wait). Nothing read confirms one: CHANGELOG 2.0.64 says
"Made auto-compacting instant" without a mechanism, and no entry up to 2.1.240 names a precomputed or
background compaction; so neither the option nor its cache cost is here. Also reported but not
modelled: a ``CLAUDE_CODE_AUTO_COMPACT_WINDOW`` between 100k and 199k disabling auto-compact
(a decompilation of 2.1.221, BaseInfinity/claude-sdlc-harness issue 520), and 1M sessions ignoring
the percentage override in some releases (anthropics/claude-code issues 63627, 82761).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Literal

from ctxsim.harness.llm.services import SUMMARY, CallSpec
from ctxsim.harness.model.conversation import Block, Breakpoint, History, Message, Request, Usage
from ctxsim.strategies.base import CallInfo, Rejection, check_room
from ctxsim.strategies.reattach import ReattachCaps, ReattachTracker, caps_for, reattachments
from ctxsim.strategies.startup_files import startup_text
from ctxsim.strategies.templates import PeerConfig, ThresholdCompactor, breakpoints_for, chars_to_tokens
from pydantic import Field

SUMMARY_RESERVE_TOKENS = 20_000  # reported: MAX_OUTPUT_TOKENS_FOR_SUMMARY
AUTOCOMPACT_BUFFER_TOKENS = 13_000  # reported: AUTOCOMPACT_BUFFER_TOKENS (2.1.x)
BUFFER_2_0_TOKENS = 45_000  # reported: /context "Autocompact buffer 45.0k" (2.0.x)
CHARS_PER_TOKEN = 3.0  # reported: chars/4 with a 4/3 conservative padding for messages since the last usage
MAX_CONSECUTIVE_FAILURES = 3  # reported: the auto-compact circuit breaker
MICROCOMPACT_KEEP = 5  # reported: the most recent 5 compactable tool results are kept
MICROCOMPACT_IDLE_S = 3_600.0  # the 1-hour cache TTL Claude Code writes: past it the cache is cold
CLEARED = "[Old tool result content cleared]"  # reported placeholder
COMPACTABLE_TOOLS = ("Read", "Bash", "Grep", "Glob", "Edit", "Write", "WebFetch", "WebSearch", "NotebookEdit")
SECTIONS = ("Primary request and intent", "Key technical concepts", "Files and code sections",
            "Errors and fixes", "Problem solving", "All user messages", "Pending tasks", "Current work",
            "Optional next step")
# Claude Code's post-compaction message, the wording Claude Code itself produces around the summary.
# Measured on the development population (/work/shared/population/dev.tsv; 172 distinct compaction
# messages of 118 sessions, Claude Code 1.0.80-2.1.143, from aistrad/work ece61bc6b5, pshung/personal_git
# a8cbef1d28, SWORDIntel/claude-backups 00f0689ae1, 13562964800/claude-skills e6578221f5, Mkid095/vps-system
# efb98e09b9) and on the bundled logs (spotter 2.1.39, codemie 2.0.76). Each part changed at one release;
# a version takes the wording of the newest observed release at or before it.
CONTINUED_HEAD = "This session is being continued from a previous conversation that ran out of context. "
SUMMARIZED_BELOW = CONTINUED_HEAD + "The conversation is summarized below:\n"
COVERS = CONTINUED_HEAD + "The summary below covers the earlier portion of the conversation.\n\n"
CONTINUED = COVERS  # the current head (2.1.7 on)
TRANSCRIPT_NOTE = ("\n\nIf you need specific details from before compaction (like exact code snippets, error messages, "
                   "or content you generated), read the full transcript at: {path}")
LEFT_IT_OFF = ("Please continue the conversation from where we left it off without asking the user any further "
               "questions. Continue with the last task that you were asked to work on.")
LEFT_OFF = ("Please continue the conversation from where we left off without asking the user any further questions. "
            "Continue with the last task that you were asked to work on.")
RESUME_DIRECTLY = ("Continue the conversation from where it left off without asking the user any further questions. "
                   "Resume directly — do not acknowledge the summary, do not recap what was happening, do not preface "
                   "with \"I'll continue\" or similar. Pick up the last task as if the break never happened.")
# (first release with the wording, where it was observed): sessions of that version holding it
MESSAGE_OBSERVED = {
    "head": (((0, 0, 0), SUMMARIZED_BELOW, "35 sessions of 1.0.80-2.1.2 (1.0.89: 8, 2.0.76: 11, 2.1.2: 2); "
                                           "bundled 2.0.76"),
             ((2, 1, 7), COVERS, "83 sessions of 2.1.7-2.1.143 (2.1.7: 2, 2.1.72: 26, 2.1.114: 20); bundled 2.1.39")),
    "transcript": (((0, 0, 0), False, "none in 33 sessions of 1.0.80-2.0.76 (2.0.76: 11); bundled 2.0.76"),
                   ((2, 1, 0), True, "all 85 sessions of 2.1.2-2.1.143 (2.1.2: 2), each naming its own "
                                     "~/.claude/projects/<project>/<session-id>.jsonl; bundled 2.1.39")),
    # an automatic compaction always ends with a directive (every auto-triggered one seen); a manual one
    # did not, up to 2.1.114
    "directive": (((0, 0, 0), LEFT_IT_OFF, "27 sessions: 1.0.80-1.0.90: 16 (no trigger recorded), 2.0.74 and "
                                           "2.0.76 auto: 9, 2.1.19 auto: 2; bundled 2.0.76"),
                  ((2, 1, 39), LEFT_OFF, "bundled 2.1.39 (auto); 2.1.62: 2, 2.1.63: 1 auto sessions"),
                  ((2, 1, 69), RESUME_DIRECTLY, "CHANGELOG 2.1.69; 2.1.72: 9 auto sessions, 2.1.143: 4")),
}
NEWEST = 10**6  # "2.1" without a patch number: the newest reading of that line
VERSION = re.compile(r"^(\d{1,3})\.(\d{1,3})(?:\.(\d{1,6}))?$")


def version_tuple(release: str) -> tuple[int, int, int]:
    """``"2.1.39"`` → (2, 1, 39); ``"2.1"`` → (2, 1, NEWEST)."""
    m = VERSION.match(release)
    if m is None:
        raise ValueError(f"release {release!r}: a Claude Code version, X.Y or X.Y.Z (e.g. 2.1 or 2.1.39)")
    return int(m[1]), int(m[2]), int(m[3]) if m[3] is not None else NEWEST


def observed(part: str, version: tuple[int, int, int]):
    """The wording of ``part`` at ``version``: that of the newest change at or before it."""
    return [w for first, w, _ in MESSAGE_OBSERVED[part] if first <= version][-1]


def compaction_message(version: tuple[int, int, int], summary: str, transcript: str | None, auto: bool = True) -> str:
    """Claude Code's post-compaction message at ``version`` around ``summary``: the head, the summary,
    the path back (from 2.1; ``transcript`` is the path it names) and, for an automatic compaction,
    the continuation directive (each joined as the real messages join them)."""
    text = observed("head", version) + summary
    if observed("transcript", version) and transcript is not None:
        text += TRANSCRIPT_NOTE.format(path=transcript)
    if auto:
        text += "\n" + observed("directive", version)
    return text
COMPACT_PROMPT = """\
Your task is to create a detailed summary of the conversation so far, paying close attention to the \
user's explicit requests and your previous actions. It will replace the conversation: capture every \
technical detail, code pattern and decision needed to continue the work without losing context. \
Write it in these sections: {sections}. Quote the user's messages that are not tool results."""


class ClaudeCodeConfig(PeerConfig):
    chars_per_token: float = Field(CHARS_PER_TOKEN, gt=0, le=20, description="characters per token of the "
                                   "estimate for messages since the last usage (reported: 4, padded by 4/3)")
    release: str = Field("2.1", pattern=VERSION.pattern, description="the Claude Code version: 2.1 (the newest "
                         "2.1 reading), 2.0, 1.0 or X.Y.Z (a log's version); from 2.1: compact at window − min(max "
                         "output, 20k) − 13k, before: at window − 45k (the 2.0.x buffer); the post-compaction "
                         "message of that release")
    auto_compact_window: int | None = Field(None, ge=1_000, le=100_000_000, description="CLAUDE_CODE_AUTO_COMPACT_"
                                            "WINDOW / autoCompactWindow: the window auto-compact computes with, "
                                            "capped at the model's; None: the model's window")
    autocompact_pct_override: float | None = Field(None, gt=0, le=100, description="CLAUDE_AUTOCOMPACT_PCT_OVERRIDE: "
                                                   "compact at this % of the effective window, never later than "
                                                   "the default (a clamp that can only lower it); None: the default")
    transcript: bool = Field(True, description="write the session's transcript in the run directory and name it "
                             "in the post-compaction message (from 2.1, as Claude Code does); off: no path back")
    summary_reserve_tokens: int = Field(SUMMARY_RESERVE_TOKENS, ge=0, le=10_000_000,
                                        description="kept below the window for the summary (capped by max output)")
    autocompact_buffer_tokens: int | None = Field(None, ge=0, le=10_000_000, description="below the effective "
                                                  "window (2.1: 13,000) or the window (2.0: 45,000); None: the release's")
    summary_max_tokens: int = Field(SUMMARY_RESERVE_TOKENS, ge=256, le=200_000, description="output bound of the summary call")
    restore_max_files: int = Field(ReattachCaps.max_files, ge=0, le=1_000, description="files re-attached after compacting")
    restore_file_tokens: int | None = Field(None, ge=0, le=10_000_000, description="cap per restored file; None: the "
                                            "release's (5,000 from 1.0.85, 10,000 before: reattach.RELEASE_CAPS)")
    restore_total_tokens: int | None = Field(None, ge=0, le=10_000_000, description="cap for all restored files; None: "
                                             "the release's (50,000 from 1.0.23)")
    restore_skill_tokens: int = Field(ReattachCaps.skills_total_tokens, ge=0, le=10_000_000, description="cap for the invoked skills")
    microcompact: Literal["time", "off"] = Field("time", description="time: clear old compactable tool results "
                                                 "once the cache has gone cold; off: never")
    microcompact_idle_s: float = Field(MICROCOMPACT_IDLE_S, gt=0, le=10_000_000, description="idle gap that "
                                       "triggers microcompact (the cache TTL)")
    microcompact_keep: int = Field(MICROCOMPACT_KEEP, ge=0, le=100_000, description="newest compactable results kept")
    cache_ttl: Literal["1h", "5m"] = Field("1h", description="TTL of the cache writes")
    max_consecutive_failures: int = Field(MAX_CONSECUTIVE_FAILURES, ge=1, le=1_000,
                                          description="failed auto-compactions in a row before auto-compact stops")
    startup_files: bool = Field(True, description="send the run's CLAUDE.md files and auto-memory index (a "
                                "synthetic trace's instruction and memory files) before the first prompt "
                                "(code.claude.com/docs/en/context-window); off: neither (this module before 2026-12)")
    resume_resends_messages: bool = Field(True, description="a resumed launch sends the conversation anew: the "
                                          "messages' cache is lost, tools and system prompt stay cached "
                                          "(recorded.RESUME_EVIDENCE); off: a resume changes nothing the cache sees")
    startup_after_compaction: bool = Field(True, description="re-inject them from disk after each compaction "
                                           "(the docs' 'What survives compaction': project-root CLAUDE.md and auto "
                                           "memory); off: lost with the summarised messages")


def auto_compact_threshold(c: ClaudeCodeConfig, window: int, max_output_tokens: int) -> int:
    """The auto-compact threshold: the default of the release on the auto-compact window (capped at the
    model's), lowered, never raised, by the percentage override."""
    w = window if c.auto_compact_window is None else min(window, c.auto_compact_window)
    if version_tuple(c.release) < (2, 1, 0):
        effective = w
        default = w - (BUFFER_2_0_TOKENS if c.autocompact_buffer_tokens is None else c.autocompact_buffer_tokens)
    else:
        effective = w - min(max_output_tokens, c.summary_reserve_tokens)
        default = effective - (AUTOCOMPACT_BUFFER_TOKENS if c.autocompact_buffer_tokens is None
                               else c.autocompact_buffer_tokens)
    if c.autocompact_pct_override is None:
        return default
    return min(int(effective * c.autocompact_pct_override / 100), default)  # Math.min(userThreshold, default)


class ClaudeCode(ThresholdCompactor):
    name = "claude_code"

    @classmethod
    def summarises_dropped(cls, config) -> bool:
        # its compactions summarise what they drop (the kit's ``summarised``)
        return True
    summary = "Claude Code (reported): auto-compact at window − 33k, restore 5 read files, microcompact when the cache is cold"
    on_rejection = "compacts reactively on prompt-too-long and retries; the turn errors if that fails (Claude Code, reported)"
    Config = ClaudeCodeConfig

    @staticmethod
    def check_params(window: int) -> dict:
        """The same rules at the same relative points of the property kit's small window."""
        scale = window / 200_000
        return {"summary_reserve_tokens": int(SUMMARY_RESERVE_TOKENS * scale),
                "autocompact_buffer_tokens": int(AUTOCOMPACT_BUFFER_TOKENS * scale),
                "summary_max_tokens": max(256, int(SUMMARY_RESERVE_TOKENS * scale)),
                "restore_file_tokens": int(ReattachCaps.file_tokens * scale),
                "restore_total_tokens": int(ReattachCaps.total_tokens * scale),
                "restore_skill_tokens": int(ReattachCaps.skills_total_tokens * scale)}

    @classmethod
    def trace_defaults(cls, trace, overrides: frozenset[str]) -> dict:
        """On a Claude Code log, the release the log ran (``recorded.agent_version``, issue 41);
        ``--set release=…`` still wins."""
        out = super().trace_defaults(trace, overrides)
        rec = trace.header.recorded
        if (trace.header.source or {}).get("format") == "claude-code" and rec.agent_version \
                and VERSION.match(rec.agent_version):
            out["release"] = rec.agent_version
        return out

    def __init__(self, config, env) -> None:
        super().__init__(config, env)
        self.reattach = ReattachTracker()  # files read, plan, skills, todo list (main context)
        self.tool_names: dict[str, str] = {}
        self.failures = 0  # consecutive failed auto-compactions
        self.last_answer_at: float | None = None
        self.started = False  # the startup files were loaded in this launch
        self.version = version_tuple(self.config.release)
        self.session_id = "session"  # the launch's id: its transcript's file name
        self._written: set[bytes] = set()  # digests of the messages already in the transcript
        c = self.config
        given = {"summary_reserve_tokens": c.summary_reserve_tokens} if self.version >= (2, 1, 0) else {}
        for k in ("autocompact_buffer_tokens", "auto_compact_window"):
            if getattr(c, k) is not None:
                given[k] = getattr(c, k)
        check_room(self.name, env.window, self.threshold(), given or {"the release's buffer": BUFFER_2_0_TOKENS})

    @classmethod
    def cache_marks_ttl(cls, config: ClaudeCodeConfig) -> str | None:
        """Every breakpoint at ``cache_ttl`` (1h: what Claude Code 2.1.x logs write, header.recorded.cache_ttl)."""
        return config.cache_ttl

    def on_session_start(self, session: str, resume: bool, now: float) -> None:
        super().on_session_start(session, resume, now)
        self.session_id = _file_safe(session) or "session"
        if not resume:
            self._written = set()
            self.reattach = ReattachTracker()
            self.failures, self.last_answer_at = 0, None
            self.started = False  # a new launch loads its startup files again
        else:   # a resume is a new process: which files it knows (ReattachTracker.new_launch)
            self.reattach.new_launch(caps_for(self.version).resume_rebuilds)
        if resume and self.config.resume_resends_messages and len(self.history) and not self.in_isolated_subtask:
            self.history = self.history.resent()
            self.rewrote = True   # a declared break: the conversation re-serialised from its first message
            self.counters.extra["resumes_resent"] += 1

    def on_user(self, message: Message) -> None:
        if not self.started and not self.in_isolated_subtask:  # before the launch's first prompt
            self.started = True
            startup = self.startup()
            if startup is not None:
                self.history = self.history.append(startup)
        super().on_user(message)
        self._track_user(message)

    def startup(self) -> Message | None:
        """The startup block read from disk now (:mod:`ctxsim.strategies.startup_files`), or None."""
        if not self.config.startup_files:
            return None
        text = startup_text(self.env.home_dir, self.env.project_dir)
        return None if text is None else Message.user(text, origin="startup")

    def _track_user(self, message: Message) -> None:
        if not self.in_isolated_subtask:
            self.reattach.on_user(message)

    def on_response(self, message: Message, usage: Usage | None) -> None:
        if not self.in_isolated_subtask:
            self.reattach.on_assistant(message)
        for b in message.blocks:
            if b.type == "tool_use" and b.id:
                self.tool_names[b.id] = b.name or ""
        self.last_answer_at = self.env.now()
        super().on_response(message, usage)

    def on_tool_results(self, message: Message) -> None:
        super().on_tool_results(message)
        if not self.in_isolated_subtask:
            self.reattach.on_results(message, len(self.history) - 1)

    # --- the trigger -------------------------------------------------------------------------------
    def threshold(self) -> int:
        return auto_compact_threshold(self.config, self.env.window, self.env.max_output_tokens)

    @classmethod
    def compacts_above(cls, config, window: int, max_output_tokens: int) -> int | None:
        # the breaker aside (compaction_breaker), auto-compact summarises at the threshold
        return auto_compact_threshold(config, window, max_output_tokens)

    @classmethod
    def compaction_breaker(cls, config) -> int | None:
        return config.max_consecutive_failures   # auto-compact stops after this many failures in a row

    def should_compact(self, call: CallInfo) -> bool:
        return self.failures < self.config.max_consecutive_failures and (self.estimate() or 0) >= self.threshold()

    def breakpoints(self, history: History) -> tuple[Breakpoint, ...]:
        return breakpoints_for(self.config.breakpoints, history, ttl=self.config.cache_ttl)

    # --- microcompact ------------------------------------------------------------------------------
    @classmethod
    def keeps_recent_tool_uses(cls, config) -> int:
        # microcompact clears compactable results but the newest microcompact_keep of them, and no
        # other result: the newest microcompact_keep tool uses of any tool keep their results
        return config.microcompact_keep

    @classmethod
    def clears_when_idle(cls, config) -> tuple[float, tuple[str, ...]] | None:
        # the time-based microcompact: past the idle gap, the results of compactable tools but the newest
        return (config.microcompact_idle_s, COMPACTABLE_TOOLS) if config.microcompact == "time" else None

    @classmethod
    def replaces_only_when_idle(cls, config) -> float | None:
        # ... and only then: nothing else changes a result it sent (its compactions summarise, they do not edit)
        return config.microcompact_idle_s if config.microcompact == "time" else None

    def prepare(self, call: CallInfo) -> None:
        c = self.config
        if (c.microcompact == "time" and self.last_answer_at is not None
                and call.now - self.last_answer_at > c.microcompact_idle_s):
            self.microcompact()
        super().prepare(call)

    def microcompact(self) -> int:
        """Clear the results of compactable tools but the newest ``microcompact_keep``."""
        h = self.history
        spots = [(i, j) for i, m in enumerate(h) if m.role == "user" for j, b in enumerate(m.blocks)
                 if b.type == "tool_result" and self.tool_names.get(b.id or "") in COMPACTABLE_TOOLS]
        keep = self.config.microcompact_keep
        old = [(i, j) for i, j in (spots[:-keep] if keep else spots) if h[i].blocks[j].text != CLEARED]
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

    # --- compaction --------------------------------------------------------------------------------
    def compact(self, call: CallInfo) -> bool | None:
        c = self.config
        if not len(self.history):
            return None
        h = self.history
        res = self.side_call(self.build_request_for_summary(h),
                             CallSpec(kind=SUMMARY, instructions=COMPACT_PROMPT.format(sections="; ".join(SECTIONS)),
                                      sections=SECTIONS, max_output_tokens=c.summary_max_tokens))
        if res is None or not res.text.strip():
            self.failures += 1
            if self.failures == c.max_consecutive_failures:
                self.counters.breaker_trips += 1
            return False
        self.failures = 0
        path = self.write_transcript(h) if c.transcript and observed("transcript", self.version) else None
        startup = self.startup() if c.startup_after_compaction else None
        if startup is not None:
            self.counters.extra["startup_reinjected"] += 1
        text = compaction_message(self.version, res.text, None if path is None else str(path))
        self.set_history(History([*([startup] if startup is not None else []),
                                  Message.user(text, origin="summary"), *self.restored()]))
        return True

    def transcript_path(self) -> Path:
        """``<home>/.claude/projects/<project>/<session>.jsonl`` under the run directory (the project
        named as Claude Code names it, its path with "/" as "-", here relative to the run directory so
        the path's length is the same in every run)."""
        home = self.env.home_dir if self.env.home_dir is not None else Path(self.env.session_dir) / "home"
        project = self.env.project_dir.name if self.env.project_dir is not None else "project"
        return Path(home) / ".claude" / "projects" / f"-{project}" / f"{self.session_id}.jsonl"

    def write_transcript(self, messages: History) -> Path:
        """Append the messages not yet on disk to the session's transcript (one JSON record a message,
        as Claude Code appends them); returns its absolute path."""
        path = self.transcript_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = []
        for m in messages:
            if m.meta.get("origin") == "startup" or m.digest in self._written:
                continue
            self._written.add(m.digest)
            lines.append(json.dumps({"type": m.role, "message": m.to_api()}, ensure_ascii=False) + "\n")
        if lines:
            with path.open("a", encoding="utf-8") as fh:
                fh.writelines(lines)
        self.counters.extra["transcript_writes"] += 1
        return path

    def build_request_for_summary(self, h: History) -> Request:
        """The summary call shares the main loop's prefix: same system prompt, tools and markers."""
        return Request(self.env.system, self.env.tools, h, self.breakpoints(h))

    def restored(self) -> list[Message]:
        """What Claude Code re-attaches after the summary (:func:`ctxsim.strategies.reattach.reattachments`):
        recent files, the plan, invoked skills, the todo list."""
        c = self.config
        caps = caps_for(self.version, max_files=c.restore_max_files, file_tokens=c.restore_file_tokens,
                        total_tokens=c.restore_total_tokens, skills_total_tokens=c.restore_skill_tokens)
        out = reattachments(self.reattach, caps, self.env.count_tokens)
        self.counters.extra["restored_files"] += sum(m.meta.get("reattached") == "file" for m in out)
        return out

    def on_rejected(self, rejection: Rejection, call: CallInfo) -> bool:
        """Reactive compaction on prompt-too-long, once per call."""
        if "overflow" not in rejection.reasons or rejection.attempt > 1:
            return False
        self.counters.extra["reactive_compactions"] += 1
        return self.compact_now(call)


def _file_safe(name: str | None) -> str:
    """A session id as a file name: letters, digits, '.', '_' and '-' kept, anything else as '_'."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name or "")[:200]
