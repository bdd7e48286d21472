"""claude_code: Anthropic's Claude Code: auto-compact, the post-compaction restore and microcompact.

Claude Code is closed source: every rule here is **reported** (third-party analyses of its
behaviour and of the 2.1.x client, cited below) and checked against the real transcripts bundled in
``../shared/traces/real/claude-code/`` where they show it (``tests/strategies/test_claude_code.py``).

* **Auto-compact trigger** (reported: zhanghandong, "Harness engineering from Claude Code", ch. 9,
  ``MAX_OUTPUT_TOKENS_FOR_SUMMARY = 20_000``, ``AUTOCOMPACT_BUFFER_TOKENS = 13_000``; manavgup,
  "shipai" deep dive 06): effective window = window − min(the model's max output, 20,000); compact
  when the token count reaches effective − 13,000 (167,000 on 200k). The count is the last usage the
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
* **After compacting** the history is the summary ("This session is being continued from a previous
  conversation that ran out of context…", as the bundled transcripts show it) and what Claude Code
  re-attaches (documented, code.claude.com/docs/en/context-window; the rest reported, peers.md): up
  to 5 files read or edited, most recently modified first, one over 5,000 tokens as a path reference
  only, 50,000 in all, the plan, the invoked skills (5,000 tokens each, 25,000 in all) and the latest todo list,
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
"""

from __future__ import annotations

from typing import Literal

from ctxsim.harness.llm.services import SUMMARY, CallSpec
from ctxsim.harness.model.conversation import Block, Breakpoint, History, Message, Request, Usage
from ctxsim.strategies.base import CallInfo, Rejection
from ctxsim.strategies.reattach import ReattachCaps, ReattachTracker, reattachments
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
CONTINUED = ("This session is being continued from a previous conversation that ran out of context. "
             "The summary below covers the earlier portion of the conversation.\n\n")  # as the bundled transcripts show it
COMPACT_PROMPT = """\
Your task is to create a detailed summary of the conversation so far, paying close attention to the \
user's explicit requests and your previous actions. It will replace the conversation: capture every \
technical detail, code pattern and decision needed to continue the work without losing context. \
Write it in these sections: {sections}. Quote the user's messages that are not tool results."""


class ClaudeCodeConfig(PeerConfig):
    chars_per_token: float = Field(CHARS_PER_TOKEN, gt=0, le=20, description="characters per token of the "
                                   "estimate for messages since the last usage (reported: 4, padded by 4/3)")
    release: Literal["2.1", "2.0"] = Field("2.1", description="2.1: compact at window − min(max output, 20k) − "
                                           "13k; 2.0: at window − 45k (the 2.0.x buffer)")
    summary_reserve_tokens: int = Field(SUMMARY_RESERVE_TOKENS, ge=0, le=10_000_000,
                                        description="kept below the window for the summary (capped by max output)")
    autocompact_buffer_tokens: int | None = Field(None, ge=0, le=10_000_000, description="below the effective "
                                                  "window (2.1: 13,000) or the window (2.0: 45,000); None: the release's")
    summary_max_tokens: int = Field(SUMMARY_RESERVE_TOKENS, ge=256, le=200_000, description="output bound of the summary call")
    restore_max_files: int = Field(ReattachCaps.max_files, ge=0, le=1_000, description="files re-attached after compacting")
    restore_file_tokens: int = Field(ReattachCaps.file_tokens, ge=0, le=10_000_000, description="cap per restored file")
    restore_total_tokens: int = Field(ReattachCaps.total_tokens, ge=0, le=10_000_000, description="cap for all restored files")
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
    startup_after_compaction: bool = Field(True, description="re-inject them from disk after each compaction "
                                           "(the docs' 'What survives compaction': project-root CLAUDE.md and auto "
                                           "memory); off: lost with the summarised messages")


class ClaudeCode(ThresholdCompactor):
    name = "claude_code"
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

    def __init__(self, config, env) -> None:
        super().__init__(config, env)
        self.reattach = ReattachTracker()  # files read, plan, skills, todo list (main context)
        self.tool_names: dict[str, str] = {}
        self.failures = 0  # consecutive failed auto-compactions
        self.last_answer_at: float | None = None
        self.started = False  # the startup files were loaded in this launch

    def on_session_start(self, session: str, resume: bool, now: float) -> None:
        super().on_session_start(session, resume, now)
        if not resume:
            self.reattach = ReattachTracker()
            self.failures, self.last_answer_at = 0, None
            self.started = False  # a new launch loads its startup files again

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
        c = self.config
        w = self.env.window
        if c.release == "2.0":
            return w - (BUFFER_2_0_TOKENS if c.autocompact_buffer_tokens is None else c.autocompact_buffer_tokens)
        effective = w - min(self.env.max_output_tokens, c.summary_reserve_tokens)
        return effective - (AUTOCOMPACT_BUFFER_TOKENS if c.autocompact_buffer_tokens is None else c.autocompact_buffer_tokens)

    def should_compact(self, call: CallInfo) -> bool:
        return self.failures < self.config.max_consecutive_failures and (self.estimate() or 0) >= self.threshold()

    def breakpoints(self, history: History) -> tuple[Breakpoint, ...]:
        return breakpoints_for(self.config.breakpoints, history, ttl=self.config.cache_ttl)

    # --- microcompact ------------------------------------------------------------------------------
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
        startup = self.startup() if c.startup_after_compaction else None
        if startup is not None:
            self.counters.extra["startup_reinjected"] += 1
        self.set_history(History([*([startup] if startup is not None else []),
                                  Message.user(CONTINUED + res.text, origin="summary"), *self.restored()]))
        return True

    def build_request_for_summary(self, h: History) -> Request:
        """The summary call shares the main loop's prefix: same system prompt, tools and markers."""
        return Request(self.env.system, self.env.tools, h, self.breakpoints(h))

    def restored(self) -> list[Message]:
        """What Claude Code re-attaches after the summary (:func:`ctxsim.strategies.reattach.reattachments`):
        recent files, the plan, invoked skills, the todo list."""
        c = self.config
        caps = ReattachCaps(max_files=c.restore_max_files, file_tokens=c.restore_file_tokens,
                            total_tokens=c.restore_total_tokens, skills_total_tokens=c.restore_skill_tokens)
        out = reattachments(self.reattach, caps)
        self.counters.extra["restored_files"] += sum(m.meta.get("reattached") == "file" for m in out)
        return out

    def on_rejected(self, rejection: Rejection, call: CallInfo) -> bool:
        """Reactive compaction on prompt-too-long, once per call."""
        if "overflow" not in rejection.reasons or rejection.attempt > 1:
            return False
        self.counters.extra["reactive_compactions"] += 1
        return self.compact_now(call)
