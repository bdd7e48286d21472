"""subagent_isolation: spans run in their own context (kind "subagent"), and only a Task
tool_use/tool_result pair with the conclusion comes back to the main context."""

from __future__ import annotations

from harness import trace as tr
from harness.engine import RunConfig, replay
from strategies.registry import get
from strategies.subagent_isolation import SubagentIsolation
from tests.helpers_traces import Builder

BIG = "word " * 7000  # 35,000 characters, about 7,000 tokens


class Capture:
    def __init__(self) -> None:
        self.seen: list = []

    def __call__(self, req, info) -> None:
        self.seen.append(req)


def span_trace(conclusion: str = "Found it: the parser is in src/parse.py.") -> tr.Trace:
    b = Builder()
    b.user("Explore where the parser lives, then fix it.")
    b.event(tr.SubtaskStart(t=b.t, id="st1", description="Find the parser"))
    for i in range(3):
        b.call(f"looking {i}", results=[BIG])
    b.event(tr.SubtaskEnd(t=b.t, id="st1", conclusion=conclusion))
    b.call("Now I fix it.", results=["ok"])
    b.call("done")
    return b.build()


def test_span_calls_run_from_their_own_context_and_the_conclusion_returns():
    cap = Capture()
    r = replay(span_trace(), "subagent_isolation", None, RunConfig(observer=cap))
    assert get("subagent_isolation") is SubagentIsolation
    assert list(r.calls.kind) == ["subagent"] * 3 + ["main"] * 2
    # the sub-agent's requests: its prompt; prompt + call 1 + results; and so on (1, 3, 5 messages)
    assert [len(q.messages) for q in cap.seen[:3]] == [1, 3, 5]
    assert "Find the parser" in cap.seen[0].messages[0].text
    # the main request after the span: user, Task tool_use, its tool_result (the conclusion): 3 messages
    main = cap.seen[3].messages
    assert len(main) == 3 and main[1].tool_use_ids() == ["ctxsim_task_1"]
    assert main[1].blocks[0].name == "Task" and main[2].tool_result_ids() == ["ctxsim_task_1"]
    assert main[2].text == "Found it: the parser is in src/parse.py."
    assert "Task" in cap.seen[3].tools.names()
    m = r.metrics
    assert m["pairing_violations"] == 0 and m["strategy_counters"] == {"subagents": 1, "subagent_calls": 3}
    assert m["by_kind"]["subagent"]["calls"] == 3


def test_the_main_context_never_holds_the_exploration():
    t = span_trace()
    iso = replay(t, "subagent_isolation", None, RunConfig())
    base = replay(t, "append_only", {"cache_breakpoints": True}, RunConfig())
    iso_main = iso.calls[iso.calls.kind == "main"].context_tokens.to_numpy()
    base_main = base.calls.context_tokens.to_numpy()[3:]
    # append_only's fourth call carries the three 7,000-token results; isolation's carries a
    # ~15-token conclusion instead: at least 3 x 6,000 fewer tokens on each main call after the span
    assert all(b - i > 18_000 for b, i in zip(base_main, iso_main))
    assert iso.metrics["cost_usd"] < base.metrics["cost_usd"]


def test_an_empty_conclusion_returns_the_sub_agents_last_text():
    cap = Capture()
    replay(span_trace(conclusion=""), "subagent_isolation", None, RunConfig(observer=cap))
    assert cap.seen[3].messages[2].text == "looking 2"


def test_conclusion_cap_and_subagent_model():
    cap = Capture()
    r = replay(span_trace(conclusion="z" * 500), "subagent_isolation",
               {"conclusion_max_chars": 100, "subagent_model": "claude-haiku-4-5"}, RunConfig(observer=cap))
    assert cap.seen[3].messages[2].text == "z" * 100
    assert list(r.calls.model[:3]) == ["claude-haiku-4-5"] * 3
    assert set(r.calls.model[3:]) == {r.model}


def test_a_recorded_isolated_span_keeps_the_parents_own_task_pair():
    b = Builder()
    b.user("Explore.")
    b.event(tr.AssistantEvent(t=b._tick(1), content=[tr.ToolUseContent(id="task1", name="Task",
                                                                       input={"prompt": "explore"})]))
    b.event(tr.SubtaskStart(t=b.t, id="s", description="explore", isolated=True))
    b.call("sub looking", results=[BIG])
    b.call("sub report")
    b.event(tr.SubtaskEnd(t=b.t, id="s"))
    b.event(tr.ToolResultEvent(t=b._tick(1), tool_use_id="task1", content="report: nothing odd"))
    b.call("done")
    cap = Capture()
    r = replay(b.build(), "subagent_isolation", None, RunConfig(observer=cap))
    assert list(r.calls.kind) == ["main", "subagent", "subagent", "main"]
    last = cap.seen[-1].messages
    assert [m.role for m in last] == ["user", "assistant", "user"]  # no extra pair was added
    assert last[2].tool_result_ids() == ["task1"]
    assert r.metrics["pairing_violations"] == 0
