"""Context the agent cleared (issue 41): a ``microcompact_boundary`` record names the tool results
Claude Code cleared; a fall of the log's context with no record is re-enacted by clearing the oldest
tool results until they hold what the log lost (harness/fidelity/drops.py)."""

from __future__ import annotations

from ctxsim.harness.importers import import_file
from ctxsim.harness.model import trace as tr
from ctxsim.harness.replay.engine import RunConfig, replay

from tests.helpers_claude_code import asst, rec, result, text, user, write

PAYLOAD = "alpha beta gamma delta " * 500   # 2,000 cl100k tokens


def _loop(tmp_path, drop_at: int | None, boundary: bool = False, calls: int = 8, lost: int = 7_000,
          heavy: int | None = None):
    """A tool loop whose recorded context grows by what came in (a 30,000-token prefix, 1.0 scale
    as the log shows it: each 2,000-token result adds ~2,010); at ``drop_at`` the log's context falls
    by 7,000 tokens more than came in and the read falls to the prefix (a drop with no record, or
    with a microcompact_boundary naming the four oldest results when ``boundary``). The result of
    call ``heavy`` grows the log's context by 3,610 tokens, not 2,010 (text denser than cl100k's)."""
    recs, ctx, t = [user(0, "go")], 30_000, 1
    for i in range(calls):
        read, write_ = (ctx - 2_010, 2_010) if i else (0, ctx)
        if i == drop_at:
            ctx -= lost
            read, write_ = 29_000, ctx - 29_000
            if boundary:
                recs.append(rec("system", t - 0.5, subtype="microcompact_boundary",
                                microcompactMetadata={"trigger": "auto", "preTokens": ctx + 7_000,
                                                      "tokensSaved": 8_000,
                                                      "compactedToolIds": ["t0", "t1", "t2", "t3"]}))
        recs.append(asst(t, f"r{i}", {"type": "tool_use", "id": f"t{i}", "name": "Read", "input": {}},
                         w5m=write_, read=read, inp=3))
        recs.append(result(t + 1, f"t{i}", PAYLOAD))
        ctx += 3_610 if i == heavy else 2_010
        t += 2
    recs.append(asst(t, "end", text("done"), w5m=10, read=ctx - 10, inp=3))
    return import_file("claude-code", write(tmp_path / "s.jsonl", recs)).trace


def _cleared(trace) -> dict[str, tuple]:
    return {e.tool_use_id: (e.meta["cleared_at_call"], e.meta.get("cleared_by")) for e in trace.events
            if isinstance(e, tr.ToolResultEvent) and "cleared_at_call" in e.meta}


def test_a_drop_with_no_record_clears_the_oldest_results_it_lost(tmp_path):
    """At call 6 the log lost 7,000 tokens beyond what came in (read at the prefix): the four
    oldest results (2,000 tokens each at scale ~1) are the fewest that hold it; the replay then
    sends them as placeholders and its context falls with the log's."""
    t = _loop(tmp_path, drop_at=6)
    assert _cleared(t) == {f"t{i}": (6, "inferred") for i in range(4)}
    assert any(n.startswith("context drops re-enacted: 1 context drop(s)") for n in t.header.notes)
    c = replay(t, "recorded", {}, RunConfig()).calls
    assert int(c.loc[6, "context_tokens"]) < int(c.loc[5, "context_tokens"]) - 5_000
    none = _loop(tmp_path, drop_at=None)
    assert _cleared(none) == {}


def test_a_microcompact_boundary_clears_the_results_it_names_at_the_next_call(tmp_path):
    """The log names what it cleared: those results, from the next call, and no drop left to infer."""
    t = _loop(tmp_path, drop_at=6, boundary=True)
    assert _cleared(t) == {f"t{i}": (6, None) for i in range(4)}
    c = replay(t, "recorded", {}, RunConfig()).calls   # 8,000 cleared, 2,010 came in
    assert int(c.loc[6, "context_tokens"]) < int(c.loc[5, "context_tokens"]) - 4_500


def test_a_sub_agents_compaction_does_not_hide_the_main_conversations_results():
    """The main conversation's drop after a sub-agent compacted its own context: the main results
    before it are still candidates (a sub-agent's compaction starts no new main conversation). One
    walk counts the compactions for the results and for the calls, so the two cannot disagree."""
    from ctxsim.harness.fidelity.drops import find_drops
    from ctxsim.harness.fidelity.recorded import recorded_calls

    def call(t, ctx, read, tool=None):
        content = [tr.ToolUseContent(id=tool, name="Read", input={})] if tool else [tr.TextContent(text="ok")]
        return tr.AssistantEvent(t=t, content=content,
                                 usage=tr.RecordedUsage(input=3, cache_read=read, cache_write_5m=ctx - read - 3))
    evs = [tr.UserEvent(t=0, text="go"),
           call(1, 30_000, 0, "t0"), tr.ToolResultEvent(t=2, tool_use_id="t0", content=PAYLOAD),
           call(3, 32_010, 30_000, "t1"), tr.ToolResultEvent(t=4, tool_use_id="t1", content=PAYLOAD),
           tr.SubtaskStart(t=5, id="a1", isolated=True), tr.UserEvent(t=5, text="look"),
           call(6, 20_000, 0), tr.CompactEvent(t=7, summary="sub summary"), call(8, 5_000, 0),
           tr.SubtaskEnd(t=9, id="a1"),
           call(10, 28_000, 25_000)]   # main: 32,010 + 2,000 expected, 28,000 seen: 6,010 lost, read at the prefix
    t = tr.validate_events(tr.Header(name="t", model="claude-opus-4-5-20251101", prefix_tokens=30_000), evs)
    calls = recorded_calls(t)
    base = {0: 0, 1: 2_000, 2: 0, 3: 0, 4: 4_000}     # the main calls' visible content (cl100k tokens)
    got = find_drops(t, calls, base, 1.0, lambda s: 2_000)
    # t1 came in at this very step: only t0 is a candidate
    assert [(d.call, d.lost, d.cleared) for d in got] == [(4, 6_010, ("t0",))]


def test_the_results_cleared_for_a_drop_are_sized_as_this_calibration_measured_them(tmp_path):
    """Result t7 grew the log's context by 3,610 tokens for 2,000 of text (a measured factor of
    ~1.8): a drop of 16,500 tokens at call 14 is held by t0-t7 (7 x ~2,010 + ~3,610), not t0-t8 as the
    text's count would have it, from the first calibration (the import) on; calibrating the
    imported trace again finds the same."""
    from ctxsim.harness.fidelity.compare import calibrate

    t = _loop(tmp_path, drop_at=14, calls=20, lost=16_500, heavy=7)
    assert _cleared(t) == {f"t{i}": (14, "inferred") for i in range(8)}
    assert _cleared(calibrate(t)) == _cleared(t)


def test_the_oldest_results_closest_to_the_loss_are_cleared_and_an_excess_carries_over():
    """Oldest first, as many as come closest to what the log lost: 2,000 + 9,000 for a loss of
    4,000 would overshoot by 7,000, so only the first (2,000 short); a later drop of 10,000 is then
    owed 12,000 and takes the 9,000 and the 2,000 after it (11,000, 1,000 short). A target already
    cleared takes nothing."""
    from ctxsim.harness.model.closest import nearest_prefix as _nearest_prefix

    sizes = [("a", 2_000.0), ("b", 9_000.0), ("c", 2_000.0), ("d", 2_000.0)]
    assert _nearest_prefix(sizes, 4_000) == (["a"], 2_000.0)
    assert _nearest_prefix(sizes[1:], 10_000 - (2_000 - 4_000)) == (["b", "c"], 11_000.0)
    assert _nearest_prefix(sizes, 6_000) == (["a"], 2_000.0)      # 4,000 short beats 5,000 over
    assert _nearest_prefix(sizes, 7_000) == (["a", "b"], 11_000.0)
    assert _nearest_prefix(sizes, 0) == ([], 0.0) and _nearest_prefix(sizes, -5) == ([], 0.0)


def test_a_drop_at_a_new_turn_of_a_model_that_strips_thinking_is_the_loss_beyond_the_thinking():
    """Sonnet 4 drops the previous turn's thinking at a new user turn; the replay's own sizes
    (``base``) leave it out already and its visible size is allowed for again (Claude 4 models
    show a summary of their thinking). A 35,000-token fall at a new turn after 1,000 tokens of
    thinking is the agent's own drop (1.0.x logs show such falls after an interrupted tool call):
    34,000 beyond the thinking, re-enacted; a fall the thinking covers is not."""
    from ctxsim.harness.fidelity.drops import find_drops
    from ctxsim.harness.fidelity.recorded import recorded_calls

    def call(t, ctx, read, tool=None, thinking=""):
        content = ([tr.ThinkingContent(thinking=thinking)] if thinking else []) + (
            [tr.ToolUseContent(id=tool, name="Read", input={})] if tool else [tr.TextContent(text="ok")])
        return tr.AssistantEvent(t=t, content=content, model="claude-sonnet-4-20250514",
                                 usage=tr.RecordedUsage(input=3, cache_read=read, cache_write_5m=ctx - read - 3))

    def session(fall):
        evs = [tr.UserEvent(t=0, text="go")]
        ctx = 30_000
        for i in range(20):
            evs.append(call(1 + 2 * i, ctx, ctx - 2_000 if i else 0, f"t{i}", thinking="hm " * 10 if i == 19 else ""))
            evs.append(tr.ToolResultEvent(t=2 + 2 * i, tool_use_id=f"t{i}", content=PAYLOAD))
            ctx += 2_000
        evs += [tr.UserEvent(t=50, text="next"), call(51, ctx - fall, 11_000)]
        return tr.validate_events(tr.Header(name="t", model="claude-sonnet-4-20250514", prefix_tokens=30_000), evs)

    base = {i: 2_000 * i for i in range(20)} | {20: 40_000}   # the strip already left out of the new turn's
    t = session(35_000)
    got = find_drops(t, recorded_calls(t), base, 1.0, lambda s: 1_000 if s.startswith("hm") else 2_000)
    assert [(d.call, d.lost) for d in got] == [(20, 35_000 - 1_000)] and len(got[0].cleared) == 17
    t = session(2_500)    # under the floors once the thinking is allowed for
    assert find_drops(t, recorded_calls(t), base, 1.0, lambda s: 1_000 if s.startswith("hm") else 2_000) == []
