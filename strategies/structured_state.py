"""structured_state: plans, task lists and decisions live in files outside the conversation; the
conversation itself is a short window (spec/novacode.md section 8: "structured state outside the
conversation (plans, task lists as files)").

Model. The agent keeps four real files under ``<session_dir>/state/``: ``plan.md`` (goal and plan),
``tasks.md`` (the user's requests as a task list, and the current work), ``decisions.md`` (decisions
and key facts) and ``notes.md`` (files touched, errors met). The conversation is windowed: when the
strategy's own estimate of the request passes ``trigger_tokens``, the oldest messages are dropped on
a pair-safe boundary until the rest fits ``keep_tokens``. Before they go, one billed side call
(kind ``summary``, this strategy's own sections, output capped at ``state_max_tokens``) reads them
(after the current state block, so the call reuses the cached prefix) and says what the state must
gain. Unlike a summary, the state is additive: a line once written stays in its file (only "Current
work" is replaced), so a fact kept once is not re-drawn at every later update; when the state
outgrows ``state_max_tokens`` the oldest lines go first, least durable sections first (current
work, files, errors, tasks, then decisions, the plan last). The files are re-injected as one small
state block, the first message of the window, which also names the files' paths so the model can
read them back. The state outlives the conversation: the state is also updated when a session ends
(``update_on_session_end``), and a new session starts from the state block, which is what the
family promises across sessions.

Sources of the idea: the seed's "structured state outside the conversation"; Claude Code's TodoWrite
task list and plan files, Anthropic's memory tool ("progress notes in files"), and the
plan/task-file practice of long-horizon agents (Anthropic, "Effective context engineering for AI
agents", 2025). What the simulated model keeps in the state files is decided by the same documented
summariser model (harness/simllm.py) as every summary, so retention is measured, not assumed.

This module also holds :class:`WindowedStrategy`, the shared mechanics of the families that keep a
bounded conversation (a calibrated token gauge, pair-safe windowing with hysteresis, pinned head
messages, a guard on oversized results): rag_memory, whole_repo and subagent_isolation build on it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from pydantic import Field, model_validator

from harness.conversation import Block, Breakpoint, History, Message, Request, ToolSet, Usage
from harness.llm import SUMMARY, CallSpec, SideCallFailed
from strategies.base import CallInfo, Strategy, StrategyConfig, StrategyEnv

CHARS_PER_TOKEN = 3.5       # N-COMP-5: the seed's characters-per-token rule, before any usage arrives
MESSAGE_FRAMING_TOKENS = 4  # per-message role framing (same modelling assumption as the provider's)
DROPPED_NOTE = "[Earlier messages of this conversation were dropped from the context window.]"
CAP_MARKER = "\n[... {n} characters cut: the result was larger than this context can hold ...]\n"


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
            import json

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
    what it was billed). Starts at 1/3.5 (N-COMP-5). ``opaque`` tokens (the recorded prompt the
    trace has no text for) are known to the agent and added as they are."""

    def __init__(self, chars_per_token: float, opaque: int = 0) -> None:
        self.ratio = 1.0 / chars_per_token
        self.opaque = opaque

    def tokens(self, chars: int, messages: int = 0) -> int:
        return self.opaque + math.ceil(chars * self.ratio) + MESSAGE_FRAMING_TOKENS * messages

    def observe(self, chars: int, messages: int, usage: Usage | None) -> None:
        if usage is None or chars <= 0:
            return
        content = usage.input_total - self.opaque - MESSAGE_FRAMING_TOKENS * messages
        if content > 0:
            self.ratio = content / chars


def pair_safe_start(h: History, lo: int, keep_tokens: int, gauge: TokenGauge) -> int:
    """Where the kept window starts: the smallest index ``i >= lo`` of an assistant message that
    follows a user message, such that messages[i:] fit ``keep_tokens``. Starting on such a message
    never splits a tool_use from its tool_result (the results of messages[i-1]'s tool uses, if any,
    are in messages[:i]; those of messages[i:] follow them). If even the newest turn does not fit,
    the newest such index; ``len(h)`` when no such index exists (nothing can be cut)."""
    n = len(h)
    total = history_chars(h)
    best = n
    for i in range(n - 1, lo - 1, -1):
        if i == 0 or h[i].role != "assistant" or h[i - 1].role != "user":
            continue
        kept = gauge.tokens(total - history_chars(h, i), n - i) - gauge.opaque
        if kept > keep_tokens and best != n:
            break
        best = i
    return best


class WindowedConfig(StrategyConfig):
    """Parameters shared by the windowed families (each subclass adds its own)."""

    trigger_tokens: int = Field(60_000, ge=1_000, le=2_000_000,
                                description="cut the conversation when the estimated request reaches this many "
                                "tokens (clamped to window - reserve_tokens)")
    keep_tokens: int = Field(20_000, ge=0, le=2_000_000,
                             description="after a cut, the newest messages kept verbatim fit this many tokens "
                             "(pair-safe boundary; the newest turn is always kept)")
    reserve_tokens: int = Field(20_000, ge=0, le=200_000,
                                description="tokens left free for the answer (as N-COMP-1 reserves for output)")
    chars_per_token: float = Field(CHARS_PER_TOKEN, gt=0.5, le=10,
                                   description="estimate before the first usage arrives (N-COMP-5)")
    max_result_chars: int = Field(400_000, ge=0, le=10_000_000,
                                  description="guard: a single tool result longer than this is cut (head kept, "
                                  "irreversible); 0 = no per-result cap. Whatever this says, one message's "
                                  "results are cut to half of what the head leaves in the window")

    @model_validator(mode="after")
    def _keep_below_trigger(self):
        if self.keep_tokens >= self.trigger_tokens:
            raise ValueError(f"keep_tokens ({self.keep_tokens}) must be below trigger_tokens ({self.trigger_tokens})")
        return self


class GaugedStrategy(Strategy):
    """Append-only history with the strategy's own calibrated estimate (:class:`TokenGauge`), a map
    of the tool uses seen (id -> name, input: a tool result names only its id) and Claude Code-style
    breakpoints (system + last message). The base of the families that transform results as they
    arrive (on_demand_reading, tiered_budget) and of the windowed ones. The config must have
    ``chars_per_token``."""

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

    def build_request(self, call: CallInfo) -> Request:
        self.prepare(call)
        h = self.history
        self._sent = (self._fixed_chars + history_chars(h), len(h))
        return Request(self.env.system, self.tools, h, self.breakpoints(h), kind=self.request_kind(),
                       estimated_tokens=self.estimate_of(h), rewrite=self._take_rewrite())

    def breakpoints(self, history: History) -> tuple[Breakpoint, ...]:
        n = len(history)
        return (Breakpoint("system"), Breakpoint(n - 1)) if n else (Breakpoint("system"),)


class WindowedStrategy(GaugedStrategy):
    """A bounded conversation: ``pinned`` head messages (repository, state block...), then a window
    of recent messages cut on pair-safe boundaries with hysteresis (cut at ``trigger_tokens`` down to
    ``keep_tokens``, so the cached prefix breaks once per cut, not on every call).

    Subclasses say what the head is (:meth:`session_head`), what happens to messages that leave
    (:meth:`on_cut`, which may return a new head) and may add to history before each call
    (:meth:`before_call`)."""

    manages_window = True

    def __init__(self, config: WindowedConfig, env: StrategyEnv) -> None:
        super().__init__(config, env)
        self.pinned = 0
        self.cuts = 0
        self._start_session(resume=False)

    # --- limits -----------------------------------------------------------------------------------
    @property
    def limit(self) -> int:
        """No request may be estimated above this (window minus the answer's reserve)."""
        return max(1, self.env.window - self.config.reserve_tokens)

    @property
    def trigger(self) -> int:
        return min(self.config.trigger_tokens, self.limit)

    def head_tokens(self) -> int:
        """Estimate of what every request carries before the window: system, tools, pinned head."""
        return self.estimate_of(self.history.truncate(self.pinned))

    @property
    def keep(self) -> int:
        """``keep_tokens``, but at most half of what the head leaves below the trigger (so a cut
        always makes room, whatever the window and the head)."""
        return min(self.config.keep_tokens, max(0, self.trigger - self.head_tokens()) // 2)

    def message_cap_chars(self) -> int:
        """The most characters of tool results one message may bring: half of what the head leaves
        below the limit (at the learned tokens-per-character ratio), and ``max_result_chars`` each."""
        room = max(0, self.limit - self.head_tokens()) // 2
        return int(room / self.gauge.ratio)

    # the parameters the property kit scales to its small window (harness.testing.machine)
    SCALED: ClassVar[tuple[str, ...]] = ("trigger_tokens", "keep_tokens", "reserve_tokens")
    FLOORS: ClassVar[dict[str, int]] = {"trigger_tokens": 1_000, "state_max_tokens": 200, "inject_max_tokens": 100}

    @classmethod
    def check_params(cls, window: int) -> dict[str, int]:
        """Token parameters scaled by window / 200,000 (never up), so the rules act at the same
        relative points of the property kit's small window."""
        f = cls.Config.model_fields
        scale = min(1.0, window / 200_000)
        return {n: max(cls.FLOORS.get(n, 0), int(f[n].default * scale)) for n in cls.SCALED}

    # --- hooks --------------------------------------------------------------------------------------
    def session_head(self, resume: bool) -> list[Message]:
        """The pinned messages a session starts with (user messages)."""
        return []

    def on_cut(self, dropped: History, start: int) -> list[Message] | None:
        """``dropped`` = history[:start], about to leave; return a new head or None (keep it)."""
        return None

    def before_call(self, call: CallInfo) -> None:
        """Add to history before the size check (injections)."""

    # --- events ---------------------------------------------------------------------------------------
    def _start_session(self, resume: bool) -> None:
        head = self.session_head(resume)
        self.pinned = len(head)
        self.history = History(head)

    def on_session_start(self, session: str, resume: bool, now: float) -> None:
        if resume:
            self.resume_repair()
            return
        self._start_session(resume)

    def on_tool_results(self, message: Message) -> None:
        self.history = self.history.append(self.guard(message))

    def guard(self, message: Message) -> Message:
        """Cut tool results (head kept, irreversible, counted) so one message cannot overflow: each
        result to ``max_result_chars``, and the message's results together to
        :meth:`message_cap_chars`, largest first, none below an equal share."""
        idx = [k for k, b in enumerate(message.blocks) if b.type == "tool_result"]
        if not idx:
            return message
        per = self.config.max_result_chars or None
        sizes = {k: min(len(message.blocks[k].text), per or len(message.blocks[k].text)) for k in idx}
        cap = self.message_cap_chars()
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

    # --- the call -------------------------------------------------------------------------------------
    def cut_if_needed(self) -> None:
        if self.estimate_of(self.history) < self.trigger:
            return
        h = self.history
        start = pair_safe_start(h, self.pinned + 1, self.keep, self.gauge)
        if start >= len(h):
            self.counters.extra["cut_impossible"] += 1
            return
        head = self.on_cut(h.truncate(start), start)
        if head is None:
            head = list(h[: self.pinned])
        if not head or head[-1].role != "user":  # the API wants a user message first
            head = [*head, Message.user(DROPPED_NOTE, origin="placeholder")]
        self.pinned = len(head)
        self.history = History([*head, *h[start:]])
        self.rewrote = True
        self.cuts += 1
        self.counters.extra["window_cuts"] += 1
        self.counters.extra["messages_dropped"] += start - len(head)
        if self.estimate_of(self.history) > self.limit:
            self.counters.extra["over_limit_after_cut"] += 1

    def prepare(self, call: CallInfo) -> None:
        self.before_call(call)
        self.cut_if_needed()

    def breakpoints(self, history: History) -> tuple[Breakpoint, ...]:
        """System, the end of the pinned head (stable between cuts) and the last message."""
        n = len(history)
        out: list[Breakpoint] = [Breakpoint("system")]
        if 0 < self.pinned < n:
            out.append(Breakpoint(self.pinned - 1))
        if n:
            out.append(Breakpoint(n - 1))
        return tuple(out)


# --- structured state --------------------------------------------------------------------------------

# The state update's sections and the file each goes to. Names chosen so a summariser that routes by
# section (simllm: "fact"/"decision", "file", "error", "user message", "current") files each kind of
# content where a plan-keeping agent would.
STATE_SECTIONS: dict[str, str] = {
    "Plan and goal": "plan.md",
    "User messages (tasks)": "tasks.md",
    "Current work": "tasks.md",
    "Decisions and key facts": "decisions.md",
    "Files": "notes.md",
    "Errors": "notes.md",
}
STATE_FILES = ("plan.md", "tasks.md", "decisions.md", "notes.md")

STATE_INSTRUCTIONS = """\
You keep this project's state in files outside the conversation; the current state files are at \
the start of the conversation. The messages above are about to leave your context window. Write \
what the state files must gain from them, so that work can continue from the state files and the \
recent messages alone: the goal and plan, the user's requests as tasks, every decision and key fact \
(exact names, numbers, constraints, preferences, feedback), the files touched, the errors met, and \
what is being worked on now. Lines already in the state files are kept; repeat none of them.

Answer with these sections, each a list of short lines:
{sections}"""

# "Current work" is replaced at each update; the other sections only gain lines. When the state
# outgrows its budget, lines go oldest first, from the least durable section first.
REPLACED_SECTIONS = ("Current work",)
TRIM_ORDER = ("Current work", "Files", "Errors", "User messages (tasks)", "Decisions and key facts", "Plan and goal")

STATE_BLOCK = """\
<project-state>
The conversation before this point was dropped from the context window. The project's state is kept \
in these files (read them if you need them again): {paths}

{body}
</project-state>"""


class StructuredStateConfig(WindowedConfig):
    state_max_tokens: int = Field(4_000, ge=200, le=50_000,
                                  description="output cap of the state update call, and so the size of the "
                                  "re-injected state block")
    update_on_session_end: bool = Field(True, description="update the state files when a session ends (so the next "
                                        "launch starts from them even if the window was never cut)")


def parse_sections(text: str, known: Sequence[str]) -> dict[str, list[str]]:
    """Section name -> its lines, from a reply with ``## Section`` headings (case-insensitive
    match on the known names; lines under an unknown heading go to the last known one)."""
    out: dict[str, list[str]] = {k: [] for k in known}
    lower = {k.lower(): k for k in known}
    cur = known[0] if known else ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line in ("<summary>", "</summary>"):
            continue
        m = re.match(r"^#{1,3}\s*(.+?)\s*:?$", line)
        if m:
            cur = lower.get(m.group(1).lower(), cur)
            continue
        if cur:
            out[cur].append(line)
    return out


class StructuredState(WindowedStrategy):
    """Windowed conversation + state files (plan, tasks, decisions, notes) re-injected as one block."""

    SCALED = (*WindowedStrategy.SCALED, "state_max_tokens")

    name = "structured_state"
    summary = "state files (plan, tasks, decisions) outside the conversation + a short window"
    Config = StructuredStateConfig

    def __init__(self, config: StructuredStateConfig, env: StrategyEnv) -> None:
        self.state_dir = Path(env.session_dir) / "state"
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.state: dict[str, list[str]] = {sec: [] for sec in STATE_SECTIONS}
        super().__init__(config, env)

    # --- the files --------------------------------------------------------------------------------
    def state_paths(self) -> list[Path]:
        return [self.state_dir / f for f in STATE_FILES]

    def state_text(self) -> str:
        parts = []
        for p in self.state_paths():
            if p.exists():
                body = p.read_text(encoding="utf-8").strip()
                if body:
                    parts.append(body)
        return "\n\n".join(parts)

    def merge_state(self, reply: str) -> None:
        """Add the reply's new lines to the state (additive: a line once written stays until the
        budget trims it), replace the current work, trim to ``state_max_tokens``, write the files."""
        for sec, lines in parse_sections(reply, list(STATE_SECTIONS)).items():
            if sec in REPLACED_SECTIONS:
                if lines:
                    self.state[sec] = list(dict.fromkeys(lines))
                continue
            have = set(self.state[sec])
            for line in lines:
                if line not in have:
                    self.state[sec].append(line)
                    have.add(line)
        budget_chars = int(self.config.state_max_tokens / self.gauge.ratio)
        total = sum(len(x) + 1 for lines in self.state.values() for x in lines)
        for sec in TRIM_ORDER:
            while total > budget_chars and self.state[sec]:
                total -= len(self.state[sec].pop(0)) + 1
                self.counters.extra["state_lines_trimmed"] += 1
        self.write_state()

    def write_state(self) -> None:
        files: dict[str, list[str]] = {f: [] for f in STATE_FILES}
        for sec, lines in self.state.items():
            if lines:
                files[STATE_SECTIONS[sec]].append(f"## {sec}\n" + "\n".join(lines))
        for f, chunks in files.items():
            (self.state_dir / f).write_text("\n\n".join(chunks) + ("\n" if chunks else ""), encoding="utf-8")

    def state_block(self) -> Message | None:
        body = self.state_text()
        if not body:
            return None
        paths = ", ".join(str(p) for p in self.state_paths())
        return Message.user(STATE_BLOCK.format(paths=paths, body=body), origin="summary", state=True)

    # --- hooks ----------------------------------------------------------------------------------------
    def session_head(self, resume: bool) -> list[Message]:
        block = self.state_block()
        return [block] if block is not None else []

    def update_state(self, messages: History) -> bool:
        """One billed state update over ``messages`` (the state block first, so the call reuses
        the cached prefix). A failure leaves the files as they were."""
        self.counters.compactions_attempted += 1
        spec = CallSpec(kind=SUMMARY, sections=tuple(STATE_SECTIONS), max_output_tokens=self.config.state_max_tokens,
                        instructions=STATE_INSTRUCTIONS.format(sections="\n".join(f"## {s}" for s in STATE_SECTIONS)))
        req = Request(self.env.system, self.tools, messages, (Breakpoint("system"), Breakpoint(len(messages) - 1)))
        try:
            res = self.env.services.call(req, spec)
        except SideCallFailed:
            self.counters.compactions_failed += 1
            self.counters.extra["state_update_failed"] += 1
            return False
        self.counters.compactions_succeeded += 1
        self.merge_state(res.text)
        self.counters.extra["state_updates"] += 1
        return True

    def on_cut(self, dropped: History, start: int) -> list[Message] | None:
        # the window is cut whether the update succeeds or not (the request must fit)
        self.update_state(dropped)
        block = self.state_block()
        return [block] if block is not None else []

    def on_session_end(self, session: str, now: float) -> None:
        """The agent saves its state before it stops, so the next launch starts from it."""
        if self.config.update_on_session_end and len(self.history) > self.pinned:
            self.update_state(repair_dangling(self.history)[0])


__all__ = ["split_names", "StructuredState", "StructuredStateConfig", "GaugedStrategy", "WindowedStrategy",
           "WindowedConfig", "TokenGauge", "pair_safe_start", "history_chars", "parse_sections", "repair_dangling"]
