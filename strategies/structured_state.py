"""structured_state: the task and its plan live in state files outside the conversation, written as
the work happens; the conversation itself is a window (spec/novacode.md section 8: "structured state
outside the conversation (plans, task lists as files)").

The practitioner is Claude Code's task list (the ``TodoWrite`` tool, closed source, reported: its
description and result text in the Claude Code system-prompt archives, ccVersion 2.0.14; its use in
the bundled real session ``../shared/traces/real/claude-code/codemie/session-196820da.jsonl``: 9
writes in 133 calls, each the whole list again, items copied verbatim from one write to the next)
beside the harness-kept record of the user's own messages that Codex CLI carries across a compaction
(``codex-rs`` ``compact.rs``: the most recent real user messages, up to 20,000 tokens, verbatim;
peers.md "Verified against current sources").

Model. Each agent context (the main agent, and each sub-agent of an isolated span: Claude Code keeps
one todo file per agent, ``todos/<session>-agent-<id>.json``) has its own state, two real files under
``<session_dir>/state/<agent>/``:

* ``requests.md`` — the user's task-bearing messages, verbatim (each cut to ``request_max_chars``),
  recorded by the harness the moment they arrive: no model call, nothing to forget. Only messages a
  user typed count: hook output, task notifications, system reminders, local-command echoes and
  interruption markers are not tasks (:func:`is_task_message`). Over ``requests_max_tokens`` the
  oldest go first, but the current session's first request (its goal) stays;
* ``todos.json`` — the task list in TodoWrite's shape (``content``, ``status``, ``activeForm``),
  written by the model in billed TodoWrite calls as the work happens: when a task-bearing request
  arrives (its item enters ``in_progress``, the previous one is ``completed``) and every
  ``todo_every`` calls within a task (the list re-sent, as the real session does). Each write is a
  real model step (kind ``todo_write``: the current context in, the tool call out) whose tool_use and
  its result enter the conversation, as in Claude Code. With a live model the items are the model's
  own; the simulated model writes one item per request, its first line cut to ``todo_item_chars``
  (real items are short imperative lines, 30–90 characters in the bundled session). A trace whose
  recorded agent keeps its own todo list (TodoWrite calls in the log) makes no extra calls: its
  recorded lists are the state.

The window: when the strategy's estimate reaches Claude Code's auto-compact line (window −
min(max output, 20,000) − 13,000, reported; the seed's soft line N-COMP-1/2), the oldest messages go
on a pair-safe boundary with no summary, keeping a NovaCode-sized tail (N-COMP-6: at least 10,000
tokens and 5 messages, at most 40,000), and the state block is the new head: the requests, the todo
list, and the files' paths (the model can read them back). The state outlives the conversation: a new
session starts from the state block. A request the API rejects as too long triggers the same cut at
once, deeper at each attempt (Claude Code's reactive compaction, reported).

This module also holds the shared mechanics of the families that keep a bounded conversation
(:class:`GaugedStrategy`, :class:`WindowedStrategy`: a calibrated token gauge, a window rule that
scales with the window, pair-safe cuts with an optional summary, pinned head messages, per-agent
contexts, a guard on oversized results, the reaction to a rejected request); rag_memory, whole_repo,
subagent_isolation, on_demand_reading and tiered_budget build on it.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from ctxsim.harness.files import confined
from ctxsim.harness.llm.services import SUMMARY, CallSpec, SideCallFailed
from ctxsim.harness.model.conversation import (
    Block,
    Breakpoint,
    History,
    Message,
    Request,
    ToolDef,
    ToolSet,
    Usage,
)
from ctxsim.strategies.base import CallInfo, Strategy, StrategyConfig, StrategyEnv, check_room
from pydantic import Field, model_validator

CHARS_PER_TOKEN = 3.5       # N-COMP-5: the seed's characters-per-token rule, before any usage arrives
MESSAGE_FRAMING_TOKENS = 4  # per-message role framing (same modelling assumption as the provider's)
SUMMARY_RESERVE_TOKENS = 20_000  # N-COMP-1; Claude Code: min(max output, 20,000) (reported, peers.md)
AUTO_COMPACT_MARGIN_TOKENS = 13_000  # N-COMP-2; Claude Code's auto-compact margin (reported, peers.md)
TAIL_MIN_TOKENS = 10_000    # N-COMP-6
TAIL_MIN_MESSAGES = 5       # N-COMP-6
TAIL_MAX_TOKENS = 40_000    # N-COMP-6
DROPPED_NOTE = "[Earlier messages of this conversation were dropped from the context window.]"
# Claude Code's compaction message around its summary, with the path back to the full transcript
# (2.1.39, as the bundled spotter sessions record it)
CONTINUATION = ("This session is being continued from a previous conversation that ran out of context. The "
                "summary below covers the earlier portion of the conversation.\n\n{summary}")
NOT_TRANSCRIBED = ("summary", "placeholder", "repository", "state", "memory")
TRANSCRIPT_NOTE = ("If you need specific details from before compaction (like exact code snippets, error messages, "
                   "or content you generated), read the full transcript at: {path}")
CAP_MARKER = "\n[... {n} characters cut: the result was larger than this context can hold ...]\n"
SUMMARY_INSTRUCTIONS = """\
Your task is to create a detailed summary of the conversation so far, paying close attention to the \
user's explicit requests and your previous actions; the summary replaces these messages in your \
context window. Use these sections:
{sections}"""
# Claude Code's nine summary sections (reported, peers.md), as the seed's compaction asks for them
SUMMARY_SECTIONS = ("Primary request and intent", "Key technical concepts", "Files and code sections",
                    "Errors and fixes", "Problem solving", "All user messages", "Pending tasks", "Current work",
                    "Optional next step")

# What a user's message is when a person did not type it: Claude Code writes these into the user
# role (the bundled real sessions hold each of them): they are context, never a new task.
NOT_TYPED_PREFIXES = (
    "<task-notification>", "<system-reminder>", "[Request interrupted", "<local-command-", "<command-name>",
    "<command-message>", "<command-args>", "Caveat: The messages below were generated by the user while running local",
    "<bash-input>", "<bash-stdout>", "<bash-stderr>", "<user-prompt-submit-hook>", "<session-start-hook>",
    "This session is being continued from a previous conversation",
)


def is_task_message(m: Message) -> bool:
    """A message the user typed: a plain user message (no tool results, nothing a strategy made)
    whose text is not hook output, a task notification, a system reminder, a local command's echo,
    an interruption marker or a compaction's continuation note."""
    if m.role != "user" or m.has_tool_result or m.meta.get("origin"):
        return False
    text = m.text.lstrip()
    return bool(text) and not text.startswith(NOT_TYPED_PREFIXES)


def _add_chars(acc: int, m: Message) -> int:
    """Fold step: running character count of a history (memoised per history store)."""
    return acc + m.chars


def history_chars(h: History, upto: int | None = None) -> int:
    """Characters of messages[0:upto] (all when ``upto`` is None), O(1) amortised."""
    n = len(h) if upto is None else upto
    return h.fold_through(n - 1, _add_chars, 0, _add_chars)


def split_names(v):
    """A tuple-of-names parameter from ``--set`` (a string): comma-separated (``Read,View``) or a
    JSON list; anything else is left for pydantic to validate."""
    if isinstance(v, str):
        text = v.strip()
        if text.startswith("["):
            return tuple(json.loads(text))
        return tuple(x.strip() for x in text.split(",") if x.strip())
    return v


INTERRUPTED = "[No result: the session ended before this tool call returned.]"


def repair_dangling(h: History) -> tuple[History, bool]:
    """A resumed conversation whose last call's tool uses got no (or only some) results — the
    previous launch crashed mid-call — gets an error result for each missing one, as Claude Code
    repairs a transcript on resume (N-TRANS-5). Returns the history and whether an already-sent
    message was rewritten (only when a partial result message had to be completed)."""
    n = len(h)
    last_a = next((i for i in range(n - 1, -1, -1) if h[i].role == "assistant"), None)
    if last_a is None:
        return h, False
    uses = [b.id for m in h[last_a:] if m.role == "assistant" for b in m.blocks if b.type == "tool_use"]
    answered = {b.id for m in h[last_a + 1:] for b in m.blocks if b.type == "tool_result"}
    missing = [u for u in uses if u not in answered]
    if not missing:
        return h, False
    fill = tuple(Block.tool_result(u, INTERRUPTED, is_error=True) for u in missing)
    if last_a + 1 < n and h[last_a + 1].has_tool_result:
        m = h[last_a + 1]
        results = tuple(b for b in m.blocks if b.type == "tool_result")
        others = tuple(b for b in m.blocks if b.type != "tool_result")
        return h.replace_at(last_a + 1, Message(m.role, results + fill + others, m.meta)), True
    if last_a + 1 < n:  # a user text after the dangling call: the results go first, in the same turn
        m = h[last_a + 1]
        return h.replace_at(last_a + 1, Message(m.role, fill + m.blocks, m.meta)), True
    return h.append(Message("user", fill, {"origin": "repair"})), False


class TokenGauge:
    """The strategy's own token estimate: characters times a tokens-per-character ratio, the ratio
    re-learned from each usage the API reports (what a real agent can do: it knows what it sent and
    what it was billed; a prompt-too-long 400 states the size too). Starts at 1/3.5 (N-COMP-5).
    ``opaque`` tokens (the recorded prompt the trace has no text for) are known to the agent and
    added as they are."""

    def __init__(self, chars_per_token: float, opaque: int = 0) -> None:
        self.ratio = 1.0 / chars_per_token
        self.opaque = opaque

    def tokens(self, chars: int, messages: int = 0) -> int:
        return self.opaque + math.ceil(chars * self.ratio) + MESSAGE_FRAMING_TOKENS * messages

    def content(self, chars: int) -> int:
        """Estimated tokens of ``chars`` characters of content alone."""
        return math.ceil(chars * self.ratio)

    def observe(self, chars: int, messages: int, usage: Usage | None) -> None:
        if usage is None or chars <= 0:
            return
        content = usage.input_total - self.opaque - MESSAGE_FRAMING_TOKENS * messages
        if content > 0:
            self.ratio = content / chars


def _turn_start(h: History, i: int) -> bool:
    """A kept window may start at ``i``: an assistant message right after a user message (the
    results of messages[i-1]'s tool uses, if any, are in messages[:i]; those of messages[i:] follow)."""
    return 0 < i < len(h) and h[i].role == "assistant" and h[i - 1].role == "user"


def pair_safe_start(h: History, lo: int, keep_tokens: int, gauge: TokenGauge) -> int:
    """Where the kept window starts: the smallest index ``i >= lo`` of an assistant message that
    follows a user message, such that messages[i:] fit ``keep_tokens``. Starting on such a message
    never splits a tool_use from its tool_result. If even the newest turn does not fit, the newest
    such index; ``len(h)`` when no such index exists (nothing can be cut)."""
    n = len(h)
    total = history_chars(h)
    best = n
    for i in range(n - 1, lo - 1, -1):
        if not _turn_start(h, i):
            continue
        kept = gauge.tokens(total - history_chars(h, i), n - i) - gauge.opaque
        if kept > keep_tokens and best != n:
            break
        best = i
    return best


def tail_start(h: History, lo: int, gauge: TokenGauge, min_tokens: int, min_messages: int, max_tokens: int) -> int:
    """N-COMP-6/7 on a history: walk back from the newest message until the tail holds at least
    ``min_tokens`` and ``min_messages``, never past ``max_tokens`` (the cap wins); then the nearest
    turn start (see :func:`pair_safe_start`) at or before that point within the cap, else the next
    one after it, so no pair is split; when every turn start is over the cap, the newest one (the newest
    turn is always kept). ``len(h)`` when none lies at or after ``lo``."""
    n = len(h)
    total = history_chars(h)

    def kept(i: int) -> int:
        return gauge.tokens(total - history_chars(h, i), n - i) - gauge.opaque

    b = n
    while b > lo and not (kept(b) >= min_tokens and n - b >= min_messages):
        if kept(b - 1) > max_tokens:
            break
        b -= 1
    for i in range(b, lo - 1, -1):
        if kept(i) > max_tokens:
            break
        if _turn_start(h, i):
            return i
    after = next((i for i in range(max(b, lo), n) if _turn_start(h, i)), None)
    if after is not None:
        return after
    # even the newest turn is over the cap: keep just it (as pair_safe_start does)
    return next((i for i in range(n - 1, lo - 1, -1) if _turn_start(h, i)), n)


def auto_compact_line(window: int, max_output: int, reserve: int = SUMMARY_RESERVE_TOKENS,
                      margin: int = AUTO_COMPACT_MARGIN_TOKENS) -> int:
    """Claude Code's auto-compact line (reported, peers.md; the seed's soft line, N-COMP-1/2):
    window − min(max output, reserve) − margin. 167,000 on a 200k window, 967,000 on 1M."""
    return window - min(max_output, reserve) - margin


class WindowedConfig(StrategyConfig):
    """Parameters shared by the windowed families (each subclass adds its own)."""

    trigger_tokens: int | None = Field(None, ge=1_000, le=10_000_000,
                                       description="compact when the estimated request reaches this many tokens "
                                       "(default: the family's rule for the window; clamped to window - reserve_tokens)")
    keep_tokens: int | None = Field(None, ge=0, le=10_000_000,
                                    description="after a compaction the newest messages kept verbatim fit this many "
                                    "tokens (default: the family's rule; pair-safe; the newest turn is always kept)")
    reserve_tokens: int = Field(SUMMARY_RESERVE_TOKENS, ge=0, le=200_000,
                                description="tokens kept free for the answer and a summary (N-COMP-1)")
    margin_tokens: int = Field(AUTO_COMPACT_MARGIN_TOKENS, ge=0, le=200_000,
                               description="the default trigger lies this far below window - reserve (N-COMP-2; "
                               "Claude Code's auto-compact margin, reported)")
    tail_min_tokens: int = Field(TAIL_MIN_TOKENS, ge=0, le=2_000_000, description="default tail: at least this many "
                                 "tokens kept verbatim (N-COMP-6)")
    tail_max_tokens: int = Field(TAIL_MAX_TOKENS, ge=0, le=2_000_000, description="default tail: never more than "
                                 "this (N-COMP-6; the cap wins over the minimum)")
    transcript: bool = Field(True, description="keep the full transcript in a file and name it after a compaction "
                             "(Claude Code's path back; a read-back of it is billed)")
    summary: bool = Field(True, description="summarise what a compaction drops (a billed side call); off: cut with "
                          "no summary")
    summary_model: str = Field("", max_length=100, description="model of the summary call (empty: the main model)")
    summary_max_tokens: int = Field(SUMMARY_RESERVE_TOKENS, ge=100, le=200_000,
                                    description="output cap of the summary call (N-COMP-1's reserve)")
    chars_per_token: float = Field(CHARS_PER_TOKEN, gt=0.5, le=10,
                                   description="estimate before the first usage arrives (N-COMP-5)")
    max_result_chars: int = Field(400_000, ge=0, le=10_000_000,
                                  description="guard: a single tool result longer than this is cut (head kept, "
                                  "irreversible); 0 = no per-result cap. Whatever this says, one message's "
                                  "results are cut to half of what the head leaves in the window")

    @model_validator(mode="after")
    def _keep_below_trigger(self):
        if self.keep_tokens is not None and self.trigger_tokens is not None and self.keep_tokens >= self.trigger_tokens:
            raise ValueError(f"keep_tokens ({self.keep_tokens}) must be below trigger_tokens ({self.trigger_tokens})")
        if self.tail_min_tokens > self.tail_max_tokens:
            raise ValueError(f"tail_min_tokens ({self.tail_min_tokens}) must not exceed tail_max_tokens "
                             f"({self.tail_max_tokens})")
        return self


class GaugedStrategy(Strategy):
    """Append-only history with the strategy's own calibrated estimate (:class:`TokenGauge`), a map
    of the tool uses seen (id -> name, input: a tool result names only its id) and Claude Code-style
    breakpoints (system + last message). The config must have ``chars_per_token``."""

    # ctxsim's own designs run as one long-lived process: what they learn or note in one launch serves the next (assumed;
    # a subclass says what it keeps). The property kit then keeps one instance across launches (keeps_across_launches).
    KEPT_ACROSS_LAUNCHES: ClassVar[str] = "its token gauge, calibrated on the usage of every launch so far"

    @classmethod
    def keeps_across_launches(cls, config: StrategyConfig) -> str | None:
        return cls.KEPT_ACROSS_LAUNCHES

    def __init__(self, config: StrategyConfig, env: StrategyEnv) -> None:
        super().__init__(config, env)
        self.gauge = TokenGauge(config.chars_per_token, env.system.opaque_tokens)
        self.tools: ToolSet = env.tools
        self._fixed_chars = len(env.system.text) + sum(len(t.payload) for t in env.tools.tools)
        self._sent: tuple[int, int] = (0, 0)  # chars and messages of the last request built
        self.tool_uses: dict[str, tuple[str, dict]] = {}

    def set_tools(self, tools: ToolSet) -> None:
        self.tools = tools
        self._fixed_chars = len(self.env.system.text) + sum(len(t.payload) for t in tools.tools)

    def add_tool(self, tool: ToolDef) -> None:
        """Declare a tool the strategy's agent has and the trace does not (Task, TodoWrite...)."""
        if tool.name not in self.tools.names():
            self.set_tools(ToolSet((*self.tools.tools, tool)))

    def estimate_of(self, h: History) -> int:
        return self.gauge.tokens(self._fixed_chars + history_chars(h), len(h))

    def estimate(self) -> int | None:
        return self.estimate_of(self.history)

    def on_response(self, message: Message, usage: Usage | None) -> None:
        self.gauge.observe(*self._sent, usage)
        for b in message.blocks:
            if b.type == "tool_use" and b.id:
                self.tool_uses[b.id] = (b.name or "", dict(b.input or {}))
        self.history = self.history.append(message)

    def request_kind(self) -> str:
        return "subagent" if self.in_isolated_subtask else "main"

    def on_session_start(self, session: str, resume: bool, now: float) -> None:
        super().on_session_start(session, resume, now)
        if resume:
            self.resume_repair()

    def resume_repair(self) -> None:
        self.history, rewrote = repair_dangling(self.history)
        if rewrote:
            self.rewrote = True
            self.counters.extra["resume_repairs"] += 1

    def prepare(self, call: CallInfo) -> None:
        """Change history before the request is built (cuts, elisions, injections)."""

    def request_of(self, h: History, kind: str | None = None, model: str | None = None) -> Request:
        """A request of ``h`` as this strategy sends it (its tools, its breakpoints)."""
        return Request(self.env.system, self.tools, h, self.breakpoints(h), kind=kind or self.request_kind(),
                       estimated_tokens=self.estimate_of(h), model=model)

    def build_request(self, call: CallInfo) -> Request:
        self.prepare(call)
        h = self.history
        self._sent = (self._fixed_chars + history_chars(h), len(h))
        return replace(self.request_of(h), rewrite=self._take_rewrite())

    def breakpoints(self, history: History) -> tuple[Breakpoint, ...]:
        n = len(history)
        return (Breakpoint("system"), Breakpoint(n - 1)) if n else (Breakpoint("system"),)

    @classmethod
    def cache_marks(cls, config) -> tuple[str, ...]:
        return ("system", "last")

    def model_step(self, kind: str, tool_use: Block, *, model: str | None = None) -> bool:
        """One model step the strategy's agent takes on its own (a TodoWrite, a search, a memory
        edit, a delegation): a billed call on the current context whose answer is ``tool_use``.
        Returns False (counted) when the call fails."""
        out_tokens = self.gauge.content(len(tool_use.payload)) + MESSAGE_FRAMING_TOKENS
        spec = CallSpec(kind=kind, max_output_tokens=max(1, out_tokens), params={"expected_output": tool_use.payload})
        try:
            self.env.services.call(self.request_of(self.history, kind=kind, model=model), spec)
        except SideCallFailed:
            self.counters.extra[f"{kind}_failed"] += 1
            return False
        return True

    def tool_step(self, kind: str, tool_use: Block, result: str, *, model: str | None = None) -> bool:
        """:meth:`model_step`, then the tool_use and its result enter history (a failed call leaves
        history unchanged)."""
        if not self.model_step(kind, tool_use, model=model):
            return False
        self.history = self.history.extend([
            Message("assistant", (tool_use,), {"origin": kind}),
            Message("user", (Block.tool_result(tool_use.id or "", result),), {"origin": kind}),
        ])
        self.counters.extra[f"{kind}_calls"] += 1
        return True


@dataclass
class _Frame:
    """An agent context set aside while an isolated sub-agent runs."""

    history: History
    pinned: int
    summary: Message | None
    state: Any = None
    label: str = "main"


class WindowedStrategy(GaugedStrategy):
    """A bounded conversation: ``pinned`` head messages (repository, memory, state, the last
    summary), then a window of recent messages, compacted on pair-safe boundaries: at the trigger
    down to the tail (so the cached prefix breaks once per compaction, not on every call), each
    compaction counted (``counters.compaction``: content left history).

    Subclasses say what the head is (:meth:`session_head`), what happens to messages that leave
    (:meth:`on_cut`, which may return a new head), may add to history before each call
    (:meth:`before_call`) and may keep per-agent state (:meth:`agent_state`, :meth:`set_agent_state`)."""

    manages_window = True
    on_rejection: ClassVar[str] = ("reactive compaction, deeper at each retry, then the newest results cut; "
                                   "the turn errors when nothing is left to cut (Claude Code, reported)")
    SUMMARY_SECTIONS: ClassVar[tuple[str, ...]] = SUMMARY_SECTIONS
    SUMMARY_INSTRUCTIONS: ClassVar[str] = SUMMARY_INSTRUCTIONS
    CONTINUATION: ClassVar[str] = CONTINUATION

    def __init__(self, config: WindowedConfig, env: StrategyEnv) -> None:
        super().__init__(config, env)
        # a reserve at or above the window leaves no request room (issue 44 fresh, case 15: 127
        # compactions in 120 calls, "completed"); refused as the other families refuse it
        check_room(self.name, env.window, env.window - config.reserve_tokens, {"reserve_tokens": config.reserve_tokens})
        self.pinned = 0
        self.cuts = 0
        self.summary_msg: Message | None = None
        self._frames: list[_Frame] = []
        self.label = "main"  # this agent context's name (its transcript file)
        self._written: set[bytes] = set()
        self._subagents = 0
        self._start_session(resume=False)

    # --- limits -----------------------------------------------------------------------------------
    @property
    def limit(self) -> int:
        """No request may be estimated above this (window minus the answer's reserve)."""
        return max(1, self.env.window - self.config.reserve_tokens)

    def rule_trigger(self) -> int:
        """The family's trigger for the window (default: Claude Code's auto-compact line)."""
        c = self.config
        return auto_compact_line(self.env.window, self.env.max_output_tokens, c.reserve_tokens, c.margin_tokens)

    @property
    def trigger(self) -> int:
        t = self.config.trigger_tokens if self.config.trigger_tokens is not None else self.rule_trigger()
        return max(1, min(t, self.limit))

    def head_tokens(self) -> int:
        """Estimate of what every request carries before the window: system, tools, pinned head."""
        return self.estimate_of(self.history.truncate(self.pinned))

    def room(self) -> int:
        """What the head leaves below the trigger, halved: a tail never takes more (so a compaction
        always makes room, whatever the window and the head)."""
        return max(0, self.trigger - self.head_tokens()) // 2

    def message_cap_chars(self) -> int:
        """The most characters of tool results one message may bring: half of what the head leaves
        below the limit (at the learned tokens-per-character ratio), and ``max_result_chars`` each."""
        room = max(0, self.limit - self.head_tokens()) // 2
        return int(room / self.gauge.ratio)

    def choose_start(self, h: History, lo: int, depth: int = 1) -> int:
        """Where the kept tail starts. ``keep_tokens`` when set (the largest tail that fits),
        else N-COMP-6's tail; never more than :meth:`room`; ``depth`` > 1 (a retry after a rejected
        request) keeps ``1 / 4**(depth-1)`` of that."""
        c = self.config
        shrink = 4 ** (depth - 1)
        cap = self.room() // shrink
        if c.keep_tokens is not None:
            return pair_safe_start(h, lo, min(c.keep_tokens // shrink, cap), self.gauge)
        return tail_start(h, lo, self.gauge, min(c.tail_min_tokens // shrink, cap), max(1, 5 // shrink),
                          min(c.tail_max_tokens // shrink, cap))

    # the parameters the property kit scales to its small window (ctxsim.harness.testing.machine)
    SCALED: ClassVar[tuple[str, ...]] = ("reserve_tokens", "margin_tokens", "tail_min_tokens", "tail_max_tokens")
    FLOORS: ClassVar[dict[str, int]] = {"trigger_tokens": 1_000, "requests_max_tokens": 200, "inject_max_tokens": 100,
                                        "summary_max_tokens": 100}

    @classmethod
    def check_params(cls, window: int) -> dict[str, int]:
        """Absolute token parameters scaled by window / 200,000 (never up), so the rules act at the
        same relative points of the property kit's small window."""
        f = cls.Config.model_fields
        scale = min(1.0, window / 200_000)
        return {n: max(cls.FLOORS.get(n, 0), int(f[n].default * scale)) for n in cls.SCALED
                if f[n].default is not None}

    # --- hooks --------------------------------------------------------------------------------------
    def session_head(self, resume: bool) -> list[Message]:
        """The pinned messages a session starts with (user messages)."""
        return []

    def on_cut(self, dropped: History, start: int) -> list[Message] | None:
        """``dropped`` = history[:start], about to leave; return a new head (without the summary,
        which the base adds) or None (keep the present one)."""
        return None

    def before_call(self, call: CallInfo) -> None:
        """Add to history before the size check (injections, the agent's own tool steps)."""

    def after_compaction(self, start: int, head: int) -> None:
        """History was rewritten: messages[start:] now begin at index ``head``."""

    def agent_state(self) -> Any:
        """Per-agent state a sub-agent must not share (set aside while one runs)."""
        return None

    def set_agent_state(self, state: Any, description: str | None) -> None:
        """Restore ``state`` (the parent's, at a sub-agent's end) or, with ``description``, start a
        fresh one for a new sub-agent."""

    # --- events ---------------------------------------------------------------------------------------
    def family_head(self) -> list[Message]:
        """The pinned messages without the summary."""
        head = list(self.history[: self.pinned])
        if self.summary_msg is not None and head and head[-1] is self.summary_msg:
            head.pop()
        return [m for m in head if m.meta.get("origin") != "placeholder"]

    def _start_session(self, resume: bool) -> None:
        self.summary_msg = None
        head = self.session_head(resume)
        self.pinned = len(head)
        self.history = History(head)

    def on_session_start(self, session: str, resume: bool, now: float) -> None:
        if self._frames:  # the launch crashed inside a sub-agent: its context is gone
            outer = self._frames[0]
            self.history, self.pinned, self.summary_msg = outer.history, outer.pinned, outer.summary
            self.label = outer.label
            self.set_agent_state(outer.state, None)
            self._frames.clear()
            self._spans.clear()
            self.counters.extra["subagents_lost"] += 1
        if resume:
            self.resume_repair()
            return
        self._start_session(resume)

    def on_subtask_start(self, id: str, description: str, isolated: bool) -> None:
        """An isolated span is a sub-agent with its own context and its own state."""
        if isolated:
            self._frames.append(_Frame(self.history, self.pinned, self.summary_msg, self.agent_state(), self.label))
            self.summary_msg = None
            self._subagents += 1
            self.label = f"agent-{self._subagents:03d}"
            self.set_agent_state(None, description or id)
        super().on_subtask_start(id, description, isolated)
        if isolated:
            head = self.session_head(False)
            self.pinned, self.history = len(head), History(head)

    def on_subtask_end(self, id: str, conclusion: str) -> None:
        if not self._spans:
            self.counters.extra["orphan_subtask_ends"] += 1  # its sub-agent died with its launch
            return
        isolated = self._spans[-1][1] is not None
        super().on_subtask_end(id, conclusion)
        if isolated and self._frames:
            f = self._frames.pop()
            self.history, self.pinned, self.summary_msg = f.history, f.pinned, f.summary
            self.label = f.label
            self.set_agent_state(f.state, None)

    def on_tool_results(self, message: Message) -> None:
        self.history = self.history.append(self.guard(message))

    def guard(self, message: Message, cap: int | None = None) -> Message:
        """Cut tool results (head kept, irreversible, counted) so one message cannot overflow: each
        result to ``max_result_chars``, and the message's results together to ``cap`` (default
        :meth:`message_cap_chars`), largest first, none below an equal share.

        On entry (``cap`` None) a result whose block carries ``readback=True`` (a strategy's read-back
        of a file it spilled, which N-SPILL-3 says enters as it is) is left whole: it counts against
        the cap first and the other results share what it leaves (none below an equal share of
        that). Read-backs alone over the cap still enter whole and the others are cut to nothing
        but the marker: the agent asked for that file, and the window is then protected as for any
        overflow (compaction at the line, or at a rejection, where :meth:`cut_newest_results` passes
        an explicit ``cap`` and that cut spares no result)."""
        idx = [k for k, b in enumerate(message.blocks) if b.type == "tool_result"]
        if not idx:
            return message
        keep = [k for k in idx if message.blocks[k].meta.get("readback") is True] if cap is None else []
        if keep:
            idx = [k for k in idx if k not in keep]
            if not idx:
                return message
        per = self.config.max_result_chars or None
        sizes = {k: min(len(message.blocks[k].text), per or len(message.blocks[k].text)) for k in idx}
        cap = self.message_cap_chars() if cap is None else cap
        cap = max(0, cap - sum(len(message.blocks[k].text) for k in keep))
        excess = sum(sizes.values()) - cap
        floor = cap // len(idx)
        for k in sorted(idx, key=lambda k: -sizes[k]):
            if excess <= 0:
                break
            cut = min(excess, max(0, sizes[k] - floor))
            sizes[k] -= cut
            excess -= cut
        if all(sizes[k] >= len(message.blocks[k].text) for k in idx):
            return message
        blocks = list(message.blocks)
        for k in idx:
            b = blocks[k]
            if sizes[k] < len(b.text):
                self.counters.extra["results_capped"] += 1
                blocks[k] = b.with_text(b.text[: sizes[k]] + CAP_MARKER.format(n=len(b.text) - sizes[k]), capped=True)
        return Message(message.role, tuple(blocks), message.meta)

    # --- compaction -----------------------------------------------------------------------------------
    def write_transcript(self, messages: History) -> Path:
        """Append the messages not yet on disk to this agent context's transcript (JSONL, one
        message a line, as Claude Code keeps one per session); returns its absolute path."""
        d = Path(self.env.session_dir) / "transcripts"
        confined.guard(d / f"{self.label}.jsonl")
        d.mkdir(parents=True, exist_ok=True)
        path = (d / f"{self.label}.jsonl").resolve()
        lines = []
        for m in messages:
            # the pinned head is on disk already (the repository, the state files, core memory)
            if m.meta.get("origin") in NOT_TRANSCRIBED or m.digest in self._written:
                continue
            self._written.add(m.digest)
            lines.append(json.dumps(m.to_api(), ensure_ascii=False) + "\n")
        if lines:
            confined.guard(path)
            with path.open("a", encoding="utf-8") as fh:
                fh.writelines(lines)
        return path

    def summarise(self, dropped: History, transcript: Path | None = None) -> Message | None:
        """One billed summary of ``dropped`` (the head and the last summary included: the call reads
        the cached prefix on the main model); None when the call fails (the cut happens anyway)."""
        c = self.config
        sections = self.SUMMARY_SECTIONS
        spec = CallSpec(kind=SUMMARY, sections=sections, max_output_tokens=c.summary_max_tokens,
                        instructions=self.SUMMARY_INSTRUCTIONS.format(sections="\n".join(
                            f"{i}. {s}" for i, s in enumerate(sections, 1))))
        msgs = dropped
        model = self.summary_model()
        if model and model != self.env.model:
            head = self.family_head()
            msgs = History(m for m in dropped if not any(m is x for x in head))  # another model: no cache to reuse
            if len(msgs) and msgs[0].role != "user":  # the API wants a user message first: the head stays
                msgs = dropped
        if not len(msgs):
            return self.summary_msg
        req = Request(self.env.system, self.tools, msgs, (Breakpoint("system"), Breakpoint(len(msgs) - 1)),
                      kind=SUMMARY, model=model or None)
        try:
            res = self.env.services.call(req, spec)
        except SideCallFailed:
            self.counters.extra["summary_failed"] += 1
            return self.summary_msg
        if not res.text.strip():  # an empty answer is no summary (and an empty block is a 400)
            self.counters.extra["summary_failed"] += 1
            return self.summary_msg
        self.counters.extra["summaries"] += 1
        text = self.CONTINUATION.format(summary=res.text.strip())
        if transcript is not None:
            text += "\n\n" + TRANSCRIPT_NOTE.format(path=transcript)
        return Message.user(text, origin="summary")

    def summary_model(self) -> str:
        """The model of this context's summary call (empty: the main model)."""
        return self.config.summary_model

    @classmethod
    def call_models(cls, config) -> dict[str, str]:
        return {"summary": config.summary_model}   # empty (the main model): no promise

    def compact(self, depth: int = 1) -> bool:
        """Drop the oldest messages down to the tail (pair-safe), the family's head and the summary
        before what stays. Returns whether anything left history (one counted compaction)."""
        h = self.history
        start = self.choose_start(h, self.pinned + 1, depth)
        if start >= len(h):
            self.counters.extra["cut_impossible"] += 1
            return False
        dropped = h.truncate(start)
        path = self.write_transcript(dropped) if self.config.transcript else None
        head = self.on_cut(dropped, start)
        if head is None:
            head = self.family_head()
        if self.config.summary:
            self.summary_msg = self.summarise(dropped, path)
        if self.summary_msg is not None:
            head = [*head, self.summary_msg]
        elif path is not None:
            head = [*head, Message.user(DROPPED_NOTE + " " + TRANSCRIPT_NOTE.format(path=path), origin="placeholder")]
        if not head or head[-1].role != "user":  # the API wants a user message first
            head = [*head, Message.user(DROPPED_NOTE, origin="placeholder")]
        self.pinned = len(head)
        self.history = History([*head, *h[start:]])
        self.after_compaction(start, len(head))
        self.rewrote = True
        self.cuts += 1
        self.counters.compaction(True)
        self.counters.extra["window_cuts"] += 1
        self.counters.extra["messages_dropped"] += start
        if self.estimate_of(self.history) > self.limit:
            self.counters.extra["over_limit_after_cut"] += 1
        return True

    def prepare(self, call: CallInfo) -> None:
        self.before_call(call)
        if self.estimate_of(self.history) >= self.trigger:
            self.compact()
        for attempt in range(1, 4):  # still over the line after the cut: the newest results are too big
            if self.estimate_of(self.history) <= self.limit or not self.cut_newest_results(attempt):
                break

    def on_rejected(self, rejection, call: CallInfo) -> bool:
        """Prompt too long: re-learn the ratio from the size the API stated, compact at once (a tail
        a quarter as long at each retry), and when nothing is left to cut, cut the newest results;
        any other rejection (a pairing or breakpoint error) is not the agent's to repair."""
        if "overflow" not in rejection.reasons:
            return False
        chars, msgs = self._sent
        if rejection.tokens > 0:
            self.gauge.observe(chars, msgs, Usage(input_uncached=rejection.tokens))
        self.counters.extra["reactive_compactions"] += 1
        if self.compact(depth=rejection.attempt + 1):
            return True
        return self.cut_newest_results(rejection.attempt)

    def cut_newest_results(self, attempt: int) -> bool:
        """The tail is one turn and still too long: cut its results to a share of the room left."""
        h = self.history
        cap = max(1_000, self.message_cap_chars() // (2 ** attempt))
        for i in range(len(h) - 1, self.pinned - 1, -1):
            if h[i].has_tool_result:
                m = self.guard(h[i], cap)
                if m is h[i]:
                    return False
                self.history = h.replace_at(i, m)
                self.rewrote = True
                self.counters.compaction(True)
                return True
        return False

    def breakpoints(self, history: History) -> tuple[Breakpoint, ...]:
        """System, the end of the pinned head (stable between compactions) and the last message."""
        n = len(history)
        out: list[Breakpoint] = [Breakpoint("system")]
        if 0 < self.pinned < n:
            out.append(Breakpoint(self.pinned - 1))
        if n:
            out.append(Breakpoint(n - 1))
        return tuple(out)


# --- structured state --------------------------------------------------------------------------------

REQUESTS_MAX_TOKENS = 20_000  # codex-rs compact.rs: user messages carried verbatim across a compaction (peers.md)
TODO_EVERY_CALLS = 15  # the bundled codemie session: 9 TodoWrite calls in 133 (one per ~15)
TODO_ITEM_CHARS = 100  # real TodoWrite items: 30-90 characters in that session
# Claude Code's TodoWrite result text (reported: the tool's transcripts)
TODO_RESULT = ("Todos have been modified successfully. Ensure that you continue to use the todo list to track "
               "your progress. Please proceed with the current tasks if applicable")
TODO_TOOL = ToolDef("TodoWrite", "Create and manage a structured task list for your current coding session; "
                    "each call sends the whole updated list.", {
                        "type": "object", "required": ["todos"],
                        "properties": {"todos": {"type": "array", "items": {
                            "type": "object", "required": ["content", "status", "activeForm"],
                            "properties": {"content": {"type": "string"}, "activeForm": {"type": "string"},
                                           "status": {"type": "string",
                                                      "enum": ["pending", "in_progress", "completed"]}}}}}})
STATE_BLOCK = """\
<project-state>
{lead}The task state is kept in these files (read them if you need them again): {paths}

## User requests (verbatim)
{requests}

## Todo list
{todos}
</project-state>"""
STATE_LEAD_CUT = "The conversation before this point was dropped from the context window. "


@dataclass
class AgentTasks:
    """One agent context's state: its user requests (verbatim) and its todo list."""

    dir: Path
    requests: list[tuple[str | None, str]] = field(default_factory=list)  # (session, text)
    todos: list[dict[str, str]] = field(default_factory=list)
    recorded: bool = False  # the recorded agent writes its own todo list


def _write_changed(written: dict[Path, tuple[str, tuple[int, ...]]], path: Path, text: str) -> None:
    """Write ``text`` to ``path`` unless this run's last write there was the same text and the file
    is as that write left it (inode, size, mtime, ctime): the state files are rewritten at every
    request and todo update, and a rewrite of unchanged bytes changes nothing on disk but the
    time (no one reads that), while it cost most of the strategy's own time in a long session."""
    last = written.get(path)
    if last is not None and last[0] == text:
        try:
            st = os.stat(path)
        except OSError:
            st = None
        if st is not None and (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns) == last[1]:
            return
    confined.guard(path)
    path.write_text(text, encoding="utf-8")
    st = os.stat(path)
    written[path] = (text, (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))


def keep_within(entries: list[tuple[str | None, str]], session: str | None, budget: int,
                size: Callable[[str], int]) -> tuple[list[tuple[str | None, str]], int]:
    """(session, text) entries cut to ``budget`` (by ``size``), oldest first, but the first entry of
    ``session`` (its goal) and the newest always stay. Returns the kept entries and how many went."""
    kept = list(entries)
    sizes = [size(x) for _, x in kept]  # each entry sized once; the total kept as entries go
    total = sum(sizes)
    first = next((k for k, (s, _) in enumerate(kept) if s == session), None)
    dropped = 0
    while len(kept) > 1 and total > budget:
        k = next((k for k in range(len(kept) - 1) if k != first), None)
        if k is None:
            break
        kept.pop(k)
        total -= sizes.pop(k)
        dropped += 1
        first = first - 1 if first is not None and k < first else first
    return kept, dropped


def todo_item(text: str, chars: int) -> dict[str, str]:
    """The simulated model's todo item for a request: its first non-empty line, cut to ``chars``."""
    line = next((x.strip() for x in text.splitlines() if x.strip()), "")[:chars]
    return {"content": line, "status": "in_progress", "activeForm": line}


def parse_todos(value: Any) -> list[dict[str, str]] | None:
    """A TodoWrite input's list (``{"todos": [...]}`` or the list itself, JSON text or data), or
    None when it is not one."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if isinstance(value, dict):
        value = value.get("todos")
    if not isinstance(value, list):
        return None
    out = []
    for t in value:
        if isinstance(t, dict) and isinstance(t.get("content"), str):
            status = t.get("status") if t.get("status") in ("pending", "in_progress", "completed") else "pending"
            out.append({"content": t["content"], "status": status,
                        "activeForm": str(t.get("activeForm") or t["content"])})
    return out


class StructuredStateConfig(WindowedConfig):
    summary: bool = Field(False, description="summarise what a cut drops as well (off: the state replaces a summary)")
    requests_max_tokens: int = Field(REQUESTS_MAX_TOKENS, ge=0, le=1_000_000,
                                     description="the user's requests kept verbatim in the state, in estimated tokens "
                                     "(codex-rs compact.rs: 20,000); the oldest go first, the session's first stays")
    request_max_chars: int = Field(10_000, ge=100, le=1_000_000,
                                   description="one request is kept up to this many characters (assumed)")
    todo_every: int = Field(TODO_EVERY_CALLS, ge=0, le=10_000,
                            description="within a task, the model re-writes its todo list every this many calls "
                            "(0: only when a request arrives; the bundled codemie session: about 15)")
    todo_item_chars: int = Field(TODO_ITEM_CHARS, ge=10, le=10_000,
                                 description="the simulated model's todo item: the request's first line, cut to this")
    todo_tool: str = Field("TodoWrite", min_length=1, max_length=64,
                           description="name of the task-list tool (its calls in a recorded log are the state)")


class StructuredState(WindowedStrategy):
    """Requests and a todo list in per-agent state files, written as the work happens; the window
    cut at the auto-compact line behind the state block."""

    name = "structured_state"
    KEPT_ACROSS_LAUNCHES = ("its task state (the user's requests and the todo list, also written to its state files) and "
                            "its token gauge")
    summary = "task state in files (user requests verbatim, a TodoWrite list), written as work happens; short window"
    Config = StructuredStateConfig
    SCALED = (*WindowedStrategy.SCALED, "requests_max_tokens")

    def __init__(self, config: StructuredStateConfig, env: StrategyEnv) -> None:
        self.root = Path(env.session_dir) / "state"
        self.agents = 0
        self.tasks = self._new_agent("main")
        self.session: str | None = None
        self.todo_due = False
        self.calls_since_todo = 0
        self._state_files: dict[Path, tuple[str, tuple[int, ...]]] = {}   # what each state file was last written with
        self._todos_memo: tuple[AgentTasks, list, str] | None = None   # the last todos.json text, and for what
        self._todo_frags: dict[tuple, str] = {}        # an item's indented dump, by its (key, value) pairs
        super().__init__(config, env)
        self.add_tool(replace(TODO_TOOL, name=config.todo_tool))

    def _new_agent(self, label: str) -> AgentTasks:
        d = self.root / label
        confined.guard(d)
        d.mkdir(parents=True, exist_ok=True)
        return AgentTasks(d)

    # --- per agent ------------------------------------------------------------------------------------
    def after_compaction(self, start: int, head: int) -> None:
        """History was rewritten: messages[start:] now begin at index ``head``."""

    def agent_state(self) -> Any:
        return (self.tasks, self.todo_due, self.calls_since_todo)

    def set_agent_state(self, state: Any, description: str | None) -> None:
        if state is not None:
            self.tasks, self.todo_due, self.calls_since_todo = state
            return
        if description is not None:
            self.agents += 1
            self.tasks = self._new_agent(f"agent-{self.agents:03d}")
            self.todo_due, self.calls_since_todo = False, 0

    # --- the files ------------------------------------------------------------------------------------
    def paths(self) -> list[Path]:
        return [self.tasks.dir / "requests.md", self.tasks.dir / "todos.json"]

    def write_state(self) -> None:
        t = self.tasks
        _write_changed(self._state_files, t.dir / "requests.md", "".join(f"{text}\n\n" for _, text in t.requests))
        _write_changed(self._state_files, t.dir / "todos.json", self._todos_json(t))

    def _todos_json(self, t: AgentTasks) -> str:
        """todos.json's text: ``json.dumps(t.todos, indent=1, ensure_ascii=False)`` and a newline,
        made from each item's own dump, encoded once per distinct item (the list only grows in a
        session and the indented dump is the pure-Python encoder: re-encoding the whole list at each
        write made a long session's writes quadratic). Values are strings, so an item's dump has no
        line break inside a value and indenting it by one space is what the whole dump does."""
        items = [tuple(x.items()) for x in t.todos]   # keys in order: the dump's order
        memo = self._todos_memo
        if memo is not None and memo[0] is t and memo[1] == items:
            return memo[2]
        if not items:
            text = "[]\n"
        else:
            frags, parts = self._todo_frags, []
            for key, x in zip(items, t.todos, strict=True):
                f = frags.get(key)
                if f is None:
                    f = frags[key] = " " + json.dumps(x, indent=1, ensure_ascii=False).replace("\n", "\n ")
                parts.append(f)
            text = "[\n" + ",\n".join(parts) + "\n]\n"
        self._todos_memo = (t, items, text)
        return text

    def state_block(self, lead: str = STATE_LEAD_CUT) -> Message | None:
        t = self.tasks
        if not t.requests and not t.todos:
            return None
        todos = "\n".join(f"- [{x['status']}] {x['content']}" for x in t.todos) or "(none yet)"
        text = STATE_BLOCK.format(lead=lead, paths=", ".join(str(p.resolve()) for p in self.paths()),
                                  requests="\n\n".join(text for _, text in t.requests), todos=todos)
        return Message.user(text, origin="state")

    def record_request(self, m: Message) -> None:
        """The harness keeps the user's words (no model call): verbatim, the oldest dropped over the
        budget, the current session's first request kept."""
        t = self.tasks
        t.requests.append((self.session, m.text[: self.config.request_max_chars]))
        t.requests, dropped = keep_within(t.requests, self.session, self.config.requests_max_tokens,
                                          lambda x: self.gauge.content(len(x)))
        self.counters.extra["requests_trimmed"] += dropped
        self.write_state()

    # --- events ---------------------------------------------------------------------------------------
    def session_head(self, resume: bool) -> list[Message]:
        block = self.state_block("") if self.tasks.requests or self.tasks.todos else None
        return [block] if block is not None else []

    def on_session_start(self, session: str, resume: bool, now: float) -> None:
        self.session = session
        super().on_session_start(session, resume, now)

    def on_user(self, message: Message) -> None:
        super().on_user(message)
        if is_task_message(message):
            self.record_request(message)
            if not self.tasks.recorded:
                for x in self.tasks.todos:
                    if x["status"] == "in_progress":
                        x["status"] = "completed"
                self.tasks.todos.append(todo_item(message.text, self.config.todo_item_chars))
                self.todo_due = True

    def on_response(self, message: Message, usage: Usage | None) -> None:
        super().on_response(message, usage)
        self.calls_since_todo += 1
        for b in message.blocks:
            if b.type == "tool_use" and b.name == self.config.todo_tool:
                todos = parse_todos(dict(b.input or {}))
                if todos is not None:  # the recorded agent keeps its own list: it is the state
                    self.tasks.recorded, self.tasks.todos, self.todo_due = True, todos, False
                    self.calls_since_todo = 0
                    self.write_state()

    def before_call(self, call: CallInfo) -> None:
        t = self.tasks
        if t.recorded or not t.todos:
            return
        every = self.config.todo_every
        if not (self.todo_due or (every and self.calls_since_todo >= every)):
            return
        self.todo_due, self.calls_since_todo = False, 0
        n = self.counters.extra["todo_write_calls"] + self.counters.extra["todo_write_failed"] + 1
        tu = Block.tool_use(f"ctxsim_todo_{n}", self.config.todo_tool, {"todos": [dict(x) for x in t.todos]})
        if self.tool_step("todo_write", tu, TODO_RESULT):
            self.write_state()

    @classmethod
    def writes_every(cls, config) -> tuple[str, int, str] | None:
        """The todo list is re-written every ``todo_every`` answered calls within a task (sooner when a task-bearing
        request arrives), until the recorded agent writes its own (a ``todo_tool`` call in the log)."""
        return ("todo_write", config.todo_every, config.todo_tool) if config.todo_every else None

    def on_cut(self, dropped: History, start: int) -> list[Message] | None:
        block = self.state_block()
        return [block] if block is not None else []


__all__ = ["split_names", "StructuredState", "StructuredStateConfig", "GaugedStrategy", "WindowedStrategy",
           "WindowedConfig", "TokenGauge", "pair_safe_start", "tail_start", "history_chars", "repair_dangling",
           "is_task_message", "auto_compact_line", "parse_todos", "todo_item", "keep_within"]
