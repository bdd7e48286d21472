"""Trace format v1: streaming validation with file:line errors, canonical round trip."""

import json

import pytest
from ctxsim.harness.cli import main
from ctxsim.harness.model import trace as tr

from tests.helpers_traces import Builder


def write_lines(path, objs):
    path.write_text("".join(json.dumps(o) + "\n" for o in objs), encoding="utf-8")
    return path


HEADER = {"type": "header", "format": "ctxsim-trace", "version": 1, "name": "x"}


def a(t, *uses):
    return {"type": "assistant", "t": t, "content": [{"type": "text", "text": "hi"},
                                                     *({"type": "tool_use", "id": u, "name": "Bash", "input": {}} for u in uses)]}


def test_round_trip_is_byte_for_byte(tmp_path):
    t = Builder().user("go").call("look", ["out1", "out2"]).call("done").build()
    p = tmp_path / "t.jsonl"
    tr.write(t, p)
    first = p.read_bytes()
    again = tmp_path / "u.jsonl"
    tr.write(tr.load(p), again)
    assert again.read_bytes() == first
    assert tr.load(again).content_hash == tr.load(p).content_hash


@pytest.mark.parametrize("lines, line_no, what", [
    ([HEADER, {"type": "user", "t": 1}], 2, "text"),
    ([HEADER, {"type": "user", "t": 2, "text": "a"}, {"type": "user", "t": 1, "text": "b"}], 3, "time goes backwards"),
    ([HEADER, a(1), {"type": "tool_result", "t": 2, "tool_use_id": "nope", "content": ""}], 3, "unknown tool_use id"),
    ([HEADER, a(1, "u1"), a(2)], 3, "has no tool_result"),
    ([HEADER, {"type": "user", "t": 1, "text": "x"}, {"type": "probe", "t": 2, "id": "p", "needs": ["f9"]}, a(3)], 3, "unknown fact"),
    ([HEADER, {"type": "user", "t": 1, "text": "abc"}, {"type": "fact", "t": 1, "id": "f", "category": "goal", "text": "zzz"}], 3, "does not appear"),
    ([HEADER, {"type": "bogus", "t": 1}], 2, "bogus"),
    ([{"type": "user", "t": 1, "text": "x"}], 1, "first line must be the header"),
    ([HEADER, {"type": "user", "t": 1, "text": "x", "extra": 1}], 2, "extra"),
])
def test_errors_name_file_line_and_reason(tmp_path, lines, line_no, what):
    p = write_lines(tmp_path / "bad.jsonl", lines)
    with pytest.raises(tr.TraceError) as e:
        tr.load(p)
    assert e.value.line == line_no
    assert str(e.value).startswith(f"{p}:{line_no}: ")
    assert what in str(e.value)


def test_not_json_line(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text(json.dumps(HEADER) + "\n{oops\n")
    with pytest.raises(tr.TraceError, match=r"bad.jsonl:2: not JSON"):
        tr.load(p)


def test_probe_needs_a_following_call(tmp_path):
    p = write_lines(tmp_path / "p.jsonl", [HEADER, {"type": "user", "t": 1, "text": "goal: X1"},
                                           {"type": "fact", "t": 1, "id": "f", "category": "goal", "text": "X1"},
                                           {"type": "probe", "t": 2, "id": "p", "needs": ["f"]}])
    with pytest.raises(tr.TraceError, match="not followed by a model call"):
        tr.load(p)


def test_subagent_span_inside_an_open_task_call_is_valid():
    b = Builder().user("go")
    b.events.append(tr.AssistantEvent(t=2, content=[tr.ToolUseContent(id="task1", name="Task", input={})]))
    b.events.append(tr.SubtaskStart(t=3, id="s1", isolated=True))
    b.events.append(tr.UserEvent(t=3, text="explore"))
    b.events.append(tr.AssistantEvent(t=4, content=[tr.ToolUseContent(id="in1", name="Bash", input={})]))
    b.events.append(tr.ToolResultEvent(t=5, tool_use_id="in1", content="x"))
    b.events.append(tr.AssistantEvent(t=6, content=[tr.TextContent(text="found")]))
    b.events.append(tr.SubtaskEnd(t=7, id="s1", conclusion="found"))
    b.events.append(tr.ToolResultEvent(t=8, tool_use_id="task1", content="found"))
    b.t = 8
    assert b.call("done").build().calls == 4


def test_validate_command_exit_codes(tmp_path, capsys):
    good = tmp_path / "g.jsonl"
    tr.write(Builder().user("go").call("done").build(), good)
    assert main(["validate", str(good)]) == 0
    assert "1 model calls" in capsys.readouterr().out
    bad = write_lines(tmp_path / "b.jsonl", [HEADER, {"type": "user", "t": -1, "text": "x"}])
    assert main(["validate", str(bad)]) == 2
    assert f"{bad}:2" in capsys.readouterr().err
    assert main(["validate", str(tmp_path / "missing.jsonl")]) == 2


def test_json_schema_covers_every_event_type():
    s = json.dumps(tr.json_schema())
    for name in ("user", "assistant", "tool_result", "compact", "session_start", "session_end", "fact", "probe",
                 "subtask_start", "subtask_end"):
        assert f'"{name}"' in s
