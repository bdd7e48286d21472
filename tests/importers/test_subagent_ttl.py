"""Sub-agents that write the cache with another TTL than the main context (issue 41): Claude Code
2.1.x writes its main context with a 1-hour TTL and its sub-agents with 5 minutes (53 sessions of the
development population, every one with both). The import reads each side's TTL from its own usage and
the replay of the log writes each with its own; a sub-agent billed at the main context's 1h price
was 60% dearer per written token (Opus 4.6: $10 against $6.25 per million)."""

from __future__ import annotations

from ctxsim.harness.importers import import_file
from ctxsim.harness.replay.engine import RunConfig, replay

from tests.helpers_claude_code import asst, rec, result, user, write


def _session(tmp_path, sub_w1h: int, sub_w5m: int):
    f = write(tmp_path / "s.jsonl", [
        user(0, "go"),
        asst(1, "r1", {"type": "tool_use", "id": "task1", "name": "Task", "input": {"prompt": "look"}},
             w1h=20_000, w5m=0),
        rec("user", 9, message={"role": "user", "content": [{"type": "tool_result", "tool_use_id": "task1",
                                                              "content": [{"type": "text", "text": "found"}]}]},
            toolUseResult={"agentId": "abc", "status": "completed"}),
        asst(10, "r2", {"type": "text", "text": "ok"}, w1h=50, w5m=0, read=20_000),
    ])
    sub = tmp_path / "s" / "subagents"
    sub.mkdir(parents=True, exist_ok=True)
    write(sub / "agent-abc.jsonl", [
        user(2, "look", isSidechain=True),
        asst(3, "s1", {"type": "tool_use", "id": "x1", "name": "Grep", "input": {}}, w1h=sub_w1h, w5m=sub_w5m),
        result(4, "x1", "hit"),
        asst(5, "s2", {"type": "text", "text": "found"}, w5m=40 if sub_w5m else 0, w1h=40 if sub_w1h else 0,
             read=sub_w1h + sub_w5m),
    ])
    return import_file("claude-code", f).trace


def test_the_sub_agents_own_ttl_is_read_and_replayed(tmp_path):
    t = _session(tmp_path, sub_w1h=0, sub_w5m=12_000)
    rec_ = t.header.recorded
    assert (rec_.cache_ttl, rec_.subagent_cache_ttl) == ("1h", "5m")
    assert "ephemeral_5m_input_tokens 12,040" in rec_.subagent_cache_ttl_evidence
    calls = replay(t, "recorded", {}, RunConfig()).calls
    sub = calls[calls["kind"] == "subagent"]
    main = calls[calls["kind"] == "main"]
    assert sub["cache_write_1h"].sum() == 0 and sub["cache_write_5m"].sum() > 0
    assert main["cache_write_5m"].sum() == 0 and main["cache_write_1h"].sum() > 0


def test_sub_agents_with_the_main_ttl_record_none(tmp_path):
    t = _session(tmp_path / "same", sub_w1h=12_000, sub_w5m=0)
    assert t.header.recorded.subagent_cache_ttl is None
    calls = replay(t, "recorded", {}, RunConfig()).calls
    assert calls[calls["kind"] == "subagent"]["cache_write_5m"].sum() == 0
