"""Hypothesis strategies that generate conversations the way coding agents produce them.

What a real session looks like, and so what these produce: a user asks; the model answers with
thinking, text and several tool calls at once (parallel calls, text interleaved between them);
every call gets a result, of any size from nothing to megabytes, some of them errors (a failing
test run prints megabytes too); the model reads the same files again, by absolute and relative
paths, and reads back a file it was pointed to; it activates a skill (Claude Code's ``Skill`` tool,
with either spelling of its input); one or several sub-agents run while the parent's ``Task`` calls
are open; the agent crashes with calls unanswered and is resumed, sometimes several times in a row;
a night passes between launches, or the clock crosses midnight within one; sessions run long
enough to cross a small window several times.

Two ways to use it:

* :func:`conversations` draws a whole valid :class:`~ctxsim.harness.model.trace.Trace` (for ``@given`` tests
  that replay it);
* :class:`ConversationBuilder` appends one step at a time and returns the events of that step (the
  state machine of :mod:`ctxsim.harness.testing.machine` feeds them to the engine as they come).

Content is generated, not drawn character by character: a drawn size and seed select a slice of a
fixed pool of code-like, log-like text (with some non-ASCII), so a 2 MB tool result costs nothing
to make and shrinks, like any drawn number, towards small.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ctxsim.harness.model import trace as tr
from hypothesis import strategies as st

# --- content ---------------------------------------------------------------------------------------


def _pool() -> str:
    lines = []
    for i in range(1200):
        k = (i * 7919) % 997
        lines.append(
            [f"{i:05d} src/pkg/module_{k % 37}.py:{k % 400}: value = compute(x_{k % 13}, depth={k % 7})",
             f"def handler_{k}(request, *, retries={k % 5}):\n    return request.get('item_{k % 41}')",
             f"ERROR test_case_{k % 53} failed: expected {k} got {k + 1} (结果不一致 ✗)",
             f"    at Object.<anonymous> (lib/worker_{k % 19}.js:{k % 300}:{k % 80})",
             f"INFO  build step {k % 29}/29 done in {k % 97}.{k % 10}s — cache hit ✓"][i % 5])
    return "\n".join(lines) + "\n"


POOL = _pool()


def _dense_pool() -> str:
    """Text that takes about a token per character (CJK prose, emoji, minified escapes): what a
    characters-per-token estimate of 2.5-4 undercounts two- to fourfold. Such output is real (a
    test log in Chinese, a JSON dump with \\u escapes) and makes overflows a strategy could not
    foresee, so its reaction to a refused request (``on_rejected``) is exercised."""
    lines = []
    for i in range(400):
        k = (i * 7919) % 997
        lines.append(["测试用例失败：期望值与实际值不一致，请检查缓存层的序列化逻辑与并发写入的顺序。",
                      "日志：节点同步完成，耗时较长；重试三次后连接恢复，队列中仍有待处理的任务。",
                      f"{{\"k{k}\":\"\\u{k % 9000 + 1000:04x}\\u{k % 7000 + 2000:04x}\"}} ✓✗⚠ ✓✗⚠",
                      "編譯警告：未使用的變數與過時的介面呼叫，建議在下一版本中移除相關程式碼。"][i % 4])
    return "\n".join(lines) + "\n"


DENSE_POOL = _dense_pool()


def _log_pool() -> str:
    """Tool output as it commonly runs, about 2.7 characters per token (issue #29: real tool output;
    POOL alone is ~2.9): POOL with one line in ten a JSON record of ids, timestamps and hashes."""
    import hashlib

    lines = POOL.splitlines()
    for i in range(0, len(lines), 10):
        h = hashlib.sha1(str(i).encode()).hexdigest()
        lines[i] = f'{{"id":"{h[:12]}","ts":{1_700_000_000 + i * 37},"v":[{i % 97},{i * 7 % 113}]}} {h[12:20]}'
    return "\n".join(lines) + "\n"


LOG_POOL = _log_pool()


def text_of(size: int, seed: int = 0, label: str = "", pool: str = POOL) -> str:
    """Deterministic text of exactly ``size`` characters: ``label`` then a slice of ``pool``."""
    if size <= 0:
        return ""
    start = (seed * 104_729) % len(pool)
    head = f"[{label}]\n" if label else ""
    body_len = max(0, size - len(head))
    reps = body_len // len(pool) + 2
    body = (pool[start:] + pool * reps)[:body_len]
    return (head + body)[:size]


# Size buckets of tool results (characters). Weighted by repetition in a sampled_from: most results
# are small, some are large, a few are megabytes (a full test log, a minified bundle, a big grep).
# Hypothesis shrinks a sampled_from towards its first element, so failures shrink towards tiny.
_BUCKETS = [(0, 300)] * 6 + [(0, 0)] * 2 + [(300, 4_000)] * 6 + [(4_000, 40_000)] * 4 + [(40_000, 250_000)] * 2 \
    + [(250_000, 2_000_000)]


def result_sizes(max_size: int = 2_000_000) -> st.SearchStrategy[int]:
    """Size of one tool result: mostly small, sometimes large, rarely megabytes."""
    buckets = [(lo, min(hi, max_size)) for lo, hi in _BUCKETS if lo <= max_size]
    return st.sampled_from(buckets).flatmap(lambda b: st.integers(b[0], b[1]))


# --- the builder -----------------------------------------------------------------------------------

TOOLS = [
    tr.ToolSpec(name="Read", description="Read a file. Input: file_path, optional offset and limit (lines).",
                input_schema={"type": "object", "properties": {"file_path": {"type": "string"},
                                                               "offset": {"type": "integer"},
                                                               "limit": {"type": "integer"}}}),
    tr.ToolSpec(name="Bash", description="Run a shell command and return its output.",
                input_schema={"type": "object", "properties": {"command": {"type": "string"}}}),
    tr.ToolSpec(name="Grep", description="Search file contents with a regular expression.",
                input_schema={"type": "object", "properties": {"pattern": {"type": "string"},
                                                               "path": {"type": "string"}}}),
    tr.ToolSpec(name="Edit", description="Replace a string in a file.",
                input_schema={"type": "object", "properties": {"file_path": {"type": "string"},
                                                               "old_string": {"type": "string"},
                                                               "new_string": {"type": "string"}}}),
    tr.ToolSpec(name="Task", description="Run a sub-agent on a task; returns its conclusion.",
                input_schema={"type": "object", "properties": {"description": {"type": "string"}}}),
    tr.ToolSpec(name="Skill", description="Activate a skill: returns its standard procedure.",
                input_schema={"type": "object", "properties": {"command": {"type": "string"}}}),
]
TOOL_NAMES = ("Read", "Read", "Bash", "Grep", "Edit", "Skill")  # reads are the commonest call
SKILLS = ("pdf", "xlsx", "frontend-design", "release-notes")
DAY_S = 86_400
SYSTEM = ("You are a coding agent working in a git repository. Use the tools to read, search, run and "
          "edit code. Keep answers short; verify changes by running the tests.\n") * 4


def default_header(name: str = "generated") -> tr.Header:
    # the tools copied per header: a strategy that edits a schema in place edits its own run's only
    return tr.Header(name=name, system=SYSTEM, tools=[t.model_copy(deep=True) for t in TOOLS],
                     notes=["generated by ctxsim.harness.testing.conversations"])


# A real agent's prompt: Claude Code's system prompt and tool set run 10-25k tokens on a 200k window
# (the recorded sessions in traces/real/claude-code/ start at 14-22k tokens before the first user
# word), part of it with no text in the log (``prefix_tokens``: an opaque prefix). Scaled to the
# window like the strategies' parameters, so a 32k window gets 1.6-4k tokens.
PROMPT_SHARE = (0.05, 0.125)  # 10k / 200k, 25k / 200k
# MCP servers' tool definitions: "a five-server setup (GitHub, Slack, Sentry, Grafana, Splunk)" comes
# to about 55k tokens before the agent reads a request (anthropic.com/engineering/advanced-tool-use,
# 2025-11-24); the heavy_tools scenario's prompt
HEAVY_PROMPT_SHARE = 0.275   # 55k / 200k
_GUIDE = ("When the user asks for a change, read the relevant files first; prefer small, verifiable edits; "
          "run the project's tests after each change and report failures verbatim. Never invent file paths. "
          "Use Grep to find call sites before renaming anything; keep the public interface stable. ")


def realistic_header(window: int, share: float, opaque: float = 0.4, seed: int = 0,
                     name: str = "generated", files: bool = False) -> tr.Header:
    """A header whose system prompt and tools come to about ``share`` of ``window`` tokens (at ~4
    characters per token of prose), ``opaque`` of it as an opaque prefix (``prefix_tokens``): 20 more
    tools with long descriptions and schemas beside the six the sessions call. With ``files``, the run
    also has what a real agent's user has on disk before the first prompt: instruction files for the
    user and the project and three memories with their indexes (``header.meta.files``, as the synthetic
    sessions lay them out: :func:`ctxsim.harness.synth.dialogue.memory_files`), which NovaCode and
    claude_code load at each launch (N-INST-3, N-MEM-3; Claude Code's startup files)."""
    target = int(window * share)
    opaque_tokens = int(target * opaque)
    text_chars = (target - opaque_tokens) * 4
    tools = [t.model_copy(deep=True) for t in TOOLS]
    for k in range(min(20, text_chars // 2 // 900)):  # about half the text in tools (~900 characters each)
        props = {f"arg_{j}": {"type": "string", "description": f"argument {j} of tool {k}: " + _GUIDE[:80]}
                 for j in range(3)}
        tools.append(tr.ToolSpec(name=f"mcp__server{k % 4}__action_{k}", description=(_GUIDE * 2)[: 200 + 13 * k],
                                 input_schema={"type": "object", "properties": props}))
    tool_chars = sum(len(t.description) + len(str(t.input_schema)) for t in tools)
    body = max(400, text_chars - tool_chars)
    system = SYSTEM + text_of(body, seed, "project instructions", (_GUIDE * 40) + POOL[:4_000])
    meta: dict[str, Any] = {}
    if files:
        from ctxsim.harness.synth.dialogue import memory_files

        meta["files"] = memory_files(seed_memories=True)
    return tr.Header(name=name, system=system, tools=tools, prefix_tokens=opaque_tokens, meta=meta,
                     notes=["generated by ctxsim.harness.testing.conversations (a realistic prompt)"])


@dataclass(frozen=True)
class ToolCall:
    """One tool call of an assistant turn and the result it gets."""

    name: str
    result_size: int
    is_error: bool = False
    seed: int = 0
    dense: bool = False  # output of about a token per character (DENSE_POOL)
    pool: str | None = None  # the text to slice instead (e.g. LOG_POOL), over ``dense``


@dataclass(frozen=True)
class Turn:
    """One model call: optional thinking, text before / between the calls, the parallel calls."""

    calls: tuple[ToolCall, ...] = ()
    thinking: int = 0          # characters of thinking (0: none)
    text: int = 40             # characters of text before the first call
    interleave: bool = False   # a short text block between the tool calls
    shuffle_results: bool = False  # results arrive in another order than the calls


@dataclass
class ConversationBuilder:
    """Appends valid trace events step by step; each method returns the events it added.

    ``phase`` says what may come next, as in a real agent loop: ``"user"`` (the model ended its turn,
    or a session just started), ``"call"`` (the model is called again: after a user message or tool
    results), ``"closed"`` (no session open: only :meth:`start_session`).
    """

    header: tr.Header = field(default_factory=default_header)
    events: list[Any] = field(default_factory=list)
    phase: str = "closed"
    t: float = 0.0  # the clock (seconds; a strategy that reads a date off it sees day 1 from t = 86,400)
    session: str | None = None
    sessions: int = 0
    _n: int = 0
    originals: dict[str, str] = field(default_factory=dict)      # tool_use_id -> result content
    inputs: dict[str, Mapping[str, Any]] = field(default_factory=dict)  # tool_use_id -> tool input
    results_by_path: dict[str, str] = field(default_factory=dict)  # Read file_path -> content read
    copying: bool = False   # the calls added are copies of an earlier session's (AssistantEvent.copied)

    # --- time and ids ---------------------------------------------------------------------------
    def _tick(self, dt: float = 1.0) -> float:
        self.t = round(self.t + dt, 3)
        return self.t

    def _id(self, prefix: str = "toolu") -> str:
        self._n += 1
        return f"{prefix}_{self._n:04d}"

    def _add(self, evs: list[Any]) -> list[Any]:
        self.events.extend(evs)
        return evs

    # --- sessions ---------------------------------------------------------------------------------
    def start_session(self, resume: bool = False, pause: float = 30.0) -> list[Any]:
        """A launch ``pause`` seconds after the last event (a night between two launches: 8 hours)."""
        if self.phase != "closed":
            raise ValueError("a session is already open")
        self.sessions += 1
        self.session = f"s{self.sessions}"
        self.phase = "user"
        return self._add([tr.SessionStart(t=self._tick(pause), session=self.session,
                                          resume=resume and self.sessions > 1)])

    def end_session(self) -> list[Any]:
        """A clean exit (the model ended its turn) or, in phase ``call`` after unanswered calls, a
        crash: the last assistant call's tool uses never get results (repaired on resume)."""
        if self.phase == "closed":
            raise ValueError("no session is open")
        self.phase = "closed"
        return self._add([tr.SessionEnd(t=self._tick(), session=self.session or "")])

    # --- content events -------------------------------------------------------------------------
    def user(self, size: int = 60, seed: int = 0, said: str = "") -> list[Any]:
        """A user message of ``size`` generated characters, after ``said`` (the user's own words, a line of their
        own) where given."""
        if self.phase not in ("user", "call"):
            raise ValueError(f"a user message cannot come in phase {self.phase!r}")
        self.phase = "call"
        text = text_of(max(size, 1), seed, f"user request {self._n}")
        return self._add([tr.UserEvent(t=self._tick(5.0), text=f"{said}\n{text}" if said else text)])

    def fact(self, fid: str, category: str, text: str) -> list[Any]:
        """A fact the last message states verbatim (what the simulated model's summaries and memories keep)."""
        return self._add([tr.FactEvent(t=self.t, id=fid, category=category, text=text)])

    def _tool_input(self, name: str, seed: int, uid: str) -> dict[str, Any]:
        k = seed % 97
        if name == "Read":  # a dozen files, read again and again, by absolute or relative path
            rel = f"src/pkg/module_{seed % 12}.py"
            return {"file_path": rel if seed % 3 == 0 else f"/repo/{rel}"}
        if name == "Skill":  # Claude Code has spelt its input both ways
            skill = SKILLS[seed % len(SKILLS)]
            return {"command": skill} if seed % 2 else {"skill": skill}
        if name == "Grep":
            return {"pattern": f"handler_{k}", "path": "/repo/src"}
        if name == "Edit":
            return {"file_path": f"/repo/src/pkg/module_{k}.py", "old_string": f"x_{k}", "new_string": f"y_{k}"}
        return {"command": f"pytest -q tests/test_{k}.py  # {uid}"}

    def call(self, turn: Turn, *, crash: bool = False, answered: int = 0) -> list[Any]:
        """One model call and (unless ``crash``) the results of its tool calls. A crash may come after
        the first ``answered`` results of parallel calls were written (the agent writes each result as
        its tool returns: a crash leaves the rest unanswered, and the resumed agent must answer them)."""
        if self.phase != "call":
            raise ValueError(f"a model call cannot come in phase {self.phase!r}")
        content: list[Any] = []
        if turn.thinking:
            content.append(tr.ThinkingContent(thinking=text_of(turn.thinking, self._n + 3, "thinking")))
        if turn.text or not turn.calls:
            content.append(tr.TextContent(text=text_of(max(turn.text, 1), self._n + 5, "answer")))
        uses = []
        for i, c in enumerate(turn.calls):
            uid = self._id()
            inp = self._tool_input(c.name, c.seed, uid)
            uses.append((uid, c, inp))
            if turn.interleave and i:
                content.append(tr.TextContent(text=f"Next, {c.name.lower()} {i}."))
            content.append(tr.ToolUseContent(id=uid, name=c.name, input=inp))
        evs: list[Any] = [tr.AssistantEvent(t=self._tick(3.0), content=content, copied=self.copying)]
        if crash:
            if not 0 <= answered < len(uses):
                raise ValueError("a crash needs unanswered tool calls")
            self._add(evs)
            self.inputs.update({uid: inp for uid, _, inp in uses})
            return evs + (self._add(self._results(uses[:answered])) if answered else []) + self.end_session()
        order = list(reversed(uses)) if turn.shuffle_results else uses
        evs += self._results(order)
        self.phase = "call" if uses else "user"
        return self._add(evs)

    def _results(self, uses: list[tuple[str, ToolCall, Mapping[str, Any]]]) -> list[Any]:
        out = []
        for uid, c, inp in uses:
            body = text_of(c.result_size, c.seed, f"{c.name} {uid}", c.pool or (DENSE_POOL if c.dense else POOL))
            if c.is_error:  # an error prints anything from one line to a whole failing test log
                body = text_of(c.result_size, c.seed, f"error: {c.name} {uid} exited 1") if c.result_size else ""
            elif c.name == "Skill" and c.result_size:
                body = text_of(c.result_size, c.seed, f"skill {inp.get('command') or inp.get('skill')}: procedure")
            self.originals[uid] = body
            self.inputs[uid] = inp
            if c.name == "Read" and not c.is_error:
                self.results_by_path[str(inp["file_path"])] = body
            out.append(tr.ToolResultEvent(t=self._tick(0.5), tool_use_id=uid, content=body, is_error=c.is_error))
        return out

    def read_back(self, path: str, content: str | None, offset: int = 0, limit: int | None = None, *,
                  tool: str = "Read", siblings: tuple[ToolCall, ...] = ()) -> list[Any]:
        """The model reads back a file it was pointed to (a spilled result, a transcript): a Read
        call (or ``tool="Bash"``: ``cat PATH``) whose result is that file's text
        (``content[offset:offset+limit]``, as a reading tool with an offset and a limit returns a
        slice; ``None``: the file does not exist, an error), with ``siblings`` called in parallel."""
        if self.phase != "call":
            raise ValueError(f"a read-back cannot come in phase {self.phase!r}")
        uid = self._id()
        if tool == "Bash":
            inp: dict[str, Any] = {"command": f"cat {path}"}
        else:
            inp = {"file_path": path}
            if offset or limit is not None:
                inp.update(offset=offset, limit=limit if limit is not None else len(content or ""))
        if content is None:
            body, error = f"File does not exist: {path}", True
        else:
            body, error = content[offset: offset + limit if limit is not None else None], False
        self.originals[uid] = body
        self.inputs[uid] = inp
        others = [(self._id(), c, self._tool_input(c.name, c.seed, "")) for c in siblings]
        content_blocks: list[Any] = [tr.TextContent(text="Reading the saved output."),
                                     tr.ToolUseContent(id=uid, name=tool, input=inp)]
        content_blocks += [tr.ToolUseContent(id=i, name=c.name, input=x) for i, c, x in others]
        evs = [tr.AssistantEvent(t=self._tick(3.0), content=content_blocks),
               tr.ToolResultEvent(t=self._tick(0.5), tool_use_id=uid, content=body, is_error=error)]
        evs += self._results(others)
        return self._add(evs)

    def subtask(self, inner: list[Turn], isolated: bool = True, conclusion_size: int = 300,
                parallel: list[list[Turn]] = ()) -> list[Any]:
        """A sub-agent (``isolated``): the parent calls ``Task``; while that call is open the
        sub-agent gets its prompt and makes its own calls; its conclusion is the ``Task`` result.
        ``parallel``: more sub-agents launched by the same answer (one ``Task`` call each, as
        Claude Code runs parallel sub-agents); they run one after the other in the trace, and all
        the results come together. Not isolated: a marked span of main-loop calls (how a recorded
        agent's exploratory work without a sub-agent looks)."""
        if self.phase != "call":
            raise ValueError(f"a sub-task cannot start in phase {self.phase!r}")
        if not isolated:
            return self._span(inner, conclusion_size)
        start = len(self.events)
        agents = [(self._id(), self._id("task"), work) for work in [inner, *parallel]]
        uses = [tr.ToolUseContent(id=uid, name="Task", input={"description": f"Investigate the failing tests ({sid})"})
                for uid, sid, _ in agents]
        self._add([tr.AssistantEvent(t=self._tick(3.0), content=[
            tr.TextContent(text="Delegating to sub-agents." if parallel else "Delegating to a sub-agent."), *uses])])
        results = []
        for (uid, sid, work), use in zip(agents, uses, strict=True):
            desc = str(use.input["description"])
            self._add([tr.SubtaskStart(t=self._tick(0.1), id=sid, description=desc, isolated=isolated)])
            self.phase = "user"
            self.user(120, self._n)
            for turn in work:
                self.call(turn)
            if self.phase == "call":
                self.call(Turn(text=conclusion_size))
            conclusion = text_of(conclusion_size, self._n, f"conclusion of {sid}")
            self.originals[uid] = conclusion
            self.inputs[uid] = {"description": desc}
            self._add([tr.SubtaskEnd(t=self._tick(0.1), id=sid, conclusion=conclusion[:200])])
            results.append((uid, conclusion))
        self._add([tr.ToolResultEvent(t=self._tick(0.5), tool_use_id=uid, content=c) for uid, c in results])
        self.phase = "call"
        return self.events[start:]

    def _span(self, inner: list[Turn], conclusion_size: int) -> list[Any]:
        """Sub-task work the recorded agent did in its own main loop (no sub-agent): a marked span
        of ordinary calls."""
        sid = self._id("span")
        start = len(self.events)
        self._add([tr.SubtaskStart(t=self._tick(0.1), id=sid, description=f"Explore the call sites ({sid})")])
        for turn in inner:
            self.call(turn)
        self._add([tr.SubtaskEnd(t=self._tick(0.1), id=sid,
                                 conclusion=text_of(min(conclusion_size, 200), self._n, f"conclusion of {sid}"))])
        return self.events[start:]

    def recorded_compact(self) -> list[Any]:
        """A compaction the recorded agent did (only strategies that re-enact a log act on it)."""
        if self.phase not in ("user", "call"):
            raise ValueError("no session is open")
        return self._add([tr.CompactEvent(t=self._tick(0.5), trigger="auto",
                                          summary="The user asked to fix the failing tests; work continues.")])

    # --- the result -------------------------------------------------------------------------------
    def trace(self) -> tr.Trace:
        """The events so far as a validated trace (raises TraceError if the builder was misused)."""
        return tr.validate_events(self.header, self.events, self.header.name)


# --- drawing steps ---------------------------------------------------------------------------------

def tool_calls(max_parallel: int = 5, max_size: int = 2_000_000) -> st.SearchStrategy[ToolCall]:
    return st.builds(ToolCall, name=st.sampled_from(TOOL_NAMES), result_size=result_sizes(max_size),
                     is_error=st.sampled_from([False] * 7 + [True]),
                     seed=st.integers(0, 10_000))


def turns(max_parallel: int = 5, max_size: int = 2_000_000, with_calls: bool | None = None) -> st.SearchStrategy[Turn]:
    """One model call. ``with_calls``: True (at least one tool call), False (an answer that ends
    the turn), None (either)."""
    lo = 1 if with_calls else 0
    hi = 0 if with_calls is False else max_parallel
    return st.builds(
        Turn,
        calls=st.lists(tool_calls(max_parallel, max_size), min_size=lo, max_size=hi).map(tuple),
        thinking=st.sampled_from([0, 0, 200, 1_500]),
        text=st.sampled_from([0, 40, 400, 3_000]),
        interleave=st.booleans(),
        shuffle_results=st.booleans(),
    )


STEP_KINDS = ("user", "call", "answer", "subtask", "restart", "crash", "compact_event")


@st.composite
def conversations(draw, max_steps: int = 30, max_result_size: int = 2_000_000, subtasks: bool = True,
                  restarts: bool = True, crashes: bool = True) -> tr.Trace:
    """A whole trace: sessions of user turns, tool loops with parallel calls, read-backs of earlier
    large results (by a ``tool-results/<id>.txt`` path, as a spilling agent would name them),
    sub-agents, clean restarts, resumes and crashes. Always valid (checked before it is returned)."""
    b = ConversationBuilder()
    b.start_session()
    b.user(draw(st.integers(20, 2_000)), draw(st.integers(0, 999)))
    steps = draw(st.integers(1, max_steps))
    for _ in range(steps):
        options = []
        if b.phase == "call":
            options += ["call", "call", "answer"]
            if subtasks:
                options.append("subtask")
            if crashes:
                options.append("crash")
            big = [uid for uid, c in b.originals.items() if len(c) > 20_000]
            if big:
                options.append("readback")
        if b.phase == "user":
            options += ["user", "user"]
            if restarts:
                options.append("restart")
        if b.phase == "closed":
            options = ["restart"]
        kind = draw(st.sampled_from(options))
        if kind == "user":
            b.user(draw(st.integers(20, 4_000)), draw(st.integers(0, 999)))
        elif kind == "call":
            b.call(draw(turns(max_size=max_result_size, with_calls=True)))
        elif kind == "answer":
            b.call(draw(turns(with_calls=False)))
        elif kind == "crash":
            turn = draw(turns(max_parallel=3, max_size=4_000, with_calls=True))  # some results back: from a drawn value
            b.call(turn, crash=True, answered=min(turn.calls[0].seed % 3, len(turn.calls) - 1))
        elif kind == "readback":
            uid = draw(st.sampled_from(sorted(big)))
            content = b.originals[uid]
            limit = draw(st.integers(1_000, 30_000))
            b.read_back(f"tool-results/{uid}.txt", content, 0, limit)
        elif kind == "subtask":
            inner = draw(st.lists(turns(max_parallel=3, max_size=100_000, with_calls=True), max_size=3))
            b.subtask(inner, isolated=draw(st.booleans()))
        elif kind == "restart":
            if b.phase != "closed":
                b.end_session()
            b.start_session(resume=draw(st.booleans()))
            b.user(draw(st.integers(20, 1_000)), draw(st.integers(0, 999)))
    if b.phase == "call":
        b.call(Turn(text=200))
    if b.phase != "closed":
        b.end_session()
    return b.trace()
