"""Issue 41: everything a user has imports, and nothing is lost silently. Each test is a small
session written here with the structure a real log showed (never a copy of one): a corrupt line in
the middle, a tool call a compaction cut off, a Claude Code 1.0.x compaction (an isCompactSummary
record and no compact_boundary), several unpriced models, a proxy's placeholder usage lines."""

from __future__ import annotations

import json

import pytest
from ctxsim.harness.cli import main as cli
from ctxsim.harness.importers import import_file
from ctxsim.harness.model import trace as tr
from ctxsim.harness.provider.models import UnknownModelError

from tests.helpers_claude_code import asst, rec, result, text, user, write


def tool(tid: str, name: str = "Bash") -> dict:
    return {"type": "tool_use", "id": tid, "name": name, "input": {"command": "ls"}}


def _kinds(trace) -> list[str]:
    return [type(e).__name__ for e in trace.events]


# --- a corrupt line in the middle --------------------------------------------------------------

def _with_bad_line(tmp_path):
    recs = [user(0, "go"), asst(1, "r1", tool("t1")), result(2, "t1", "a.py"), asst(3, "r2", text("done"), read=103)]
    lines = [json.dumps(r) for r in recs]
    lines.insert(2, '{"type": "progress", "data": ')   # a record cut short, then the log goes on
    f = tmp_path / "s.jsonl"
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return f


def test_a_corrupt_line_in_the_middle_is_skipped_and_the_session_imports(tmp_path):
    f = _with_bad_line(tmp_path)
    res = import_file("claude-code", f)
    assert res.trace.calls == 2 and res.summary["skipped_lines"] == 1
    assert res.warnings == [f"{f}:3: not JSON: Expecting value at column 30 (line skipped)"]


def test_the_cli_writes_the_trace_warns_with_file_and_line_and_exits_2(tmp_path, capsys):
    f = _with_bad_line(tmp_path)
    out = tmp_path / "t.jsonl"
    assert cli(["import", "claude-code", str(f), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"warning: {f}:3: not JSON" in err and "imported with 1 line(s) skipped" in err
    assert tr.load(out).calls == 2
    # a folder: the session is in the table, the warning names it, the status says something was lost
    folder = tmp_path / "proj"
    folder.mkdir()
    f.rename(folder / "s.jsonl")
    write(folder / "ok.jsonl", [user(0, "hi"), asst(1, "q1", text("hello"))])
    assert cli(["import", "claude-code", str(folder), "-o", str(tmp_path / "out"), "--json"]) == 2
    cap = capsys.readouterr()
    rep = json.loads(cap.out)
    assert [r["session"] for r in rep["sessions"]] == ["ok", "s"] and rep["failed"] == []
    assert "1 imported with lines skipped (exit 2)" in cap.err
    # nothing lost: exit 0
    assert cli(["import", "claude-code", str(folder / "ok.jsonl"), "-o", str(tmp_path / "ok.jsonl")]) == 0


def test_a_record_of_a_shape_no_claude_code_writes_is_skipped_like_a_corrupt_line(tmp_path):
    """Valid JSON, wrong inside (a token count as a string, a result block with no id): that record is
    skipped with a warning naming file and line, the session imports. The damaged call's answer and
    the results that answered it go with it; the import repairs the pairing as for any lost line."""
    bad_usage = asst(3, "r2", text("done"), read=103)
    bad_usage["message"]["usage"]["input_tokens"] = "3"
    f = write(tmp_path / "s.jsonl", [
        user(0, "go"), asst(1, "r1", tool("t1")),
        user(2, [{"type": "tool_result", "content": "a.py"}]),   # no tool_use_id
        bad_usage, user(4, "again"), asst(5, "r3", text("ok"), read=110)])
    res = import_file("claude-code", f)
    assert res.trace.calls == 2 and res.summary["skipped_lines"] == 2
    assert res.warnings == [f"{f}:3: tool_result block without tool_use_id (line skipped)",
                            f"{f}:4: usage.input_tokens is '3': expected a whole number of tokens (line skipped)"]
    assert res.summary["repairs"] == {"dangling tool_use repaired with a synthetic error result": 1}


def test_a_record_whose_envelope_or_text_has_a_type_no_claude_code_writes_is_skipped_and_named(tmp_path):
    """A version that is a number once made the whole folder fail after the last line (a float has no
    ``split``, where the versions are compared), a string ``isSidechain`` read as true and a text of
    ``true`` billed as the word "True". Each record is skipped, named with its file, line and field; the
    session imports with the rest (exit 2: something was lost)."""
    numbered = user(2, "again")
    numbered["version"] = 2.1
    side = asst(3, "r2", text("ok"), read=103)
    side["isSidechain"] = "no"
    odd_text = asst(5, "r3", {"type": "text", "text": True}, read=110)
    f = write(tmp_path / "s.jsonl", [user(0, "go"), asst(1, "r1", text("hi")), numbered, side,
                                     user(4, "more"), odd_text, user(6, "last"), asst(7, "r4", text("ok"), read=120)])
    res = import_file("claude-code", f)
    assert res.warnings == [
        f"{f}:3: version is float 2.1, where Claude Code writes a string (line skipped)",
        f"{f}:4: isSidechain is str 'no', where Claude Code writes a boolean (line skipped)",
        f"{f}:6: a text block whose text is bool True, not a string (line skipped)"]
    assert res.trace.calls == 2 and res.summary["skipped_lines"] == 3
    assert res.trace.header.source["version"] == "2.1.39"
    assert cli(["import", "claude-code", str(f), "-o", str(tmp_path / "t.jsonl")]) == 2


def test_a_file_of_another_format_still_fails_at_its_first_record(tmp_path):
    """Records that never say they are Claude Code's (no sessionId, no version): not a damaged session
    but another log, refused at line 1 as before."""
    f = tmp_path / "other.jsonl"
    f.write_text('{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "yo"}\n', encoding="utf-8")
    with pytest.raises(tr.TraceError, match=r"other.jsonl:1: not a Claude Code transcript record"):
        import_file("claude-code", f)


def test_a_damaged_side_file_is_skipped_with_a_warning_and_the_session_imports(tmp_path, capsys):
    """A sub-agent transcript with no readable record (a disk error, a copy cut at its first line) and a
    compaction call's file of another agent's records: each is left out with a warning naming the file and
    line, the session imports with its own calls (it used to fail whole on either)."""
    f = write(tmp_path / "s.jsonl", [
        user(0, "go"),
        asst(1, "r1", {"type": "tool_use", "id": "task1", "name": "Task", "input": {"prompt": "look"}}),
        rec("user", 9, message={"role": "user", "content": [{"type": "tool_result", "tool_use_id": "task1",
                                                              "content": "found"}]},
            toolUseResult={"agentId": "abc", "status": "completed"}),
        asst(10, "r2", text("ok"))])
    sub = tmp_path / "s" / "subagents"
    sub.mkdir(parents=True)
    (sub / "agent-abc.jsonl").write_bytes(b"\x1f\x8b garbage\n")
    (sub / "agent-acompact-1.jsonl").write_text('{"role": "user", "content": "hi"}\n', encoding="utf-8")
    res = import_file("claude-code", f)
    assert res.summary["main_calls"] == 2 and res.summary["subagent_calls"] == 0
    assert res.summary["skipped_lines"] == 2
    assert [w.split(": ")[0] for w in res.warnings] == [f"{sub / 'agent-acompact-1.jsonl'}:1", f"{sub / 'agent-abc.jsonl'}:1"]
    assert all("the file is not imported (its calls are not in the trace) (line skipped)" in w for w in res.warnings)
    assert cli(["import", "claude-code", str(f), "-o", str(tmp_path / "t.jsonl")]) == 2
    assert "imported with 2 line(s) skipped" in capsys.readouterr().err


# --- a tool call cut off by a compaction ---------------------------------------------------------

def _cut_off(tmp_path, with_request: bool):
    """A Bash call whose result never reached the main transcript: the auto compaction came first.
    The compaction request (agent-acompact) holds the history as sent, with the result."""
    f = write(tmp_path / "s.jsonl", [
        user(0, "commit"),
        asst(1, "r1", tool("t1"), w1h=1000, w5m=0),
        result(2, "t1", "ok"),
        asst(3, "r2", tool("t2"), w1h=50, w5m=0, read=1003),
        rec("system", 10, subtype="compact_boundary", compactMetadata={"trigger": "auto", "preTokens": 1100}),
        user(10, "This session is being continued ...", isCompactSummary=True),
        asst(12, "r3", text("resumed"), w1h=200, w5m=0, read=300)])
    if with_request:
        write(tmp_path / "s" / "subagents" / "agent-acompact-1.jsonl", [
            user(0, "commit", isSidechain=True),
            asst(1, "r1", tool("t1"), isSidechain=True), result(2, "t1", "ok", isSidechain=True),
            asst(3, "r2", tool("t2"), isSidechain=True), result(4, "t2", "[main 1a2b] committed", isSidechain=True),
            user(4, "Your task is to create a detailed summary ...", isSidechain=True),
            asst(9, "c1", text("<summary>...</summary>"), w1h=0, w5m=40, read=1050, out=300, isSidechain=True)])
    return f


def test_a_tool_call_cut_off_by_a_compaction_is_closed_as_the_compaction_request_shows_it(tmp_path):
    res = import_file("claude-code", _cut_off(tmp_path, with_request=True))
    ev = res.trace.events
    assert _kinds(res.trace) == ["UserEvent", "AssistantEvent", "ToolResultEvent", "AssistantEvent",
                                 "ToolResultEvent", "CompactEvent", "AssistantEvent"]
    assert ev[4].tool_use_id == "t2" and ev[4].content == "[main 1a2b] committed" and not ev[4].is_error
    assert ev[5].usage.output == 300
    assert res.summary["repairs"] == {"tool use cut off by a compaction, closed with the result its compaction "
                                      "request holds": 1}


def test_with_no_compaction_request_the_cut_off_call_gets_a_synthetic_result_before_the_compaction(tmp_path):
    res = import_file("claude-code", _cut_off(tmp_path, with_request=False))
    ev = res.trace.events
    assert _kinds(res.trace)[4:6] == ["ToolResultEvent", "CompactEvent"]
    assert ev[4].is_error and ev[4].meta.get("synthetic")
    assert "tool use cut off by a compaction, closed with a synthetic error result (no compaction request holds " \
           "its result)" in res.summary["repairs"]


# --- Claude Code 1.0.x compactions -------------------------------------------------------------

def _v1(tmp_path, opens_with_summary: bool = False, command: bool = False):
    v = {"version": "1.0.89"}
    recs = [user(0, "Earlier summary ...", isCompactSummary=True, **v)] if opens_with_summary else []
    recs += [user(1, "fix it", **v), asst(2, "r1", tool("t1"), w5m=155_000, **v), result(3, "t1", "fixed", **v)]
    if command:
        recs.append(user(4, "<command-name>/compact</command-name>\n<command-message>compact</command-message>", **v))
    recs += [user(5, "This session is being continued from a previous conversation ...", isCompactSummary=True, **v),
             asst(6, "r2", text("go on"), w5m=2_000, read=15_000, **v)]
    return write(tmp_path / "s.jsonl", recs)


def test_a_1_0_summary_with_no_boundary_is_a_compaction(tmp_path):
    res = import_file("claude-code", _v1(tmp_path))
    compact = next(e for e in res.trace.events if isinstance(e, tr.CompactEvent))
    assert compact.trigger == "auto" and compact.pre_tokens is None and compact.usage is None
    assert compact.summary.startswith("This session is being continued")
    assert compact.meta["inferred"] == "isCompactSummary with no compact_boundary (Claude Code 1.0.x)"
    assert res.summary["compactions"] == 1


def test_a_1_0_compact_command_makes_it_manual_and_an_opening_summary_stays_a_message(tmp_path):
    res = import_file("claude-code", _v1(tmp_path, opens_with_summary=True, command=True))
    ev = res.trace.events
    assert isinstance(ev[0], tr.UserEvent) and ev[0].meta.get("compact_summary")
    (compact,) = [e for e in ev if isinstance(e, tr.CompactEvent)]
    assert compact.trigger == "manual"


def test_an_early_1_0_summary_with_no_flag_opening_a_new_root_is_a_compaction(tmp_path):
    """Claude Code 1.0.11 and 1.0.17 write the summary as a user message that opens a new
    conversation root (parentUuid null), with no isCompactSummary: after calls it is a compaction
    (the next call reads 15,000 where the last one held 155,000), not one more user message."""
    v = {"version": "1.0.17"}
    f = write(tmp_path / "s.jsonl", [
        user(1, "fix it", parentUuid=None, uuid="u1", **v),
        asst(2, "r1", tool("t1"), w5m=155_000, parentUuid="u1", uuid="a1", **v),
        result(3, "t1", "fixed", parentUuid="a1", uuid="u2", **v),
        user(5, "This session is being continued from a previous conversation that ran out of context. ...",
             parentUuid=None, uuid="u3", **v),
        asst(6, "r2", text("go on"), w5m=2_000, read=15_000, parentUuid="u3", uuid="a2", **v),
        # the same opening further down a chain (a user quoting it) is not a summary
        user(7, "This session is being continued from a previous conversation, you said", parentUuid="a2", **v),
        asst(8, "r3", text("yes"), read=17_000, **v)])
    res = import_file("claude-code", f)
    (compact,) = [e for e in res.trace.events if isinstance(e, tr.CompactEvent)]
    assert compact.summary.startswith("This session is being continued") and compact.trigger == "auto"
    assert compact.meta["inferred"].startswith("a summary opening a new conversation root, with no isCompactSummary")
    assert res.summary["compactions"] == 1
    assert isinstance(res.trace.events[-2], tr.UserEvent) and res.trace.events[-2].text.endswith("you said")


def test_a_log_that_begins_mid_conversation_says_so(tmp_path):
    """A session file whose first message answers one in no line of it (its history lives in
    another file): the first call's unseen context counts as the system prefix, and the header says
    that earlier conversation is among it; a log that begins at a root says nothing."""
    def session(first_parent):
        return write(tmp_path / f"{first_parent}.jsonl", [
            user(0, "go on", parentUuid=None if first_parent == "root" else first_parent, uuid="u1"),
            asst(1, "r1", text("on it"), w5m=1_000, read=90_000, parentUuid="u1", uuid="a1")])
    res = import_file("claude-code", session("elsewhere"))
    said = res.trace.header.meta["begins_mid_conversation"]
    assert said.startswith("the log begins mid-conversation: its first message (line 1) answers one (elsewher…)")
    assert said in res.trace.header.notes and res.trace.header.prefix_tokens > 90_000
    assert "begins_mid_conversation" not in import_file("claude-code", session("root")).trace.header.meta


def _resumed(tmp_path, marks):
    """A session interrupted after its second call (a tool use left open), relaunched on the same
    transcript with ``marks`` (Claude Code's resume records) before the user goes on."""
    return write(tmp_path / "s.jsonl", [
        {"type": "file-history-snapshot", "messageId": "u1", "snapshot": {"messageId": "u1"}, "isSnapshotUpdate": False},
        user(0, "fix it", uuid="u1"), asst(1, "r1", tool("t1")), result(2, "t1", "a.py"),
        asst(3, "r2", tool("t2"), read=103), user(4, [text("[Request interrupted by user for tool use]")]),
        *marks,
        user(40, "go on"), asst(41, "r3", text("done"), read=2_000, w5m=1_500)])


NO_RESPONSE = rec("assistant", 30, message={"id": "x1", "model": "<synthetic>", "role": "assistant",
                                            "content": [text("No response requested.")]})
SNAPSHOT_AGAIN = {"type": "file-history-snapshot", "messageId": "u1", "snapshot": {"messageId": "u1"},
                  "isSnapshotUpdate": False}
CONTINUE = user(31, [text("Continue from where you left off.")], isMeta=True)
RESUME_HOOK = rec("progress", 29, data={"type": "hook_progress", "hookEvent": "SessionStart",
                                        "hookName": "SessionStart:resume", "command": "cat notes.md"})


@pytest.mark.parametrize("marks", [[NO_RESPONSE], [SNAPSHOT_AGAIN], [CONTINUE], [RESUME_HOOK],
                                   [RESUME_HOOK, SNAPSHOT_AGAIN, NO_RESPONSE, CONTINUE]],
                         ids=["no-response-notice", "snapshot-again", "continue-message", "resume-hook", "all-four"])
def test_a_resumed_launch_on_the_same_transcript_is_a_session_boundary(tmp_path, marks):
    """Claude Code resumed on the same transcript (its resume marks: the "No response requested."
    notice, the meta "Continue from where you left off." message, the file-history snapshots written
    again, a SessionStart hook run for the "resume" source): one session_end + session_start(resume) at the first mark, however many there are, and
    the trace opens with the session it resumes. The tool use the interruption left open is closed
    with a synthetic error result, counted; the first snapshot of a message is no mark."""
    res = import_file("claude-code", _resumed(tmp_path, marks))
    evs = res.trace.events
    kinds = _kinds(res.trace)
    assert kinds[0] == "SessionStart" and not evs[0].resume and evs[0].session == "s" and evs[0].t == 0
    assert kinds.count("SessionStart") == 2 and kinds.count("SessionEnd") == 1
    i = kinds.index("SessionEnd")
    assert kinds[i - 1] == "ToolResultEvent" and evs[i - 1].meta == {"synthetic": True}   # t2, left open
    assert evs[i + 1].resume and evs[i + 1].session == "s"
    assert kinds[i + 2:] == ["UserEvent"] * (2 if CONTINUE in marks else 1) + ["AssistantEvent"]
    assert res.summary["repairs"]["tool use left open by a resumed launch, closed with a synthetic error result"] == 1
    assert sum(v for k, v in res.summary["repairs"].items() if k.startswith("resumes (a new launch")) == 1


def test_a_resume_mark_between_a_compaction_and_its_summary_keeps_the_summary(tmp_path):
    """A session resumed right after its compaction (the snapshots copied between the boundary and
    the summary): the compaction keeps its summary, after the session boundary."""
    f = write(tmp_path / "s.jsonl", [
        {"type": "file-history-snapshot", "messageId": "u1", "snapshot": {"messageId": "u1"}, "isSnapshotUpdate": False},
        user(0, "fix it", uuid="u1"), asst(1, "r1", text("on it"), w5m=1_000),
        rec("system", 10, subtype="compact_boundary", compactMetadata={"trigger": "manual", "preTokens": 1_100}),
        SNAPSHOT_AGAIN, user(11, "This session is being continued ...", isCompactSummary=True),
        asst(12, "r2", text("done"), read=300)])
    res = import_file("claude-code", f)
    kinds = _kinds(res.trace)
    assert kinds[-4:] == ["SessionEnd", "SessionStart", "CompactEvent", "AssistantEvent"]
    assert res.trace.events[-2].summary == "This session is being continued ..."


def test_a_record_of_a_claude_code_version_new_to_the_file_is_a_relaunch(tmp_path):
    """A running Claude Code writes its own version on every record and updates only on a restart, so
    a main-context record of a version no earlier record of the file carries was written by a new
    launch: a resume, at that record, even with none of the other marks (a relaunch whose turn had
    ended leaves none). The version of a sidechain's record, or one seen before (a 1.0.x log that
    interleaves two versions' records), marks nothing."""
    new = {"version": "2.1.40"}
    f = write(tmp_path / "s.jsonl", [
        user(0, "fix it"), asst(1, "r1", text("done")),
        user(40, "and this", **new), asst(41, "r2", text("ok"), read=2_000, **new),
        user(50, "more", version="2.1.39"), asst(51, "r3", text("fine"), read=2_100, **new)])
    res = import_file("claude-code", f)
    kinds = _kinds(res.trace)
    assert kinds == ["SessionStart", "UserEvent", "AssistantEvent", "SessionEnd", "SessionStart", "UserEvent",
                     "AssistantEvent", "UserEvent", "AssistantEvent"]
    assert res.trace.events[4].resume and res.trace.events[4].t == 40
    assert res.summary["repairs"]["resumes (a new launch on the conversation: a record of a Claude Code version "
                                  "new to the file)"] == 1
    side = write(tmp_path / "side.jsonl", [
        user(0, "fix it"), asst(1, "r1", text("done")), user(2, "look", isSidechain=True, **new),
        asst(3, "r2", text("seen"), isSidechain=True, **new), user(4, "and"), asst(5, "r3", text("ok"))])
    assert "SessionStart" not in _kinds(import_file("claude-code", side).trace)


def test_resume_marks_before_the_first_call_open_no_session(tmp_path):
    """A notice before any call (a launch resumed before it asked anything) changes no cache the
    log shows: nothing is emitted, the trace has no session events."""
    f = write(tmp_path / "s.jsonl", [user(0, "hi"), NO_RESPONSE, user(31, "go"), asst(32, "r1", text("ok"))])
    assert "SessionStart" not in _kinds(import_file("claude-code", f).trace)


# --- prices: every unknown model in one message ------------------------------------------------

def test_every_unknown_model_is_named_in_one_message(tmp_path):
    f = write(tmp_path / "s.jsonl", [
        user(0, "go"), asst(1, "r1", text("a"), model="glm-9"), user(2, "more"),
        asst(3, "r2", text("b"), model="claude-opus-4-6"), user(4, "and"), asst(5, "r3", text("c"), model="glm-9-air")])
    with pytest.raises(UnknownModelError) as e:
        import_file("claude-code", f)
    assert e.value.names == ("glm-9", "glm-9-air")
    assert str(e.value).startswith("unknown models 'glm-9', 'glm-9-air': not in the price table")
    models = tmp_path / "m.toml"
    models.write_text("".join(f'[models."{m}"]\nprovider = "zai"\nwindow = 200000\nmax_output = 8000\ninput = 1.0\n'
                              f'output = 2.0\ncache_read = 0.1\n\n' for m in ("glm-9", "glm-9-air")))
    assert import_file("claude-code", f, models_file=str(models)).trace.calls == 3


@pytest.mark.parametrize("model", ["glm-4.7", "glm-5", "glm-4.7-flash", "glm-4.5-air", "claude-opus-4-8",
                                   "claude-opus-5", "claude-sonnet-5", "claude-opus-5-5", "claude-sonnet-5-5",
                                   "claude-haiku-5-5", "gpt-5.1", "gpt-5.2", "gpt-5.3-codex", "gpt-5.4", "gpt-5.6-sol"])
def test_the_current_models_are_priced(model):
    from ctxsim.harness.provider.models import load_table

    spec = load_table().get(model)
    assert spec.input > 0 and "genai-prices 0.2.5" in spec.source


# --- a proxy's usage lines ---------------------------------------------------------------------

def test_placeholder_usage_lines_do_not_replace_the_calls_usage(tmp_path):
    """A proxy writes {input 0, output 0} on a call's first lines, and may write it again after the
    real one: each count's largest value is the call's; a call with only placeholders has none."""
    zero = {"input_tokens": 0, "output_tokens": 0}
    first = asst(1, "r1", text("a"), inp=1957, w5m=0, read=15_872, out=65, model="glm-4.7")
    head, tail = json.loads(json.dumps(first)), json.loads(json.dumps(first))
    head["message"]["usage"] = zero
    tail["message"]["usage"] = zero
    only = asst(3, "r2", text("b"), model="glm-4.7")
    only["message"]["usage"] = zero
    res = import_file("claude-code", write(tmp_path / "s.jsonl", [user(0, "go"), head, first, tail, user(2, "more"), only]))
    calls = [e for e in res.trace.events if isinstance(e, tr.AssistantEvent)]
    assert calls[0].usage.input == 1957 and calls[0].usage.cache_read == 15_872 and calls[0].usage.output == 65
    assert calls[1].usage is None


# --- plan mode's clear context -------------------------------------------------------------------

def test_a_plan_opening_a_new_root_after_exit_plan_mode_is_a_compaction_without_a_call(tmp_path):
    """The plan (a long text, ``parentUuid: null``) right after an ExitPlanMode tool use replaces the
    history: a compaction whose summary is the plan, with no summary call (meta.no_call); the
    replay then bills no summary call. A short new root (54 characters) is an ordinary message."""
    from ctxsim.harness.replay.engine import RunConfig, replay

    plan = "## Plan\n" + "- step\n" * 200
    recs = [user(0, "plan the refactor"),
            asst(1, "r1", {"type": "tool_use", "id": "p1", "name": "ExitPlanMode", "input": {"plan": "..."}},
                 w5m=20_000),
            result(2, "p1", "User chose to clear the context", is_error=True),
            user(3, "go"),
            user(4, plan, parentUuid=None),
            asst(5, "r2", text("starting"), w5m=5_000, read=12_000),
            user(6, "short root " * 5, parentUuid=None),
            asst(7, "r3", text("ok"), w5m=100, read=17_000)]
    t = import_file("claude-code", write(tmp_path / "s.jsonl", recs)).trace
    compacts = [e for e in t.events if isinstance(e, tr.CompactEvent)]
    assert len(compacts) == 1 and compacts[0].summary == plan and compacts[0].meta["no_call"]
    assert compacts[0].trigger == "manual"
    c = replay(t, "recorded", {}, RunConfig()).calls
    assert list(c["kind"]) == ["main", "main", "main"]


def test_plan_modes_clear_context_re_attaches_no_file(tmp_path):
    """Plan mode's "clear context" opens a new conversation with the plan: Claude Code's compact
    routine, which re-reads recent files, does not run (in the 3 clears of the development population
    the next call's context is the prefix and the plan, within 1.2k tokens). A file read before it is
    not re-attached; after a real compaction it would be."""
    from ctxsim.harness.replay.engine import RunConfig, replay

    body = "".join(f"{i:6}\tline {i} of the module\n" for i in range(1, 200))
    plan = "## Plan\n" + "- step\n" * 200
    recs = [user(0, "plan the refactor"),
            asst(1, "r0", {"type": "tool_use", "id": "rd", "name": "Read", "input": {"file_path": "/w/mod.py"}},
                 w5m=20_000),
            result(2, "rd", body),
            asst(3, "r1", {"type": "tool_use", "id": "p1", "name": "ExitPlanMode", "input": {"plan": "..."}},
                 w5m=3_000, read=20_000),
            result(4, "p1", "User chose to clear the context", is_error=True),
            user(5, plan, parentUuid=None),
            asst(6, "r2", text("starting"), w5m=5_000, read=12_000)]
    t = import_file("claude-code", write(tmp_path / "s.jsonl", recs)).trace
    res = replay(t, "recorded", {}, RunConfig())
    assert res.metrics["strategy_counters"].get("messages re-attached after compactions", 0) == 0


def test_the_plan_claude_code_logs_in_exit_plan_modes_input_is_kept_out_of_the_requests(tmp_path):
    """From 2.0.54 Claude Code writes the plan file into ExitPlanMode's logged input ("plan", 2.1.x also
    "planFilePath") and strips both before the API (LOGGED_ONLY_INPUT): the tool use imports with the
    input the model sent, the two keys kept apart (logged_only: the strategy knows the plan, it is never
    sent), and the header says so. A 2.0.53 log's plan is the model's own input and stays."""
    plan = "## Plan\n" + "- step\n" * 300

    def session(version):
        return [user(0, "plan it", version=version),
                asst(1, "r1", {"type": "tool_use", "id": "p1", "name": "ExitPlanMode",
                               "input": {"allowedPrompts": [{"tool": "Bash", "prompt": "run tests"}], "plan": plan,
                                         "planFilePath": "/h/.claude/plans/p.md"}}, w5m=20_000, version=version),
                result(2, "p1", "User has approved your plan.", version=version),
                asst(3, "r2", text("starting"), w5m=100, read=20_000, version=version)]

    t = import_file("claude-code", write(tmp_path / "a.jsonl", session("2.1.114"))).trace
    (use,) = [c for e in t.events if isinstance(e, tr.AssistantEvent) for c in e.content if isinstance(c, tr.ToolUseContent)]
    assert use.input == {"allowedPrompts": [{"tool": "Bash", "prompt": "run tests"}]}
    assert use.logged_only == {"plan": plan, "planFilePath": "/h/.claude/plans/p.md"}
    assert any(n.endswith("kept out of the requests: ExitPlanMode plan/planFilePath ×1") for n in t.header.notes)
    (tmp_path / "a.trace.jsonl").write_text(tr.dumps(t), encoding="utf-8")
    assert tr.load(tmp_path / "a.trace.jsonl").events == t.events   # the split survives a round trip
    t = import_file("claude-code", write(tmp_path / "b.jsonl", session("2.0.53"))).trace
    (use,) = [c for e in t.events if isinstance(e, tr.AssistantEvent) for c in e.content if isinstance(c, tr.ToolUseContent)]
    assert use.input["plan"] == plan and not use.logged_only


def test_the_todo_list_a_todowrite_changed_goes_with_the_next_request_where_the_log_records_no_attachments(tmp_path):
    """Claude Code sends a changed todo list again in the next request (attachments.TODO_CHANGED, a
    "todo" attachment); logs before 2.1.105 record no attachments, so it is rebuilt from TodoWrite's
    input, after its result, and named in the header. A TodoWrite that failed changed nothing. A 2.1.114
    log records the attachment itself: the same text, from the record."""
    todos = [{"content": "fix the parser", "status": "in_progress", "activeForm": "Fixing the parser"}]
    sent = ('<system-reminder>\nYour todo list has changed. DO NOT mention this explicitly to the user. Here are '
            'the latest contents of your todo list:\n\n[{"content":"fix the parser","status":"in_progress",'
            '"activeForm":"Fixing the parser"}]. Continue on with the tasks at hand if applicable.\n</system-reminder>')

    def session(version, error=False, record=False):
        return [user(0, "fix the parser", version=version),
                asst(1, "r1", {"type": "tool_use", "id": "d1", "name": "TodoWrite", "input": {"todos": todos}},
                     w5m=9_000, version=version),
                result(2, "d1", "Todos have been modified successfully.", is_error=error, version=version),
                *([rec("attachment", 2, version=version, attachment={"type": "todo", "content": todos, "itemCount": 1,
                                                                      "context": "file-watch"})] if record else []),
                asst(3, "r2", text("on it"), w5m=100, read=9_000, version=version)]

    def reminders(t):
        return [(e.text, e.meta.get("attachment")) for e in t.events if isinstance(e, tr.UserEvent) and e.meta.get("attachment")]

    t = import_file("claude-code", write(tmp_path / "a.jsonl", session("2.1.39"))).trace
    assert reminders(t) == [(sent, "todo")]
    kinds = [type(e).__name__ for e in t.events if not isinstance(e, (tr.SessionStart, tr.SessionEnd))]
    assert kinds == ["UserEvent", "AssistantEvent", "ToolResultEvent", "UserEvent", "AssistantEvent"]
    assert any("attachment todo (rebuilt from TodoWrite's input" in n for n in t.header.notes)
    assert reminders(import_file("claude-code", write(tmp_path / "b.jsonl", session("2.1.39", error=True))).trace) == []
    assert reminders(import_file("claude-code", write(tmp_path / "c.jsonl", session("2.1.114"))).trace) == []
    assert reminders(import_file("claude-code", write(tmp_path / "d.jsonl", session("2.1.114", record=True))).trace) == [
        (sent, "todo")]


# --- a conversation copied in by a resume (Claude Code 1.0.x) -------------------------------------

def _copied(tmp_path, name="s.jsonl"):
    """A 1.0.x resume into a new file: the earlier conversation's records copied in at one moment (the
    first user record keeps its own time; the calls keep their request ids and usage), then this
    session's own turn. The read file is about the 400 tokens the context grew by between the two
    copied calls, so the token scale fitted on that one step is about 1."""
    return write(tmp_path / name, [
        user(0, "fix the parser"),
        asst(100.0, "r1", tool("t1"), w5m=9_000), result(100.0, "t1", "def parse(s):\n    return s.split()\n" * 40),
        asst(100.001, "r2", text("fixed"), w5m=400, read=9_000), user(100.001, "thanks"),
        user(130, "now the tests"), asst(131, "r3", text("done"), read=2_000)])


def test_calls_a_resume_copied_in_are_history_not_calls(tmp_path):
    """Claude Code 1.0.x resumed a conversation by copying its records into a new file, each stamped
    with the moment of the copy: calls of one conversation, made one after another, never finish in
    the same millisecond. Those calls are history this session starts from (``copied``): not calls,
    not billed here (the session that made them paid), and the first call after them is a resume."""
    res = import_file("claude-code", _copied(tmp_path))
    t = res.trace
    assert _kinds(t) == ["SessionStart", "UserEvent", "AssistantEvent", "ToolResultEvent", "AssistantEvent",
                         "UserEvent", "SessionEnd", "SessionStart", "UserEvent", "AssistantEvent"]
    assert [e.copied for e in t.events if isinstance(e, tr.AssistantEvent)] == [True, True, False]
    assert t.events[7].resume
    assert t.calls == 1 and res.summary["calls"] == 1
    assert t.header.recorded.models == {"claude-opus-4-6": {"main": 1}}
    assert res.summary["repairs"]["calls copied in from an earlier session by a resume (history: no request sent, "
                                  "not billed here)"] == 2
    # r3 alone, on Opus 4.6 ($5 / $6.25 / $0.50 / $25 a million): 3 input, 100 written, 2,000 read, 5 out
    from ctxsim.harness.fidelity.recorded import recorded_cost
    assert recorded_cost(t) == pytest.approx((3 * 5 + 100 * 6.25 + 2_000 * 0.5 + 5 * 25) / 1e6)


def test_a_copy_needs_two_calls_written_at_once(tmp_path):
    """One call at the head, or calls a second apart, are this session's own: nothing is copied."""
    for recs in ([user(0, "go"), asst(100, "r1", text("a")), user(130, "more"), asst(131, "r2", text("b"))],
                 [user(0, "go"), asst(100, "r1", tool("t1")), result(100.2, "t1", "x"), asst(101, "r2", text("b"))]):
        t = import_file("claude-code", write(tmp_path / "s.jsonl", recs)).trace
        assert not any(e.copied for e in t.events if isinstance(e, tr.AssistantEvent)) and t.calls == 2
        assert "SessionStart" not in _kinds(t)


def test_a_session_that_only_holds_a_copy_made_no_call(tmp_path, capsys):
    """A resumed conversation left before its first request: nothing billed, noted and left out of a
    folder's table, as any session with no model call."""
    write(tmp_path / "logs" / "p" / "a.jsonl", [user(0, "go"), asst(1, "r1", text("a"))])
    write(tmp_path / "logs" / "p" / "b.jsonl", [
        user(0, "go"), asst(100.0, "r1", tool("t1")), result(100.0, "t1", "x"), asst(100.0, "r2", text("b"))])
    assert cli(["import", "claude-code", str(tmp_path / "logs"), "-o", str(tmp_path / "out"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["session"] for r in out["sessions"]] == ["a"]
    assert f"{tmp_path / 'logs' / 'p' / 'b.jsonl'}:2: all 2 model calls are copies of an earlier session's" in \
        out["no_model_calls"][0]


def test_a_replay_sends_no_request_for_a_copied_call(tmp_path):
    """The engine gives the strategy a copied call's answer as history (usage None) and sends nothing
    for it: the only call is the session's own, its request holding the copied conversation."""
    from ctxsim.harness.replay.engine import RunConfig, replay
    from ctxsim.strategies.registry import names

    t = import_file("claude-code", _copied(tmp_path)).trace
    seen = []
    for name in names():
        r = replay(t, name, config=RunConfig(observer=lambda req, info: seen.append(req)))
        main = r.calls[r.calls["kind"] == "main"]
        assert len(main) == 1, name
    first = seen[0]
    texts = [b.text for m in first.messages for b in m.blocks if b.type == "text"]
    assert "fixed" in texts and "now the tests" in texts


def test_a_folder_row_says_what_its_copies_cost_even_without_the_session_that_made_them(tmp_path, capsys):
    """The copies are left out of the row's calls and cost, and said: how many, what they cost where
    they were billed, and that the folder does not hold that session."""
    _copied(tmp_path / "logs" / "p")
    assert cli(["import", "claude-code", str(tmp_path / "logs"), "-o", str(tmp_path / "out"), "--json",
                "--no-probes"]) == 0
    cap = capsys.readouterr()
    (row,) = json.loads(cap.out)["sessions"]
    assert row["calls"] == 1 and row["tokens"]["cache_read"] == 2_000
    # r1: 3·5 + 9,000·6.25 + 5·25 = 56,390e-6; r2: 3·5 + 400·6.25 + 9,000·0.5 + 5·25 = 7,140e-6
    assert row["copied_calls"] == {"calls": 2, "cost_usd": pytest.approx(0.0635, abs=1e-4), "made_in": []}
    assert ("2 of its calls are copies of calls made in an earlier session this folder does not hold (a resumed "
            "conversation copies them): billed there, not counted here ($0.06)") in cap.err


def test_a_sidechain_call_written_with_the_copy_is_copied_too(tmp_path):
    """Whatever the copy holds was written at once: a sub-agent's call among the copied records is
    the earlier session's too."""
    t = import_file("claude-code", write(tmp_path / "s.jsonl", [
        user(0, "go"), asst(100.0, "r1", tool("t1")), result(100.0, "t1", "x"),
        user(100.0, "look", isSidechain=True), asst(100.0, "r9", text("seen"), isSidechain=True),
        asst(100.001, "r2", text("b")), user(130, "more"), asst(131, "r3", text("c"))])).trace
    assert [(e.request_id, e.copied) for e in t.events if isinstance(e, tr.AssistantEvent)] == [
        ("r1", True), ("r9", True), ("r2", True), ("r3", False)]
    assert t.calls == 1


def test_the_token_scale_is_fitted_on_the_copied_calls_too(tmp_path):
    """The copies grew the same conversation, with the earlier session's usage: their growth pairs
    are evidence of the token scale (a session that made a few calls after a long copy would fit on
    those few alone). Fitted on them and on the first 30% of the session's own calls; scored on none."""
    from ctxsim.harness.fidelity.compare import copied_fit, fit_calls
    from ctxsim.harness.fidelity.recorded import recorded_calls

    res = import_file("claude-code", _copied(tmp_path))
    calls = recorded_calls(res.trace)
    on = copied_fit(res.trace, calls, fit_calls(calls, 0.3), None, 0, None)
    assert on.copies == 2 and [c.usage.cache_read for c in on.calls] == [0, 9_000, 2_000] and on.fit == {0, 1, 2}
    assert set(on.sizes) == {0, 1, 2}
    assert "and the 2 calls a resume copied in" in res.trace.header.recorded.token_scale_evidence


def test_a_copy_only_session_with_a_damaged_line_names_that_line(tmp_path):
    """The damaged line may have held the session's own call: the error is at that line, not at the copy."""
    recs = [user(0, "go"), asst(100.0, "r1", tool("t1")), result(100.0, "t1", "x"), asst(100.0, "r2", text("b"))]
    lines = [json.dumps(r) for r in recs] + ['{"type": "assistant", "message": {"id": "m3", "content": [']
    f = tmp_path / "s.jsonl"
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(tr.TraceError) as e:
        import_file("claude-code", f)
    assert e.value.line == 5 and "with the line skipped, all 2 model calls are copies" in str(e.value)


def test_validate_counts_the_copies_apart_from_the_calls(tmp_path, capsys):
    out = tmp_path / "t.jsonl"
    assert cli(["import", "claude-code", str(_copied(tmp_path)), "-o", str(out), "--no-probes"]) == 0
    capsys.readouterr()
    assert cli(["validate", str(out)]) == 0
    assert "ok: 1 model calls (and 2 an earlier session made, copied in by a resume)" in capsys.readouterr().out


def test_a_folder_names_every_unpriced_model_once_with_its_sessions(tmp_path, capsys):
    """Each session's error names its own unknown ids; the folder's last lines name them all, with how many
    sessions each holds, so one --models file prices the whole folder."""
    logs = tmp_path / "logs" / "p"
    write(logs / "a.jsonl", [user(0, "go"), asst(1, "r1", text("a"), model="glm-9")])
    write(logs / "b.jsonl", [user(0, "go"), asst(1, "r2", text("a"), model="glm-9"), user(2, "more"),
                             asst(3, "r3", text("b"), model="glm-9-air")])
    write(logs / "c.jsonl", [user(0, "go"), asst(1, "r4", text("a"))])
    assert cli(["import", "claude-code", str(tmp_path / "logs"), "-o", str(tmp_path / "out"), "--json",
                "--no-probes"]) == 2
    cap = capsys.readouterr()
    assert json.loads(cap.out)["unknown_models"] == {"glm-9": 2, "glm-9-air": 1}
    # each session names its own ids, not the whole price table each time
    assert f"{logs / 'b.jsonl'}: unknown models 'glm-9', 'glm-9-air': not in the price table (session skipped)" in cap.err
    assert "known:" not in cap.err
    assert ("unknown models across the folder: 'glm-9' (2 sessions), 'glm-9-air' (1 session); price them all in one "
            "TOML file") in cap.err


# --- records written again ----------------------------------------------------------------------

def test_records_written_again_with_their_uuids_are_no_new_messages_and_no_new_calls(tmp_path):
    """A run of an earlier chain's records written again in the middle of the file, uuids, request ids
    and times kept (seen in one development-population session and one outside it): the same
    messages, not new ones. Read as new, their user prompts joined the conversation with no answers
    and the copied calls' blocks were added to the calls they repeat. Skipped and counted."""
    first = [user(0, "go", uuid="u1"), asst(1, "r1", tool("t1"), uuid="a1", parentUuid="u1"),
             result(2, "t1", "a.py", uuid="u2", parentUuid="a1"),
             asst(3, "r2", text("listed"), read=103, uuid="a2", parentUuid="u2")]
    then = [user(600, "next", uuid="u3", parentUuid="a2"),
            asst(601, "r3", text("done"), read=206, uuid="a3", parentUuid="u3")]
    res = import_file("claude-code", write(tmp_path / "s.jsonl", first + first[:3] + then))
    t = res.trace
    assert _kinds(t) == ["UserEvent", "AssistantEvent", "ToolResultEvent", "AssistantEvent", "UserEvent",
                         "AssistantEvent"]
    assert [len(e.content) for e in t.events if isinstance(e, tr.AssistantEvent)] == [1, 1, 1]
    assert t.calls == 3
    assert res.summary["ignored"] == {"assistant written again (a uuid the file already holds)": 1,
                                      "user written again (a uuid the file already holds)": 2}
    assert any("user written again (a uuid the file already holds) ×2" in n for n in t.header.notes)
    # a uuid repeated on a record of another time (a damaged id, not a copy): the record stays a message
    damaged = first + [user(600, "next", uuid="u1", parentUuid="a2"),
                       asst(601, "r3", text("done"), read=206, uuid="a3", parentUuid="u1")]
    t = import_file("claude-code", write(tmp_path / "d.jsonl", damaged)).trace
    assert t.calls == 3 and [e.text for e in t.events if isinstance(e, tr.UserEvent)] == ["go", "next"]


def test_an_answer_whose_lines_lost_some_request_ids_stays_one_call(tmp_path):
    """A damaged file whose second streamed line of an answer lost its request id: the lines share the answer's
    message id, so they are one call, billed once (it was split in two, its usage counted twice). A proxy that
    reuses one message id across requests with their own request ids still makes separate calls."""
    first = asst(1, "r1", {"type": "thinking", "thinking": "plan", "signature": "s"}, out=5)
    second = asst(1.5, "r1", tool("t1"), out=40)
    del second["requestId"]
    t = import_file("claude-code", write(tmp_path / "s.jsonl", [user(0, "go"), first, second, result(2, "t1", "a.py"),
                                                               asst(3, "r2", text("done"), read=103)])).trace
    calls = [e for e in t.events if isinstance(e, tr.AssistantEvent)]
    assert t.calls == 2 and [[b.type for b in c.content] for c in calls] == [["thinking", "tool_use"], ["text"]]
    assert calls[0].usage.output == 40
    # the other order: the line without the request id first
    first2, second2 = dict(first), dict(second)
    del first2["requestId"]
    second2["requestId"] = "r1"
    t = import_file("claude-code", write(tmp_path / "s2.jsonl", [user(0, "go"), first2, second2, result(2, "t1", "a.py"),
                                                                asst(3, "r2", text("done"), read=103)])).trace
    assert t.calls == 2
    # one message id, two request ids: two calls
    a, b = asst(1, "q1", text("a")), asst(3, "q2", text("b"), read=103)
    b["message"] = dict(b["message"], id=a["message"]["id"])
    t = import_file("claude-code", write(tmp_path / "s3.jsonl", [user(0, "go"), a, user(2, "more"), b])).trace
    assert t.calls == 2
