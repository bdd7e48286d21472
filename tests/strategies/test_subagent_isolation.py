"""subagent_isolation: a span the recorded agent did in its main context runs as a sub-agent on the
small model (kind "subagent"); the delegating call and the report are billed; only a Task
tool_use/tool_result pair with the report comes back; the main context is compacted NovaCode-style."""

from __future__ import annotations

from ctxsim.harness.model import trace as tr
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.strategies.registry import get
from ctxsim.strategies.subagent_isolation import EXPLORE_MODEL, SubagentIsolation

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


def test_a_span_is_delegated_run_on_the_small_model_and_reported():
    cap = Capture()
    r = replay(span_trace(), "subagent_isolation", None, RunConfig(observer=cap))
    assert get("subagent_isolation") is SubagentIsolation
    calls = r.calls
    # the parent's delegating call, the sub-agent's three calls, its report, then the main loop
    assert list(calls.kind) == ["delegate", "subagent", "subagent", "subagent", "summary", "main", "main"]
    assert list(calls.model) == [r.model] + [EXPLORE_MODEL] * 4 + [r.model] * 2
    assert (calls.cost_usd > 0).all()
    delegate, sub = cap.seen[0], cap.seen[1:4]
    assert len(delegate.messages) == 1 and "Task" in delegate.tools.names()
    # the sub-agent's requests: its prompt; prompt + call 1 + results; and so on (1, 3, 5 messages)
    assert [len(q.messages) for q in sub] == [1, 3, 5] and "Find the parser" in sub[0].messages[0].text
    # the main request after the span: user, the Task tool_use, its tool_result (the report)
    main = cap.seen[5].messages
    assert len(main) == 3 and main[1].tool_use_ids() == ["ctxsim_task_1"]
    task = main[1].blocks[0]
    assert task.name == "Task" and task.input["subagent_type"] == "Explore"
    report = main[2].blocks[0].text
    assert main[2].tool_result_ids() == ["ctxsim_task_1"] and report.startswith("Found it: the parser is in src/parse.py.")
    assert "<summary>" in report  # the sub-agent's own report of its context follows the conclusion
    m = r.metrics
    assert m["pairing_violations"] == 0 and m["overflows"] == 0
    assert m["strategy_counters"]["subagents"] == 1 and m["strategy_counters"]["subagent_calls"] == 3
    assert m["by_kind"]["delegate"]["calls"] == 1 and m["by_kind"]["summary"]["calls"] == 1


def test_the_main_context_never_holds_the_exploration():
    t = span_trace()
    iso = replay(t, "subagent_isolation", None, RunConfig())
    base = replay(t, "append_only", {"cache_breakpoints": True}, RunConfig())
    iso_main = iso.calls[iso.calls.kind == "main"].context_tokens.to_numpy()
    base_main = base.calls.context_tokens.to_numpy()[3:]
    # append_only's fourth call carries the three 7,000-token results; isolation's carries a report
    # of at most 2,500 tokens instead: more than 18,000 fewer tokens on each main call after the span
    assert all(b - i > 18_000 for b, i in zip(base_main, iso_main))
    assert iso.metrics["cost_usd"] < base.metrics["cost_usd"]


def test_an_empty_conclusion_leaves_the_report_alone_and_the_main_model_is_a_choice():
    cap = Capture()
    r = replay(span_trace(conclusion=""), "subagent_isolation", {"subagent_model": ""}, RunConfig(observer=cap))
    assert cap.seen[5].messages[2].blocks[0].text.startswith("<summary>")
    assert set(r.calls.model) == {r.model}


def test_a_recorded_isolated_span_keeps_the_parents_own_task_pair_and_model():
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
    assert list(r.calls.kind) == ["main", "subagent", "subagent", "main"]  # nothing added
    assert set(r.calls.model) == {r.model}  # a recorded sub-agent runs on its recorded model
    last = cap.seen[-1].messages
    assert [m.role for m in last] == ["user", "assistant", "user"] and last[2].tool_result_ids() == ["task1"]
    assert r.metrics["pairing_violations"] == 0


def test_the_main_context_is_compacted_with_a_summary():
    b = Builder()
    b.user("Goal: tidy the parser.")
    for i in range(12):
        b.call(f"step {i}", results=["word " * 1500])
    cap = Capture()
    r = replay(b.build(), "subagent_isolation", {"trigger_tokens": 8_000, "keep_tokens": 2_000},
               RunConfig(observer=cap))
    m = r.metrics
    # Claude Code's compaction message: the summary, then the path to the full transcript
    head = cap.seen[-1].messages[0]
    assert head.meta["origin"] == "summary"
    assert head.text.startswith("This session is being continued from a previous conversation that ran out of context.")
    assert "read the full transcript at: /" in head.text and head.text.rstrip().endswith("transcripts/main.jsonl")
    assert m["compactions"]["succeeded"] == m["by_kind"]["summary"]["calls"] >= 2
    assert m["overflows"] == m["pairing_violations"] == 0
    assert set(r.calls[r.calls.kind == "summary"].model) == {r.model}  # the main model summarises the main context


def test_a_resumed_launch_after_a_span_continues_the_main_conversation():
    b = Builder()
    b.event(tr.SessionStart(t=0.0, session="s1"))
    b.user("Explore, then fix.")
    b.event(tr.SubtaskStart(t=b.t, id="st1", description="look"))
    b.call("looking", results=["x" * 100])
    b.event(tr.SubtaskEnd(t=b.t, id="st1", conclusion="nothing"))
    b.event(tr.SessionEnd(t=b._tick(1), session="s1"))
    b.event(tr.SessionStart(t=b._tick(10), session="s2", resume=True))
    b.user("Go on.")
    b.call("going on")
    b.event(tr.SessionEnd(t=b._tick(1), session="s2"))
    r = replay(b.build(), "subagent_isolation", None, RunConfig())
    assert r.metrics["pairing_violations"] == 0 and r.metrics["overflows"] == 0
