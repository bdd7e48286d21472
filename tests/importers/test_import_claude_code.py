"""Claude Code importer: real transcripts (counts checked against a direct reading of the file,
computed here independently of the importer) and small hand-made files, broken ones included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ctxsim.harness.cli import main as cli
from ctxsim.harness.importers import import_file
from ctxsim.harness.importers.common import SYNTHETIC_RESULT
from ctxsim.harness.model import trace as tr
from ctxsim.harness.model.trace import TraceError
from ctxsim.harness.replay.engine import RunConfig, replay

from tests.helpers_claude_code import asst, rec, result, user, write

REAL = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces" / "real" / "claude-code"
needs_real = pytest.mark.skipif(not REAL.is_dir(), reason="real logs not present (../shared/traces/real)")
MAIN_LOGS = ["spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl", "spotter/ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl",
             "spotter/short.jsonl", "spotter/tool_heavy.jsonl", "spotter/subagent.jsonl",
             "codemie/session-624a4a58.jsonl", "codemie/session-196820da.jsonl"]


def direct_reading(path: Path) -> dict:
    """What the file says, read the plain way: distinct API calls (requestId, else message.id),
    distinct tool_use ids, compact_boundary records, progress records, and the same for every
    sub-agent transcript a Task result points to."""
    calls, tool_uses, compactions, progress, agents = set(), set(), 0, 0, []
    for line in path.read_text(encoding="utf-8").splitlines():
        o = json.loads(line)
        if o["type"] == "assistant":
            calls.add(o.get("requestId") or o["message"]["id"])
            tool_uses.update(b["id"] for b in o["message"]["content"] if b["type"] == "tool_use")
        elif o["type"] == "system" and o.get("subtype") == "compact_boundary":
            compactions += 1
        elif o["type"] == "progress":
            progress += 1
        elif o["type"] == "user" and isinstance(o.get("toolUseResult"), dict) and o["toolUseResult"].get("agentId"):
            agents.append(o["toolUseResult"]["agentId"])
    out = {"main_calls": len(calls), "tool_uses": len(tool_uses), "compactions": compactions, "progress": progress,
           "sub_calls": 0}
    for a in agents:
        f = path.with_suffix("") / "subagents" / f"agent-{a}.jsonl"
        if f.exists():
            sub = direct_reading(f)
            out["sub_calls"] += sub["main_calls"]
            out["tool_uses"] += sub["tool_uses"]
            out["progress"] += sub["progress"]
    return out


@needs_real
@pytest.mark.parametrize("name", MAIN_LOGS)
def test_real_log_counts_match_a_direct_reading(name):
    path = REAL / name
    want = direct_reading(path)
    res = import_file("claude-code", path)
    s = res.summary
    assert s["main_calls"] == want["main_calls"]
    assert s["subagent_calls"] == want["sub_calls"]
    assert s["tool_uses"] == want["tool_uses"]
    assert s["compactions"] == want["compactions"]
    assert s["ignored"].get("progress", 0) == want["progress"]
    # nothing ignored silently: every ignored kind is in the header notes with its count
    if want["progress"]:
        assert any(f"progress ×{want['progress']}" in n for n in res.trace.header.notes)


@needs_real
def test_real_readme_figures_258c():
    """README of the logs: 152 API calls, auto compaction at preTokens 167,094 after call 102."""
    res = import_file("claude-code", REAL / MAIN_LOGS[0])
    evs = res.trace.events
    assert res.summary["main_calls"] == 152
    k = next(i for i, e in enumerate(evs) if isinstance(e, tr.CompactEvent))
    comp = evs[k]
    assert (comp.trigger, comp.pre_tokens) == ("auto", 167_094)
    assert comp.summary.startswith("This session is being continued")
    # the compaction call itself (subagents/agent-acompact-fffbd0.jsonl): 3 + 2,487 (1h) + 166,758
    assert comp.usage == tr.RecordedUsage(input=3, cache_write_1h=2487, cache_read=166_758, output=6)
    spans = 0
    main_before = 0
    for e in evs[:k]:
        spans += isinstance(e, tr.SubtaskStart)
        if isinstance(e, tr.AssistantEvent) and not e.meta.get("subagent"):
            main_before += 1
    assert main_before == 102 and spans == 0
    h = res.trace.header
    # first call: 3 + 8,037 + 17,842 = 25,882 recorded; the visible user text is a few tokens
    assert h.meta["first_call_context"] == 25_882
    assert 25_000 < h.prefix_tokens < 25_882
    assert h.output_tokens_partial is True and h.usage == "per_call"


@needs_real
def test_real_subagent_span_sits_inside_the_open_task_call():
    res = import_file("claude-code", REAL / MAIN_LOGS[1])
    evs = res.trace.events
    i = next(k for k, e in enumerate(evs) if isinstance(e, tr.SubtaskStart))
    start = evs[i]
    assert start.isolated and start.id == "aac57f5"
    task = next(e for e in reversed(evs[:i]) if isinstance(e, tr.AssistantEvent))
    task_id = next(c.id for c in task.tool_uses() if c.name == "Task")
    j = next(k for k, e in enumerate(evs) if isinstance(e, tr.SubtaskEnd))
    inside = [e for e in evs[i:j] if isinstance(e, tr.AssistantEvent)]
    assert len(inside) == 3 and all(e.meta["subagent"] == "aac57f5" for e in inside)
    assert all(e.model.startswith("claude-sonnet-4-5") for e in inside)
    # the Task's result comes after the span closes
    assert any(isinstance(e, tr.ToolResultEvent) and e.tool_use_id == task_id for e in evs[j:])
    assert res.trace.header.meta["subtasks"]["aac57f5"]["first_call_context"] == 3 + 13_838


@needs_real
def test_real_missing_subagent_transcript_is_said():
    res = import_file("claude-code", REAL / "spotter/subagent.jsonl")
    assert any("afb92ff" in n and "missing" in n for n in res.trace.header.notes)


# --- hand-made files --------------------------------------------------------------------------

def test_blocks_of_one_call_join_across_interleaved_tool_results(tmp_path):
    """Streaming: the call's second tool_use is logged after the first one's result. One call,
    two tool uses, output = the largest streaming count (5, then 40)."""
    f = write(tmp_path / "s.jsonl", [
        user(0, "do it"),
        asst(1, "r1", {"type": "thinking", "thinking": "plan", "signature": "x"}, out=5, w1h=1000, w5m=0),
        asst(1.5, "r1", {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "a"}}, out=5, w1h=1000, w5m=0),
        result(2, "t1", "A"),
        asst(2.5, "r1", {"type": "tool_use", "id": "t2", "name": "Read", "input": {"file_path": "b"}}, out=40, w1h=1000, w5m=0),
        result(3, "t2", [{"type": "text", "text": "B"}, {"type": "image", "source": {}}]),
        asst(4, "r2", {"type": "text", "text": "done"}, out=7, read=1003, w5m=20),
        rec("progress", 4.5, data={"type": "hook_progress"}),
        rec("file-history-snapshot", 4.6),
    ])
    res = import_file("claude-code", f)
    calls = [e for e in res.trace.events if isinstance(e, tr.AssistantEvent)]
    assert len(calls) == 2
    assert [c.type for c in calls[0].content] == ["thinking", "tool_use", "tool_use"]
    assert calls[0].usage == tr.RecordedUsage(input=3, cache_write_1h=1000, output=40)
    assert calls[1].usage == tr.RecordedUsage(input=3, cache_write_5m=20, cache_read=1003, output=7)
    results = [e for e in res.trace.events if isinstance(e, tr.ToolResultEvent)]
    assert [r.content for r in results] == ["A", "B\n[image content not in the log]"]
    assert res.summary["ignored"] == {"file-history-snapshot": 1, "progress": 1}
    assert res.trace.events[1].t == 1.0  # seconds since the first record


def test_dangling_tool_use_gets_a_synthetic_error_result(tmp_path):
    f = write(tmp_path / "s.jsonl", [
        user(0, "go"),
        asst(1, "r1", {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "sleep 999"}}),
        user(2, "[Request interrupted by user]"),
        asst(3, "r2", {"type": "text", "text": "stopped"}),
    ])
    res = import_file("claude-code", f)
    synth = [e for e in res.trace.events if isinstance(e, tr.ToolResultEvent)]
    assert len(synth) == 1 and synth[0].is_error and synth[0].content == SYNTHETIC_RESULT
    assert res.summary["repairs"] == {"dangling tool_use repaired with a synthetic error result": 1}
    assert any("dangling tool_use repaired with a synthetic error result: 1" == n for n in res.trace.header.notes)
    out = tmp_path / "t.jsonl"
    tr.write(res.trace, out)
    tr.load(out)  # the loader, which rejects dangling tool uses, accepts the repaired trace


def test_compaction_with_its_summary_and_its_call(tmp_path):
    f = write(tmp_path / "s.jsonl", [
        user(0, "go"),
        asst(1, "r1", {"type": "text", "text": "a"}, w1h=500, w5m=0),
        rec("system", 5, subtype="compact_boundary", content="Conversation compacted",
            compactMetadata={"trigger": "auto", "preTokens": 1234}),
        user(5.1, "This session is being continued ... summary", isCompactSummary=True),
        asst(6, "r2", {"type": "text", "text": "b"}),
    ])
    sub = tmp_path / "s" / "subagents"
    sub.mkdir(parents=True)
    write(sub / "agent-acompact-1.jsonl", [
        user(2, "Your task is to create a detailed summary", isSidechain=True),
        asst(4, "rc", {"type": "text", "text": "<summary>"}, out=900, w1h=50, w5m=0, read=990),
    ])
    res = import_file("claude-code", f)
    comp = [e for e in res.trace.events if isinstance(e, tr.CompactEvent)]
    assert len(comp) == 1
    c = comp[0]
    assert (c.trigger, c.pre_tokens, c.summary) == ("auto", 1234, "This session is being continued ... summary")
    assert c.usage == tr.RecordedUsage(input=3, cache_write_1h=50, cache_read=990, output=900)
    # the summary is the compaction's, not a user message
    assert not any(isinstance(e, tr.UserEvent) and "continued" in e.text for e in res.trace.events)


def test_subagent_file_becomes_an_isolated_span(tmp_path):
    f = write(tmp_path / "s.jsonl", [
        user(0, "go"),
        asst(1, "r1", {"type": "tool_use", "id": "task1", "name": "Task", "input": {"prompt": "look"}}),
        rec("user", 9, message={"role": "user", "content": [{"type": "tool_result", "tool_use_id": "task1",
                                                              "content": [{"type": "text", "text": "found"}]}]},
            toolUseResult={"agentId": "abc", "status": "completed"}),
        asst(10, "r2", {"type": "text", "text": "ok"}),
    ])
    _grep_agent(tmp_path, 2)
    res = import_file("claude-code", f)
    kinds = [type(e).__name__ for e in res.trace.events]
    assert kinds == ["UserEvent", "AssistantEvent", "SubtaskStart", "UserEvent", "AssistantEvent", "ToolResultEvent",
                     "AssistantEvent", "SubtaskEnd", "ToolResultEvent", "AssistantEvent"]
    assert res.summary["subagent_calls"] == 2 and res.summary["main_calls"] == 2
    assert res.trace.events[7].conclusion == "found"


def _grep_agent(root, t):
    """Sub-agent abc's transcript beside session s: its prompt at ``t``, a Grep call, its result and its answer, a
    second apart."""
    write(root / "s" / "subagents" / "agent-abc.jsonl", [
        user(t, "look", isSidechain=True),
        asst(t + 1, "s1", {"type": "tool_use", "id": "x1", "name": "Grep", "input": {}}),
        result(t + 2, "x1", "hit"),
        asst(t + 3, "s2", {"type": "text", "text": "found"}),
    ])


def _task(t, tid, agent, status="completed", text="found"):
    tur = {"agentId": agent, "status": status, **({"isAsync": True} if status == "async_launched" else {})}
    return rec("user", t, message={"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid,
                                                                 "content": [{"type": "text", "text": text}]}]},
               toolUseResult=tur)


def test_a_background_sub_agent_is_placed_where_it_finished_and_the_main_calls_keep_their_times(tmp_path):
    """Task with run_in_background: its result at 3 s only says it started (status async_launched). The
    agent calls at 100 and 102 s; meanwhile the main context calls at 20 and 40 s, and at 125 s after
    the task's notification (120 s). The span goes after the 40 s call, ending at 102 s: every main call
    keeps its time (at the launch, the span pushed the 20 and 40 s calls to 102 s, past a 5-minute TTL
    in the logs where agents ran longer)."""
    f = write(tmp_path / "s.jsonl", [
        user(0, "go"),
        asst(1, "r1", {"type": "tool_use", "id": "task1", "name": "Task", "input": {"prompt": "look"}}),
        _task(3, "task1", "abc", status="async_launched", text="Async agent launched successfully."),
        asst(20, "r2", {"type": "tool_use", "id": "b1", "name": "Bash", "input": {"command": "ls"}}),
        result(21, "b1", "a.py"),
        asst(40, "r3", {"type": "text", "text": "waiting"}),
        user(120, "<task-notification>done</task-notification>"),
        asst(125, "r4", {"type": "text", "text": "ok"}),
    ])
    _grep_agent(tmp_path, 99)
    res = import_file("claude-code", f)
    ev = res.trace.events
    main = [e.t for e in ev if isinstance(e, tr.AssistantEvent) and not e.meta.get("subagent")]
    assert main == [1.0, 20.0, 40.0, 125.0]
    kinds = [type(e).__name__ for e in ev]
    assert kinds.index("SubtaskStart") == 6 and kinds[6:11] == ["SubtaskStart", "UserEvent", "AssistantEvent",
                                                               "ToolResultEvent", "AssistantEvent"]
    end = next(e for e in ev if isinstance(e, tr.SubtaskEnd))
    assert end.t == 102.0 and res.summary["subagent_calls"] == 2
    assert "background sub-agents placed at their last record's time: 1" in "\n".join(res.trace.header.notes)


def test_a_background_sub_agent_is_imported_when_the_log_ends_inside_sidechain_records(tmp_path):
    """The main file's last records are isSidechain lines (a span open at the end) and a background
    agent has not been placed yet: it is placed once that span closes, not dropped."""
    f = write(tmp_path / "s.jsonl", [
        user(0, "go"),
        asst(1, "r1", {"type": "tool_use", "id": "task1", "name": "Task", "input": {"prompt": "look"}}),
        _task(3, "task1", "abc", status="async_launched", text="Async agent launched successfully."),
        asst(4, "r2", {"type": "text", "text": "waiting"}),
        user(5, "side", isSidechain=True),
        asst(6, "sc1", {"type": "text", "text": "side answer"}, isSidechain=True),
    ])
    write(tmp_path / "s" / "subagents" / "agent-abc.jsonl", [
        user(99, "look", isSidechain=True),
        asst(100, "s1", {"type": "text", "text": "found"}),
    ])
    res = import_file("claude-code", f)
    assert res.summary["subagent_calls"] == 2 and res.summary["main_calls"] == 2
    starts = [e.id for e in res.trace.events if isinstance(e, tr.SubtaskStart)]
    assert starts == ["sidechain-1", "abc"]


def test_a_background_sub_agent_whose_result_comes_before_it_finished_is_placed_there_once(tmp_path):
    """Launched in the background at 3 s; a later result naming it (its output read while it still
    ran, at 50 s) comes before its last record (110 s): the span is placed at that result, ending
    there, and its calls are imported once (the transcript read once, at the launch)."""
    f = write(tmp_path / "s.jsonl", [
        user(0, "go"),
        asst(1, "r1", {"type": "tool_use", "id": "task1", "name": "Task", "input": {"prompt": "look"}}),
        _task(3, "task1", "abc", status="async_launched", text="Async agent launched successfully."),
        asst(49, "r2", {"type": "tool_use", "id": "out1", "name": "TaskOutput", "input": {"task_id": "abc"}}),
        _task(50, "out1", "abc", text="partial"),
        asst(125, "r3", {"type": "text", "text": "ok"}),
    ])
    write(tmp_path / "s" / "subagents" / "agent-abc.jsonl", [
        user(99, "look", isSidechain=True),
        asst(100, "s1", {"type": "text", "text": "found"}),
        asst(110, "s2", {"type": "text", "text": "more"}),
    ])
    res = import_file("claude-code", f)
    assert res.summary["subagent_calls"] == 2
    (end,) = [e for e in res.trace.events if isinstance(e, tr.SubtaskEnd)]
    assert end.conclusion == "partial"


def test_a_sub_agent_two_task_results_name_is_imported_once(tmp_path):
    """Two Task results name agent abc (a later call resumed or read it): its two calls are billed
    once, at the first, and the second reference is said."""
    f = write(tmp_path / "s.jsonl", [
        user(0, "go"),
        asst(1, "r1", {"type": "tool_use", "id": "task1", "name": "Task", "input": {"prompt": "look"}}),
        _task(9, "task1", "abc"),
        asst(10, "r2", {"type": "tool_use", "id": "task2", "name": "Task", "input": {"prompt": "again"}}),
        _task(12, "task2", "abc"),
        asst(13, "r3", {"type": "text", "text": "ok"}),
    ])
    _grep_agent(tmp_path, 2)
    res = import_file("claude-code", f)
    assert res.summary["subagent_calls"] == 2 and res.summary["main_calls"] == 3
    assert "sub-agent referenced again by a later Task result (its calls imported once): 1" in \
        "\n".join(res.trace.header.notes)


def test_a_half_written_last_line_is_skipped_with_a_warning_naming_it(tmp_path):
    """A session still being written (issue 41): its cut-off last line is skipped, said with the
    file and line, and the rest imports."""
    good = [user(0, "go"), asst(1, "r1", {"type": "text", "text": "a"})]
    text = "".join(json.dumps(r) + "\n" for r in good) + json.dumps(user(2, "more"))[:40]
    f = tmp_path / "cut.jsonl"
    f.write_text(text, encoding="utf-8")
    res = import_file("claude-code", f)
    assert res.trace.calls == 1 and res.summary["skipped_lines"] == 1
    assert len(res.warnings) == 1 and res.warnings[0].startswith(f"{f}:3: ") and "truncated" in res.warnings[0]
    assert any(n.startswith(f"line skipped: {f}:3: ") for n in res.trace.header.notes)


def test_foreign_file_fails_with_the_reason(tmp_path):
    f = tmp_path / "codex.jsonl"
    f.write_text(json.dumps({"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta", "payload": {}}) + "\n")
    with pytest.raises(TraceError) as e:
        import_file("claude-code", f)
    assert "not a Claude Code transcript" in str(e.value) and e.value.line == 1
    g = tmp_path / "list.jsonl"
    g.write_text("[1, 2]\n")
    with pytest.raises(TraceError, match=r"list.jsonl:1: expected a JSON object"):
        import_file("claude-code", g)


def test_assistant_record_without_ids_fails(tmp_path):
    bad = asst(1, "r1", {"type": "text", "text": "a"})
    del bad["requestId"]
    del bad["message"]["id"]
    f = write(tmp_path / "s.jsonl", [user(0, "go"), bad])
    with pytest.raises(TraceError, match=r"s.jsonl:2: assistant record with neither requestId nor message.id"):
        import_file("claude-code", f)


def test_cli_import_writes_a_loadable_trace_and_exit_2_on_bad_input(tmp_path, capsys):
    f = write(tmp_path / "s.jsonl", [user(0, "go"), asst(1, "r1", {"type": "text", "text": "a"})])
    out = tmp_path / "t.jsonl"
    assert cli(["import", "claude-code", str(f), "-o", str(out)]) == 0
    assert tr.load(out).calls == 1
    assert "calls: 1" in capsys.readouterr().out
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    assert cli(["import", "claude-code", str(bad), "-o", str(tmp_path / "x.jsonl")]) == 2
    assert f"{bad}:1: not JSON" in capsys.readouterr().err


# --- property: whatever the interleaving and the interruptions, the import loads --------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

turn = st.lists(st.tuples(st.booleans(), st.booleans()), max_size=3)  # per tool use: (answered, streamed late)


@settings(max_examples=30, deadline=None)
@given(st.lists(turn, min_size=1, max_size=6))
def test_property_any_interleaving_imports_to_a_valid_trace(tmp_path_factory, turns):
    """Each turn is one call with 0–3 tool uses; a tool use may be logged after an earlier one's
    result (streaming) and may never be answered (interrupted). The import always loads, keeps
    every call and tool use, and repairs exactly the unanswered ones."""
    d = tmp_path_factory.mktemp("prop")
    recs, ts, n = [user(0, "go")], 0.0, 0
    dangling = 0
    for i, uses in enumerate(turns):
        ts += 1
        recs.append(asst(ts, f"r{i}", {"type": "text", "text": f"turn {i}"}))
        late = []
        for answered, streamed_late in uses:
            n += 1
            block = {"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {"n": n}}
            if streamed_late and recs[-1]["type"] == "user":
                late.append((block, answered, n))
                continue
            ts += 0.1
            recs.append(asst(ts, f"r{i}", block))
            if answered:
                ts += 0.1
                recs.append(result(ts, f"t{n}", f"out {n}"))
            else:
                dangling += 1
        for block, answered, k in late:
            ts += 0.1
            recs.append(asst(ts, f"r{i}", block))
            if answered:
                ts += 0.1
                recs.append(result(ts, f"t{k}", f"out {k}"))
            else:
                dangling += 1
    res = import_file("claude-code", write(d / "p.jsonl", recs))
    out = d / "t.jsonl"
    tr.write(res.trace, out)
    back = tr.load(out)
    assert back.calls == len(turns)
    assert res.summary["tool_uses"] == n
    assert res.summary["repairs"].get("dangling tool_use repaired with a synthetic error result", 0) == dangling


def test_inline_sidechain_records_become_a_span(tmp_path):
    """Older transcripts keep sub-agent records in the main file with isSidechain: each
    contiguous run is one isolated span."""
    side = dict(isSidechain=True)
    f = write(tmp_path / "s.jsonl", [
        user(0, "go"),
        asst(1, "r1", {"type": "tool_use", "id": "task1", "name": "Task", "input": {"prompt": "look"}}),
        {**user(2, "look"), **side},
        {**asst(3, "s1", {"type": "text", "text": "found"}), **side},
        result(4, "task1", "found"),
        asst(5, "r2", {"type": "text", "text": "ok"}),
    ])
    res = import_file("claude-code", f)
    kinds = [type(e).__name__ for e in res.trace.events]
    assert kinds == ["UserEvent", "AssistantEvent", "SubtaskStart", "UserEvent", "AssistantEvent", "SubtaskEnd",
                     "ToolResultEvent", "AssistantEvent"]
    start = res.trace.events[2]
    assert start.isolated and start.id == "sidechain-1"
    assert res.summary["subagent_spans"] == 1
    assert (res.summary["main_calls"], res.summary["subagent_calls"]) == (2, 1)


# --- hidden content the transcript lost, put back from the other log files ----------------------

def hook(ts, tid, event, name):
    return rec("progress", ts, toolUseID=tid, parentToolUseID=tid,
               data={"type": "hook_progress", "hookEvent": event, "hookName": name, "command": "x.sh"})


def test_pretooluse_block_is_repeated_as_a_system_reminder(tmp_path):
    """A PreToolUse hook's block reaches the model twice: the tool's error result, and a
    <system-reminder> repeating it (Claude Code's hook_blocking_error attachment). A user rejection,
    a command's own failure and a blocked call's PostToolUse-run sibling are not blocks."""
    reason = "Pre-commit validation failed:\\n\\n[FORMAT] Code is not formatted."
    f = write(tmp_path / "s.jsonl", [
        user(0, "commit"),
        asst(1, "r1", {"type": "tool_use", "id": "b1", "name": "Bash", "input": {"command": "git commit"}}),
        hook(1.1, "b1", "PreToolUse", "PreToolUse:Bash"),
        {**result(2, "b1", reason, is_error=True), "toolUseResult": "Error: " + reason},
        asst(3, "r2", {"type": "tool_use", "id": "b2", "name": "Bash", "input": {"command": "false"}}),
        hook(3.1, "b2", "PreToolUse", "PreToolUse:Bash"), hook(3.2, "b2", "PostToolUseFailure", "PostToolUseFailure:Bash"),
        {**result(4, "b2", "Exit code 1", is_error=True), "toolUseResult": "Error: Exit code 1"},
        asst(5, "r3", {"type": "tool_use", "id": "b3", "name": "Bash", "input": {"command": "rm -rf"}}),
        hook(5.1, "b3", "PreToolUse", "PreToolUse:Bash"),
        {**result(6, "b3", "The user doesn't want to proceed with this tool use.", is_error=True),
         "toolUseResult": "User rejected tool use"},
        asst(7, "r4", {"type": "text", "text": "ok"}),
    ])
    res = import_file("claude-code", f)
    hidden = [(i, e) for i, e in enumerate(res.trace.events) if isinstance(e, tr.UserEvent) and e.meta.get("hidden")]
    assert len(hidden) == 1 and res.summary["hidden_messages"] == 1
    i, e = hidden[0]
    assert e.text == f"<system-reminder>\nPreToolUse:Bash hook blocking error from command: {reason}\n</system-reminder>"
    # after the blocked call's result, before the next call
    assert isinstance(res.trace.events[i - 1], tr.ToolResultEvent) and res.trace.events[i - 1].tool_use_id == "b1"
    assert isinstance(res.trace.events[i + 1], tr.AssistantEvent)
    assert any("hidden content recovered: 1 meta user message(s) from PreToolUse:Bash" in n
               and f"{len(e.text)} chars" in n for n in res.trace.header.notes)


def test_acompact_meta_messages_go_back_before_the_next_call(tmp_path):
    """The compaction request's isMeta messages (before its prompt) are conversation content the
    main transcript lost: each goes before the first main call after its time."""
    f = write(tmp_path / "s.jsonl", [
        user(0, "go"),
        asst(1, "r1", {"type": "tool_use", "id": "e1", "name": "Edit", "input": {}}),
        result(2, "e1", "updated"),
        asst(4, "r2", {"type": "tool_use", "id": "e2", "name": "Edit", "input": {}}),
        result(5, "e2", "updated"),
        asst(7, "r3", {"type": "text", "text": "a"}),
        rec("system", 9, subtype="compact_boundary", compactMetadata={"trigger": "auto", "preTokens": 99}),
        user(9.1, "This session is being continued", isCompactSummary=True),
        asst(10, "r4", {"type": "text", "text": "b"}),
    ])
    sub = tmp_path / "s" / "subagents"
    sub.mkdir(parents=True)
    write(sub / "agent-acompact-1.jsonl", [
        user(3, "<system-reminder>\nPostToolUse:Edit hook additional context: [COMPILE ERROR]\n</system-reminder>",
             isSidechain=True, isMeta=True),
        user(6, "<system-reminder>\nsecond\n</system-reminder>", isSidechain=True, isMeta=True),
        user(8, "Your task is to create a detailed summary", isSidechain=True),
        asst(8.5, "rc", {"type": "text", "text": "<summary>"}, read=900),
    ])
    res = import_file("claude-code", f)
    kinds = [(type(e).__name__, e.meta.get("hidden") is not None if isinstance(e, tr.UserEvent) else None)
             for e in res.trace.events]
    assert kinds == [("UserEvent", False), ("AssistantEvent", None), ("ToolResultEvent", None), ("UserEvent", True),
                     ("AssistantEvent", None), ("ToolResultEvent", None), ("UserEvent", True),
                     ("AssistantEvent", None), ("CompactEvent", None), ("AssistantEvent", None)]
    assert res.trace.events[3].text.startswith("<system-reminder>\nPostToolUse:Edit")
    assert res.summary["hidden_messages"] == 2
    # the compaction prompt itself is not conversation content
    assert not any(isinstance(e, tr.UserEvent) and "detailed summary" in e.text for e in res.trace.events)


@needs_real
def test_real_258c_acompact_hook_outputs_are_put_back():
    """agent-acompact-fffbd0.jsonl holds two PostToolUse:Edit hook outputs (isMeta, 20:57:47 and
    20:58:09) the main transcript lacks; each goes right before the main call that followed it
    (read here from the main file: the first assistant record after its timestamp)."""
    from datetime import datetime

    main = REAL / MAIN_LOGS[0]
    acompact = main.with_suffix("") / "subagents" / "agent-acompact-fffbd0.jsonl"
    metas = [json.loads(x) for x in acompact.read_text().splitlines()]
    metas = [o for o in metas if o["type"] == "user" and o.get("isMeta")]
    assert len(metas) == 2
    recs = [json.loads(x) for x in main.read_text().splitlines()]
    ts = lambda o: datetime.fromisoformat(o["timestamp"].replace("Z", "+00:00"))  # noqa: E731
    want_next = [next(o["requestId"] for o in recs if o["type"] == "assistant" and ts(o) > ts(m)) for m in metas]
    res = import_file("claude-code", main)
    evs = res.trace.events
    got = [(e.text, evs[i + 1].request_id) for i, e in enumerate(evs) if isinstance(e, tr.UserEvent) and e.meta.get("hidden")]
    assert got == [(m["message"]["content"], r) for m, r in zip(metas, want_next)]
    assert res.summary["hidden_messages"] == 2


@needs_real
def test_real_ae4a_pretooluse_blocks_are_repeated():
    """ae4a77f8: the Bash calls whose PreToolUse hooks ran but no PostToolUse hook did, and whose
    result is an error that no user rejected (counted here from the raw records: 8, the
    pre-commit validation failures), each get the repeated reminder."""
    main = REAL / MAIN_LOGS[1]
    pre, post, errors = set(), set(), {}
    for x in main.read_text().splitlines():
        o = json.loads(x)
        d = o.get("data") or {}
        if o["type"] == "progress" and d.get("type") == "hook_progress":
            (pre if d["hookEvent"] == "PreToolUse" else post).add(o["toolUseID"])
        if o["type"] == "user" and isinstance(o["message"]["content"], list):
            for b in o["message"]["content"]:
                if b.get("type") == "tool_result" and b.get("is_error") and o.get("toolUseResult") != "User rejected tool use":
                    errors[b["tool_use_id"]] = b["content"]
    blocked = [errors[t] for t in errors if t in pre and t not in post]
    assert len(blocked) == 8 and all(t.startswith("Pre-commit validation failed") for t in blocked)
    res = import_file("claude-code", main)
    hidden = [e.text for e in res.trace.events if isinstance(e, tr.UserEvent) and e.meta.get("hidden")]
    assert len(hidden) == 8 and res.summary["hidden_messages"] == 8
    assert sorted(h.split("from command: ", 1)[1].removesuffix("\n</system-reminder>") for h in hidden) == sorted(blocked)


def _progress(t, tid, agent):
    """Claude Code 2.1.x's record of a running sub-agent's step: ``data.agentId`` under the Task call's id."""
    return rec("progress", t, parentToolUseID=tid, toolUseID=f"agent_msg_{agent}",
               data={"type": "agent_progress", "agentId": agent, "prompt": "look"})


def test_the_sub_agent_of_an_interrupted_task_call_is_found_by_its_progress_records(tmp_path):
    """The user interrupted a Task call while its sub-agent ran: the result is the interruption and names no
    agent (no toolUseResult.agentId), yet the agent's two calls were billed. Its progress records name it:
    it is a span ending at the interruption, and nothing is left out (no warning)."""
    f = write(tmp_path / "s.jsonl", [
        user(0, "go"),
        asst(1, "r1", {"type": "tool_use", "id": "task1", "name": "Task", "input": {"prompt": "look for it"}}),
        _progress(3, "task1", "abc"),
        result(9, "task1", "[Request interrupted by user for tool use]", is_error=True,
               toolUseResult="Error: [Request interrupted by user for tool use]"),
        asst(10, "r2", {"type": "text", "text": "ok"}),
    ])
    _grep_agent(tmp_path, 2)   # its first message is "look": not the call's prompt, the progress record decides
    res = import_file("claude-code", f)
    assert res.summary["subagent_calls"] == 2 and res.summary["main_calls"] == 2
    assert res.warnings == []
    (end,) = [e for e in res.trace.events if isinstance(e, tr.SubtaskEnd)]
    assert end.t == 9.0 and end.conclusion == "[Request interrupted by user for tool use]"
    assert "found by its agent_progress records: 1" in "\n".join(res.trace.header.notes)


def test_the_sub_agent_of_a_rejected_task_call_is_found_by_its_prompt_where_no_progress_is_written(tmp_path):
    """2.1.109 writes no agent_progress records. Two Task calls with the same prompt, the first rejected while
    its agent ran (the result names no agent), the second completed (its result names agent def). The rejected
    call's agent is the transcript no result names whose first message is the call's prompt."""
    f = write(tmp_path / "s.jsonl", [
        user(0, "go"),
        asst(1, "r1", {"type": "tool_use", "id": "task1", "name": "Agent", "input": {"prompt": "look"}}),
        result(8, "task1", "User rejected tool use", is_error=True, toolUseResult="User rejected tool use"),
        asst(20, "r2", {"type": "tool_use", "id": "task2", "name": "Agent", "input": {"prompt": "look"}}),
        _task(30, "task2", "def"),
        asst(31, "r3", {"type": "text", "text": "ok"}),
    ])
    _grep_agent(tmp_path, 2)
    write(tmp_path / "s" / "subagents" / "agent-def.jsonl", [
        user(21, "look", isSidechain=True), asst(22, "d1", {"type": "text", "text": "found"})])
    res = import_file("claude-code", f)
    assert res.summary["subagent_calls"] == 3 and res.warnings == []
    assert [e.id for e in res.trace.events if isinstance(e, tr.SubtaskStart)] == ["abc", "def"]
    assert "found by its prompt: 1" in "\n".join(res.trace.header.notes)


def test_the_sub_agent_of_a_task_call_with_no_result_is_placed_where_it_stopped(tmp_path):
    """The user typed while a Task call's agent ran: the call has no result at all (the importer closes it
    with a synthetic one), and the agent's calls were billed. Its progress records name it: placed at its
    last record's time, before the user's message."""
    f = write(tmp_path / "s.jsonl", [
        user(0, "go"),
        asst(1, "r1", {"type": "tool_use", "id": "task1", "name": "Task", "input": {"prompt": "look for it"}}),
        _progress(3, "task1", "abc"),
        user(30, "stop, do this instead"),
        asst(31, "r2", {"type": "text", "text": "ok"}),
    ])
    _grep_agent(tmp_path, 2)
    res = import_file("claude-code", f)
    assert res.summary["subagent_calls"] == 2 and res.warnings == []
    kinds = [type(e).__name__ for e in res.trace.events]
    assert kinds.index("SubtaskEnd") < [i for i, e in enumerate(res.trace.events)
                                        if isinstance(e, tr.UserEvent) and e.text.startswith("stop")][0]
    (end,) = [e for e in res.trace.events if isinstance(e, tr.SubtaskEnd)]
    assert end.t == 5.0


def test_a_fork_of_the_main_conversation_is_a_fork_span_of_its_own_part_at_its_start(tmp_path):
    """A side question (/btw, ``agent-aside_question-*``) forks the main conversation: its file copies the main
    transcript's calls with their request ids (and the results of their tool uses), then holds its own question
    and call. Imported: a fork span at the question's time holding only the question and its call (no copy twice,
    nothing left out, no warning); the copies stay the main transcript's. Replayed, the fork reads from the
    cache what the main call before it cached."""
    f = write(tmp_path / "s.jsonl", [
        user(0, "go"),
        asst(1, "r1", {"type": "tool_use", "id": "b1", "name": "Bash", "input": {"command": "ls"}}, w5m=3_000),
        result(2, "b1", "a.py"),
        asst(3, "r2", {"type": "text", "text": "listed"}, w5m=100, read=3_000),
        user(100, "next"),
        asst(101, "r3", {"type": "text", "text": "done"}, w5m=100, read=3_100),
    ])
    side = tmp_path / "s" / "subagents" / "agent-aside_question-f1.jsonl"
    write(side, [
        user(0, "go", isSidechain=True),
        asst(1, "r1", {"type": "tool_use", "id": "b1", "name": "Bash", "input": {"command": "ls"}}, isSidechain=True),
        result(2, "b1", "a.py", isSidechain=True),
        asst(3, "r2", {"type": "text", "text": "listed"}, isSidechain=True),
        user(4, "<system-reminder>This is a side question from the user.</system-reminder> why?", isSidechain=True),
        asst(9, "q1", {"type": "text", "text": "because"}, w5m=0, read=3_100, inp=30, isSidechain=True),
    ])
    res = import_file("claude-code", f)
    assert res.warnings == [] and res.trace.calls == 4 and res.summary["subagent_calls"] == 1
    ev = res.trace.events
    i = next(i for i, e in enumerate(ev) if isinstance(e, tr.SubtaskStart))
    span = ev[i:i + 4]
    assert [type(e).__name__ for e in span] == ["SubtaskStart", "UserEvent", "AssistantEvent", "SubtaskEnd"]
    assert span[0].fork and span[0].isolated and span[1].text.endswith("why?")
    assert {e.t for e in span} == {4.0} and ev[i - 1].t == 3.0 and ev[i + 4].text == "next"
    assert res.summary["fork_spans"] == 1 and res.summary["subagent_spans"] == 0
    assert any(n.startswith("1 fork(s) of the main conversation") for n in res.trace.header.notes)
    c = replay(res.trace, "append_only", {}, RunConfig()).calls
    assert list(c["kind"]) == ["main", "main", "subagent", "main"]
    assert c.iloc[2]["cache_read"] == c.iloc[1]["cache_read"] + c.iloc[1]["cache_write_5m"]


def test_a_side_file_with_no_copied_call_and_no_parent_in_the_main_transcript_is_a_span_at_its_time(tmp_path):
    """A side file that copies no call of the main transcript and whose first record answers none of its records
    cannot be told from a sub-agent no Task call launches: its calls are imported as an isolated span placed at
    its last record's time, nothing left out."""
    f = write(tmp_path / "s.jsonl", [user(0, "go"), asst(1, "r1", {"type": "text", "text": "listed"})])
    side = tmp_path / "s" / "subagents" / "agent-aprompt_suggestion-f2.jsonl"
    write(side, [asst(2, "r9", {"type": "text", "text": "more"}, isSidechain=True),
                 user(3, "[SUGGESTION MODE: Suggest what the user might naturally type next.]", isSidechain=True),
                 asst(4, "q1", {"type": "text", "text": "run the tests"}, isSidechain=True)])
    res = import_file("claude-code", f)
    assert res.trace.calls == 3 and res.warnings == [] and res.summary["subagent_calls"] == 2


def test_a_prompt_suggestion_that_copies_nothing_is_a_fork_told_by_its_parent_in_the_main_transcript(tmp_path):
    """Claude Code 2.1.23-2.1.29 writes a prompt suggestion's file as its prompt, answering the main transcript's
    last record (``parentUuid``), then its call: no copied call tells it apart, its parent does (a sub-agent a Task
    call launches begins with no parent). Imported as a fork span, not as an agent placed at its time; a leading
    copy of the main's last answer the main transcript lacks (written before it) is context, not a call."""
    f = write(tmp_path / "s.jsonl", [
        user(0, "go", uuid="u1"),
        asst(1, "r1", {"type": "text", "text": "listed"}, uuid="a1", parentUuid="u1"),
        user(50, "next", uuid="u2", parentUuid="a1"),
        asst(51, "r2", {"type": "text", "text": "done"}, uuid="a2", parentUuid="u2"),
    ])
    prompt = "[SUGGESTION MODE: Suggest what the user might naturally type next into Claude Code.]"
    write(tmp_path / "s" / "subagents" / "agent-aprompt_suggestion-aa.jsonl", [
        user(2, prompt, isSidechain=True, uuid="p1", parentUuid="a1"),
        asst(3, "q1", {"type": "text", "text": "run the tests"}, isSidechain=True, uuid="p2", parentUuid="p1")])
    write(tmp_path / "s" / "subagents" / "agent-aprompt_suggestion-bb.jsonl", [
        asst(52, "r9", {"type": "text", "text": "a later answer"}, isSidechain=True, uuid="c1", parentUuid="u2"),
        user(53, prompt, isSidechain=True, uuid="p3", parentUuid="c1"),
        asst(54, "q2", {"type": "text", "text": "commit it"}, isSidechain=True, uuid="p4", parentUuid="p3")])
    res = import_file("claude-code", f)
    assert res.warnings == [] and res.trace.calls == 4
    forks = [e for e in res.trace.events if isinstance(e, tr.SubtaskStart)]
    assert [(e.id, e.fork, e.t) for e in forks] == [("aprompt_suggestion-aa", True, 2.0), ("aprompt_suggestion-bb", True, 53.0)]
    spans = [type(e).__name__ for e in res.trace.events[res.trace.events.index(forks[1]):]]
    assert spans == ["SubtaskStart", "UserEvent", "AssistantEvent", "SubtaskEnd"]


def test_a_fork_whose_lines_are_out_of_order_leaves_its_own_call_out_said_and_the_session_imports(tmp_path):
    """A damaged fork: its own call comes before the main transcript's calls it copies. No own part follows them, and
    imported as an agent its copies would be the main transcript's calls twice (a duplicate tool_use id failed the
    whole session). Its own call is named as left out (exit 2); the main transcript imports whole."""
    f = write(tmp_path / "s.jsonl", [
        user(0, "go"),
        asst(1, "r1", {"type": "tool_use", "id": "b1", "name": "Bash", "input": {"command": "ls"}}),
        result(2, "b1", "a.py"),
        asst(3, "r2", {"type": "text", "text": "listed"}),
    ])
    side = tmp_path / "s" / "subagents" / "agent-aside_question-f3.jsonl"
    write(side, [
        asst(5, "q1", {"type": "text", "text": "because"}, isSidechain=True),
        user(0, "go", isSidechain=True),
        asst(1, "r1", {"type": "tool_use", "id": "b1", "name": "Bash", "input": {"command": "ls"}}, isSidechain=True),
        result(2, "b1", "a.py", isSidechain=True),
        asst(3, "r2", {"type": "text", "text": "listed"}, isSidechain=True),
    ])
    res = import_file("claude-code", f)
    assert res.trace.calls == 2
    assert res.warnings == [f"{side}: 1 model call of a fork of the main conversation whose own part follows none of "
                            "the calls it copies (lines out of order?): not in the trace"]
