"""subagent_isolation: a sub-task runs in its own context; only its conclusion returns (spec/
novacode.md section 8: "sub-agent isolation (a sub-task runs in its own context, only its conclusion
returns)").

Model. Spans the trace marks as sub-tasks (``subtask_start`` / ``subtask_end``) run as a sub-agent:
at the span's start the main conversation is set aside and a fresh one begins with the sub-agent's
prompt (the span's description, as the ``Task`` tool's prompt); every model call inside the span is
sent from that context as a request of kind ``subagent`` (billed like any call, optionally on a
cheaper ``subagent_model``), and the span's tool results enter only that context. At the span's
end the sub-agent's context is discarded and the main conversation gets one ``Task`` tool_use and its
tool_result holding the conclusion (the span's recorded conclusion, else the sub-agent's last text,
capped at ``conclusion_max_chars``), as Claude Code's Task tool returns a sub-agent's final report.
The ``Task`` tool is added to the tools array when the trace does not declare it. Spans the recorded
agent already ran isolated (``isolated: true``, e.g. imported Claude Code sub-agents) keep their
recorded shape: the parent's own Task tool_use/tool_result pair is in the trace, so none is added.

Outside spans the main conversation is append-only until the request nears the window, where the
oldest messages are dropped on pair-safe boundaries (no summary), so a long session does not
overflow; the default trigger is as late as the window allows, so on most traces it never fires.

What it trades: the main context never holds the exploration's tool output (lower peak, cheaper
calls), and the sub-agent starts small; but whatever the exploration met and the conclusion does
not carry is gone for the main agent (retention shows it). Sources: Claude Code's Task tool /
sub-agents, Anthropic's multi-agent research system ("Building effective agents"; "How we built our
multi-agent research system", 2025), OpenHands' delegation.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field

from harness.conversation import Block, History, Message, Request, ToolDef, ToolSet
from strategies.base import CallInfo, StrategyEnv
from strategies.structured_state import WindowedConfig, WindowedStrategy

TASK_DESCRIPTION = "Launches a sub-agent for a multi-step task in its own context; returns its final report."
SUBAGENT_PROMPT = """\
You are a sub-agent. Do this task, then end with a short report of what you found (the report is \
all the main agent will see):
{description}"""


class SubagentIsolationConfig(WindowedConfig):
    trigger_tokens: int = Field(2_000_000, ge=1_000, le=2_000_000,
                                description="drop the oldest messages when the estimated request reaches this "
                                "(default: as late as the window allows, window - reserve_tokens)")
    keep_tokens: int = Field(40_000, ge=0, le=2_000_000, description="tokens kept verbatim after such a drop")
    subagent_model: str = Field("", max_length=100,
                                description="model of the sub-agents' calls (empty: the main model)")
    conclusion_max_chars: int = Field(4_000, ge=100, le=200_000,
                                      description="the conclusion returned to the main context is cut to this")
    task_tool: str = Field("Task", min_length=1, max_length=64, description="name of the delegation tool")


@dataclass
class _Frame:
    id: str
    description: str
    recorded_isolated: bool
    outer: History
    outer_pinned: int
    calls: int = 0


class SubagentIsolation(WindowedStrategy):
    """Sub-task spans in their own context; one Task tool_use/tool_result pair in the main one."""

    name = "subagent_isolation"
    summary = "sub-task spans run as sub-agents in their own context; only the conclusion returns"
    Config = SubagentIsolationConfig

    def __init__(self, config: SubagentIsolationConfig, env: StrategyEnv) -> None:
        super().__init__(config, env)
        self.frames: list[_Frame] = []
        self.task_n = 0
        if config.task_tool not in env.tools.names():
            self.set_tools(ToolSet((*env.tools.tools, ToolDef(config.task_tool, TASK_DESCRIPTION, {
                "type": "object", "properties": {"description": {"type": "string"}, "prompt": {"type": "string"}},
                "required": ["description", "prompt"]}))))

    @property
    def in_subagent(self) -> bool:
        return bool(self.frames)

    def request_kind(self) -> str:
        return "subagent" if self.frames else "main"

    def build_request(self, call: CallInfo) -> Request:
        req = super().build_request(call)
        if self.frames:
            self.frames[-1].calls += 1
            self.counters.extra["subagent_calls"] += 1
            if self.config.subagent_model:
                from dataclasses import replace

                req = replace(req, model=self.config.subagent_model)
        return req

    # --- spans --------------------------------------------------------------------------------------
    def on_subtask_start(self, id: str, description: str, isolated: bool) -> None:
        self.frames.append(_Frame(id, description, isolated, self.history, self.pinned))
        prompt = SUBAGENT_PROMPT.format(description=description or f"sub-task {id}")
        self.history = History([Message.user(prompt, origin="subagent_prompt")])
        self.pinned = 1
        self.counters.extra["subagents"] += 1

    def on_session_start(self, session: str, resume: bool, now: float) -> None:
        """A launch while a sub-agent ran (the previous one crashed inside a span): the sub-agent's
        context is gone; the main conversation is what resumes (its open Task call repaired)."""
        if self.frames:
            self.history, self.pinned = self.frames[0].outer, self.frames[0].outer_pinned
            self.frames.clear()
            self.counters.extra["subagents_lost"] += 1
        super().on_session_start(session, resume, now)

    def on_subtask_end(self, id: str, conclusion: str) -> None:
        if not self.frames or self.frames[-1].id != id:
            self.counters.extra["orphan_subtask_ends"] += 1  # its sub-agent died with its launch
            return
        frame = self.frames.pop()
        sub = self.history
        self.history, self.pinned = frame.outer, frame.outer_pinned
        if frame.recorded_isolated:
            return  # the trace carries the parent's own Task tool_use and its result
        report = (conclusion or _last_text(sub) or f"(sub-task {id} ended without a report)")
        report = report[: self.config.conclusion_max_chars]
        self.task_n += 1
        tu = Block.tool_use(f"ctxsim_task_{self.task_n}", self.config.task_tool,
                            {"description": frame.description or id,
                             "prompt": SUBAGENT_PROMPT.format(description=frame.description or id)})
        self.history = self.history.extend([
            Message("assistant", (tu,), {"origin": "subagent"}),
            Message("user", (Block.tool_result(tu.id, report),), {"origin": "subagent"}),
        ])


def _last_text(h: History) -> str:
    """The sub-agent's final report: the text of its last assistant message that has any."""
    for m in reversed(list(h)):
        if m.role == "assistant":
            text = "\n".join(b.text for b in m.blocks if b.type == "text").strip()
            if text:
                return text
    return ""
