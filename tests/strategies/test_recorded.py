"""The `recorded` strategy: re-enacts a log (append-only, its compactions, its breakpoints, its
sub-agent contexts and models), driven by the real engine on small hand-built traces."""

from __future__ import annotations

import pytest
from ctxsim.harness.model import trace as tr
from ctxsim.harness.model.conversation import Breakpoint
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.strategies.recorded import COMPACT_INSTRUCTIONS, MISSING_SUMMARY, Recorded, RecordedConfig
from ctxsim.strategies.registry import StrategyError, get, make_config

MODEL = "claude-opus-4-6"
BIG = "x " * 3000   # ≈3,000 cl100k tokens: above Opus 4.6's 4,096-token cache minimum with the prefix


def trace(events, prefix=2000):
    return tr.validate_events(tr.Header(name="t", model=MODEL, prefix_tokens=prefix), events)


def run(t, params=None, **cfg):
    """Each call on the model its event names (the trace's model otherwise), as `ctxsim run` does."""
    seen = []
    res = replay(t, Recorded, params or {}, RunConfig(observer=lambda req, info: seen.append(req), **cfg))
    return res, seen




def test_registered_and_config_round_trip():
    assert get("recorded") is Recorded
    c = make_config(Recorded, {"ttl": "1h", "breakpoints": "last"})
    assert RecordedConfig.model_validate(c.model_dump()) == c
    with pytest.raises(StrategyError, match="unknown parameter"):
        make_config(Recorded, {"tll": "1h"})
    with pytest.raises(StrategyError, match="invalid parameter"):
        make_config(Recorded, {"ttl": "2h"})


def test_breakpoints_on_system_and_last_message_with_the_recorded_ttl():
    t = trace([tr.UserEvent(t=0, text="hi"), tr.AssistantEvent(t=1, content=[tr.TextContent(text="a")]),
               tr.UserEvent(t=2, text="more"), tr.AssistantEvent(t=3, content=[tr.TextContent(text="b")])])
    _, seen = run(t, {"ttl": "1h"})
    assert seen[0].breakpoints == (Breakpoint("system", "1h"), Breakpoint(0, "1h"))
    # second call: user, assistant, user → last message index 2
    assert seen[1].breakpoints == (Breakpoint("system", "1h"), Breakpoint(2, "1h"))
    _, seen = run(t, {"breakpoints": "none"})
    assert seen[1].breakpoints == ()
    _, seen = run(t)   # no ttl of its own: the client's (the TTL the log wrote, else 5m)
    assert seen[0].breakpoints == (Breakpoint("system"), Breakpoint(0))


def test_append_only_reads_the_previous_context_from_cache():
    """Each call reads what the previous call wrote: cache_read_2 = context_1 (the last message of
    call 1 carried the breakpoint), as in the real logs."""
    t = trace([tr.UserEvent(t=0, text=BIG), tr.AssistantEvent(t=1, content=[tr.TextContent(text="a")]),
               tr.UserEvent(t=2, text="more"), tr.AssistantEvent(t=3, content=[tr.TextContent(text="b")])], prefix=3000)
    res, _ = run(t)
    c = res.calls
    assert c.loc[0, "cache_read"] == 0 and c.loc[0, "cache_write_5m"] == c.loc[0, "context_tokens"]
    assert c.loc[1, "cache_read"] == c.loc[0, "context_tokens"]


def test_recorded_compaction_bills_a_summary_call_then_sends_the_recorded_summary():
    t = trace([tr.UserEvent(t=0, text=BIG), tr.AssistantEvent(t=1, content=[tr.TextContent(text="a")]),
               tr.CompactEvent(t=2, trigger="auto", pre_tokens=9999, summary="SUMMARY TEXT"),
               tr.UserEvent(t=3, text="go on"), tr.AssistantEvent(t=4, content=[tr.TextContent(text="b")])], prefix=3000)
    res, seen = run(t)
    c = res.calls
    assert list(c["kind"]) == ["main", "summary", "main"]
    # the summary call is the history + the compaction prompt: it reuses the cached prefix
    assert c.loc[1, "cache_read"] == c.loc[0, "context_tokens"]
    assert seen[1].messages[-1].text == COMPACT_INSTRUCTIONS
    after = seen[2]
    assert [m.text for m in after.messages] == ["SUMMARY TEXT", "go on"]
    assert after.messages[0].meta["origin"] == "summary" and after.rewrite
    assert res.metrics["compactions"]["succeeded"] == 1


def test_the_summary_call_is_billed_at_the_size_of_the_summary_the_log_holds():
    """The replayed compaction call wrote the summary the log holds: its output is that text's tokens
    (500 words of one cl100k token each, at Opus 4.6's token scale of 1.5 in models.toml: 750), whatever
    length the simulated summariser would have given; a compaction with no recorded summary keeps the
    summariser's answer."""
    said = " ".join(["word"] * 500)

    def summary_output(summary):
        t = trace([tr.UserEvent(t=0, text=BIG), tr.AssistantEvent(t=1, content=[tr.TextContent(text="a")]),
                   tr.CompactEvent(t=2, trigger="auto", summary=summary),
                   tr.UserEvent(t=3, text="go on"), tr.AssistantEvent(t=4, content=[tr.TextContent(text="b")])],
                  prefix=3000)
        c = run(t)[0].calls
        return int(c.loc[c["kind"] == "summary", "output"].iloc[0])

    assert summary_output(said) == 750
    assert summary_output(None) not in (0, 750)


def test_compaction_without_recorded_summary_says_so():
    t = trace([tr.UserEvent(t=0, text="hi"), tr.AssistantEvent(t=1, content=[tr.TextContent(text="a")]),
               tr.CompactEvent(t=2), tr.AssistantEvent(t=3, content=[tr.TextContent(text="b")])])
    _, seen = run(t, {"summary_call": False})
    assert [m.text for m in seen[-1].messages] == [MISSING_SUMMARY]
    assert all(r.kind == "main" for r in seen)  # no summary call when it is turned off


def test_isolated_subtask_runs_in_its_own_context_with_its_own_prefix_and_model():
    t = trace([
        tr.UserEvent(t=0, text="parent task"),
        tr.AssistantEvent(t=1, content=[tr.ToolUseContent(id="task", name="Task", input={"prompt": "look"})]),
        tr.SubtaskStart(t=2, id="sub", isolated=True), tr.UserEvent(t=2, text="look"),
        tr.AssistantEvent(t=3, content=[tr.TextContent(text="found it")], model="claude-sonnet-4-5"),
        tr.SubtaskEnd(t=4, id="sub"),
        tr.ToolResultEvent(t=5, tool_use_id="task", content="found it"),
        tr.AssistantEvent(t=6, content=[tr.TextContent(text="thanks")]),
    ])
    res, seen = run(t, {"subtask_prefix_tokens": {"sub": 700}})
    sub, after = seen[1], seen[2]
    assert [m.text for m in sub.messages] == ["look"] and sub.kind == "subagent"
    assert sub.system.opaque_tokens == 700 and sub.model == "claude-sonnet-4-5"
    assert [m.role for m in after.messages] == ["user", "assistant", "user"]  # parent context untouched
    assert after.system.opaque_tokens == 2000 and after.kind == "main"
    assert list(res.calls["model"]) == [MODEL, "claude-sonnet-4-5", MODEL]


def test_model_switch_gets_that_models_system_prefix():
    t = trace([tr.UserEvent(t=0, text="hi"), tr.AssistantEvent(t=1, content=[tr.TextContent(text="a")]),
               tr.UserEvent(t=2, text="skill"),
               tr.AssistantEvent(t=3, content=[tr.TextContent(text="b")], model="claude-haiku-4-5")])
    res, seen = run(t, {"model_prefix_tokens": {MODEL: 2000, "claude-haiku-4-5": 2600}})
    assert [r.system.opaque_tokens for r in seen] == [2000, 2600]
    # the first call names no model: it runs on the trace's
    assert [r.model for r in seen] == [None, "claude-haiku-4-5"]
    assert list(res.calls["model"]) == [MODEL, "claude-haiku-4-5"]


def test_compaction_call_runs_on_the_recorded_compaction_model_and_ttl():
    """Spotter ae4a77f8: the session ran on Haiku, /compact called Opus with 5-minute writes. The
    summary call re-enacts that: Opus (with Opus's own system prompt) and 5m breakpoints, while the
    main calls keep their 1h breakpoints; without the parameters it follows the last call."""
    haiku = "claude-haiku-4-5"
    t = trace([tr.UserEvent(t=0, text=BIG), tr.AssistantEvent(t=1, content=[tr.TextContent(text="a")]),
               tr.UserEvent(t=2, text="more"), tr.AssistantEvent(t=3, content=[tr.TextContent(text="b")], model=haiku),
               tr.CompactEvent(t=4, trigger="manual", summary="S"),
               tr.UserEvent(t=5, text="go on"), tr.AssistantEvent(t=6, content=[tr.TextContent(text="c")])], prefix=3000)
    params = {"ttl": "1h", "model_prefix_tokens": {MODEL: 3000, haiku: 3500}}
    res, seen = run(t, {**params, "compact_models": (MODEL,), "compact_ttls": ("5m",)})
    summary = seen[2]
    assert summary.kind == "summary" and summary.model == MODEL
    assert summary.system.opaque_tokens == 3000            # Opus's system prompt, not Haiku's 3,500
    assert summary.breakpoints == (Breakpoint("system", "5m"), Breakpoint(3, "5m"))  # user, a, user, b
    assert seen[1].breakpoints[0] == Breakpoint("system", "1h")
    c = res.calls
    # Opus's cache holds call 0's entries (written at 1h): the summary call reads call 0's whole
    # context (its breakpoint is 3 blocks back, within the lookback) and writes the rest at 5m
    assert c.loc[2, "cache_read"] == c.loc[0, "context_tokens"]
    assert c.loc[2, "cache_write_5m"] > 0 and c.loc[2, "cache_write_1h"] == 0
    # default: the last call's model and the strategy's ttl
    _, seen = run(t, params)
    assert seen[2].model == haiku and seen[2].breakpoints[0] == Breakpoint("system", "1h")
    assert seen[2].system.opaque_tokens == 3500


def warm_trace(evs):
    """A 5,000-token system prompt whose 3,000-token shared head an earlier session left cached (1h)."""
    rec = tr.RecordedSetting(warm_prefix_tokens=3000, cache_ttl="1h")
    return tr.validate_events(tr.Header(name="t", model=MODEL, prefix_tokens=5000, recorded=rec), evs)


def test_a_task_notification_is_an_ordinary_message_and_an_mcp_reconnect_resends_the_system():
    """A <task-notification> is appended like any message (a full hit: it is not re-enacted as a
    cache loss). After an /mcp command the session part of the system prompt goes anew: the next
    call reads only the system prompt's shared head (an earlier session's, 3,000 of the 5,000) and
    writes the rest; the context does not change size."""
    evs = [tr.UserEvent(t=0, text=BIG), tr.AssistantEvent(t=1, content=[tr.TextContent(text="a")]),
           tr.UserEvent(t=2, text="<task-notification>\n<status>completed</status>\n</task-notification>"),
           tr.AssistantEvent(t=3, content=[tr.TextContent(text="b")]),
           tr.UserEvent(t=4, text="<command-name>/mcp</command-name>"),
           tr.UserEvent(t=4, text="<local-command-stdout>Reconnected to tidewave.</local-command-stdout>"),
           tr.AssistantEvent(t=5, content=[tr.TextContent(text="c")]),
           tr.UserEvent(t=6, text="thanks"), tr.AssistantEvent(t=7, content=[tr.TextContent(text="d")])]
    t = warm_trace(evs)
    res, seen = run(t)
    c = res.calls
    assert c.loc[1, "cache_read"] == c.loc[0, "context_tokens"]            # the notification: a hit
    assert c.loc[2, "cache_read"] == 3000                                   # after /mcp: the shared head
    assert c.loc[2, "cache_write_1h"] + c.loc[2, "input_uncached"] == c.loc[2, "context_tokens"] - 3000
    assert c.loc[3, "cache_read"] == c.loc[2, "context_tokens"]            # the new prompt is kept
    assert seen[2].system.opaque_tokens == 5000 and seen[2].system.revision == 1
    off, _ = run(t, {"mcp_reconnect": False})
    assert off.calls.loc[2, "cache_read"] == off.calls.loc[1, "context_tokens"]
    assert list(off.calls["context_tokens"]) == list(c["context_tokens"])


def _search(i: int, t: float, *names: str) -> list:
    """A ToolSearch call and its result, which loads ``names`` (tool_reference blocks: meta.tools_loaded)."""
    return [tr.AssistantEvent(t=t, content=[tr.ToolUseContent(id=f"ts{i}", name="ToolSearch", input={"query": "q"})]),
            tr.ToolResultEvent(t=t + 1, tool_use_id=f"ts{i}", content="[tool_reference content not in the log]",
                               meta={tr.TOOLS_LOADED: list(names)} if names else {})]


def test_the_first_tool_a_tool_search_loads_resends_the_system_on_opus_4_7():
    """On Opus 4.7 the first tool a tool search loads sends the session part of the system prompt
    anew, as /mcp does: the next call reads only the shared head (an earlier session's 3,000 of the
    5,000) and writes the rest. A second load changes nothing; a result that loads nothing changes
    nothing; on Opus 4.6 (or with tool_load_rekeys empty) the first load is a full hit too."""
    evs = [tr.UserEvent(t=0, text=BIG), *_search(0, 1), *_search(1, 3), *_search(2, 5, "ExitPlanMode"),
           *_search(3, 7, "TaskCreate"), tr.AssistantEvent(t=9, content=[tr.TextContent(text="done")])]
    res, seen = run(warm_trace(evs), model="claude-opus-4-7")
    c = res.calls
    assert c.loc[0, "cache_read"] == 3000                                   # the warm shared head
    assert c.loc[1, "cache_read"] == c.loc[0, "context_tokens"]            # a result that loaded nothing
    assert c.loc[2, "cache_read"] == c.loc[1, "context_tokens"]            # the load's own call: not yet
    assert c.loc[3, "cache_read"] == 3000                                   # after the first load: the shared head
    assert c.loc[3, "cache_write_1h"] + c.loc[3, "input_uncached"] == c.loc[3, "context_tokens"] - 3000
    assert c.loc[4, "cache_read"] == c.loc[3, "context_tokens"]            # the second load: a full hit
    assert [r.system.revision for r in seen] == [0, 0, 0, 1, 1]
    assert res.metrics["strategy_counters"]["system prompt sent anew after the first tool a tool search loaded"] == 1
    for other, params in (("claude-opus-4-6", {}), ("claude-opus-4-7", {"tool_load_rekeys": []})):
        off, _ = run(warm_trace(evs), params, model=other)
        assert off.calls.loc[3, "cache_read"] == off.calls.loc[2, "context_tokens"]
        if other == "claude-opus-4-7":   # the same requests (Opus 4.6 counts the same text in fewer tokens)
            assert list(off.calls["context_tokens"]) == list(c["context_tokens"])


def test_an_effort_level_set_keys_every_cache_entry_anew():
    """After an /effort command that set a level (its stdout "Set effort level to max …"), the next
    call reads nothing, not even the system prompt's shared head (3,000 of 5,000): 19 of 20 such calls
    in the development population read nothing or the shared head only. The call after reads it all
    again; a second /effort to the same level changes nothing; effort_changes=False keeps the reads."""
    cmd = "<command-name>/effort</command-name>\n<command-args>max</command-args>"
    out = "<local-command-stdout>Set effort level to max (this session only): Maximum capability</local-command-stdout>"
    evs = [tr.UserEvent(t=0, text=BIG), tr.AssistantEvent(t=1, content=[tr.TextContent(text="a")]),
           tr.UserEvent(t=2, text=cmd), tr.UserEvent(t=2, text=out),
           tr.UserEvent(t=3, text="go on"), tr.AssistantEvent(t=4, content=[tr.TextContent(text="b")]),
           tr.UserEvent(t=5, text="thanks"), tr.AssistantEvent(t=6, content=[tr.TextContent(text="c")]),
           tr.UserEvent(t=7, text=cmd), tr.UserEvent(t=7, text=out),
           tr.UserEvent(t=8, text="more"), tr.AssistantEvent(t=9, content=[tr.TextContent(text="d")])]
    t = warm_trace(evs)
    res, seen = run(t)
    c = res.calls
    assert c.loc[0, "cache_read"] == 3000                                  # the warm shared head
    assert c.loc[1, "cache_read"] == 0                                     # after /effort: nothing
    assert c.loc[1, "cache_write_1h"] + c.loc[1, "input_uncached"] == c.loc[1, "context_tokens"]
    assert c.loc[2, "cache_read"] == c.loc[1, "context_tokens"]            # keyed by the level from then on
    assert c.loc[3, "cache_read"] == c.loc[2, "context_tokens"]            # the same level again: no break
    assert [r.effort for r in seen] == [None, "max", "max", "max"] and [r.rewrite for r in seen] == [False, True, False, False]
    off, _ = run(t, {"effort_changes": False})
    assert off.calls.loc[1, "cache_read"] == off.calls.loc[0, "context_tokens"]
    assert list(off.calls["context_tokens"]) == list(c["context_tokens"])


def test_a_resumed_launch_sends_the_conversation_anew():
    """A resumed launch (session_start with resume) re-serialises the conversation: the next call
    reads only the tools and system prompt (5,000 + the request's 8 framing tokens,
    tokenizer.REQUEST_OVERHEAD) and writes the messages again, the context the same size; the call
    after reads it all. resume_resends_messages=False keeps the reads."""
    evs = [tr.SessionStart(t=0, session="s"), tr.UserEvent(t=0, text=BIG),
           tr.AssistantEvent(t=1, content=[tr.TextContent(text="a")]),
           tr.SessionEnd(t=2, session="s"), tr.SessionStart(t=30, session="s", resume=True),
           tr.UserEvent(t=31, text="go on"), tr.AssistantEvent(t=32, content=[tr.TextContent(text="b")]),
           tr.UserEvent(t=33, text="thanks"), tr.AssistantEvent(t=34, content=[tr.TextContent(text="c")])]
    t = warm_trace(evs)
    res, seen = run(t)
    c = res.calls
    assert c.loc[0, "cache_read"] == 3000                                  # the warm shared head
    assert c.loc[1, "cache_read"] == 5008                                  # resumed: tools and system only
    assert c.loc[1, "cache_write_1h"] + c.loc[1, "input_uncached"] == c.loc[1, "context_tokens"] - 5008
    assert c.loc[2, "cache_read"] == c.loc[1, "context_tokens"]
    assert [r.rewrite for r in seen] == [False, True, False]
    assert res.metrics["strategy_counters"]["resumed launch (the conversation sent anew, messages' cache lost)"] == 1
    off, _ = run(t, {"resume_resends_messages": False})
    assert off.calls.loc[1, "cache_read"] == off.calls.loc[0, "context_tokens"]
    assert list(off.calls["context_tokens"]) == list(c["context_tokens"])


def test_an_effort_output_cut_short_names_no_level():
    """The words after "Set effort level to " are the level; a message ending there (a cut log line, a
    user quoting the phrase) sets none instead of failing the replay."""
    from ctxsim.strategies.recorded import effort_level

    assert effort_level("<local-command-stdout>Set effort level to max (this session only)") == "max"
    assert effort_level("Set effort level to high: Comprehensive") == "high"
    assert effort_level("Set effort level to ") is None and effort_level("Set effort level to :") is None
    assert effort_level("no command here") is None
    evs = [tr.UserEvent(t=0, text=BIG), tr.AssistantEvent(t=1, content=[tr.TextContent(text="a")]),
           tr.UserEvent(t=2, text="Set effort level to "), tr.AssistantEvent(t=3, content=[tr.TextContent(text="b")])]
    res, seen = run(trace(evs))
    assert [r.effort for r in seen] == [None, None] and res.calls.loc[1, "cache_read"] > 0


def read_call(i, path, t):
    return tr.AssistantEvent(t=t, content=[tr.ToolUseContent(id=f"r{i}", name="Read", input={"file_path": path})])


def test_compaction_reattaches_the_recently_read_files_skills_and_todo():
    """Claude Code's docs (context-window, "What survives compaction"): up to 5 files read or
    edited come back, one over 5,000 tokens (f5: 15,000 words, 30,000 characters and 15,000 cl100k
    tokens) as a path reference only; then the plan, the invoked skills' bodies and the todo list (reported).
    Seven files are read (f6 twice: its second read counts, as the most recent); a sub-agent's read
    does not count."""
    evs, t = [tr.UserEvent(t=0, text="go")], 1.0
    for i, name in enumerate(["f0", "f1", "f2", "f3", "f4", "f5", "f6", "f6"]):
        evs += [read_call(i, name, t), tr.ToolResultEvent(t=t + 0.5, tool_use_id=f"r{i}",
                                                          content=(" x" * 15_000 if name == "f5" else f"text of {name} #{i}"))]
        t += 1
    evs += [tr.AssistantEvent(t=t, content=[tr.ToolUseContent(id="sk", name="Skill", input={"skill": "deploy"})]),
            tr.ToolResultEvent(t=t + 0.1, tool_use_id="sk", content="Launching skill: deploy"),
            tr.UserEvent(t=t + 0.2, text="Base directory for this skill: /s\n# Deploy\nrun make deploy",
                         meta={"meta_record": True}),
            tr.AssistantEvent(t=t + 1, content=[tr.ToolUseContent(id="td", name="TodoWrite", input={
                "todos": [{"content": "ship it", "status": "in_progress"}]})]),
            tr.ToolResultEvent(t=t + 1.1, tool_use_id="td", content="ok"),
            tr.AssistantEvent(t=t + 2, content=[tr.ToolUseContent(id="task", name="Task", input={})]),
            tr.SubtaskStart(t=t + 2, id="sub", isolated=True), tr.UserEvent(t=t + 2, text="look"),
            read_call(99, "sub-only", t + 2.1), tr.ToolResultEvent(t=t + 2.2, tool_use_id="r99", content="sub"),
            tr.AssistantEvent(t=t + 2.3, content=[tr.TextContent(text="done")]), tr.SubtaskEnd(t=t + 2.4, id="sub"),
            tr.ToolResultEvent(t=t + 2.5, tool_use_id="task", content="done"),
            tr.AssistantEvent(t=t + 3, content=[tr.TextContent(text="ok")]),
            tr.CompactEvent(t=t + 4, summary="SUMMARY"), tr.UserEvent(t=t + 5, text="go on"),
            tr.AssistantEvent(t=t + 6, content=[tr.TextContent(text="b")])]
    t_ = trace(evs)
    _, seen = run(t_, {"reattach": "claude-code"})
    after = [m.text for m in seen[-1].messages]
    assert after[0] == "SUMMARY" and after[-1] == "go on"
    files = [x for x in after[1:6]]
    assert [x.split('"file_path": "')[1].split('"')[0] for x in files if "Called the Read tool" in x] == ["f6", "f4", "f3", "f2"]
    assert "text of f6 #7" in files[0]
    assert files[1] == ("<system-reminder>\nNote: f5 was read before the last conversation was summarized, but the "
                        "contents are too large to include. Use Read tool if you need to access it.\n</system-reminder>")
    assert "### Skill: deploy\nBase directory for this skill" in after[6]
    assert "ship it" in after[7] and len(after) == 9
    _, seen = run(t_)   # without the setting (another agent's trace): nothing re-attached
    assert [m.text for m in seen[-1].messages] == ["SUMMARY", "go on"]
    # the reported 50,000-token budget, lowered to 8 tokens = 32 characters: f6's 13 fit, f5 comes as
    # a path (not counted), f4's 13 make 26, f3's would make 39 > 32 and the budget stops there
    _, seen = run(t_, {"reattach": "claude-code", "reattach_total_tokens": 8})
    assert [m.text.split('"file_path": "')[1][:2] for m in seen[-1].messages if "Called the Read tool" in m.text] == ["f6", "f4"]


def test_a_plan_logged_but_not_sent_is_never_counted_and_comes_back_after_a_compaction():
    """ExitPlanMode's plan that Claude Code logged but did not send (ToolUseContent.logged_only): the
    request carries the tool use with the model's own input, so the call after it is exactly as large
    as where the log has no plan at all; the re-attachment after a compaction still brings the plan
    back (what the bundles re-attach: the plan file)."""
    def evs(**use):
        return [tr.UserEvent(t=0, text="plan it"),
                tr.AssistantEvent(t=1, content=[tr.ToolUseContent(id="p1", name="ExitPlanMode", **use)]),
                tr.ToolResultEvent(t=2, tool_use_id="p1", content="User has approved your plan."),
                tr.AssistantEvent(t=3, content=[tr.TextContent(text="a")]),
                tr.CompactEvent(t=4, summary="SUMMARY"), tr.UserEvent(t=5, text="go on"),
                tr.AssistantEvent(t=6, content=[tr.TextContent(text="b")])]
    plan = "## Plan\n" + "- ship the parser\n" * 100
    res, seen = run(trace(evs(logged_only={"plan": plan})), {"reattach": "claude-code"})
    bare, _ = run(trace(evs()), {"reattach": "claude-code"})
    use = seen[1].messages[1].blocks[0]
    assert use.type == "tool_use" and use.input == {} and plan not in seen[1].messages[1].text
    assert res.calls.loc[1, "context_tokens"] == bare.calls.loc[1, "context_tokens"]
    assert any(plan in m.text and m.meta.get("reattached") == "plan" for m in seen[-1].messages)


def test_startup_content_heads_the_main_context_and_comes_back_after_a_compaction():
    """Prefix 6,000, of which 2,000 measured as startup content (CLAUDE.md, rules, hooks): the system
    prompt is sent as 4,000 and an opaque message of 2,000 tokens heads the history (4 more for the
    message's framing, MESSAGE_OVERHEAD). Docs (context-window, "What survives compaction"): after
    the compaction it is re-injected from disk, before the summary; turned off, it is lost."""
    from ctxsim.harness.provider.tokenizer import MESSAGE_OVERHEAD, get_tokenizer

    evs = [tr.UserEvent(t=0, text="go"), tr.AssistantEvent(t=1, content=[tr.TextContent(text="a")]),
           tr.CompactEvent(t=2, summary="SUMMARY"), tr.UserEvent(t=3, text="go on"),
           tr.AssistantEvent(t=4, content=[tr.TextContent(text="b")])]
    t = trace(evs, prefix=6000)
    res, seen = run(t, {"startup_tokens": 2000}, token_scale=1.0)
    base, _ = run(t, token_scale=1.0)
    first = seen[0]
    assert first.system.opaque_tokens == 4000 and first.messages[0].meta["origin"] == "startup"
    assert get_tokenizer().message(first.messages[0]) == 2000 + MESSAGE_OVERHEAD
    assert res.calls.loc[0, "context_tokens"] == base.calls.loc[0, "context_tokens"] + MESSAGE_OVERHEAD
    after = seen[-1].messages
    assert [m.meta.get("origin") for m in after][:2] == ["startup", "summary"] and after[-1].text == "go on"
    assert res.metrics["strategy_counters"]["startup content re-sent after compactions"] == 1
    _, seen = run(t, {"startup_tokens": 2000, "startup_after_compaction": False})
    assert [m.text for m in seen[-1].messages] == ["SUMMARY", "go on"]
    # from the header, at the fitted scale: 2,000 recorded tokens at 1.25 are 1,600 cl100k tokens
    rec = tr.RecordedSetting(startup_tokens=2000, token_scale=1.25)
    t2 = tr.with_header(t, t.header.model_copy(update={"recorded": rec}))
    assert Recorded.trace_defaults(t2, frozenset())["startup_tokens"] == 2000
    _, seen = run(t2)
    assert get_tokenizer().message(seen[0].messages[0]) == 1600 + MESSAGE_OVERHEAD
    # a measure not below the prefix is not split (nothing would be left for the system prompt)
    _, seen = run(t, {"startup_tokens": 6000})
    assert seen[0].system.opaque_tokens == 6000 and seen[0].messages[0].text == "go"


def test_new_user_turn_drops_earlier_thinking_on_models_that_strip_it():
    """Sonnet 4.5 (before Opus 4.5) drops previous turns' thinking at a new user turn: the next
    request holds the earlier answers without their thinking blocks; tool-result continuations and
    meta records keep them; Opus 4.6 keeps them always."""
    sonnet = "claude-sonnet-4-5-20250929"
    think = tr.ThinkingContent(thinking="let me think " * 50)
    evs = [tr.UserEvent(t=0, text=BIG),
           tr.AssistantEvent(t=1, content=[think, tr.ToolUseContent(id="r1", name="Read", input={"p": 1})]),
           tr.ToolResultEvent(t=2, tool_use_id="r1", content="file"),
           tr.AssistantEvent(t=3, content=[think, tr.TextContent(text="done")]),     # continuation: kept
           tr.UserEvent(t=4, text="<system-reminder>x</system-reminder>", meta={"meta_record": True}),
           tr.AssistantEvent(t=5, content=[tr.TextContent(text="noted")]),           # meta record: kept
           tr.UserEvent(t=6, text="next task"),
           tr.AssistantEvent(t=7, content=[tr.TextContent(text="ok")])]
    t = tr.validate_events(tr.Header(name="t", model=sonnet, prefix_tokens=3000), evs)
    res, seen = run(t)
    kinds = lambda req: [[b.type for b in m.blocks] for m in req.messages if m.role == "assistant"]  # noqa: E731
    assert kinds(seen[1]) == [["thinking", "tool_use"]]
    assert kinds(seen[2]) == [["thinking", "tool_use"], ["thinking", "text"]]
    assert kinds(seen[3]) == [["tool_use"], ["text"], ["text"]]
    c = res.calls
    # the context shrinks by the two thinking blocks although a message was added
    assert c.loc[3, "context_tokens"] < c.loc[2, "context_tokens"]
    res_opus, seen_opus = run(tr.validate_events(tr.Header(name="t", model=MODEL, prefix_tokens=3000), evs))
    assert kinds(seen_opus[3]) == [["thinking", "tool_use"], ["thinking", "text"], ["text"]]
    _, seen_never = run(t, {"strip_previous_thinking": "never"})
    assert kinds(seen_never[3]) == kinds(seen_opus[3])
    # a Bedrock route's id (region and "anthropic." prefixes) is the same model: its thinking is dropped too
    bedrock = tr.validate_events(tr.Header(name="t", model="us.anthropic.claude-sonnet-4-5-20250929-v1:0",
                                           prefix_tokens=3000), evs)
    _, seen_bedrock = run(bedrock)
    assert kinds(seen_bedrock[3]) == kinds(seen[3])


def test_openai_reasoning_of_earlier_turns_leaves_the_input_at_a_new_user_turn():
    """The Responses API leaves the reasoning items of turns before the last user message out of the
    input (codex-rs TokenUsage::tokens_in_context_window; the development population's Codex rollout
    shrinks by the previous turn's reasoning at each new turn and reads the cache up to where that
    turn began). By hand: the first request is 3,000 prefix + 3,005 message + 8 framing = 6,013
    tokens, 46 whole 128-token blocks = 5,888 cached; the second grows by the reasoning and the tool
    call to 6,349 (6,272 cacheable); at the new turn the reasoning is gone, so the request shrinks to
    6,058 and its cache match stops where that reasoning began: 5,888 again, not 6,272."""
    think = tr.ThinkingContent(thinking="weigh the options " * 100)
    evs = [tr.UserEvent(t=0, text=BIG),
           tr.AssistantEvent(t=1, content=[think, tr.ToolUseContent(id="c1", name="shell", input={"cmd": "ls"})]),
           tr.ToolResultEvent(t=2, tool_use_id="c1", content="a.py b.py"),
           tr.AssistantEvent(t=3, content=[think, tr.TextContent(text="listed")]),
           tr.UserEvent(t=10, text="now the tests"),
           tr.AssistantEvent(t=11, content=[tr.TextContent(text="ok")])]
    t = tr.validate_events(tr.Header(name="t", model="gpt-5.3-codex", prefix_tokens=3000), evs)
    res, seen = run(t)
    kinds = lambda req: [[b.type for b in m.blocks] for m in req.messages if m.role == "assistant"]  # noqa: E731
    assert kinds(seen[1]) == [["thinking", "tool_use"]]
    assert kinds(seen[2]) == [["tool_use"], ["text"]]
    assert res.calls["context_tokens"].tolist() == [6013, 6349, 6058]
    assert res.calls["cache_read"].tolist() == [0, 5888, 5888]


def test_one_test_of_which_models_strip_or_budget_thinking_whatever_the_route():
    """strategies.recorded's two predicates read a model id without its route or region prefix: the
    strategy, the drops finder, the miss labels and the miss classifier all ask them."""
    from ctxsim.strategies.recorded import budget_thinking, strips_previous_thinking

    assert strips_previous_thinking("claude-sonnet-4-5-20250929")
    assert strips_previous_thinking("converse/jp.anthropic.claude-haiku-4-5-20251001-v1:0")
    assert not strips_previous_thinking("claude-opus-4-5-20251101") and not strips_previous_thinking(None)
    assert strips_previous_thinking("gpt-5.3-codex") and strips_previous_thinking("openai/o4-mini")
    assert not strips_previous_thinking("gpt-4.1") and not budget_thinking("gpt-5.5")
    assert budget_thinking("us.anthropic.claude-opus-4-5-20251101-v1:0") and budget_thinking("claude-opus-4-1-20250805")
    assert not budget_thinking("claude-opus-4-6") and not budget_thinking("")


def test_the_startup_content_resent_after_a_compaction_is_the_logs_measure():
    """The log measured 500 of the 2,000 startup tokens coming back after the compaction (the rest,
    the skill listing among it, is not re-injected): at scale 1.25 the first turn carries 1,600
    cl100k tokens and the re-sent message 400; with no measure all of it comes back."""
    from ctxsim.harness.provider.tokenizer import MESSAGE_OVERHEAD, get_tokenizer

    evs = [tr.UserEvent(t=0, text="go"), tr.AssistantEvent(t=1, content=[tr.TextContent(text="a")]),
           tr.CompactEvent(t=2, summary="SUMMARY"), tr.UserEvent(t=3, text="go on"),
           tr.AssistantEvent(t=4, content=[tr.TextContent(text="b")])]
    t = trace(evs, prefix=6000)
    rec = tr.RecordedSetting(startup_tokens=2000, token_scale=1.25, resent_startup_tokens=500)
    t2 = tr.with_header(t, t.header.model_copy(update={"recorded": rec}))
    assert Recorded.trace_defaults(t2, frozenset())["resent_startup_tokens"] == 500
    _, seen = run(t2)
    tok = get_tokenizer()
    assert tok.message(seen[0].messages[0]) == 1600 + MESSAGE_OVERHEAD
    after = seen[-1].messages
    assert after[0].meta["origin"] == "startup" and tok.message(after[0]) == 400 + MESSAGE_OVERHEAD
    # none re-sent: the summary heads the context
    t3 = tr.with_header(t, t.header.model_copy(update={"recorded": rec.model_copy(update={"resent_startup_tokens": 0})}))
    _, seen = run(t3)
    assert [m.meta.get("origin") for m in seen[-1].messages][:1] == ["summary"]


def test_a_log_that_switches_its_cache_ttl_mid_session_is_replayed_with_each_calls_ttl():
    """A Claude Code client moves between 1h and 5m writes within a session (2.1.x logs: dozens of
    1h calls, then 5m). Calls 0-1 write at 1h, call 2 writes nothing, call 3 at 5m, a sub-agent's
    call 4 at 5m (not the main context's), call 5 at 1h again: the main context switches at calls 3
    and 5. Replayed, call 3's breakpoints ask for 5m; after ten idle minutes call 4 still reads what
    the 1h writes before it left (call 2's context), not what call 3 wrote at 5m."""
    from ctxsim.strategies.recorded import ttl_switches

    def u(w1=0, w5=0):
        return tr.RecordedUsage(input=3, cache_write_1h=w1, cache_write_5m=w5, output=5)

    def turn(t, text, usage, **kw):
        return [tr.UserEvent(t=t, text=text), tr.AssistantEvent(t=t + 1, content=[tr.TextContent(text="ok")],
                                                                 usage=usage, **kw)]
    evs = [*turn(0, BIG, u(w1=100)), *turn(10, "b", u(w1=100)), *turn(20, "c", u()), *turn(30, BIG, u(w5=100)),
           tr.SubtaskStart(t=40, id="s1", description="look"),
           tr.AssistantEvent(t=41, content=[tr.TextContent(text="x")], usage=u(w5=100)),
           tr.SubtaskEnd(t=42, id="s1", conclusion="done"),
           *turn(50, "e", u(w1=100))]
    assert ttl_switches(trace(evs), "1h") == {3: "5m", 5: "1h"}
    assert ttl_switches(trace(evs), "5m") == {0: "1h", 3: "5m", 5: "1h"}
    assert ttl_switches(trace(evs[:6]), "1h") == {}

    # replayed: 1h through call 2, 5m from call 3; ten minutes idle before call 4
    evs = [*turn(0, BIG, None), *turn(10, "b", None), *turn(20, "c", None), *turn(30, BIG, None),
           *turn(631, "d", None)]
    res, seen = run(trace(evs, prefix=3000), {"ttl": "1h", "call_ttls": {3: "5m"}})
    assert [r.breakpoints[-1].ttl for r in seen] == ["1h", "1h", "1h", "5m", "5m"]
    c = res.calls
    assert c.loc[3, "cache_read"] == c.loc[2, "context_tokens"] and c.loc[3, "cache_write_5m"] > 0
    assert c.loc[4, "cache_read"] == c.loc[2, "context_tokens"]   # call 3's 5m entries are gone; call 2's 1h are not
    res, _ = run(trace(evs, prefix=3000), {"ttl": "1h"})
    assert res.calls.loc[4, "cache_read"] == res.calls.loc[3, "context_tokens"]   # all at 1h: call 3's read


def test_the_compaction_call_sends_the_thinking_setting_of_the_calls_before_it():
    """On a model sent a thinking budget the setting keys the messages' cache. Three logs of the
    population whose main calls thought (Haiku 4.5 twice, Sonnet 4.5) show their compaction call
    reading the whole context the last call wrote (83,856 of 87,037; 50,414 of 51,764; 164,075 of
    169,009): the summary request carries the same setting. The engine used to rebuild a side call
    without it, so the summary call read the system prompt alone and wrote the rest."""
    haiku = "claude-haiku-4-5"
    t = tr.validate_events(tr.Header(name="t", model=haiku, prefix_tokens=3000), [
        tr.UserEvent(t=0, text=BIG, meta={"thinking": True}),
        tr.AssistantEvent(t=1, content=[tr.ThinkingContent(thinking="hmm"), tr.TextContent(text="a")]),
        tr.UserEvent(t=2, text="more", meta={"thinking": True}),
        tr.AssistantEvent(t=3, content=[tr.TextContent(text="b")]),
        tr.CompactEvent(t=4, trigger="auto", summary="S"),
        tr.UserEvent(t=5, text="go on", meta={"thinking": True}),
        tr.AssistantEvent(t=6, content=[tr.TextContent(text="c")])])
    res, seen = run(t)
    summary = next(r for r in seen if r.kind == "summary")
    assert seen[1].thinking is True and summary.thinking is True
    c = res.calls
    assert c.loc[2, "kind"] == "summary" and c.loc[2, "cache_read"] == c.loc[1, "context_tokens"]
