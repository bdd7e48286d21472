"""Codex, SWE-agent and OpenHands importers: real files (counts from a direct reading of the file)
and small hand-made files, broken ones included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ctxsim.harness.importers import import_file
from ctxsim.harness.model import trace as tr
from ctxsim.harness.model.trace import TraceError

REAL = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces" / "real"
needs_real = pytest.mark.skipif(not REAL.is_dir(), reason="real logs not present (../shared/traces/real)")


# --- codex ------------------------------------------------------------------------------------

@needs_real
def test_codex_real_rollout_counts():
    path = next((REAL / "codex").glob("*.jsonl"))
    calls, tools, last = 0, 0, None
    for line in path.read_text(encoding="utf-8").splitlines():
        o = json.loads(line)
        p = o["payload"]
        if p.get("type") == "token_count" and p.get("info"):
            if p["info"]["total_token_usage"] != last:
                calls += 1
            last = p["info"]["total_token_usage"]
        if p.get("type") in ("function_call", "custom_tool_call"):
            tools += 1
    res = import_file("codex", path)
    assert (res.summary["calls"], res.summary["tool_uses"]) == (calls, tools) == (66, 102)
    h = res.trace.header
    assert h.model == "gpt-5.5" and h.usage == "per_call" and h.system.startswith("You are Codex")
    first = next(e for e in res.trace.events if isinstance(e, tr.AssistantEvent))
    # first token_count: input 18,703 of which 0 cached, output 167
    assert first.usage == tr.RecordedUsage(input=18_703, cache_read=0, output=167)
    second = [e for e in res.trace.events if isinstance(e, tr.AssistantEvent)][1]
    # input_tokens include cached (OpenAI): 18,911 − 18,304 = 607 uncached
    assert second.usage == tr.RecordedUsage(input=607, cache_read=18_304, output=37)


def _codex_line(ts, kind, payload):
    return json.dumps({"timestamp": f"2026-01-01T00:00:{ts:02d}Z", "type": kind, "payload": payload}) + "\n"


def test_codex_duplicate_token_count_is_dropped_and_counted(tmp_path):
    usage = {"input_tokens": 1000, "cached_input_tokens": 800, "output_tokens": 50}
    tc = {"type": "token_count", "info": {"total_token_usage": {"total_tokens": 1050}, "last_token_usage": usage}}
    f = tmp_path / "rollout.jsonl"
    f.write_text(
        _codex_line(0, "session_meta", {"base_instructions": {"text": "sys"}, "cli_version": "0.1"})
        + _codex_line(0, "turn_context", {"model": "gpt-5"})
        + _codex_line(1, "response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]})
        + _codex_line(2, "response_item", {"type": "function_call", "name": "shell", "arguments": "{\"cmd\": \"ls\"}", "call_id": "c1"})
        + _codex_line(3, "event_msg", tc)
        + _codex_line(3, "event_msg", tc)
        + _codex_line(4, "response_item", {"type": "function_call_output", "call_id": "c1", "output": "a b"})
        + _codex_line(5, "response_item", {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]})
        + _codex_line(6, "event_msg", {"type": "token_count", "info": {"total_token_usage": {"total_tokens": 2000},
                                                                       "last_token_usage": usage}}))
    res = import_file("codex", f)
    assert res.summary["calls"] == 2
    assert res.summary["repairs"]["duplicate token_count dropped"] == 1
    call = next(e for e in res.trace.events if isinstance(e, tr.AssistantEvent))
    assert call.usage == tr.RecordedUsage(input=200, cache_read=800, output=50)  # 1,000 − 800 cached
    assert call.tool_uses()[0].input == {"cmd": "ls"}


def test_codex_bad_line_fails_with_line(tmp_path):
    f = tmp_path / "rollout.jsonl"
    f.write_text(_codex_line(0, "session_meta", {}) + json.dumps({"type": "event_msg"}) + "\n")
    with pytest.raises(TraceError, match=r"rollout.jsonl:2: not a Codex rollout line"):
        import_file("codex", f)


# --- swe-agent --------------------------------------------------------------------------------

@needs_real
@pytest.mark.parametrize("name,calls,tools", [("6e44b9__sweagenttestrepo-1c2844.traj", 5, 4),
                                              ("pydicom__pydicom-1458.traj", 12, 0)])
def test_swe_agent_real_counts(name, calls, tools):
    doc = json.loads((REAL / "swe-agent" / name).read_text(encoding="utf-8"))
    assert doc["info"]["model_stats"]["api_calls"] == calls          # the file's own count
    assert sum(len(m.get("tool_calls") or []) for m in doc["history"]) == tools
    res = import_file("swe-agent", REAL / "swe-agent" / name)
    # every call is an action with its observation: the function calls, plus the text actions
    # (pydicom: 12) and the final submit appended from the trajectory (test repo: 4 + 1)
    assert (res.summary["calls"], res.summary["tool_uses"], res.summary["observations_paired"]) == (calls, calls, calls)
    h = res.trace.header
    assert h.usage == "aggregate" and h.meta["aggregate_usage"]["api_calls"] == calls
    assert h.system.startswith("SETTING: You are an autonomous programmer")


def test_swe_agent_foreign_and_truncated(tmp_path):
    f = tmp_path / "x.traj"
    f.write_text(json.dumps({"events": []}))
    with pytest.raises(TraceError, match="not a SWE-agent trajectory"):
        import_file("swe-agent", f)
    g = tmp_path / "cut.traj"
    g.write_text('{"history": [\n  {"role": "system",')
    with pytest.raises(TraceError) as e:
        import_file("swe-agent", g)
    assert e.value.line == 2 and "truncated" in str(e.value)


# --- openhands --------------------------------------------------------------------------------

@needs_real
def test_openhands_real_counts():
    path = REAL / "openhands" / "basic_gui_mode.json"
    events = json.loads(path.read_text(encoding="utf-8"))
    responses = {e["tool_call_metadata"]["model_response"]["id"] for e in events
                 if "action" in e and e.get("tool_call_metadata")}
    tool_actions = sum(1 for e in events if "action" in e and e.get("tool_call_metadata"))
    res = import_file("openhands", path)
    # 4 logged responses with usage + the final message (no usage logged)
    assert res.summary["calls"] == len(responses) + 1 == 5
    assert res.summary["tool_uses"] == tool_actions == 4
    first = next(e for e in res.trace.events if isinstance(e, tr.AssistantEvent))
    # litellm: prompt_tokens 3,439 include the 3,435 cache-creation tokens → 4 uncached
    assert first.usage == tr.RecordedUsage(input=4, cache_write_5m=3435, cache_read=0, output=104)


def test_openhands_foreign_file(tmp_path):
    f = tmp_path / "x.json"
    f.write_text(json.dumps([{"type": "user"}]))
    with pytest.raises(TraceError, match="event #0 has no id or timestamp"):
        import_file("openhands", f)


@pytest.mark.parametrize("event,edit,words", [
    (4, lambda e: e["args"].pop("content"), "event #4: a message from the user whose args.content is not a string"),
    (4, lambda e: e.__setitem__("args", 5), "event #4: a message from the user whose args.content is not a string"),
    (15, lambda e: e["args"].__setitem__("content", None), "event #15: a message from the agent whose args.content is not"),
    (7, lambda e: e["tool_call_metadata"].__setitem__("function_name", ["execute_bash"]),
     "event #7: tool_call_metadata.function_name is not a string"),
])
@needs_real
def test_openhands_an_event_of_a_type_openhands_never_writes_is_named_not_sent_as_its_str(tmp_path, event, edit, words):
    """A message whose text is missing or not a string was sent as "None" or "5", a tool named by a list
    as "['execute_bash']". Each is refused at its event, as any other damaged field of the document is."""
    events = json.loads((REAL / "openhands" / "basic_gui_mode.json").read_text(encoding="utf-8"))
    edit(events[event])
    f = tmp_path / "damaged.json"
    f.write_text(json.dumps(events))
    with pytest.raises(TraceError, match=words):
        import_file("openhands", f)
