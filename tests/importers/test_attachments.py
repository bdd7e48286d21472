"""Claude Code's ``attachment`` records (2.1.105+): content the model received beside the
conversation, which the log holds as data. Each test is a small session written here with the
structure the development population shows (a skill listing at the first prompt, a file attached
after a compaction, a queued prompt, plan mode's fixed reminder), never a copy of one."""

from __future__ import annotations

from ctxsim.harness.importers import import_file
from ctxsim.harness.importers.attachments import render
from ctxsim.harness.model import trace as tr
from ctxsim.harness.replay.engine import RunConfig, replay

from tests.helpers_claude_code import asst, rec, result, text, user, write


def attachment(ts, a, **kw):
    return rec("attachment", ts, attachment=a, **kw)


def file_att(path, body, start=1):
    return {"type": "file", "filename": path, "displayPath": path.rsplit("/", 1)[-1],
            "content": {"type": "text", "file": {"filePath": path, "content": body, "numLines": body.count("\n") + 1,
                                                 "startLine": start, "totalLines": 99}}}


def test_render_keeps_the_recorded_content_verbatim_in_a_short_frame():
    """A file's text comes numbered as the Read tool numbers it (from its start line: 3 and 4
    here); a skill listing, a plan, a skill body and a snippet come verbatim; plan mode's reminder,
    whose text the log does not hold, is named instead of guessed."""
    got, why = render(file_att("/w/a.py", "x = 1\ny = 2", start=3))
    assert why == "" and "     3\u2192x = 1\n     4\u2192y = 2" in got and '"file_path": "/w/a.py"' in got
    got, _ = render({"type": "skill_listing", "content": "- deploy: ship it", "skillCount": 1, "isInitial": True})
    assert got.startswith("<system-reminder>\n") and "- deploy: ship it" in got
    got, _ = render({"type": "invoked_skills", "skills": [{"name": "deploy", "path": "p", "content": "BODY"}]})
    assert "### Skill: deploy\nPath: p\n\nBODY" in got
    got, _ = render({"type": "plan_file_reference", "planFilePath": "/p.md", "planContent": "# Plan"})
    assert got.endswith("# Plan\n</system-reminder>")
    assert render({"type": "deferred_tools_delta", "addedLines": [], "removedNames": []}) == (
        None, "deferred_tools_delta with no change")
    assert render({"type": "plan_mode", "reminderType": "full"})[0] is None
    assert "fixed reminder text" in render({"type": "plan_mode"})[1]
    assert "does not know" in render({"type": "hologram"})[1]
    assert "no text in the log" in render({"type": "file", "content": {"type": "image"}})[1]


def _session(tmp_path, compact: bool):
    listing = "- deploy: ship the service\n" * 40
    body = "def parse():\n    return 1\n" * 30
    recs = [user(0, "fix the parser", version="2.1.114"),
            attachment(0.1, {"type": "skill_listing", "content": listing, "skillCount": 40, "isInitial": True}),
            attachment(0.1, {"type": "plan_mode", "reminderType": "full", "isSubAgent": False}),
            attachment(0.2, {"type": "queued_command", "prompt": "and the tests", "commandMode": "prompt"}),
            attachment(0.2, {"type": "queued_command", "prompt": "also the docs", "commandMode": "prompt"}),
            asst(1, "r1", text("on it"), w5m=0, w1h=20_000),
            user(2, "also the docs")]
    if compact:
        recs += [asst(2.5, "r0", {"type": "tool_use", "id": "rd", "name": "Read", "input": {"file_path": "/w/parser.py"}},
                      w5m=0, w1h=400, read=20_000),
                 result(2.6, "rd", body),
                 asst(3, "r2", text("ok"), w5m=0, w1h=500, read=20_400),
                 rec("system", 4, subtype="compact_boundary", compactMetadata={"trigger": "manual", "preTokens": 20_500}),
                 user(4, "This session is being continued ...", isCompactSummary=True),
                 attachment(4.1, file_att("/w/parser.py", body)),
                 user(5, "go on"),
                 asst(6, "r3", text("resumed"), w5m=0, w1h=6_000, read=15_000)]
    else:
        recs.append(asst(3, "r2", text("ok"), w5m=0, w1h=500, read=20_000))
    return import_file("claude-code", write(tmp_path / "s.jsonl", recs))


def test_attachments_import_as_hidden_meta_messages_and_the_rest_are_counted(tmp_path):
    """The skill listing and the queued prompt the log holds only as an attachment reach the trace
    as hidden meta messages (no new turn); the queued prompt that is also a user message is sent
    once, as that message; plan mode's reminder is counted as ignored, with its reason."""
    res = _session(tmp_path, compact=False)
    hidden = [e for e in res.trace.events if isinstance(e, tr.UserEvent) and e.meta.get("hidden")]
    assert [e.meta["hidden"].split(" (")[0] for e in hidden] == ["attachment skill_listing", "attachment queued_command"]
    assert all(e.meta.get("meta_record") for e in hidden)
    assert "- deploy: ship the service\n" * 40 in hidden[0].text and "and the tests" in hidden[1].text
    ign = res.summary["ignored"]
    assert ign["attachment/queued_command also recorded as a user message"] == 1
    assert ign["attachment/plan_mode (Claude Code's fixed reminder text, not in the log)"] == 1


def test_files_the_log_re_attached_after_a_compaction_replace_the_modelled_ones(tmp_path):
    """A compaction followed by the log's own file attachment is marked (reattached_in_log): the
    replay sends that file (numbered as a Read result) and models no re-attachment of its own; with
    the mark taken away it would re-attach the file read before the compaction a second time."""
    t = _session(tmp_path, compact=True).trace
    (c,) = [e for e in t.events if isinstance(e, tr.CompactEvent)]
    assert c.meta["reattached_in_log"] is True
    f = [e for e in t.events if isinstance(e, tr.UserEvent) and "attachment file" in str(e.meta.get("hidden"))]
    assert len(f) == 1 and f[0].meta["read_file"] == "/w/parser.py" and "     1\u2192def parse():" in f[0].text
    res = replay(t, "recorded", {}, RunConfig())
    assert res.metrics["strategy_counters"].get("messages re-attached after compactions", 0) == 0
    off = replay(t, "recorded", {"compact_reattached_in_log": []}, RunConfig())
    assert off.metrics["strategy_counters"]["messages re-attached after compactions"] == 1
    assert off.calls["context_tokens"].iloc[-1] > res.calls["context_tokens"].iloc[-1]


def test_a_queued_prompt_with_a_pasted_image_imports_the_image_as_a_placeholder_not_its_base64(tmp_path):
    """A prompt the user queued while the agent worked can hold content blocks: its text and a
    pasted image (base64 in the log). The text is sent; the image becomes the placeholder a user
    message's image becomes (its size then comes from the log's next step), and is counted. Sent
    as text, 200,000 characters of base64 made a replay overflow where the log did not."""
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "A" * 200_000}}
    got, why = render({"type": "queued_command", "prompt": [{"type": "text", "text": "see this screenshot"}, image],
                       "commandMode": "prompt"})
    assert why == "" and "see this screenshot" in got and "[image content not in the log]" in got
    assert "AAAA" not in got and len(got) < 200
    recs = [user(0, "fix the page", version="2.1.114"),
            attachment(0.2, {"type": "queued_command", "prompt": [{"type": "text", "text": "see this"}, image],
                             "commandMode": "prompt"}),
            asst(1, "r1", text("on it"), w5m=0, w1h=20_000)]
    res = import_file("claude-code", write(tmp_path / "s.jsonl", recs))
    (q,) = [e for e in res.trace.events if isinstance(e, tr.UserEvent) and e.meta.get("attachment") == "queued_command"]
    assert "see this" in q.text and "AAAA" not in q.text
    assert any("attachment image block ×1" in n for n in res.trace.header.notes)
