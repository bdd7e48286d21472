"""Codex rollouts of current versions (issue 27): with and without ``token_count`` events, user
turns only in ``event_msg/user_message``, the model from ``turn_context``/``session_meta``, the
project from the session's ``cwd``; a trace with no model is exit 2 at ``run``."""

from __future__ import annotations

import json

from ctxsim.harness.cli import main as cli
from ctxsim.harness.importers import import_file
from ctxsim.harness.model import trace as tr


def line(ts, kind, payload):
    return json.dumps({"timestamp": f"2026-01-01T00:00:{ts:02d}Z", "type": kind, "payload": payload}) + "\n"


def fcall(ts, cid, cmd="ls"):
    return line(ts, "response_item", {"type": "function_call", "name": "shell", "arguments": json.dumps({"cmd": cmd}),
                                      "call_id": cid})


def fout(ts, cid, out="ok"):
    return line(ts, "response_item", {"type": "function_call_output", "call_id": cid, "output": out})


def say(ts, text, role="assistant"):
    kind = "output_text" if role == "assistant" else "input_text"
    return line(ts, "response_item", {"type": "message", "role": role, "content": [{"type": kind, "text": text}]})


META = line(0, "session_meta", {"cwd": "/home/u/repos/parser", "cli_version": "0.128.0-alpha.3",
                                "base_instructions": {"text": "You are Codex."}})


def desktop_rollout(tmp_path, model_line=True):
    """No token_count: user turns only as event_msg/user_message (3); a call with two parallel
    tool calls (c1, c2), then one with c3, then one with c4, then a final answer; a second user
    turn with one more call. Calls by hand: [c1 c2] [c3] [c4] [text] | [text] | [text] = 6."""
    body = (META + (line(0, "turn_context", {"model": "gpt-5.5", "cwd": "/home/u/repos/parser"}) if model_line else "")
            + line(1, "event_msg", {"type": "user_message", "message": "fix the parser"})
            + line(2, "response_item", {"type": "reasoning", "summary": [{"type": "summary_text", "text": "look"}]})
            + fcall(3, "c1") + fcall(3, "c2") + fout(4, "c1") + fout(4, "c2")
            + fcall(5, "c3", "pytest") + fout(6, "c3", "1 failed")
            + fcall(7, "c4", "sed") + fout(8, "c4")
            + say(9, "fixed")
            + line(10, "event_msg", {"type": "user_message", "message": "thanks, also the lexer"})
            + say(11, "on it")
            + line(12, "event_msg", {"type": "user_message", "message": "go"})
            + say(13, "done"))
    f = tmp_path / "2026" / "01" / "01" / "rollout-2026-01-01T00-00-00-desk.jsonl"
    f.parent.mkdir(parents=True)
    f.write_text(body)
    return f


def test_a_rollout_without_token_count_keeps_user_turns_and_splits_calls(tmp_path):
    res = import_file("codex", desktop_rollout(tmp_path))
    t = res.trace
    users = [e.text for e in t.events if isinstance(e, tr.UserEvent)]
    assert users == ["fix the parser", "thanks, also the lexer", "go"]
    calls = [e for e in t.events if isinstance(e, tr.AssistantEvent)]
    assert [[c.id for c in e.tool_uses()] for e in calls] == [["c1", "c2"], ["c3"], ["c4"], [], [], []]
    assert all(e.usage is None and e.model == "gpt-5.5" for e in calls)
    assert t.header.model == "gpt-5.5" and t.header.usage == "none"
    assert t.header.source["cwd"] == "/home/u/repos/parser"
    assert any("not recorded" in n for n in t.header.notes)
    assert res.summary["usage"] == "not recorded (cost simulated)"
    # every tool result follows its call, in the rollout's order
    kinds = [type(e).__name__ for e in t.events if not isinstance(e, (tr.FactEvent, tr.ProbeEvent))]
    assert kinds[:6] == ["UserEvent", "AssistantEvent", "ToolResultEvent", "ToolResultEvent", "AssistantEvent",
                         "ToolResultEvent"]


def test_a_rollout_with_token_count_still_joins_a_call_to_its_usage(tmp_path):
    u = {"input_tokens": 2000, "cached_input_tokens": 1024, "output_tokens": 30}

    def tc(ts, n):
        return line(ts, "event_msg", {"type": "token_count", "info": {"total_token_usage": {"total_tokens": n},
                                                                      "last_token_usage": u}})
    f = tmp_path / "rollout-a.jsonl"
    f.write_text(META + line(0, "turn_context", {"model": "gpt-5.5"}) + say(1, "hi", "user")
                 + fcall(2, "c1") + fcall(2, "c2") + fout(3, "c1") + tc(3, 1) + fout(3, "c2") + say(4, "done") + tc(5, 2))
    t = import_file("codex", f).trace
    calls = [e for e in t.events if isinstance(e, tr.AssistantEvent)]
    assert [[c.id for c in e.tool_uses()] for e in calls] == [["c1", "c2"], []]
    assert calls[0].usage == tr.RecordedUsage(input=976, cache_read=1024, output=30)
    assert t.header.usage == "per_call" and [e.text for e in t.events if isinstance(e, tr.UserEvent)] == ["hi"]


def test_the_model_from_session_meta_and_none_is_exit_2_at_run(tmp_path, capsys):
    f = desktop_rollout(tmp_path, model_line=False)
    out = tmp_path / "t.jsonl"
    assert cli(["import", "codex", str(f), "-o", str(out), "--no-probes"]) == 0
    assert tr.load(out).header.model is None
    assert cli(["run", str(out), "--strategy", "append_only", "-q"]) == 2
    assert "records no model" in capsys.readouterr().err
    assert cli(["run", str(out), "--strategy", "append_only", "-q", "--model", "gpt-5.5"]) == 0
    assert "this cost is simulated" in capsys.readouterr().err
    g = tmp_path / "m" / "rollout-b.jsonl"
    g.parent.mkdir()
    g.write_text(f.read_text().replace('"cli_version"', '"model": "gpt-5.5", "cli_version"'))
    assert import_file("codex", g).trace.header.model == "gpt-5.5"


def test_a_sessions_tree_names_the_project_after_the_cwd(tmp_path, capsys):
    desktop_rollout(tmp_path)
    assert cli(["import", "codex", str(tmp_path / "2026"), "-o", str(tmp_path / "out"), "--json", "--no-probes"]) == 0
    rows = json.loads(capsys.readouterr().out)["sessions"]
    assert [(r["project"], r["calls"], r["tokens"]) for r in rows] == [("parser", 6, None)]


def test_a_rollout_never_written_is_left_out_with_a_note_not_failed(tmp_path, capsys):
    """A rollout file created and never written (no record at all) billed nothing and loses nothing: in a
    sessions tree it is left out with a note and the import exits 0, as an empty Claude Code session is; a
    file whose lines are not Codex's is still a failure."""
    desktop_rollout(tmp_path)
    day = tmp_path / "2026" / "01" / "02"
    day.mkdir(parents=True)
    (day / "rollout-2026-01-02T00-00-00-e.jsonl").write_bytes(b"")
    assert cli(["import", "codex", str(tmp_path / "2026"), "-o", str(tmp_path / "out"), "--json", "--no-probes"]) == 0
    cap = capsys.readouterr()
    rep = json.loads(cap.out)
    assert [r["calls"] for r in rep["sessions"]] == [6] and rep["failed"] == []
    assert [e.endswith("rollout-2026-01-02T00-00-00-e.jsonl: empty file: no records: nothing to replay")
            for e in rep["no_model_calls"]] == [True]
    (day / "rollout-2026-01-02T00-00-00-e.jsonl").write_text('{"type": "other"}\n')
    assert cli(["import", "codex", str(tmp_path / "2026"), "-o", str(tmp_path / "out2"), "--json", "--no-probes"]) == 2
    assert "not a Codex rollout" in json.loads(capsys.readouterr().out)["failed"][0]["error"]


def test_a_rollout_cut_off_mid_write_or_with_a_damaged_record_imports_with_each_line_named(tmp_path, capsys):
    """issue 41 for Codex as for Claude Code: a rollout Codex is still writing ends in half a line, and one
    record inside is of a shape Codex never writes (a tool call with no call_id). Each is skipped with a
    warning naming file and line; the rest imports: calls [c1 c2] [c3] [c4] [fixed] | [on it] (the cut
    line was the last user turn's, so its answer "done" is still a call of its own) = 6, c2 missing from the
    first call (its line skipped), so c2's output is dropped as answering no call."""
    f = desktop_rollout(tmp_path)
    lines = f.read_text().splitlines(keepends=True)
    bad = json.loads(lines[5])
    assert bad["payload"]["call_id"] == "c2"
    del bad["payload"]["call_id"]
    lines[5] = json.dumps(bad) + "\n"
    f.write_text("".join(lines) + lines[1][:30])   # a last line cut off while being written
    res = import_file("codex", f)
    calls = [e for e in res.trace.events if isinstance(e, tr.AssistantEvent)]
    assert [[c.id for c in e.tool_uses()] for e in calls] == [["c1"], ["c3"], ["c4"], [], [], []]
    n = len(lines) + 1
    assert res.warnings == [f"{f}:6: function_call without call_id (line skipped)",
                            f"{f}:{n}: not JSON: Unterminated string starting at column 15 (truncated file?) (line skipped)"]
    assert res.summary["skipped_lines"] == 2
    assert res.summary["repairs"]["tool_result for an unknown tool_use dropped"] == 1
    assert cli(["import", "codex", str(f), "-o", str(tmp_path / "t.jsonl")]) == 2
    assert "imported with 2 line(s) skipped" in capsys.readouterr().err


def test_a_tool_call_whose_name_id_or_arguments_have_a_type_codex_never_writes_is_skipped_and_named(tmp_path):
    """A tool named by a list ("[1, 2]" once), arguments as a list, an output whose call_id is a number (it
    answered a call "3" nobody made): each line is skipped, named; the calls go on as for any lost line.
    Calls by hand, desktop_rollout's with c1's call (line 5), c3's call (line 9) and c4's output (line 12) lost:
    [c2] (c1's output answers no call: dropped; c2's closes the call), c3's output answers no call (dropped),
    [c4 fixed] (no output closes it before the answer: one call, c4 left open and repaired), then [on it] |
    [done] = 4 calls."""
    f = desktop_rollout(tmp_path)
    lines = f.read_text().splitlines(keepends=True)
    edits = {4: ("name", [1, 2]), 8: ("arguments", ["pytest"]), 11: ("call_id", 3)}
    for i, (key, value) in edits.items():
        rec = json.loads(lines[i])
        rec["payload"][key] = value
        lines[i] = json.dumps(rec) + "\n"
    f.write_text("".join(lines))
    res = import_file("codex", f)
    assert res.warnings == [f"{f}:5: function_call whose name is list, not a string (line skipped)",
                            f"{f}:9: function_call whose arguments are list, not a string or an object (line skipped)",
                            f"{f}:12: function_call_output whose call_id is int, not a string (line skipped)"]
    calls = [e for e in res.trace.events if isinstance(e, tr.AssistantEvent)]
    assert [[c.id for c in e.tool_uses()] for e in calls] == [["c2"], ["c4"], [], []]
    repairs = res.summary["repairs"]
    assert repairs["tool_result for an unknown tool_use dropped"] == 2
    assert repairs["dangling tool_use repaired with a synthetic error result"] == 1


def test_a_file_of_another_format_is_still_refused_as_a_rollout_at_its_first_line(tmp_path):
    f = tmp_path / "rollout-x.jsonl"
    f.write_text('{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "yo"}\n')
    import pytest

    with pytest.raises(tr.TraceError, match=r"rollout-x.jsonl:1: not a Codex rollout line"):
        import_file("codex", f)


def _ms(ms: int) -> str:
    return f"2026-01-01T00:{ms // 60_000:02d}:{ms // 1000 % 60:02d}.{ms % 1000:03d}Z"


def _at(ms: int, kind: str, payload: dict) -> str:
    return json.dumps({"timestamp": _ms(ms), "type": kind, "payload": payload}) + "\n"


def _usage(inp: int, cached: int, out: int, total: int) -> dict:
    u = {"input_tokens": inp, "cached_input_tokens": cached, "output_tokens": out}
    return {"type": "token_count", "info": {"last_token_usage": u, "total_token_usage": {"input_tokens": total}}}


def _parent_items(ms: int) -> str:
    """The parent thread's two calls (c1, then an answer), as its own rollout holds them and as a fork's copy
    holds them again (``ms`` = when each line is written, one millisecond apart in a copy's burst)."""
    return (_at(ms, "turn_context", {"model": "gpt-5.5"})
            + _at(ms + 1, "response_item", {"type": "message", "role": "user",
                                            "content": [{"type": "input_text", "text": "fix the parser"}]})
            + _at(ms + 2, "response_item", {"type": "function_call", "name": "shell", "call_id": "c1",
                                            "arguments": json.dumps({"cmd": "ls"})})
            + _at(ms + 3, "event_msg", _usage(5000, 0, 40, 5000))
            + _at(ms + 4, "response_item", {"type": "function_call_output", "call_id": "c1", "output": "parser.py"})
            + _at(ms + 5, "response_item", {"type": "message", "role": "assistant",
                                            "content": [{"type": "output_text", "text": "found it"}]})
            + _at(ms + 6, "event_msg", _usage(5100, 4990, 20, 10100)))


def test_a_forked_rollout_starts_from_its_parents_copied_history_and_bills_only_its_own_calls(tmp_path, capsys):
    """Codex persists a fork's history as-is into the new rollout (codex.rs record_initial_history), after the
    fork's own session_meta and the parent's, in one burst of lines (each stamped as written). The copy is
    history: its two calls are marked copied, not billed; the fork's own call 30 s later is its only call. A
    folder with both files bills the parent's two calls once (in the parent's trace) and the fork's one."""
    parent = (_at(0, "session_meta", {"id": "p1", "cli_version": "0.150.0", "base_instructions": {"text": "You are Codex."}})
              + _parent_items(10_000))
    fork = (_at(60_000, "session_meta", {"id": "f1", "forked_from_id": "p1", "cli_version": "0.150.0",
                                         "base_instructions": {"text": "You are Codex."}})
            + _at(60_001, "session_meta", {"id": "p1", "cli_version": "0.149.0", "base_instructions": {"text": "other"}})
            + _parent_items(60_002)
            + _at(90_000, "response_item", {"type": "message", "role": "user",
                                            "content": [{"type": "input_text", "text": "now the lexer"}]})
            + _at(95_000, "response_item", {"type": "message", "role": "assistant",
                                            "content": [{"type": "output_text", "text": "done"}]})
            + _at(95_001, "event_msg", _usage(5300, 5120, 10, 15400)))
    folder = tmp_path / "sessions"
    folder.mkdir()
    (folder / "rollout-2026-01-01T00-00-00-p1.jsonl").write_text(parent)
    (folder / "rollout-2026-01-01T00-01-00-f1.jsonl").write_text(fork)

    res = import_file("codex", folder / "rollout-2026-01-01T00-01-00-f1.jsonl")
    answers = [e for e in res.trace.events if isinstance(e, tr.AssistantEvent)]
    assert [(e.copied, e.usage.input if e.usage else None) for e in answers] == [(True, 5000), (True, 110), (False, 180)]
    assert res.trace.calls == 1 and res.summary["calls"] == 1
    assert res.trace.header.system == "You are Codex." and res.trace.header.source["version"] == "0.150.0"
    assert res.summary["repairs"]["calls copied in from thread p1 (a fork's history: not billed here)"] == 2
    # the first own call's 5,300 tokens hold the copied history: only what the log does not show is hidden (the
    # copies grew too little to fit a scale on: the model table's, 1.0, counts the history's 64 visible tokens)
    assert 5300 - 100 < res.trace.header.prefix_tokens < 5300
    assert res.trace.header.recorded.token_scale_evidence.startswith("model table (no growth pairs to fit on, or under 200")

    assert cli(["import", "codex", str(folder), "-o", str(tmp_path / "out"), "--json"]) == 0
    cap = capsys.readouterr()
    rep = json.loads(cap.out)
    assert sorted(r["calls"] for r in rep["sessions"]) == [1, 2]
    fork_row = next(r for r in rep["sessions"] if r["thread"] == "f1")
    assert fork_row["copied_calls"]["made_in"] == ["sessions/rollout-2026-01-01T00-00-00-p1"]
    assert "2 of its calls are copies of calls made in sessions/rollout-2026-01-01T00-00-00-p1 (a forked thread " \
           "copies its parent's history): counted there, once" in cap.err
    # the parent's rollout elsewhere: the fork's copies are still not counted, and the note names the thread
    (folder / "rollout-2026-01-01T00-00-00-p1.jsonl").unlink()
    assert cli(["import", "codex", str(folder), "-o", str(tmp_path / "out2")]) == 0
    assert "copies of calls made in thread p1, which this folder does not hold" in capsys.readouterr().err


def test_the_provider_session_meta_names_is_the_sessions_route(tmp_path):
    """``session_meta.model_provider`` (``openai``; ``ollama`` for a local or cloud model) says who served
    the calls: the trace's route, as a Claude Code log's ids give its route (a folder's fidelity groups by
    it; it read "?" for every rollout). A rollout that names none has none."""
    f = tmp_path / "rollout-a.jsonl"
    meta = line(0, "session_meta", {"cli_version": "0.125.0", "model_provider": "ollama",
                                    "base_instructions": {"text": "You are Codex."}})
    f.write_text(meta + line(0, "turn_context", {"model": "gpt-5.5"}) + say(1, "hi", "user") + say(2, "done"))
    res = import_file("codex", f)
    assert res.trace.header.source["route"] == "ollama" and res.summary["route"] == "ollama"
    f.write_text(META + line(0, "turn_context", {"model": "gpt-5.5"}) + say(1, "hi", "user") + say(2, "done"))
    assert "route" not in import_file("codex", f).trace.header.source
