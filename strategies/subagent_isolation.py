"""subagent_isolation: a sub-task runs in its own context on a small model; only its report returns
(spec/novacode.md section 8: "sub-agent isolation (a sub-task runs in its own context, only its
conclusion returns)").

Practitioner: Claude Code's ``Task`` tool and its built-in ``Explore`` sub-agent (closed source;
documented at code.claude.com/docs/en/sub-agents: a read-only exploration agent that runs on Haiku in
its own context window and returns one answer; the bundled real sessions in
``../shared/traces/real/claude-code/spotter/`` show the shape: the parent's Task tool_use, the
sub-agent's calls on their own model, a report of 2,870–9,962 characters as the Task result).

Model. Spans the trace marks as sub-tasks that the recorded agent did in its main context
(``subtask_start``/``subtask_end`` with ``isolated: false``) run as sub-agents:

1. **Delegation.** The parent makes the delegating call: a billed step on the parent's context
   (kind ``delegate``) whose answer is the ``Task`` tool_use (the span's description as its prompt).
2. **The sub-agent.** A fresh context starts with that prompt; every model call of the span is sent
   from it, kind ``subagent``, on ``subagent_model`` (default ``claude-haiku-4-5``: Explore's model;
   on a provider without it, the main model). The span's tool results enter only that context.
3. **The report.** At the span's end the sub-agent writes its final report: a billed call on its
   own context and model (kind ``summary``: a summary of the sub-agent's work, capped at
   ``report_max_tokens``, the bundled logs' reports being 700–2,500 tokens); the trace's
   ``conclusion``, when it gives one, opens it (the trace format's "what a sub-agent would return").
   Its text comes from the backend: the simulated model's report of what the sub-agent's context
   holds (files, errors, findings, facts by their survival draw), or a live model's.
4. **Back in the parent.** The sub-agent's context is discarded; the parent gets the Task tool_use
   and its tool_result (the report), and the next recorded call follows.

Spans the recorded agent already ran isolated (``isolated: true``, imported Claude Code sub-agents)
keep their recorded shape: the parent's own Task pair is in the trace and its calls run on their
recorded model, so nothing is added. The ``Task`` tool is added to the tools array when the trace
does not declare it.

The main context is compacted as NovaCode does (N-COMP-1/2's soft line, window − 20,000 − 13,000:
Claude Code's auto-compact line, reported; a billed summary in Claude Code's nine sections; a
N-COMP-6 tail), so a long session stays in its window; a request the API rejects as too long is
compacted at once and retried (Claude Code's reactive compaction, reported).

What it trades: the main context never holds the exploration's tool output (lower peak, cheaper
calls, the exploration billed at the small model's price), at the price of the delegation and the
report; whatever the exploration met and the report does not carry is gone for the parent
(retention shows it). Sources beside Claude Code: Anthropic, "How we built our multi-agent research
system" (2025); OpenHands' delegation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ctxsim.harness.llm.services import SUMMARY, CallSpec, SideCallFailed
from ctxsim.harness.model.conversation import Block, History, Message, Request, ToolDef
from ctxsim.strategies.base import CallInfo, StrategyEnv
from ctxsim.strategies.structured_state import WindowedConfig, WindowedStrategy
from pydantic import Field

EXPLORE_MODEL = "claude-haiku-4-5"  # Claude Code's Explore sub-agent (code.claude.com/docs/en/sub-agents)
REPORT_MAX_TOKENS = 2_500  # bundled reports: 2,870-9,962 characters (spotter sessions), about 700-2,500 tokens
TASK_TOOL = ToolDef("Task", "Launch a new agent to handle a multi-step task in its own context; it returns one "
                    "final report.", {"type": "object", "required": ["description", "prompt"], "properties": {
                        "description": {"type": "string"}, "prompt": {"type": "string"},
                        "subagent_type": {"type": "string"}}})
SUBAGENT_PROMPT = """\
{description}

Explore the codebase to answer this; do not modify files. End with a report of what you found: the \
report is all the caller will see."""
REPORT_SECTIONS = ("Answer", "Key findings", "Files and code sections", "Errors and fixes")
REPORT_INSTRUCTIONS = """\
Your task is done. Write your final report for the agent that delegated it: it sees nothing of this \
conversation but the report. Use these sections:
{sections}"""


class SubagentIsolationConfig(WindowedConfig):
    subagent_model: str = Field(EXPLORE_MODEL, max_length=100,
                                description="model of the sub-agents this strategy runs (Explore's; empty: the main "
                                "model; the main model on a provider without it)")
    report_max_tokens: int = Field(REPORT_MAX_TOKENS, ge=100, le=100_000,
                                   description="output cap of the sub-agent's final report")
    task_tool: str = Field("Task", min_length=1, max_length=64, description="name of the delegation tool")
    subagent_type: str = Field("Explore", min_length=1, max_length=64, description="the Task call's subagent_type")


@dataclass
class _Span:
    id: str
    tool_use: Block | None  # the parent's Task call (None: the recorded agent ran it isolated)


class SubagentIsolation(WindowedStrategy):
    """Sub-task spans as sub-agents on a small model; a Task pair with the report in the main
    context; the main context compacted as NovaCode does."""

    name = "subagent_isolation"
    summary = "sub-task spans run as sub-agents (own context, small model); only their report returns; NovaCode-style compaction"
    Config = SubagentIsolationConfig

    @classmethod
    def call_models(cls, config) -> dict[str, str]:
        # sub_model(): a sub-agent's calls and its report on subagent_model (empty: the run's); summary_model():
        # inside a sub-agent subagent_model, else the configured summary model
        return {"summary": config.summary_model, "subagent": config.subagent_model, "report": config.subagent_model,
                "subagent:summary": config.subagent_model or config.summary_model}
    on_rejection: ClassVar[str] = ("reactive compaction, deeper at each retry, then the turn errors (Claude Code, "
                                   "reported)")

    def __init__(self, config: SubagentIsolationConfig, env: StrategyEnv) -> None:
        if env.provider != "anthropic" and config.subagent_model == EXPLORE_MODEL:
            config = config.model_copy(update={"subagent_model": ""})
        super().__init__(config, env)
        self.spans: list[_Span] = []
        self.task_n = 0
        self.add_tool(ToolDef(config.task_tool, TASK_TOOL.description, TASK_TOOL.input_schema))

    @property
    def in_own_subagent(self) -> bool:
        """Inside a span this strategy isolated (not a recorded sub-agent)."""
        return any(s.tool_use is not None for s in self.spans)

    def sub_model(self) -> str | None:
        return (self.config.subagent_model or None) if self.in_own_subagent else None

    def summary_model(self) -> str:
        return (self.config.subagent_model if self.in_own_subagent else "") or self.config.summary_model

    def build_request(self, call: CallInfo) -> Request:
        req = super().build_request(call)
        if self.in_isolated_subtask:
            self.counters.extra["subagent_calls"] += 1
        model = self.sub_model()
        return req.with_messages(req.messages, model=model) if model else req

    # --- spans --------------------------------------------------------------------------------------
    def on_subtask_start(self, id: str, description: str, isolated: bool) -> None:
        tu = None
        if not isolated:  # the recorded agent did it in its main context: delegate it
            self.task_n += 1
            desc = description or f"sub-task {id}"
            tu = Block.tool_use(f"ctxsim_task_{self.task_n}", self.config.task_tool, {
                "description": desc[:80], "prompt": SUBAGENT_PROMPT.format(description=desc),
                "subagent_type": self.config.subagent_type})
            self.model_step("delegate", tu)  # billed; a failure still delegates (the trace did the work)
        self.spans.append(_Span(id, tu))
        super().on_subtask_start(id, description, True)
        if tu is not None:
            self.history = History([Message.user(str(tu.input["prompt"]), origin="subagent_prompt")])
            self.pinned = 1
        self.counters.extra["subagents"] += 1

    def on_session_start(self, session: str, resume: bool, now: float) -> None:
        """A launch while a sub-agent ran (the previous one crashed inside a span): the sub-agent's
        context is gone; the main conversation is what resumes (the base restores it)."""
        self.spans.clear()
        super().on_session_start(session, resume, now)

    def on_subtask_end(self, id: str, conclusion: str) -> None:
        if not self.spans or self.spans[-1].id != id:
            self.counters.extra["orphan_subtask_ends"] += 1  # its sub-agent died with its launch
            return
        span = self.spans[-1]
        report = self.report(conclusion) if span.tool_use is not None else ""
        self.spans.pop()
        super().on_subtask_end(id, conclusion)
        if span.tool_use is None:
            return  # the trace carries the parent's own Task tool_use and its result
        self.history = self.history.extend([
            Message("assistant", (span.tool_use,), {"origin": "subagent"}),
            Message("user", (Block.tool_result(span.tool_use.id or "", report),), {"origin": "subagent"}),
        ])

    def report(self, conclusion: str) -> str:
        """The sub-agent's final report: one billed call on its own context and model."""
        h = self.history
        text = ""
        if len(h):
            spec = CallSpec(kind=SUMMARY, sections=REPORT_SECTIONS, max_output_tokens=self.config.report_max_tokens,
                            instructions=REPORT_INSTRUCTIONS.format(sections="\n".join(
                                f"{i}. {s}" for i, s in enumerate(REPORT_SECTIONS, 1))),
                            params={"purpose": "subagent_report"})
            try:
                text = self.env.services.call(self.request_of(h, kind=SUMMARY, model=self.sub_model()), spec).text
                self.counters.extra["reports"] += 1
            except SideCallFailed:
                self.counters.extra["report_failed"] += 1
        parts = [p for p in (conclusion.strip(), text.strip()) if p]
        return "\n\n".join(parts) or "(the sub-agent ended without a report)"
