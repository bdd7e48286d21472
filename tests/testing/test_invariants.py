"""The invariants as plain functions, on hand-built requests and recordings."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ctxsim.harness.model.conversation import (
    Block,
    Breakpoint,
    History,
    Message,
    Request,
    SystemPrompt,
    ToolDef,
    ToolSet,
)
from ctxsim.harness.testing.invariants import (
    INVARIANTS,
    Checker,
    InvariantViolation,
    assert_holds,
    pairing_violation,
    prefix_change,
    promises,
    split_pairs,
)
from ctxsim.harness.testing.recording import Mark, Recording, Sent
from ctxsim.strategies.append_only import AppendOnly
from ctxsim.strategies.base import Strategy

SYSTEM = SystemPrompt.of("You are a coding agent.")
TOOLS = ToolSet((ToolDef("Read"),))
ALL = frozenset(INVARIANTS)


def user(text: str) -> Message:
    return Message.user(text)


def calls(*ids: str) -> Message:
    return Message("assistant", tuple(Block.tool_use(i, "Read", {"file_path": f"/repo/{i}.py"}) for i in ids))


def results(*pairs: tuple[str, str]) -> Message:
    return Message("user", tuple(Block.tool_result(i, text) for i, text in pairs))


def read_step(tid: str, text: str, tool: str = "Read") -> list[Message]:
    """One tool call (a Read) and its result."""
    return [Message("assistant", (Block.tool_use(tid, tool, {}),)), Message("user", (Block.tool_result(tid, text),))]


def reads(texts: dict[str, str], cleared: str = "") -> list[Message]:
    """The task, then one Read step per entry of ``texts`` (in order), its result "[cleared]" for the ids in
    ``cleared``."""
    return [user("go"), *(s for i, t in texts.items() for s in read_step(i, "[cleared]" if i in cleared else t))]


def req(msgs, bps=(), rewrite=False, kind="main", tools=TOOLS, system=SYSTEM) -> Request:
    h = msgs if isinstance(msgs, History) else History(msgs)
    return Request(system, tools, h, tuple(bps), kind=kind, rewrite=rewrite)


def sent(r: Request, call: int, tokens: int = 100, window: int = 1_000) -> Sent:
    return Sent(r, tokens, window, False, "", call, float(call))


# --- pairing -----------------------------------------------------------------------------------------

def test_pairing_valid_request_has_no_complaint():
    assert pairing_violation(req([user("fix it"), calls("a", "b"), results(("a", "x"), ("b", "y"))])) == ""


def test_pairing_flags_a_result_whose_call_was_dropped():
    assert "unexpected tool_use_id" in pairing_violation(req([results(("a", "x")), user("go on")]))


def test_pairing_flags_a_call_left_unanswered_n_trans_5():
    """N-TRANS-5: a crash leaves calls open; sent as they are, the request is a 400."""
    assert "without tool_result" in pairing_violation(req([user("fix"), calls("a"), user("continue")]))


# --- stable prefix ----------------------------------------------------------------------------------

def test_prefix_unchanged_when_history_only_grows():
    h = History([user("fix it"), calls("a"), results(("a", "x"))])
    before = req(h, [Breakpoint("system"), Breakpoint(2)])
    after = req(h.append(calls("b")).append(results(("b", "y"))), [Breakpoint("system"), Breakpoint(4)])
    assert prefix_change(before, after) == ""


def test_prefix_blocks_added_after_the_breakpoint_are_not_a_change():
    """A strategy that adds a block to the last message keeps the bytes before the breakpoint (the
    breakpoint marked the end of the message's old last block)."""
    h = History([user("fix it")])
    before = req(h, [Breakpoint(0)])
    grown = Message("user", (Block.text_block("fix it"), Block.text_block("and the docs")))
    assert prefix_change(before, req(History([grown]), [Breakpoint(0)])) == ""


def test_prefix_edit_of_an_old_message_is_named():
    before = req([user("fix it"), calls("a"), results(("a", "x"))], [Breakpoint(2)])
    after = req([user("fix it now"), calls("a"), results(("a", "x")), user("more")], [Breakpoint(3)])
    change = prefix_change(before, after)
    assert "block 0 (user text) changed" in change and "'fix it'" in change


def test_prefix_tools_or_system_change_breaks_every_breakpoint():
    before = req([user("a")], [Breakpoint("tools")])
    assert prefix_change(before, req([user("a")], tools=ToolSet((ToolDef("Read"), ToolDef("Bash"))))) \
        == "the tools array changed"
    before = req([user("a")], [Breakpoint("system")])
    assert prefix_change(before, req([user("a")], system=SystemPrompt.of("other"))) == "the system prompt changed"
    # a breakpoint on the tools only does not cover the system prompt (tools come first)
    assert prefix_change(req([user("a")], [Breakpoint("tools")]), req([user("a")], system=SystemPrompt.of("x"))) == ""


def test_prefix_without_breakpoints_promises_nothing():
    assert prefix_change(req([user("a")]), req([user("b")])) == ""


def test_prefix_shorter_history_is_a_change():
    before = req([user("a"), calls("x"), results(("x", "r")), user("b")], [Breakpoint(3)])
    after = req([user("a")], [Breakpoint(0)])
    assert "holds 1 blocks where the cached prefix had 4" in prefix_change(before, after)


# --- split pairs ------------------------------------------------------------------------------------

def test_split_pairs_names_the_orphan_n_comp_7():
    """N-COMP-7: a boundary that keeps a result without its call (or the reverse) splits a pair."""
    assert split_pairs(req([results(("a", "x")), calls("b"), results(("b", "y"))])) == \
        "tool_result a kept but its tool_use dropped"
    assert split_pairs(req([user("s"), calls("a")])) == "tool_use a kept but its tool_result dropped"
    assert split_pairs(req([user("s"), calls("a"), results(("a", "x"))])) == ""


# --- the checker --------------------------------------------------------------------------------------

def checker(promised=ALL, originals=None, session_dir=None, texts=()) -> Checker:
    """``texts``: what the trace fed as user messages (held to path_back when they leave)."""
    return Checker(frozenset(promised), originals or {}, session_dir,
                   trace_digests={Block.text_block(t).digest for t in texts})


def test_checker_declared_rewrite_is_not_a_prefix_violation():
    c = checker(ALL - {"path_back"})
    a = req([user("one"), calls("a"), results(("a", "x"))], [Breakpoint(2)])
    b = req([user("summary"), results(("a", "x"))], [Breakpoint(1)], rewrite=True)
    found = c.feed([sent(a, 0), sent(b, 1)])
    # no stable_prefix (declared), but the rewrite split the pair a: boundary_pairs and pairing; and
    # the orphan result follows the summary's text in one user turn (api: tool_result not first)
    assert {v.invariant for v in found} == {"boundary_pairs", "pairing", "api"}


def test_checker_new_launch_resets_comparison_but_resume_does_not():
    a = req([user("one")], [Breakpoint(0)])
    b = req([user("two")], [Breakpoint(0)])
    assert checker(texts=["one", "two"]).feed([sent(a, 0), Mark("session_start", "s2"), sent(b, 1)]) == []
    found = checker(texts=["one", "two"]).feed([sent(a, 0), Mark("session_start", "s2", resume=True), sent(b, 1)])
    # a resumed session rebuilds the window it had: what it lost has no summary or path back
    assert [v.invariant for v in found] == ["stable_prefix", "path_back"]
    assert "(main; session s2 after resume #1)" in str(found[0])


def test_checker_resume_pairing_only_on_the_first_request_after_resume():
    bad = req([user("fix"), calls("a"), user("continue")])
    found = checker().feed([Mark("session_start", "s2", resume=True), sent(bad, 0), sent(bad, 1)])
    assert [v.invariant for v in found] == ["pairing", "resume_pairing", "pairing"]


def test_checker_window_counts_only_main_line_requests():
    c = checker()
    found = c.feed([sent(req([user("a")]), 0, tokens=1_001), sent(req([user("a")], kind="summary"), 1, tokens=5_000),
                    sent(req([user("a")]), 2, tokens=1_000)])
    # 1,001 > 1,000 is an overflow; the summary side call is not held to it; 1,000 is not over
    assert [(v.invariant, v.call) for v in found] == [("window", 0)]


def test_checker_window_excuses_the_request_after_an_injected_side_call_failure():
    summary = req([user("a")], kind="summary")
    failed = Sent(summary, 900, 1_000, True, "injected failure", 1, 1.0)
    refused = Sent(summary, 1_200, 1_000, True, "overflow: prompt is too long", 3, 3.0)
    big = req([user("a")])
    found = checker().feed([sent(big, 0), failed, sent(big, 2, tokens=1_100), refused, sent(big, 4, tokens=1_100),
                            sent(big, 5, tokens=1_100)])
    # call 2 follows an injected failure: excused; call 4 follows a refusal (the strategy's own
    # too-long summary request): not excused; call 5 follows nothing: not excused
    assert [(v.invariant, v.call) for v in found] == [("window", 4), ("window", 5)]


def test_checker_isolated_span_is_its_own_conversation():
    """A sub-agent's fresh history is not a rewrite of the parent's, whatever its kind label."""
    main = req([user("parent task")], [Breakpoint(0)])
    sub = req([user("sub-agent prompt")], [Breakpoint(0)])  # labelled main, as some strategies do
    after = req([user("parent task"), user("more")], [Breakpoint(1)])
    found = checker().feed([sent(main, 0), Mark("subtask_start", "t", isolated=True), sent(sub, 1),
                            Mark("subtask_end", "t"), sent(after, 2)])
    assert found == []


def test_checker_only_promised_invariants_are_reported():
    found = checker(promised={"pairing"}).feed([sent(req([user("a")]), 0, tokens=10**6)])
    assert found == []


def test_checker_spill_with_a_path_back_n_spill_5(tmp_path: Path):
    """N-SPILL-1/5: a replaced result must name a file holding it whole."""
    original = "line\n" * 20_000
    f = tmp_path / "tool-results" / "a.txt"
    f.parent.mkdir()
    f.write_text(original)
    c = checker(originals={"a": original}, session_dir=tmp_path)
    ok = req([user("go"), calls("a"), results(("a", f"<persisted-output>saved to {f}</persisted-output>"))])
    assert c.feed([sent(ok, 0)]) == []
    assert c.spills == {str(f): "a"}
    f.write_text(original[:1000])  # the file no longer holds it: nothing to go back to
    c2 = checker(originals={"a": original}, session_dir=tmp_path)
    assert [v.invariant for v in c2.feed([sent(ok, 0)])] == ["path_back"]


def test_checker_readback_of_a_spill_spilled_again_n_spill_3(tmp_path: Path):
    """N-SPILL-3: the result of a call that reads a spilled file back enters as it is."""
    original = "x" * 5_000
    f = tmp_path / "tool-results" / "a.txt"
    f.parent.mkdir()
    f.write_text(original)
    g = tmp_path / "tool-results" / "b.txt"
    g.write_text(original)
    c = checker(originals={"a": original, "b": original}, session_dir=tmp_path)
    first = [user("go"), calls("a"), results(("a", f"saved to {f}"))]
    back = Message("assistant", (Block.tool_use("b", "Read", {"file_path": "tool-results/a.txt"}),))
    again = req([*first, back, results(("b", f"saved to {g}"))])
    inline = req([*first, back, results(("b", original))])
    assert c.feed([sent(req(first), 0)]) == []
    assert [v.invariant for v in c.feed([sent(again, 1)])] == ["no_respill"]
    c3 = checker(originals={"a": original, "b": original}, session_dir=tmp_path)
    assert c3.feed([sent(req(first), 0), sent(inline, 1)]) == []


def _summary_call(messages, text: str, call: int) -> list:
    """A successful summary side call over ``messages`` and its answer, as the recording has them."""
    return [sent(req(messages, kind="summary"), call), Mark("side_result", "summary", text=text)]


def test_checker_dropped_messages_need_a_summary_or_a_path_back(tmp_path: Path):
    """Nothing leaves NovaCode's window without a summary or a path back (N-COMP-9/10): a summary
    of the dropped messages whose text the request holds, or a file named in the request."""
    msgs = [user("the goal is X"), calls("a"), results(("a", "r")), user("next")]
    a = req(msgs)
    cut = req([user("next")])
    summarised = req([Message.user("Summary: the user wants X done.", origin="summary"), user("next")])
    transcript = tmp_path / "t.jsonl"
    transcript.write_text('{"text": "the goal is X"}\n{"content": "r"}\n')
    pointed = req([Message.user(f"history saved at {transcript}"), user("next")])

    def c():
        return checker(promised={"path_back"}, originals={"a": "r"}, session_dir=tmp_path, texts=["the goal is X", "next"])

    assert [v.invariant for v in c().feed([sent(a, 0), sent(cut, 1)])] == ["path_back"] * 2
    assert c().feed([sent(a, 0), *_summary_call(msgs, "Summary: the user wants X done.", 1), sent(summarised, 2)]) == []
    assert c().feed([sent(a, 0), sent(pointed, 1)]) == []


def test_checker_a_message_called_summary_excuses_nothing_by_itself():
    """An origin="summary" message made without a summary of what left (a notice, or a summary
    call over something else) is no path back."""
    msgs = [user("the goal is X"), user("next")]
    tagged = req([Message.user("[2 earlier messages were dropped]", origin="summary"), user("next")])
    found = checker(promised={"path_back"}, texts=["the goal is X", "next"]).feed([sent(req(msgs), 0), sent(tagged, 1)])
    assert [v.invariant for v in found] == ["path_back"] and "'the goal is X' left the window" in found[0].detail
    # a real summary call whose answer is not in the request excuses nothing either
    found = checker(promised={"path_back"}, texts=["the goal is X", "next"]).feed(
        [sent(req(msgs), 0), *_summary_call(msgs, "Summary: the user wants X done.", 1), sent(tagged, 2)])
    assert [v.invariant for v in found] == ["path_back"]


def test_checker_text_that_never_entered_the_session_may_leave():
    """A reminder a strategy adds to one request (a date, a todo list) is not the session's: it
    leaving the next request is no loss (a false positive of the earlier kit)."""
    with_note = req([user("fix it"), Message.user("<system-reminder>Today is 2026-11-02</system-reminder>")])
    later = req([user("fix it"), calls("a"), results(("a", "r")), Message.user("<system-reminder>Today is 2026-11-03</system-reminder>")])
    assert checker(promised={"path_back"}, originals={"a": "r"}, texts=["fix it"]).feed(
        [sent(with_note, 0), sent(later, 1)]) == []


def test_checker_a_re_rendered_placeholder_whose_file_holds_the_result_is_no_loss(tmp_path: Path):
    """A strategy may re-render a placeholder (a shorter preview) in a declared rewrite: the result
    is still one read away (a false positive of the earlier kit)."""
    original = "line\n" * 5_000
    f = tmp_path / "tool-results" / "a.txt"
    f.parent.mkdir()
    f.write_text(original)
    first = req([user("go"), calls("a"), results(("a", f"<persisted-output>preview... saved to {f}</persisted-output>"))])
    again = req([user("go"), calls("a"), results(("a", f"[saved to {f}]"))], rewrite=True)
    c = checker(promised={"path_back"}, originals={"a": original}, session_dir=tmp_path, texts=["go"])
    assert c.feed([sent(first, 0), sent(again, 1)]) == []


def test_checker_a_placeholder_naming_its_file_by_bare_name_gives_no_path_back(tmp_path: Path):
    """A strategy that promises no path back is held to the one its placeholder claims: naming the
    file that holds the result by its bare name (opencode's hint without the folder) leaves the agent,
    working in the project folder, nothing it can open. A project file named bare (the source a Read
    returned) is not the strategy's claim, and the full path passes."""
    original = "line\n" * 2_000
    saved = tmp_path / "tool-output" / "toolu_7.txt"
    saved.parent.mkdir()
    saved.write_text(original)
    source = tmp_path / "project" / "src" / "module.py"
    source.parent.mkdir(parents=True)
    source.write_text(original)

    def sent_with(text):
        c = checker(promised=ALL - {"path_back"}, originals={"a": original}, session_dir=tmp_path, texts=["go"])
        return c.feed([sent(req([user("go"), calls("a"), results(("a", text))]), 0)])

    found = sent_with("line\nline\n...output truncated; the full output is in toolu_7.txt")
    assert [v.invariant for v in found] == ["path_back"]
    assert "by its bare name 'toolu_7.txt'" in found[0].detail and str(saved) in found[0].detail
    assert sent_with(f"line\n...output truncated; the full output is in {saved}") == []
    assert sent_with("[Old tool result content cleared: a read of module.py]") == []


def test_checker_a_placeholder_in_the_window_needs_its_file_for_as_long_as_it_is_there(tmp_path: Path):
    """N-SPILL-1/5 hold for as long as the placeholder is in the window: a file overwritten by a
    later spill (a counter reset per launch) or deleted at exit breaks the path back."""
    original = "line\n" * 5_000
    f = tmp_path / "tool-results" / "result-1.txt"
    f.parent.mkdir()
    f.write_text(original)
    msgs = [user("go"), calls("a"), results(("a", f"<persisted-output>saved to {f}</persisted-output>"))]
    c = checker(promised={"path_back"}, originals={"a": original}, session_dir=tmp_path, texts=["go"])
    assert c.feed([sent(req(msgs), 0)]) == []
    f.write_text("another result")
    found = c.feed([Mark("session_start", "s2", resume=True), sent(req([*msgs, user("continue")]), 1)])
    assert [v.invariant for v in found] == ["path_back"]
    assert "no longer holds the result: it was overwritten" in found[0].detail and "after resume #1" in str(found[0])
    f.unlink()
    c2 = checker(promised={"path_back"}, originals={"a": original}, session_dir=tmp_path, texts=["go"])
    f.write_text(original)
    c2.feed([sent(req(msgs), 0)])
    f.unlink()
    assert "it is gone" in c2.feed([sent(req([*msgs, user("more")]), 1)])[0].detail


def test_promises_follow_the_class_claims():
    assert "window" not in promises(AppendOnly)

    class Claims(Strategy):
        name = "claims"
        manages_window = True
        keeps_path_back = True

    assert {"window", "path_back", "goal"} <= promises(Claims)
    assert promises(AppendOnly) == set(INVARIANTS) - {"window", "path_back", "goal", "latest_request", "user_messages",
                                                      "replaced_once"}

    class GoalOnly(AppendOnly):
        keeps_goal = True

    assert "goal" in promises(GoalOnly) and "path_back" not in promises(GoalOnly)

    class InHand(AppendOnly):
        keeps_latest_request = True

    assert promises(InHand) - promises(AppendOnly) == {"latest_request"}


def test_assert_holds_raises_with_every_violation():
    rec = Recording(AppendOnly, [sent(req([results(("a", "x"))]), 0)])
    try:
        assert_holds(rec)
    except InvariantViolation as e:
        assert [v.invariant for v in e.violations] == ["pairing"]
        assert "[pairing] request 0 (main)" in str(e)
    else:
        raise AssertionError("a pairing violation was not raised")


# --- the invariants added with the mutant corpus -------------------------------------------------------

def test_checker_is_error_is_kept():
    c = Checker(ALL, {"a": "boom"}, errors={"a": True})
    lost = req([user("go"), calls("a"), results(("a", "boom"))])  # results() makes is_error=False
    found = c.feed([sent(lost, 0)])
    assert [v.detail for v in found if v.invariant == "is_error"] == [
        "tool_result a sent with is_error=False; the tool returned it with is_error=True"]
    kept = req([user("go"), calls("a"), Message("user", (Block.tool_result("a", "boom", is_error=True),))])
    assert Checker(ALL, {"a": "boom"}, errors={"a": True}).feed([sent(kept, 0)]) == []


def test_checker_estimate_far_from_the_truth():
    """Judged on requests of at least a quarter of the window, within a factor of 1.6 either way."""
    def est(e, tokens):
        r = Request(SYSTEM, TOOLS, History([user("go")]), estimated_tokens=e)
        return [v.detail for v in checker().feed([sent(r, 0, tokens=tokens, window=1_000)]) if v.invariant == "estimate"]

    assert est(400, 250) == []             # 1.6 × 250 = 400: allowed
    assert est(401, 250) == ["the strategy estimated 401 tokens, the API counts 250 (+60%; a factor of 1.6 either way is allowed)"]
    assert est(156, 250) != [] and est(157, 250) == []  # 250 / 1.6 = 156.25
    assert est(10, 100) == []              # under a quarter of the window, off by less than an eighth: not judged
    # under a quarter, but off by an eighth of the window or more (issue #45: a saving taken off in
    # characters, a sub-agent's usage kept by the parent): judged
    assert est(10, 249) == ["the strategy estimated 10 tokens, the API counts 249 (-96%; a factor of 1.6 either way is allowed)"]
    assert est(0, 124) == [] and est(0, 125) != []
    assert est(None, 900) == []            # no estimate claimed


def test_checker_a_rewrite_declared_twice_in_a_row_with_nothing_rewritten():
    h = History([user("go")])
    reqs = [req(h, [Breakpoint(0)])]
    for k in range(3):
        h = h.append(calls(f"c{k}")).append(results((f"c{k}", "ok")))
        reqs.append(req(h, [Breakpoint(len(h) - 1)], rewrite=True))
    found = checker().feed([sent(r, i) for i, r in enumerate(reqs)])
    # the first false declaration is let go (a compaction may drop only what was never sent)
    assert [(v.invariant, v.call) for v in found] == [("false_rewrite", 2), ("false_rewrite", 3)]
    assert found[0].detail == "declares a rewrite, but only appends to request 1 (2 such requests in a row)"
    # the first request of a launch is not judged; an identical request is not either
    c = checker()
    assert c.feed([sent(reqs[0], 0), Mark("session_start", "s2", resume=True), sent(reqs[1], 1), sent(reqs[2], 2)]) == []


def test_checker_tools_compared_by_value():
    """A schema edited in place keeps the ToolSet's memoised digest: the value is what is sent."""
    schema = {"type": "object"}
    tools = ToolSet((ToolDef("Read", "", schema),))
    a = req([user("go")], [Breakpoint("tools")], tools=tools)
    first = Sent(a, 100, 1_000, False, "", 0, 0.0, '[{"name": "Read"}]')
    later = Sent(a, 100, 1_000, False, "", 1, 1.0, '[{"name": "Read", "cache_control": {}}]')
    found = checker().feed([first, later])
    assert [(v.invariant, v.detail) for v in found] == [("stable_prefix", "undeclared change since request 0: the tools array changed")]


# --- a refused request and the strategy's reaction (interface 1 of #15) ----------------------------

def _over(call, tokens=1_200, est=None):
    r = Request(SYSTEM, TOOLS, History([user("go")]), estimated_tokens=est)
    return Sent(r, tokens, 1_000, True, "overflow: prompt is too long", call, float(call))


def _window(entries):
    return [v.detail for v in checker(promised={"window"}).feed(entries)]


def test_window_a_recovered_overflow_it_could_not_foresee_is_no_defect():
    assert _window([_over(0, est=800), Mark("on_rejected", "overflow", retried=True), sent(req([user("go")]), 1)]) == []


def test_window_giving_up_on_an_overflow_is_the_defect():
    assert _window([_over(0, est=800), Mark("on_rejected", "overflow", retried=False)]) == [
        "1,200 tokens > window 1,000 (its estimate, 800, was under it) and it gave up (on_rejected returned "
        "False): the session ends there"]
    # the attempts ran out: the engine asks no more (no mark after the last refused request)
    assert _window([_over(0), Mark("on_rejected", "overflow", retried=True), _over(1)]) == [
        "1,200 tokens > window 1,000 and it was still over after 2 attempt(s): the session ends there"]


def test_window_sending_what_it_knew_was_too_long_is_a_defect_even_when_it_recovers():
    assert _window([_over(0, est=1_100), Mark("on_rejected", "overflow", retried=True), sent(req([user("go")]), 1)]) == [
        "1,200 tokens > window 1,000 (its estimate, 1,100, was over it): it sent a request it knew was too long "
        "(it recovered on retry)"]


def test_window_names_a_summary_request_refused_as_too_long():
    summary = Sent(req([user("go")], kind="summary"), 1_300, 1_000, True, "overflow: prompt is too long", 1, 1.0)
    (line,) = _window([_over(0, est=1_100), summary, Mark("on_rejected", "overflow", retried=False)])
    assert line.endswith("and it gave up (on_rejected returned False): the session ends there; its summary "
                         "request was refused as too long")


def test_window_a_failed_side_call_before_the_request_does_not_excuse_a_reaction_that_does_not_try():
    failed = Sent(req([user("go")], kind="summary"), 900, 1_000, True, "injected failure", 0, 0.0)
    assert _window([failed, _over(0, est=800), Mark("on_rejected", "overflow", retried=False)]) == [
        "1,200 tokens > window 1,000 (its estimate, 800, was under it) and it gave up (on_rejected returned "
        "False): the session ends there"]
    # its reaction tried (a summary) and that call failed by injection: excused
    again = Sent(req([user("go")], kind="summary"), 900, 1_000, True, "injected failure", 0, 0.0)
    assert _window([failed, _over(0, est=800), again, Mark("on_rejected", "overflow", retried=False)]) == []
    # sending it right after the failed call is excused too (it recovered)
    assert _window([failed, _over(0, est=1_100), Mark("on_rejected", "overflow", retried=True), sent(req([user("go")]), 1)]) == []


def test_window_names_a_give_up_after_a_summary_its_reaction_made():
    made = Sent(req([user("go")], kind="summary"), 900, 1_000, False, "", 0, 0.0)
    (line,) = _window([_over(0, est=800), made, Mark("on_rejected", "overflow", retried=False)])
    assert line.endswith("and it gave up (on_rejected returned False): the session ends there; after a summary "
                         "made in its reaction")


# --- goal --------------------------------------------------------------------------------------------

def _goal_checker():
    c = Checker(frozenset({"goal", "path_back"}), {}, goals={"s1": "fix the flaky login test"})
    c.feed([Mark("session_start", "s1")])
    return c


def test_goal_dropped_at_a_rewrite_is_reported_once():
    c = _goal_checker()
    first = [user("fix the flaky login test"), Message("assistant", (Block.text_block("on it"),))]
    assert c.feed([sent(req(first), 0)]) == []
    out = c.feed([sent(req([user("[earlier turns dropped]"), user("go on")], rewrite=True), 1)])
    assert [v.invariant for v in out] == ["goal"]
    assert "'fix the flaky login test'" in out[0].detail
    assert c.feed([sent(req([user("[earlier turns dropped]"), user("go on"), user("more")], rewrite=True), 2)]) == []


def test_goal_kept_verbatim_or_in_a_summary_that_saw_it():
    c = _goal_checker()
    first = [user("fix the flaky login test"), Message("assistant", (Block.text_block("on it"),))]
    c.feed([sent(req(first), 0)])
    summary_req = req([*first, user("summarise")], kind="summary")
    c.feed([sent(summary_req, 1), Mark("side_result", "summary", text="The user wants the login test fixed.")])
    after = [user("<summary>The user wants the login test fixed.</summary>"), user("go on")]
    assert c.feed([sent(req(after, rewrite=True), 2)]) == []
    # a second compaction whose summary saw only the first summary still carries the goal
    c.feed([sent(req([*after, user("summarise")], kind="summary"), 3),
            Mark("side_result", "summary", text="Summary two: still the login test.")])
    assert c.feed([sent(req([user("Summary two: still the login test."), user("next")], rewrite=True), 4)]) == []


def test_goal_summary_that_never_saw_it_does_not_count():
    c = _goal_checker()
    first = [user("fix the flaky login test"), Message("assistant", (Block.text_block("on it"),))]
    c.feed([sent(req(first), 0)])
    c.feed([sent(req([user("(task in transcript)"), first[1], user("summarise")], kind="summary"), 1),
            Mark("side_result", "summary", text="Work continues on something.")])
    out = c.feed([sent(req([user("Work continues on something."), user("go on")], rewrite=True), 2)])
    assert [v.invariant for v in out] == ["goal"]


# --- latest_request ------------------------------------------------------------------------------------

def test_latest_request_kept_as_written_and_lost_otherwise():
    """A strategy declaring keeps_latest_request (goose re-sends the user's latest message after a
    compaction, Codex keeps the newest user messages) holds the latest one as the user wrote it (its
    first 200 characters: a budget cut keeps that) after every rewrite. A summary of it is not the
    promise; a rewrite re-sending the first request instead is reported, once per conversation. A
    sub-agent's prompt is not the user's request."""
    c = Checker(frozenset({"latest_request"}), {})
    c.feed([Mark("session_start", "s1"), Mark("user", text="fix the flaky login test")])
    first = [user("fix the flaky login test"), Message("assistant", (Block.text_block("on it"),))]
    c.feed([sent(req(first), 0), Mark("subtask_start", "t1", isolated=True), Mark("user", text="look around"),
            Mark("subtask_end", "t1"), Mark("user", text="now make the retry limit configurable " + "x" * 300)])
    kept = [user("<summary>done with login</summary>"), user("now make the retry limit configurable " + "x" * 170)]
    assert c.feed([sent(req(kept, rewrite=True), 1)]) == []
    wrong = [user("<summary>make the retry limit configurable</summary>"), user("fix the flaky login test")]
    out = c.feed([sent(req(wrong, rewrite=True), 2)])
    assert [v.invariant for v in out] == ["latest_request"]
    assert "'now make the retry limit configurable xxx" in out[0].detail
    assert c.feed([sent(req([*wrong, user("more")], rewrite=True), 3)]) == []


# --- result_limit -------------------------------------------------------------------------------------

def test_result_limit_counts_in_the_declared_unit():
    """truncate declares 10 KiB and 256 lines (codex-rs MODEL_FORMAT_MAX_*). Here 100 bytes and 5 lines,
    with a cut's notices allowed 64 bytes and 8 lines: 160 ASCII characters pass (160 bytes ≤ 164); 60
    three-byte characters are 60 characters but 180 bytes, reported once; 14 lines (> 13) are reported."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.truncate import Truncate

    assert declared(Truncate, {}).result_limits == ((10_240, "bytes"), (256, "lines"))
    c = Checker(frozenset({"result_limit"}), {}, declared=Declared(result_limits=((100, "bytes"), (5, "lines"))))

    def call(tid):
        return Message("assistant", (Block.tool_use(tid, "Read", {}),))

    def result(tid, text):
        return Message("user", (Block.tool_result(tid, text),))

    msgs = [user("go"), call("a"), result("a", "x" * 160)]
    assert c.feed([sent(req(msgs), 0)]) == []
    msgs += [call("b"), result("b", "结" * 60)]
    out = c.feed([sent(req(msgs), 1)])
    assert [v.invariant for v in out] == ["result_limit"] and "sent at 180 bytes, over the 100 bytes" in out[0].detail
    msgs += [call("c"), result("c", "l\n" * 13)]
    assert c.feed([sent(req(msgs), 2)]) == []
    msgs += [call("d"), result("d", "l\n" * 14)]
    out = c.feed([sent(req(msgs), 3)])
    assert [v.invariant for v in out] == ["result_limit"] and "sent at 14 lines, over the 5 lines" in out[0].detail


def test_result_limit_a_result_that_fits_enters_whole():
    """Declared 100 bytes and 5 lines: a result of 80 bytes on one line fits and enters cut to 40, reported
    (a budget counted in another unit cuts below the declared size); one of 200 bytes cut to 90 is a cut
    the limit asks for; a result cleared later (the same id sent shorter again) is no cut on entry. Codex
    declares its middle cut at tool_output_tokens x chars_per_token characters."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.codex import Codex

    assert declared(Codex, {"tool_output_tokens": 100, "chars_per_token": 4.0}).result_limits == ((400, "chars"),)
    assert declared(Codex, {"tool_output": "bytes_lines"}).result_limits == ((10_240, "bytes"), (256, "lines"))
    originals = {"a": "x" * 80, "b": "y" * 200}
    c = Checker(frozenset({"result_limit"}), originals, declared=Declared(result_limits=((100, "bytes"), (5, "lines"))))

    out = c.feed([sent(req([user("go"), *read_step("a", "x" * 40)]), 0)])
    assert [v.invariant for v in out] == ["result_limit"]
    assert "entered changed ('" + "x" * 40 + "') though it was within the limits the strategy declares " \
           "(80 bytes and 1 lines; result_limits)" in out[0].detail
    msgs = [user("go"), *read_step("a", "x" * 40), *read_step("b", "y" * 90)]
    assert c.feed([sent(req(msgs), 1)]) == []
    c = Checker(frozenset({"result_limit"}), originals, declared=Declared(result_limits=((100, "bytes"), (5, "lines"))))
    assert c.feed([sent(req([user("go"), *read_step("a", "x" * 80)]), 0)]) == []
    assert c.feed([sent(req([user("go"), *read_step("a", "[cleared]")], rewrite=True), 1)]) == []


def test_result_limit_kept_whole_within_the_room_the_window_had_left():
    """gemini-cli 0.56 cuts shell output past min(40,000, 4 x (window - the last prompt's tokens)) characters.
    Declared (1,000, 4, Bash): after a request of 800 tokens in a window of 1,000, 200 tokens are left, 800
    characters. A Bash result of 700 characters entering cut is reported; one of 900 may be cut; a Read result of 700
    is not judged (not a declared tool); at a launch's first request the room is not known: not judged. Release
    2025-12 cuts every tool's output past the static threshold: (40,000, None, None)."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.gemini_cli import GeminiCli

    d = declared(GeminiCli, {"truncate_threshold_chars": 40_000})
    assert d.whole_left[:2] == (40_000, 4.0) and "Bash" in d.whole_left[2] and "run_shell_command" in d.whole_left[2]
    assert declared(GeminiCli, {"release": "2025-12", "truncate_threshold_chars": 40_000}).whole_left == (40_000, None, None)
    texts = {"a": "a" * 700, "b": "b" * 900, "c": "c" * 700}

    def run(tid: str, tool: str, first: int | None = 800) -> list[str]:
        c = Checker(frozenset({"result_limit"}), texts, declared=Declared(whole_left=(1_000, 4.0, ("Bash",))))
        if first is not None:
            assert c.feed([sent(req([user("go")]), 0, tokens=first)]) == []
        return [v.detail for v in c.feed([sent(req([user("go"), *read_step(tid, "[cut]", tool)]), 1, tokens=900)])]

    assert run("a", "Bash") == ["tool_result a (Bash, 700 characters) entered changed ('[cut]'), though within the 800 the "
                                "strategy declares it keeps whole (the least of 1,000 and 4 a token of the 200 tokens the "
                                "window had left after the last request's 800) (keeps_results_whole_left: a threshold "
                                "converted the wrong way?)"]
    assert run("b", "Bash") == [] and run("c", "Read") == [] and run("a", "Bash", first=None) == []


# --- recent_kept --------------------------------------------------------------------------------------

def clear_a_then_b(declared, texts: dict[str, str]) -> list:
    """Reads a, b, c sent whole; then a cleared (passes); then a and b cleared: what that request is reported
    for (returned); the same again with one more message is not reported twice."""
    c = Checker(frozenset({"recent_kept"}), {}, declared=declared)
    assert c.feed([sent(req(reads(texts)), 0)]) == []
    assert c.feed([sent(req(reads(texts, "a"), rewrite=True), 1)]) == []
    out = c.feed([sent(req(reads(texts, "ab"), rewrite=True), 2)])
    assert c.feed([sent(req([*reads(texts, "ab"), user("more")], rewrite=True), 3)]) == []
    return out


def test_recent_kept_holds_the_newest_declared_tool_uses_as_they_entered():
    """context_editing declares keep (3 by default): the newest 3 tool uses are never cleared. Here 2:
    clearing the oldest of three passes; clearing the second newest is reported, once."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.context_editing import ContextEditing

    assert declared(ContextEditing, {}).recent_kept == 3
    assert declared(ContextEditing, {"keep_tool_uses": 5}).recent_kept == 5
    out = clear_a_then_b(Declared(recent_kept=2), {"a": "A" * 50, "b": "B" * 50, "c": "C" * 50})
    assert [v.invariant for v in out] == ["recent_kept"] and "tool use b, one of the newest 2" in out[0].detail


def test_recent_kept_holds_the_declared_characters_of_the_newest_output():
    """opencode declares its prune protection in characters (4 per estimated token). Here 100: walking back
    from the newest result, c (30 characters, +4 for a rounded estimate: 34) and b (68) are within it, a
    (132) is not. Clearing a passes; clearing b is reported, once, naming how far back it stands."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.opencode import OpenCode

    assert declared(OpenCode, {"prune_protect_tokens": 6_400}).recent_chars == 25_600
    # gemini-cli: the smaller of its masking protection and its compression budget, 4 a token, a tenth off for the
    # tool names masking counts too: min(8,000, 10,000) x 4 x 0.9 = 28,800 (its release 2025-12 masks nothing)
    from ctxsim.strategies.gemini_cli import GeminiCli

    assert declared(GeminiCli, {"protection_threshold_tokens": 8_000, "function_response_token_budget": 10_000}).recent_chars == 28_800
    assert declared(GeminiCli, {"protection_threshold_tokens": 8_000, "function_response_token_budget": 10_000,
                                "release": "2025-12"}).recent_chars == 36_000
    out = clear_a_then_b(Declared(recent_chars=100), {"a": "A" * 60, "b": "B" * 30, "c": "C" * 30})
    assert [v.invariant for v in out] == ["recent_kept"] and "tool use b, within the newest 100 characters" in out[0].detail
    assert "68 from the newest through it" in out[0].detail


def test_recent_kept_holds_the_newest_declared_reads_as_they_entered():
    """on_demand_reading declares its newest keep_recent_reads reads (of its read tools, of min_pointer_chars or
    more) never become pointers. Here 1 read of 40 characters or more: b (50) is the newest such, c (20) is under
    the least. Replacing a passes; replacing a and b is reported, once. The same requests with the promise on
    another tool pass; with any tool (elide_all_results) b is still the newest of 40 or more."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.on_demand_reading import OnDemandReading

    assert declared(OnDemandReading, {}).recent_reads == (2, ("Read", "NotebookRead", "read_file", "view", "open_file"), 1_000)
    assert declared(OnDemandReading, {"elide_all_results": True, "keep_recent_reads": 3}).recent_reads == (3, None, 1_000)
    assert declared(OnDemandReading, {"keep_recent_reads": 0}).recent_reads[0] == 0   # the reads it tracks, none kept
    texts = {"a": "A" * 50, "b": "B" * 50, "c": "C" * 20}
    out = clear_a_then_b(Declared(recent_reads=(1, ("Read",), 40)), texts)
    assert [v.invariant for v in out] == ["recent_kept"]
    assert "tool use b, one of the newest 1 results of Read of 40 characters or more" in out[0].detail
    assert clear_a_then_b(Declared(recent_reads=(1, ("Grep",), 40)), texts) == []
    assert len(clear_a_then_b(Declared(recent_reads=(1, None, 40)), texts)) == 1
    # the reaction to a refused request may cut what it keeps (its window fallback's tail): not judged, nor later
    c = Checker(frozenset({"recent_kept"}), {}, declared=Declared(recent_reads=(1, ("Read",), 40)))
    assert c.feed([sent(req(reads(texts)), 0)]) == []
    assert c.feed([Sent(req(reads(texts)), 2_000, 1_000, True, "too long", 1, 1.0)]) == []
    assert c.feed([sent(req(reads(texts, "b"), rewrite=True), 2), sent(req(reads(texts, "b"), rewrite=True), 3)]) == []


def test_recent_kept_a_round_of_replaced_reads_leaves_the_rest_within_the_declared_tokens():
    """on_demand_reading replaces its oldest reads until the inline ones fit keep_read_tokens (replaces_reads_to), all
    but the newest keep_recent_reads if need be. Reads a, b, c of 100 characters; keep 1. The request that replaces a
    is 344 characters (system and tools 112, "go" 2, three calls of 7, "[cleared]" 9, b and c 200) estimated at 344
    tokens: one a character, so b and c whole come to 200. Declared 100: past 160 (a factor of 1.6): reported, b older
    than the newest kept. Declared 150 (240): held. Replacing a and b leaves only the newest whole: not judged so, but
    held to having needed b."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.on_demand_reading import OnDemandReading

    assert declared(OnDemandReading, {}).reads_to == 10_000 and declared(OnDemandReading, {"keep_recent_reads": 0}).reads_to == 10_000
    texts = {"a": "A" * 100, "b": "B" * 100, "c": "C" * 100}

    def run(reads_to: int, cleared: str) -> list:
        c = Checker(frozenset({"recent_kept"}), {}, declared=Declared(recent_reads=(1, ("Read",), 40), reads_to=reads_to))
        assert c.feed([sent(req(reads(texts)), 0)]) == []
        r = dataclasses.replace(req(reads(texts, cleared), rewrite=True), estimated_tokens=344)
        return [v.detail for v in c.feed([sent(r, 1)])]

    out = run(100, "a")
    assert out == ["the request replaced 1 read(s) and sends 2 whole, about 200 tokens as the strategy estimates (of b on, "
                   "1 older than the newest it keeps), past the 100 the strategy declares a replacement leaves "
                   "(replaces_reads_to; a factor of 1.6 allowed): reads it took as replaced still whole (one per message?)"]
    assert run(150, "a") == [] and run(100, "ab") == []
    # the other way: before the round took b (the newest it replaced), what was left, b and c, was 200 characters; the
    # request replacing both is 253 characters (112 + 2 + 21 + two "[cleared]" 18 + c 100) estimated at 344: 1.36 a
    # character, 272 tokens. Declared 300, within it by the 1.1 allowed for the strategy's rate (299): it replaced more
    # than it needed; declared 290: held
    assert run(300, "ab") == ["the request replaced 2 read(s), the newest b, and sends 1 whole: those and it come to "
                              "about 272 tokens as the strategy estimates, within the 300 the strategy declares a "
                              "replacement leaves (replaces_reads_to; 1.1 times allowed for its rate): the round went on "
                              "past its budget (what it took never counted down?)"]
    assert run(290, "ab") == []
    # and the oldest first: replacing b while a, older and not the newest kept, goes whole is reported
    assert run(1_000, "b") == ["the request replaced 1 read(s), the newest b, and sends a, older and not among the newest "
                               "1 it keeps, whole: the strategy declares a round replaces the oldest (replaces_reads_to: "
                               "the reads walked newest first, or some it took left whole?)"]
    # the reaction to a refused request may cut reads (its window fallback): noted, not judged, nor at the next request
    c = Checker(frozenset({"recent_kept"}), {}, declared=Declared(recent_reads=(1, ("Read",), 40), reads_to=100))
    assert c.feed([sent(req(reads(texts)), 0), Sent(req(reads(texts)), 2_000, 1_000, True, "too long", 1, 1.0)]) == []
    cut = dataclasses.replace(req(reads(texts, "a"), rewrite=True), estimated_tokens=344)
    assert c.feed([sent(cut, 2), sent(cut, 3)]) == []


def test_recent_kept_a_clearing_takes_every_older_result_where_declared():
    """context_editing declares its clearings take every result older than the newest keep tool uses (its
    excluded tools apart). keep 1: the request that clears a and b passes; one that clears only a (b, older
    than the newest tool use, whole) is reported; a request that clears nothing new is not judged."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.context_editing import ContextEditing

    assert declared(ContextEditing, {"exclude_tools": "Grep"}).clears_all_but == ("Grep",)
    texts = {"a": "A" * 80, "b": "B" * 80, "c": "C" * 80}   # more than a placeholder: clearing one frees something
    def run(*cleared: str) -> list:
        c = Checker(frozenset({"recent_kept"}), texts, declared=Declared(recent_kept=1, clears_all_but=()))
        c.feed([sent(req(reads(texts)), 0)])
        return c.feed([sent(req(reads(texts, "".join(cleared)), rewrite=True), 1)])

    assert run("a", "b") == []
    out = run("a")
    assert [v.invariant for v in out] == ["recent_kept"] and "of tool use b on" in out[0].detail
    assert run() == []
    # SWE-agent's masking (polling 1) declares it too; it counts results where they stand: calls a b c answered
    # c b a in one message, keep 1: a is the newest result as it stands, so clearing c and b alone passes
    from ctxsim.strategies.observation_masking import ObservationMasking

    assert declared(ObservationMasking, {}).clears_all_but == () and declared(ObservationMasking, {"polling": 2}).clears_all_but is None
    ask = Message("assistant", tuple(Block.tool_use(t, "Read", {}) for t in "abc"))
    c = Checker(frozenset({"recent_kept"}), texts, declared=Declared(recent_kept=1, clears_all_but=()))
    answered = Message("user", tuple(Block.tool_result(t, texts[t]) for t in "cba"))
    assert c.feed([sent(req([user("go"), ask, answered]), 0)]) == []
    masked = Message("user", tuple(Block.tool_result(t, "[x]" if t != "a" else texts[t]) for t in "cba"))
    assert c.feed([sent(req([user("go"), ask, masked], rewrite=True), 1)]) == []


def test_recent_kept_a_prune_takes_every_result_beyond_its_turns_and_its_budget_where_declared():
    """opencode's prune (clears_all_beyond) leaves the last two turns (three as the kit counts, the prune made as the
    next one opens) and the newest prune_protect_tokens of output before them (4 characters a token), skill apart.
    Declared here (2 turns, 150 characters): [go, z, a, b, next, c, more], each result 100 characters; the
    request that newly clears z walks back from 'next' (the second newest typed): b (0 before it), a (100), then z
    (replaced: the walk stops). Within 150 nothing is reported; within 50, a goes whole with 100 characters of
    whole output between it and those turns: reported. A request that clears nothing new is not judged; a summary
    stops the walk as a replaced result does."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.opencode import OpenCode

    assert declared(OpenCode, {"prune_protect_tokens": 6_400}).clears_beyond == (3, 25_600, ("skill",))
    assert declared(OpenCode, {"prune": False}).clears_beyond is None
    texts = {t: t.upper() * 100 for t in "zabc"}

    def convo(cleared: str, head: list[Message] = ()) -> list[Message]:
        steps = {t: read_step(t, "[cleared]" if t in cleared else texts[t]) for t in texts}
        return [*head, user("go"), *steps["z"], *steps["a"], *steps["b"], user("next"), *steps["c"], user("more")]

    def run(chars: int, cleared: str = "z", head: list[Message] = ()) -> list[str]:
        c = Checker(frozenset({"recent_kept"}), texts, declared=Declared(clears_beyond=(2, chars, ())))
        c.feed([sent(req(convo("", head)), 0)])
        return [v.detail for v in c.feed([sent(req(convo(cleared, head), rewrite=True), 1)])]

    assert run(150) == []
    out = run(50)
    assert len(out) == 1 and out[0].startswith("1 result(s) older than the newest 2 user turns and than the newest 50 "
                                               "characters of tool output before them sent whole at a request that "
                                               "clears others (tool use a, with 100 characters of whole output")
    assert run(50, cleared="") == []
    summary = Message.user("Summary: the task so far.", origin="summary")
    assert len(run(50, cleared="zc", head=[summary])) == 1   # the walk ends before reaching the summary anyway


def test_compaction_trigger_a_clearing_trigger_is_judged_on_the_whole_prompt():
    """context_editing declares the API's trigger (per_request: every request past it clears all but the newest
    keep), judged on the whole prompt, each result as it entered. Results of 281 tokens each ("the cat sat on the
    mat. " x 40: 7 tokens a sentence and the last space); the placeholder "[cleared]" is 4. Declared trigger 900,
    keep 1; judged past 1,350 (CLEAR_TRIGGER_SLACK 1.5).
    * a request of 1,100 tokens sending a cleared, b c d whole: whole prompt 1,100 + 281 - 4 = 1,377, past it,
      and b and c (older than d) go whole: reported; with b and c cleared too, nothing;
    * the same at the strategy's own estimate of 935 for those 1,100: it sees 1,170 (1,377 x 0.85), not past;
    * a request of 300 tokens that newly clears: not judged."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.harness.testing.invariants import CLEAR_TRIGGER_SLACK
    from ctxsim.strategies.context_editing import ContextEditing

    assert CLEAR_TRIGGER_SLACK == 1.5
    assert declared(ContextEditing, {"trigger_input_tokens": 5000}).clears_above == 5000
    assert declared(ContextEditing, {"mode": "episodic"}).clears_above is None
    assert declared(ContextEditing, {"clear_at_least": 100, "clear_at_least_scope": "per_clearing"}).clears_above is None
    body = "the cat sat on the mat. " * 40
    texts = dict.fromkeys("abcd", body)

    def msgs(ids: str, cleared: str) -> list[Message]:
        return reads({i: body for i in ids}, cleared)

    def run(cleared: str, tokens: int, estimate: int | None = None) -> list:
        c = Checker(frozenset({"compaction_trigger"}), texts, declared=Declared(recent_kept=1, clears_all_but=(),
                                                                                 clears_above=900))
        assert c.feed([sent(req(msgs("abc", "")), 0, tokens=900)]) == []
        r = req(msgs("abcd", cleared), rewrite=True)
        if estimate is not None:
            r = Request(r.system, r.tools, r.messages, r.breakpoints, kind=r.kind, rewrite=True, estimated_tokens=estimate)
        return c.feed([sent(r, 1, tokens=tokens)])

    out = run("a", 1100)
    assert [v.invariant for v in out] == ["compaction_trigger"]
    assert "the whole prompt is 1,377 tokens" in out[0].detail and "2 older result(s) go whole (of tool use b on)" in out[0].detail
    assert run("abc", 1100 - 2 * 277) == []
    assert run("a", 1100, estimate=935) == []
    # not judged the other way: a clearing under the trigger (the estimate of a request that clears is no measure
    # of the whole prompt: a correct twin was reported so)
    c = Checker(frozenset({"compaction_trigger"}), texts, declared=Declared(recent_kept=1, clears_all_but=(), clears_above=1000))
    assert c.feed([sent(req(msgs("ab", "")), 0, tokens=300)]) == []
    assert c.feed([sent(req(msgs("ab", "a"), rewrite=True), 1, tokens=23)]) == []


def test_superseded_a_replaced_read_needs_a_later_read_of_its_file_that_goes():
    """sliding_window replaces every read of a file but the latest by Cline's notice (supersedes_reads). Reads of
    one file by relative and absolute path, t1 then t2, and a Grep on it (t3, another tool) after both:
    t1 replaced and t2 whole passes; t2 replaced and t1 whole is reported (the newest read gone, the stale one
    kept), as is t1 replaced with only the Grep after it."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.sliding_window import DUPLICATE_READ_NOTICE, SlidingWindow

    assert declared(SlidingWindow, {}).superseded == DUPLICATE_READ_NOTICE
    assert declared(SlidingWindow, {"duplicate_file_reads": False}).superseded is None
    texts = {"t1": "v1 " * 30, "t2": "v2 " * 30, "t3": "a.py:1: v2"}

    def step(i: str, path: str, replaced: bool, tool: str = "Read") -> list[Message]:
        return [Message("assistant", (Block.tool_use(i, tool, {"file_path" if tool == "Read" else "path": path}),)),
                Message("user", (Block.tool_result(i, DUPLICATE_READ_NOTICE if replaced else texts[i]),))]

    def run(*steps) -> list:
        c = Checker(frozenset({"superseded"}), texts, declared=Declared(superseded=DUPLICATE_READ_NOTICE))
        return c.feed([sent(req([user("go"), *(m for s in steps for m in s)]), 0)])

    assert run(step("t1", "src/a.py", True), step("t2", "/repo/src/a.py", False), step("t3", "src/a.py", False, "Grep")) == []
    out = run(step("t1", "src/a.py", False), step("t2", "/repo/src/a.py", True), step("t3", "src/a.py", False, "Grep"))
    assert [v.invariant for v in out] == ["superseded"] and "tool use t2 (Read /repo/src/a.py)" in out[0].detail
    out = run(step("t1", "src/a.py", True), step("t3", "src/a.py", False, "Grep"))
    assert [v.invariant for v in out] == ["superseded"] and "tool use t1" in out[0].detail


def test_recent_kept_holds_the_results_of_the_newest_declared_user_turns():
    """opencode never prunes the last two turns before the one a new message opens: it declares the newest 3. Turns
    u1 (a), u2 (b), u3 (c), u4 (nothing yet): the newest 3 begin at u2, so clearing a passes and clearing b is
    reported; a note of the strategy's own (origin) is no turn."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.opencode import OpenCode

    assert declared(OpenCode, {}).recent_turns == 3
    texts = {"a": "A" * 40, "b": "B" * 40, "c": "C" * 40}

    def turns(cleared: str) -> list[Message]:
        out: list[Message] = []
        for k, i in enumerate("abc"):
            out += [user(f"u{k + 1}"), *read_step(i, "[cleared]" if i in cleared else texts[i])]
        return [*out, Message.user("a note", origin="reminder"), user("u4")]

    def run(cleared: str) -> list:
        c = Checker(frozenset({"recent_kept"}), texts, declared=Declared(recent_turns=3))
        assert c.feed([sent(req(turns("")), 0)]) == []
        return c.feed([sent(req(turns(cleared), rewrite=True), 1)])

    assert run("a") == []
    out = run("ab")
    assert [v.invariant for v in out] == ["recent_kept"] and "tool use b, in one of the newest 3 user turns" in out[0].detail


def test_result_limit_a_declared_cut_keeps_its_shares_and_reaches_every_result():
    """tiered_budget declares each tier's cut (result_cuts). Here Bash past 500 characters keeps 20% (100) from the
    start and 400 from the end; a result of 1,000 ("0123456789" x 100): cut as declared passes; with the shares
    swapped (400 from the start) it is reported (more than 100 + 64 of slack); whole, it is reported; a Grep result
    (no cut declared for it) is not judged; a result shortened further (a cap of the strategy's own) passes."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.tiered_budget import TieredBudget

    tiers = declared(TieredBudget, {"shell_budget_chars": 500, "read_mode": "keep"}).result_cuts
    assert ((), 100_000, 1.0) in tiers and ("Read",) not in [t[0][:1] for t in tiers]
    assert next(c for c in tiers if "Bash" in c[0])[1:] == (500, 0.2)
    body = "0123456789" * 100

    def run(text: str, tool: str = "Bash") -> list:
        c = Checker(frozenset({"result_limit"}), {"t": body}, declared=Declared(result_cuts=((("Bash",), 500, 0.2),)))
        return c.feed([sent(req([user("go"), *read_step("t", text, tool)]), 0)])

    assert run(body[:100] + "\n[cut]\n" + body[-400:]) == []
    out = run(body[:400] + "\n[cut]\n" + body[-100:])
    assert [v.invariant for v in out] == ["result_limit"] and "keeping the first 400 and the last 100" in out[0].detail
    out = run(body)
    assert [v.invariant for v in out] == ["result_limit"] and "entered whole, past the 500 characters" in out[0].detail
    assert run(body, "Grep") == [] and run(body[:50] + "\n[capped]") == []


def test_recent_kept_newest_where_calls_and_results_agree():
    """Parallel results may come back in another order than their calls; context_editing counts the
    calls, SWE-agent's masking and Claude Code's microcompact count the results as they stand. Declared
    2, calls a b c answered c b a: b is newest both ways and held; c (newest call, oldest result) and a
    are not. observation_masking declares its n, claude_code its microcompact_keep."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.claude_code import ClaudeCode
    from ctxsim.strategies.observation_masking import ObservationMasking

    assert declared(ObservationMasking, {}).recent_kept == 5 and declared(ObservationMasking, {"n": 10}).recent_kept == 10
    assert declared(ClaudeCode, {"microcompact_keep": 3}).recent_kept == 3
    c = Checker(frozenset({"recent_kept"}), {}, declared=Declared(recent_kept=2))
    ask = Message("assistant", tuple(Block.tool_use(t, "Read", {}) for t in "abc"))

    def answers(a, b, c_):
        return Message("user", (Block.tool_result("c", c_), Block.tool_result("b", b), Block.tool_result("a", a)))

    assert c.feed([sent(req([user("go"), ask, answers("A" * 40, "B" * 40, "C" * 40)]), 0)]) == []
    assert c.feed([sent(req([user("go"), ask, answers("[x]", "B" * 40, "[x]")], rewrite=True), 1)]) == []
    out = c.feed([sent(req([user("go"), ask, answers("[x]", "[x]", "[x]")], rewrite=True), 2)])
    assert [v.invariant for v in out] == ["recent_kept"] and "tool use b," in out[0].detail


# --- idle_clear ---------------------------------------------------------------------------------------

def test_idle_clear_judges_the_first_request_past_the_declared_gap():
    """Claude Code declares its microcompact: past 3,600 s idle, the old results of its compactable tools
    are cleared, all but the newest microcompact_keep. Here 3,600 s, Read, keep 1. Results a (Read),
    t (TodoWrite), b (Read), c (Read): the newest (c) is kept, t is not the rule's, so a and b are old.
    A gap of 3,600 + 500 s is within the 600 s of slack (not judged); 3,600 + 700 s sending a and b as
    they entered is reported (4,300 s); the request after the next gap clearing a alone passes (the rule fired)."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.harness.testing.invariants import IDLE_SLACK_S
    from ctxsim.strategies.claude_code import COMPACTABLE_TOOLS, ClaudeCode

    assert declared(ClaudeCode, {}).idle_clear == (3_600.0, COMPACTABLE_TOOLS)
    assert declared(ClaudeCode, {"microcompact": "off"}).idle_clear is None
    assert IDLE_SLACK_S == 600

    def at(msgs, call, now, rewrite=False):
        return Sent(req(msgs, rewrite=rewrite), 100, 1_000, False, "", call, now)

    c = Checker(frozenset({"idle_clear"}), {}, declared=Declared(recent_kept=1, idle_clear=(3_600.0, ("Read",))))
    msgs = [user("go"), *read_step("a", "A" * 50, "Read"), *read_step("t", "T" * 50, "TodoWrite"), *read_step("b", "B" * 50, "Read"),
            *read_step("c", "C" * 50, "Read")]
    assert c.feed([Mark("session_start", "s1"), at(msgs, 0, 0.0)]) == []
    msgs.append(user("back"))
    assert c.feed([at(msgs, 1, 4_100.0)]) == []           # 4,100 s: not past 3,600 + 600
    msgs.append(user("again"))
    out = c.feed([at(msgs, 2, 8_400.0)])                    # 4,300 s
    assert [v.invariant for v in out] == ["idle_clear"]
    assert out[0].detail.startswith("2 old result(s) of Read sent as they entered after 4,300 s idle since request 1")
    cleared = [user("go"), *read_step("a", "[cleared]", "Read"), *msgs[3:], user("later")]
    assert c.feed([at(cleared, 3, 13_000.0, rewrite=True)]) == []


def test_idle_clear_not_judged_at_a_launch_or_with_nothing_old():
    """The first request of a new launch (a new conversation: nothing old) and a request whose predecessor held
    no old result of the declared tools beyond the kept are not judged. A resume's first request is: the same
    conversation, its last answer in the history the launch picked up (blind set 22: a strategy that forgot
    when it last answered at every resume never cleared after one)."""
    from ctxsim.harness.testing.declared import Declared

    c = Checker(frozenset({"idle_clear"}), {}, declared=Declared(recent_kept=2, idle_clear=(60.0, ())))
    msgs = [user("go"), *read_step("a", "A" * 40), *read_step("b", "B" * 40)]
    assert c.feed([Mark("session_start", "s1"), Sent(req(msgs), 100, 1_000, False, "", 0, 0.0)]) == []
    assert c.feed([Sent(req([*msgs, user("x")]), 100, 1_000, False, "", 1, 5_000.0)]) == []   # a and b: the newest 2
    msgs = [*msgs, user("x"), *read_step("c", "C" * 40)]
    assert c.feed([Sent(req(msgs), 100, 1_000, False, "", 2, 5_010.0),
                   Mark("session_end", "s1"), Mark("session_start", "s2", resume=True)]) == []
    out = c.feed([Sent(req([*msgs, user("y")]), 100, 1_000, False, "", 3, 90_000.0)])  # a resume's first: a old, whole
    assert [v.invariant for v in out] == ["idle_clear"] and "1 old result(s) of any tool" in out[0].detail
    c = Checker(frozenset({"idle_clear"}), {}, declared=Declared(recent_kept=2, idle_clear=(60.0, ())))
    assert c.feed([Mark("session_start", "s1"), Sent(req(msgs), 100, 1_000, False, "", 0, 0.0),
                   Mark("session_end", "s1"), Mark("session_start", "s2")]) == []
    assert c.feed([Sent(req([user("new")]), 100, 1_000, False, "", 1, 90_000.0)]) == []   # a new launch's first


def test_idle_clear_a_strategy_that_changes_results_only_when_idle_does_not_while_warm():
    """on_demand_reading replaces old reads only after an idle gap past cold_cache_s (300 s); Claude Code clears old
    results only in its time-based microcompact, after an hour idle (none with it off). A request 4 s after
    the one before that changes a result it sent whole is reported; the same change 400 s after passes (and one
    150 s after, half the gap, is not judged: however the gap is read, the cache may be cold); so is one a second
    after a request the API refused as too long."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.claude_code import ClaudeCode
    from ctxsim.strategies.on_demand_reading import OnDemandReading

    assert declared(OnDemandReading, {}).cold_only == 300.0 and declared(OnDemandReading, {"cold_cache_s": 0}).cold_only is None
    assert declared(ClaudeCode, {}).cold_only == 3_600.0 and declared(ClaudeCode, {"microcompact": "off"}).cold_only is None
    texts = {"a": "A" * 40, "b": "B" * 40}
    msgs = [user("go"), *read_step("a", texts["a"]), *read_step("b", texts["b"])]
    later = [user("go"), *read_step("a", "[pointer]"), *read_step("b", texts["b"]), user("more")]

    def run(gap: float) -> list:
        c = Checker(frozenset({"idle_clear"}), texts, declared=Declared(cold_only=300.0))
        assert c.feed([Sent(req(msgs), 100, 1_000, False, "", 0, 1_000.0)]) == []
        return c.feed([Sent(req(later, rewrite=True), 100, 1_000, False, "", 1, 1_000.0 + gap)])

    out = run(4.0)
    assert [v.invariant for v in out] == ["idle_clear"] and "changes 1 result(s) it sent before as they entered (tool use a) 4 s" in out[0].detail
    assert run(400.0) == [] and run(150.0) == []
    # a reaction to a request the API refused as too long must shrink what it sends, the cache warm or not
    c = Checker(frozenset({"idle_clear"}), texts, declared=Declared(cold_only=300.0))
    c.feed([Sent(req(msgs), 100, 1_000, False, "", 0, 1_000.0), Sent(req(msgs), 1_200, 1_000, True, "prompt is too long", 1, 1_002.0),
            Mark("on_rejected", "overflow")])
    assert c.feed([Sent(req(later, rewrite=True), 100, 1_000, False, "", 2, 1_003.0)]) == []


def test_idle_clear_a_round_of_replacing_runs_once_idle_past_its_trigger():
    """on_demand_reading replaces its oldest reads once they pass inline_read_tokens (replaces_reads_above) and the
    cache is cold (300 s idle). Reads a, b and c of 40 characters, the newest 1 kept; the request is 259 characters
    (system and tools 112, "go" 2, three calls of 7, the reads 120, "more" 4) estimated at 259 tokens: one a
    character, the reads 120 tokens. Declared 100: 700 s after the request before (past twice 300), nothing replaced,
    reported; replacing a, held; 400 s after (not twice the gap), not judged; declared 110 (121 with its rate's
    slack, over 120), not judged."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.on_demand_reading import OnDemandReading

    assert declared(OnDemandReading, {}).reads_above == 30_000
    texts = {"a": "A" * 40, "b": "B" * 40, "c": "C" * 40}
    msgs = reads(texts)

    def run(gap: float, cleared: str = "", above: int = 100) -> list[str]:
        c = Checker(frozenset({"idle_clear"}), texts, declared=Declared(
            cold_only=300.0, recent_reads=(1, ("Read",), 10), reads_above=above))
        assert c.feed([Sent(req(msgs), 100, 1_000, False, "", 0, 1_000.0)]) == []
        r = dataclasses.replace(req(reads(texts, cleared) + [user("more")], rewrite=bool(cleared)), estimated_tokens=259)
        return [v.detail for v in c.feed([Sent(r, 100, 1_000, False, "", 1, 1_000.0 + gap)])]

    assert run(700.0) == ["request 1 of the main conversation comes 700 s after the one before, past the 300 s idle the "
                          "strategy declares a round waits for, with 3 reads sent whole, about 120 tokens as it "
                          "estimates them, past the 100 at which it declares a round replaces the oldest "
                          "(replaces_reads_above), and none replaced: the round never ran (an idle gap read in another "
                          "unit?)"]
    assert run(700.0, cleared="a") == [] and run(400.0) == [] and run(700.0, above=110) == []


def test_replaced_once_a_placeholder_is_not_replaced_again_from_itself():
    """observation_masking, context_editing and opencode set keeps_replacements. A result masked as "(3 lines
    omitted)" and then sent as "(1 lines omitted)" (masked again from its own one-line placeholder) is reported,
    once; sent whole again, then masked as before, passes."""
    from ctxsim.harness.testing.invariants import promises
    from ctxsim.strategies.observation_masking import ObservationMasking

    assert "replaced_once" in promises(ObservationMasking)
    texts = {"a": "x\ny\nz", "b": "B" * 40}

    def step(a: str) -> list[Message]:
        return [user("go"), *read_step("a", a), *read_step("b", texts["b"])]

    c = Checker(frozenset({"replaced_once"}), texts)
    assert c.feed([sent(req(step(texts["a"])), 0)]) == []
    assert c.feed([sent(req(step("Old environment output: (3 lines omitted)"), rewrite=True), 1)]) == []
    assert c.feed([sent(req(step(texts["a"])), 2), sent(req(step("Old environment output: (3 lines omitted)")), 3)]) == []
    out = c.feed([sent(req(step("Old environment output: (1 lines omitted)"), rewrite=True), 4)])
    assert [v.invariant for v in out] == ["replaced_once"] and "(3 lines omitted)" in out[0].detail
    assert c.feed([sent(req(step("Old environment output: (1 lines omitted)")), 5)]) == []


# --- cache_marks --------------------------------------------------------------------------------------

def test_cache_marks_are_where_the_strategy_declares_them_n_cache_1():
    """N-CACHE-1: NovaCode marks the tools, the system prompt and the last user message. A request of
    three messages (user, assistant, user) marked on tools, system and message 1 (an index taken one
    short) leaves the last user message (2) unmarked: reported once; marked on 2, it passes. The peers'
    style system_last declares the system prompt and the last message; aider (--cache-prompts) only its system
    prompt."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.aider import Aider
    from ctxsim.strategies.claude_code import ClaudeCode
    from ctxsim.strategies.novacode.strategy import NovaCode

    assert declared(NovaCode, {}).cache_marks == ("tools", "system", "last_user")
    assert declared(NovaCode, {"cache_breakpoints": False}).cache_marks == ()
    assert declared(ClaudeCode, {}).cache_marks == ("system", "last")
    assert declared(ClaudeCode, {"breakpoints": "none"}).cache_marks == ()
    assert declared(Aider, {"cache_prompts": True}).cache_marks == ("system",)
    assert declared(Aider, {"cache_prompts": False}).cache_marks == ()
    c = Checker(frozenset({"cache_marks"}), {}, declared=Declared(cache_marks=("tools", "system", "last_user")))
    msgs = [user("go"), Message("assistant", (Block.text_block("on it"),)), user("and this")]
    short = (Breakpoint("tools"), Breakpoint("system"), Breakpoint(1))
    out = c.feed([sent(req(msgs, bps=short), 0)])
    assert [v.invariant for v in out] == ["cache_marks"]
    assert out[0].detail.startswith("no cache breakpoint on the last user message (2), where the strategy declares "
                                    "one on every request (cache_marks: tools, system, last_user); it marks 1, "
                                    "system, tools of 3 messages")
    assert c.feed([sent(req(msgs, bps=short), 1)]) == []      # once a run
    c = Checker(frozenset({"cache_marks"}), {}, declared=Declared(cache_marks=("tools", "system", "last_user")))
    assert c.feed([sent(req(msgs, bps=(Breakpoint("tools"), Breakpoint("system"), Breakpoint(2))), 0)]) == []


def test_cache_marks_ttl_N_CACHE_1_every_declared_mark_at_the_configured_ttl():
    """Claude Code writes its cache marks at one hour (cache_ttl, what its 2.1.x logs write), NovaCode at its
    cache_ttl (N-CACHE-1). Declared system and last at 1h: marks written with no TTL (the run's default, five
    minutes) on the system prompt are reported once; both at 1h pass, and so do marks given another TTL on purpose (the
    stable prefix for an hour, the conversation for five minutes). A mark elsewhere (an extra one) is not judged, nor
    marks without a TTL where the declared one is the API's default."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.claude_code import ClaudeCode
    from ctxsim.strategies.novacode.strategy import NovaCode

    assert declared(ClaudeCode, {}).marks_ttl == "1h" and declared(ClaudeCode, {"breakpoints": "none"}).marks_ttl is None
    assert declared(NovaCode, {}).marks_ttl == "5m" and declared(NovaCode, {"cache_ttl": "1h"}).marks_ttl == "1h"
    msgs = [user("go"), Message("assistant", (Block.text_block("on it"),)), user("and this")]

    def run(*bps: Breakpoint, ttl: str = "1h") -> list[str]:
        c = Checker(frozenset({"cache_marks"}), {}, declared=Declared(cache_marks=("system", "last"), marks_ttl=ttl))
        return [v.detail for v in c.feed([sent(req(msgs, bps=bps), 0), sent(req(msgs, bps=bps), 1)])]

    assert run(Breakpoint("system"), Breakpoint(2)) == [
        "a cache breakpoint on 'system' written with no TTL (the API's default, 5m), where the strategy declares its "
        "marks at 1h (cache_marks_ttl: a TTL not passed on?)"]
    assert run(Breakpoint("system", "1h"), Breakpoint(2, "1h"), Breakpoint(0)) == []
    assert run(Breakpoint("system", "1h"), Breakpoint(2, "5m")) == []
    assert run(Breakpoint("system"), Breakpoint(2), ttl="5m") == []


def test_cache_marks_judge_only_what_the_request_has():
    """No tools, no system prompt: nothing to mark there. The last message marked by a negative index counts.
    A side call (a summary) is not a request of the conversation."""
    from ctxsim.harness.testing.declared import Declared

    c = Checker(frozenset({"cache_marks"}), {}, declared=Declared(cache_marks=("tools", "system", "last")))
    bare = req([user("go")], bps=(Breakpoint(-1),), tools=ToolSet(()), system=SystemPrompt.of())
    assert c.feed([sent(bare, 0), sent(req([user("sum it up")], kind="summary"), 1)]) == []


# --- compaction_trigger -------------------------------------------------------------------------------

def _estimated(msgs, est: int, kind: str = "main") -> Request:
    from dataclasses import replace

    return replace(req(msgs, kind=kind), estimated_tokens=est)


def test_compaction_trigger_a_request_estimated_past_it_follows_a_summary():
    """Declared 1,000: the first request of a launch is not judged (5,000); 1,020 is within the 2% slack;
    1,100 sent with no summary asked for is reported, once a run. Claude Code's threshold at the kit's
    window: 32,000 - min(64,000, 3,200) - 2,080 = 26,720 (release 2.1); anthropic_compaction's is its
    trigger; cline's 0.9 of its usable input, 0.9 of the window (25,920), with nothing to summarise excused; nothing
    is declared without the window and the output limit."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.harness.testing.invariants import TRIGGER_SLACK
    from ctxsim.strategies.anthropic_compaction import AnthropicCompaction
    from ctxsim.strategies.claude_code import ClaudeCode

    assert TRIGGER_SLACK == 1.02
    assert declared(ClaudeCode, {"summary_reserve_tokens": 3_200, "autocompact_buffer_tokens": 2_080},
                    32_000, 64_000).compacts_above == 26_720
    assert declared(AnthropicCompaction, {"trigger_input_tokens": 24_000}, 32_000, 64_000).compacts_above == 24_000
    assert declared(AnthropicCompaction, {}).compacts_above is None
    from ctxsim.strategies.cline import Cline

    assert declared(Cline, {}, 32_000, 64_000).compacts_above == 25_920 and declared(Cline, {}, 32_000, 64_000).before_prompt
    assert declared(Cline, {"max_input_tokens": 20_000}, 32_000, 64_000).compacts_above == 18_000
    assert not declared(Cline, {}).before_prompt   # no trigger to excuse
    c = Checker(frozenset({"compaction_trigger"}), {}, declared=Declared(compacts_above=1_000))
    msgs = [user("go")]
    assert c.feed([Mark("session_start", "s1"), sent(_estimated(msgs, 5_000), 0)]) == []
    assert c.feed([sent(_estimated(msgs, 1_020), 1)]) == []
    out = c.feed([sent(_estimated(msgs, 1_100), 2)])
    assert [v.invariant for v in out] == ["compaction_trigger"]
    assert out[0].detail.startswith("estimated at 1,100 tokens by the strategy itself, past the 1,000 at which it "
                                    "declares it summarises before sending (compacts_above)")
    assert c.feed([sent(_estimated(msgs, 1_200), 3)]) == []


def test_reinjected_N_COMP_12_after_a_compaction_what_the_conversation_was_sent():
    """NovaCode's memories (origin "memory") go in again on the very next request after a compaction (N-COMP-12). The
    conversation was sent a memory at request 0; a summary is made; request 2, the rewrite that uses it, holds no
    memory: reported. Holding one: held. A conversation never sent one is not judged."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.novacode.strategy import NovaCode

    assert declared(NovaCode, {}).reinjects == ("memory",) and declared(NovaCode, {"memory": False}).reinjects == ()
    memory = Message.user("<memory>I prefer small commits.</memory>", origin="memory")
    summary = Message.user(TAIL_SUMMARY, origin="summary")

    def run(first: list[Message], after: list[Message]) -> list[str]:
        c = Checker(frozenset({"reinjected"}), {}, declared=Declared(reinjects=("memory",)))
        c.feed([Mark("session_start", "s1"), sent(req([*first, user("go")]), 0),
                sent(req([user("summarise")], kind="summary"), 1), Mark("side_result", "summary", text=TAIL_SUMMARY)])
        return [v.detail for v in c.feed([sent(req([summary, *after, user("next")], rewrite=True), 2)])]

    assert run([memory], []) == ["the first request after a compaction holds no message of origin 'memory', which the "
                                 "conversation was sent before and the strategy declares a compaction injects again "
                                 "(reinjects_after_compaction: its markers not reset, N-COMP-12?)"]
    assert run([memory], [memory]) == [] and run([], []) == []


def _read_marks(tid: str, path: str, content: str | None = None, error: bool = False) -> list[Mark]:
    """A Read call of ``path`` and its result (``content``, by default "text of PATH")."""
    return [Mark("message", message=Message("assistant", (Block.tool_use(tid, "Read", {"file_path": path}),))),
            Mark("message", message=Message("user", (Block.tool_result(tid, content or f"text of {path}", error),)))]


def _restored_after(declared, before: list, attached: str, originals: dict[str, str] | None = None) -> list[str]:
    """``restored`` on a launch that sends a request, goes through ``before``, makes a summary and sends it with an
    attachment of ``attached``: what is reported."""
    c = Checker(frozenset({"restored"}), originals or {}, declared=declared)
    c.feed([Mark("session_start", "s1"), sent(req([user("go")]), 0), *before,
            sent(req([user("summarise")], kind="summary"), 1), Mark("side_result", "summary", text=TAIL_SUMMARY)])
    summary, restore = Message.user(TAIL_SUMMARY, origin="summary"), Message.user(attached, origin="restore")
    return [v.detail for v in c.feed([sent(req([summary, restore, user("next")], rewrite=True), 2)])]


def test_restored_N_COMP_11_no_file_only_an_isolated_sub_agent_read():
    """An isolated sub-agent's context is gone when it ends: NovaCode's parent restores what the parent read (its own
    tracker, N-COMP-11). The main conversation read a.py; a sub-agent read b.py, and a span run in the main context
    read c.py. An attachment naming a.py and c.py holds; one naming b.py on a line of its own is reported; had the
    main conversation read b.py too, it holds."""
    from ctxsim.harness.testing.declared import Declared

    def run(attached: str, main_b: bool = False) -> list[str]:
        return _restored_after(Declared(restores=(5, ("Read",), ("file_path",))), [
            *_read_marks("r1", "/repo/a.py"),
            Mark("subtask_start", "t1", isolated=True), *_read_marks("r2", "/repo/b.py"), Mark("subtask_end", "t1"),
            Mark("subtask_start", "t2", isolated=False), *_read_marks("r3", "/repo/c.py"), Mark("subtask_end", "t2"),
            *(_read_marks("r4", "/repo/b.py") if main_b else [])], attached)

    assert run("## files\n### /repo/c.py\n...\n### /repo/a.py\n...") == []
    assert run("## files\n### /repo/b.py\n...\n### /repo/a.py\n...") == [
        "the attachment after this compaction restores '/repo/b.py', which only an isolated sub-agent read (its own "
        "context, gone when it ended), where the strategy declares it restores the files the conversation read most "
        "recently (restores_recent_reads: a sub-agent's reads kept by the parent's tracker?)"]
    assert run("## files\n### /repo/b.py\n...\n### /repo/a.py\n...", main_b=True) == []


def test_restored_N_COMP_11_the_file_read_last_is_restored_with_its_content():
    """NovaCode restores a file as its last read returned it, clipped to 800 tokens at its lowest rate, half a character
    a token: 400 characters at the least (restores_file_chars). Here the least is 12: the conversation read a.py
    ('print("a.py"): the whole file', 29 characters) last; an attachment whose a.py section holds its first 12
    characters holds, one holding a spill's preview in their place is reported, and one that names a.py only inside
    another file's text (not on a line of its own) is not judged."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.novacode.strategy import NovaCode

    assert declared(NovaCode, {}).restore_chars == 2_500 and declared(NovaCode, {"restore_file_tokens": 800}).restore_chars == 400
    content = 'print("a.py"): the whole file'

    def run(attached: str) -> list[str]:
        return _restored_after(Declared(restores=(5, ("Read",), ("file_path",)), restore_chars=12),
                               _read_marks("r1", "/repo/a.py", content), attached, {"r1": content})

    assert run(f"## files\n### /repo/a.py\n{content[:20]}\n[... truncated]") == []
    assert run("## files\n### /repo/a.py\n<persisted-output>saved to tool-results/r1.txt</persisted-output>") == [
        "the attachment after this compaction names '/repo/a.py', the file the conversation read last, without the "
        "opening of what that read returned ('print(\"a.py\"', the 12 characters the strategy declares a restored "
        "file holds at least: restores_file_chars): a placeholder or a preview restored in place of the file?"]
    assert run("## files\n### /repo/b.py\nimport /repo/a.py as a") == []


def test_restored_N_COMP_11_the_attachment_names_the_file_read_last():
    """NovaCode restores the 5 files read most recently (N-COMP-11). The conversation reads a.py, b.py, then a.py again
    (the last read), and c.py's read fails; a summary is made. An attachment naming a.py and b.py holds; one naming b.py
    but not a.py (a tracker keeping a re-read file at its first read, with fewer places) is reported; one naming no file
    read (none restored: the caps) is not judged, nor one after a resume (the last read not known)."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.novacode.strategy import NovaCode

    assert declared(NovaCode, {}).restores[0] == 5 and declared(NovaCode, {"restore_skip_in_tail": True}).restores is None

    def run(attached: str, resume: bool = False) -> list[str]:
        return _restored_after(Declared(restores=(5, ("Read",), ("file_path",))), [
            *_read_marks("r1", "/repo/a.py"), *_read_marks("r2", "/repo/b.py"), *_read_marks("r3", "/repo/a.py"),
            *_read_marks("r4", "/repo/c.py", error=True), *([Mark("session_start", "s1", resume=True)] if resume else [])],
            attached)

    assert run("## files\n### /repo/a.py\n...\n### /repo/b.py\n...") == []
    assert run("## files\n### /repo/b.py\n...") == [
        "the attachment after this compaction restores '/repo/b.py' but not '/repo/a.py', the file the conversation read "
        "last, where the strategy declares it restores the 5 read most recently (restores_recent_reads: a re-read file "
        "kept at its first read, a list walked the wrong way?)"]
    assert run("## files\n(none)") == [] and run("## files\n### /repo/b.py\n...", resume=True) == []


def test_cadence_a_periodic_side_call_comes_every_n_answered_main_requests():
    """structured_state re-writes its todo list every todo_every answered calls (15), sooner when a task arrives, until
    the log's agent writes its own TodoWrite. Here every 2: main 0 is not counted (no write yet); the write at 1 starts
    the count; mains 2 and 3 make 2, the write at 4 is on time; main 5 makes 1 and the write at 6 is early: reported.
    After a typed message a write after 1 is due to it: held. Mains 9 and 10 make 2, and main 11 is sent with no write:
    late, reported once. An answer that calls TodoWrite ends the promise."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.structured_state import StructuredState

    assert declared(StructuredState, {}).writes_every == ("todo_write", 15, "TodoWrite")
    assert declared(StructuredState, {"todo_every": 0}).writes_every is None

    def write(call: int) -> Sent:
        return Sent(req([user("go")], kind="todo_write"), 50, 1_000, False, "", call, float(call))

    def check() -> Checker:
        return Checker(frozenset({"cadence"}), {}, declared=Declared(writes_every=("todo_write", 2, "TodoWrite")))

    c = check()
    go = [user("go")]
    assert c.feed([Mark("session_start", "s1"), sent(req(go), 0), write(1), sent(req(go), 2), sent(req(go), 3), write(4)]) == []
    out = c.feed([sent(req(go), 5), write(6)])
    assert [v.detail for v in out] == ["a todo_write call after 1 answered request(s) of the main conversation since the "
                                       "last, none typed by the user since: the strategy declares one every 2 "
                                       "(writes_every: a count reset at the wrong moment, or compared one off?)"]
    assert c.feed([sent(req(go), 7), Mark("user", text="next task"), write(8)]) == []
    out = c.feed([sent(req(go), 9), sent(req(go), 10), sent(req(go), 11), sent(req(go), 12)])
    assert [v.detail for v in out] == ["request 11 of the main conversation is sent after 2 answered since the last "
                                       "todo_write call, with none made: the strategy declares one every 2 (writes_every: "
                                       "compared one off, or a count not reset?)"]
    c = check()
    todo = Message("assistant", (Block.tool_use("t1", "TodoWrite", {}),))
    assert c.feed([sent(req(go), 0), write(1), Mark("message", message=todo), sent(req(go), 2), sent(req(go), 3),
                   sent(req(go), 4), write(5)]) == []


def test_estimate_declared_the_whole_request_is_its_json_over_the_rate():
    """cline estimates every request whole: JSON.stringify of the system prompt, tools and messages over 3. Here the
    system prompt and tools are 112 characters (23 + 89) and the one message's JSON 61 ('{"role": "user", "content":
    [{"type": "text", "text": "go"}]}'): 173 / 3 = 57.7, 58. Estimated 58 or 57 (within 2 tokens): held; 38, the
    message's text counted (112 + 2 = 114 / 3), is reported, though well within the factor allowed any estimate."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.cline import Cline

    assert declared(Cline, {}).estimates_whole == (3.0, "json_chars")
    msgs = [user("go")]

    def run(est: int) -> list:
        c = Checker(frozenset({"estimate"}), {}, declared=Declared(estimates_whole=(3.0, "json_chars")))
        return c.feed([sent(_estimated(msgs, est), 0, tokens=60, window=1_000)])

    assert run(58) == [] and run(57) == []
    out = run(38)
    assert [v.invariant for v in out] == ["estimate"]
    assert out[0].detail == ("the strategy estimated 38 tokens where it declares its estimate is the whole request's 173 "
                             "JSON characters (system prompt and tools 112) over 3 a token: 58 (estimates_whole: a part "
                             "left out, the text counted where the JSON is, a stale figure?)")


def test_estimate_declared_from_usage_is_the_last_usage_and_what_came_after_the_answer_N_COMP_5():
    """NovaCode's anchor (N-COMP-5), and cut_no_summary's: the last answered request's usage (input and output) and
    the characters after the answer over 3.5. Request 0 [go, call a] is answered (usage: 900 input read, 100 written, 60
    output: 1,060); request 1 [go, call a, answer, result a] adds the answer "read it" and result a's 350 characters:
    1,060 + 350 / 3.5 = 1,160. Estimated 1,160 or 1,161: held; 1,162, the answer's 7 characters counted again (the anchor
    taken before it entered: 357 / 3.5 = 102), is reported. Not judged after a rewrite, nor after a side call."""
    from ctxsim.harness.model.conversation import Usage
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.cut_no_summary import CutNoSummary
    from ctxsim.strategies.novacode.strategy import NovaCode

    assert declared(NovaCode, {}).from_usage == declared(CutNoSummary, {}).from_usage == 3.5
    go, call = user("go"), Message("assistant", (Block.tool_use("a", "Read", {}),))
    answer = Message("assistant", (Block.text_block("read it"),))
    result = Message("user", (Block.tool_result("a", "A" * 350),))
    usage = Usage(cache_read=900, cache_write_5m=100, output=60)

    def run(est: int, rewrite: bool = False, side: bool = False) -> list:
        c = Checker(frozenset({"estimate"}), {}, declared=Declared(from_usage=3.5))
        c.feed([sent(_estimated([go, call], 1_000), 0, tokens=1_000, window=10_000),
                Mark("message", message=answer, usage=usage), Mark("message", message=result)])
        if side:
            c.feed([sent(req([user("extract the facts")], kind="memory"), 1)])
        r = dataclasses.replace(_estimated([go, call, answer, result], est), rewrite=rewrite)
        return [v.detail for v in c.feed([sent(r, 2, tokens=1_150, window=10_000)])]

    assert run(1_160) == [] and run(1_161) == []
    assert run(1_162) == ["the strategy estimated 1,162 tokens where it declares its estimate is the usage of its last "
                          "answered request (1,060: input and output) and the 350 characters of the 1 message(s) after "
                          "the answer over 3.5 a token: 1,160 (estimates_from_usage: the anchor taken before the answer "
                          "entered, or a message counted twice?)"]
    assert run(1_162, rewrite=True) == [] and run(1_162, side=True) == []
    # the run's first request, nothing measured: the whole request at that rate, the system prompt and tools (112
    # characters), "go" (2) and the call (7): 121 / 3.5 = 34.6, 35 (34 within a token, 5% of 35 being less); 31 is
    # reported
    def first(est: int) -> list[str]:
        c = Checker(frozenset({"estimate"}), {}, declared=Declared(from_usage=3.5))
        return [v.detail for v in c.feed([sent(_estimated([go, call], est), 0, tokens=40, window=10_000)])]

    assert first(35) == [] and first(34) == []
    assert first(31) == ["the strategy estimated 31 tokens where, with no usage yet, it declares its estimate is the "
                         "whole request's 121 characters (system prompt and tools 112) over 3.5 a token: 35 "
                         "(estimates_from_usage: a part left out, another rate?)"]


def test_compaction_trigger_counted_on_the_finished_messages_is_a_floor_only():
    """aider summarises its finished exchanges once they pass its budget, min(max(window / 16, 1,024), 8,192): 2,000
    at the kit's 32,000 (1,024 at 8,000; 8,192 at 200,000), only as a user turn begins; it keeps the newest finished
    messages under half of it, counted as its estimate counts them (characters over chars_per_token). The whole request counts more
    than the finished messages: declared so (compacts_above_finished), a request estimated past it with no summary
    is not reported (1,100 past 1,000); a summary asked for on a conversation of 500 tokens (800 with the factor of
    1.6, under 1,000) is, as with any trigger."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.aider import Aider

    d = declared(Aider, {}, 32_000, 64_000)
    assert (d.compacts_above, d.above_finished, d.only_at_turns, d.tail, d.tail_walked) == (
        2_000, True, True, ((4_000.0, None, "chars"),), True)
    assert declared(Aider, {}, 8_000, 4_096).compacts_above == 1_024 and declared(Aider, {}, 200_000, 64_000).compacts_above == 8_192
    # the tail in the characters its estimate counts (4 a token by default): half the budget
    assert declared(Aider, {"max_chat_history_tokens": 3_000}, 32_000, 64_000).tail == ((6_000.0, None, "chars"),)
    assert declared(Aider, {"chars_per_token": 3.0}, 32_000, 64_000).tail == ((3_000.0, None, "chars"),)
    c = Checker(frozenset({"compaction_trigger"}), {}, declared=Declared(compacts_above=1_000, above_finished=True))
    msgs = [user("go")]
    assert c.feed([Mark("session_start", "s1"), sent(_estimated(msgs, 900), 0, tokens=900),
                   sent(_estimated(msgs, 1_100), 1, tokens=1_100)]) == []
    c = Checker(frozenset({"compaction_trigger"}), {}, declared=Declared(compacts_above=1_000, above_finished=True))
    out = c.feed([sent(_estimated(msgs, 500), 0, tokens=500),
                  Sent(req([user("sum up")], kind="summary"), 500, 32_000, False, "", 1, 1.0)])
    assert [v.invariant for v in out] == ["compaction_trigger"]
    assert out[0].detail.startswith("a summary asked for on 500 tokens of the conversation, under the 1,000")


def test_compaction_trigger_nothing_but_a_summary_before_the_latest_prompt_excuses_a_cut_that_never_passes_it():
    """Cline's cut never passes the user's latest typed prompt nor its preserved tail (summarises_before_latest_prompt):
    with only its previous summary before them, or the prompt first, there is nothing to summarise and a request over
    the trigger (1,100 of 1,000) goes out. With a Read step before the prompt it is reported; so is the same request
    of a strategy that makes no such exception."""
    from ctxsim.harness.testing.declared import Declared

    go, nxt = user("go"), user("next, the tests")
    summary = Message.user("Context summary: a and b were read.", origin="summary")
    step = read_step("a", "A" * 100)

    def run(msgs, before_prompt=True) -> list[str]:
        c = Checker(frozenset({"compaction_trigger"}), {}, declared=Declared(compacts_above=1_000, before_prompt=before_prompt),
                    trace_digests={go.blocks[0].digest, nxt.blocks[0].digest})
        c.feed([Mark("session_start", "s1"), sent(_estimated([go], 500), 0)])
        return [v.invariant for v in c.feed([sent(_estimated(msgs, 1_100), 1)])]

    assert run([summary, nxt, *read_step("b", "B" * 100)]) == []
    assert run([go, *step]) == []   # the prompt first
    assert run([go, *step, nxt]) == ["compaction_trigger"]
    assert run([summary, nxt, *step], before_prompt=False) == ["compaction_trigger"]
    assert run([summary, *step]) == ["compaction_trigger"]   # no prompt typed: all may be summarised

    # nor before the tail it keeps (its preserved JSON characters, back to an answer or a typed message): with a least
    # of 400, [summary, calls a, results a (500 characters: 608 of JSON), answer, next] keeps all after the summary
    answer = Message("assistant", (Block.text_block("ok"),))
    a = [calls("a"), results(("a", "A" * 500))]

    def run_tail(msgs) -> list[str]:
        c = Checker(frozenset({"compaction_trigger"}), {}, trace_digests={go.blocks[0].digest, nxt.blocks[0].digest},
                    declared=Declared(compacts_above=1_000, before_prompt=True, tail=((400, None, "json_chars"),)))
        c.feed([Mark("session_start", "s1"), sent(_estimated([go], 500), 0)])
        return [v.invariant for v in c.feed([sent(_estimated(msgs, 1_100), 1)])]

    assert run_tail([summary, *a, answer, nxt]) == []
    assert run_tail([summary, go, *a, answer, nxt]) == ["compaction_trigger"]   # the prompt before: summarised


def test_compaction_trigger_a_view_of_more_events_than_declared_follows_a_summary():
    """OpenHands V1 condenses a view of more than max_size events (compacts_above_events), an event being the system
    prompt, each tool call, each result, any other message. Declared 6: [go, calls a b, results a b] is 1 + 1 + 2 +
    2 = 6 events (held); with c too, 1 + 1 + 3 + 3 = 8, sent with no summary asked for: reported (the parallel calls
    counted as one message each would make 4); after a summary asked for, not. The release counting messages (v0)
    declares nothing."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.openhands import OpenHands

    assert declared(OpenHands, {}).above_events == 80 and declared(OpenHands, {"release": "v0"}).above_events is None
    two = [user("go"), calls("a", "b"), results(("a", "x"), ("b", "y"))]
    three = [user("go"), calls("a", "b", "c"), results(("a", "x"), ("b", "y"), ("c", "z"))]

    def run(msgs, *between) -> list[str]:
        c = Checker(frozenset({"compaction_trigger"}), {}, declared=Declared(above_events=6))
        c.feed([Mark("session_start", "s1"), sent(req([user("go")]), 0), *between])
        return [v.detail for v in c.feed([sent(req(msgs), 9)])]

    assert run(two) == []
    out = run(three)
    assert len(out) == 1 and out[0].startswith("the request holds 8 events (the system prompt, each tool call and each "
                                               "result one; any other message one), past the 6")
    assert run(three, sent(req([user("sum up")], kind="summary"), 1, tokens=900)) == []


def test_compaction_trigger_a_summary_asked_for_or_a_failed_one_excuses():
    """A summary side call since the last request is the trigger firing (its result may still be large);
    after a side call that failed or was refused a strategy's breaker may stop trying: not judged again."""
    from ctxsim.harness.testing.declared import Declared

    c = Checker(frozenset({"compaction_trigger"}), {}, declared=Declared(compacts_above=1_000))
    msgs = [user("go")]
    asked = sent(req([user("sum up")], kind="summary"), 1, tokens=900)   # 900 x 1.6 >= 1,000: not early
    assert c.feed([sent(_estimated(msgs, 500), 0), asked, sent(_estimated(msgs, 1_500), 2)]) == []
    failed = Sent(req([user("sum up")], kind="summary"), 900, 1_000, True, "injected failure", 3, 3.0)
    assert c.feed([failed, sent(_estimated(msgs, 1_500), 4), sent(_estimated(msgs, 1_600), 5)]) == []


def test_compaction_trigger_at_turns_judges_the_first_request_of_a_user_turn():
    """goose declares its reply-start trigger, 0.8 of the window: 25,600 at 32,000. Declared 1,000 here: a
    request in a tool loop after one of 1,500 tokens is not judged (goose compacts only as a reply starts);
    the first request after the user's message, when the one before held 1,500 (past 1,020), with no summary
    asked for, is reported; with a summary asked for first, it passes."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.goose import Goose

    assert declared(Goose, {}, 32_000, 64_000).compacts_at_turns == 25_600
    msgs = [user("go")]
    c = Checker(frozenset({"compaction_trigger"}), {}, declared=Declared(compacts_at_turns=1_000))
    assert c.feed([Mark("session_start", "s1"), sent(req(msgs), 0, tokens=1_500), sent(req(msgs), 1, tokens=1_500)]) == []
    out = c.feed([Mark("user", text="next"), sent(req(msgs), 2, tokens=1_600)])
    assert [v.invariant for v in out] == ["compaction_trigger"]
    assert out[0].detail.startswith("a user turn began after request 1 held 1,500 tokens, past the 1,000 at which")
    c = Checker(frozenset({"compaction_trigger"}), {}, declared=Declared(compacts_at_turns=1_000))
    asked = sent(req([user("sum up")], kind="summary"), 2, tokens=1_500)
    assert c.feed([Mark("session_start", "s1"), sent(req(msgs), 0, tokens=100), sent(req(msgs), 1, tokens=1_500),
                   Mark("user", text="next"), asked, sent(req(msgs, rewrite=True), 3, tokens=300)]) == []


def test_compaction_trigger_on_usage_counts_the_input_and_the_output():
    """opencode compacts before the next step once the last step's usage (input, cache and output) reaches ``usable``:
    the window less the output limit capped at 32,000 (26,880 at 32,000 with a 5,120 output limit: 32,000 - 5,120).
    Declared 1,000 here. Request 0 used 900 input and 120 output (1,020): request 1 sent with no summary first is
    reported; 900 and 100 (exactly 1,000, reached) too; 900 and 99 is not. With a summary asked first, it passes;
    a summary after a usage of 800 and 100 (900) fired early. goose's (as a reply starts) is the least whole number
    past 0.8 of the window: 25,601 at 32,000."""
    from ctxsim.harness.model.conversation import Usage
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.goose import Goose
    from ctxsim.strategies.opencode import OpenCode

    assert declared(OpenCode, {}, 32_000, 5_120).on_usage == 26_880
    assert declared(Goose, {}, 32_000, 64_000).on_usage == 25_601
    go, answer = user("go"), Message("assistant", (Block.text_block("working on it"),))

    def run(inp: int, out: int, summarise: bool = False) -> list[str]:
        c = Checker(frozenset({"compaction_trigger"}), {}, declared=Declared(on_usage=1_000))
        c.feed([Mark("session_start", "s1"), sent(req([go]), 0, tokens=inp, window=10_000),
                Mark("message", message=answer, usage=Usage(input_uncached=inp, output=out))])
        side = [sent(req([user("sum up")], kind="summary"), 1, window=10_000)] if summarise else []
        out_ = c.feed([*side, sent(req([go, answer], rewrite=summarise), 2, tokens=inp, window=10_000)])
        return [v.detail for v in out_]

    assert run(900, 120) == ["request 0 of the main conversation used 1,020 tokens (input and output), at or past the "
                             "1,000 at which the strategy declares it summarises before its next request "
                             "(compacts_on_usage), and no summary was asked for: the trigger did not fire (a part of the "
                             "usage left out?)"]
    assert len(run(900, 100)) == 1 and run(900, 99) == []
    assert run(900, 120, summarise=True) == []
    early = run(800, 100, summarise=True)
    assert len(early) == 1 and early[0].startswith("a summary asked for after request 0 of the main conversation used "
                                                   "900 tokens (input and output), under the 1,000")


def test_compaction_trigger_by_cut_is_a_rewrite_where_a_cut_would_drop_any():
    """sliding_window cuts at its allowed size, no summary: 25,600 at 32,000 (Cline's table), its own estimate with
    what came since the last usage (count_pending). Declared 1,000 and a cut here: a request estimated at 1,100 (past
    1,020) that is a rewrite passes; one that is not is reported where a cut would drop some of its messages, and not
    where none would (a short conversation: sliding_window's range drops nothing of fewer than 4 messages after the
    first pair; nor where its first kept message would be left empty)."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.sliding_window import SlidingWindow

    d = declared(SlidingWindow, {}, 32_000, 64_000)
    assert d.compacts_above == 25_600 and d.on_usage is None and d.by_cut is not None
    assert declared(SlidingWindow, {"count_pending": False}, 32_000, 64_000).on_usage == 25_600
    # typed turns: [go, on it, now read a, a, ..., now read d, d]; a tool loop after a first answer that calls nothing:
    # every message a cut could start the kept part at holds only results, which repair to nothing
    answered = [user("go"), Message("assistant", (Block.text_block("on it"),)),
                *(x for i in "abcd" for x in (user(f"now read {i}"), Message("assistant", (Block.text_block(i),))))]
    loop = [user("go"), Message("assistant", (Block.text_block("on it"),)), *reads({"b": "B", "c": "C", "d": "D"})[1:]]
    assert d.by_cut(answered) and not d.by_cut(answered[:4]) and not d.by_cut(loop)

    def run(msgs: list[Message], rewrite: bool = False) -> list[str]:
        c = Checker(frozenset({"compaction_trigger"}), {},
                    declared=Declared(compacts_above=1_000, by_cut=lambda ms: len(ms) >= 6))
        r = dataclasses.replace(_estimated(msgs, 1_100), rewrite=rewrite)
        return [v.detail for v in c.feed([Mark("session_start", "s1"), sent(req(msgs), 0, tokens=500), sent(r, 1)])]

    assert run(answered) == ["estimated at 1,100 tokens by the strategy itself, past the 1,000 at which it declares it "
                             "cuts before sending (compacts_above), and nothing was cut (compacts_by_cut): the trigger "
                             "did not fire (compared in another unit, against a constant, a part of it left out?)"]
    assert run(answered, rewrite=True) == [] and run(answered[:4]) == []


def test_compaction_trigger_a_summary_under_it_fired_early():
    """Declared 10,000: a summary asked for on a conversation of 7,000 tokens is within the estimate's factor
    (7,000 x 1.6 = 11,200); on 5,000 (8,000 < 10,000) the trigger fired early, reported once a run. Where the
    strategy's last estimate ran 1.8 times the truth (dense text), 5,000 tokens were 9,000 to it: not early.
    After a refused request (a reaction to an overflow) it is not judged, nor a summary asked again after one
    refused as too long (Codex drops the oldest items)."""
    from ctxsim.harness.testing.declared import Declared

    def summary(call, tokens):
        return Sent(req([user("sum up")], kind="summary"), tokens, 32_000, False, "", call, float(call))

    c = Checker(frozenset({"compaction_trigger"}), {}, declared=Declared(compacts_above=10_000))
    assert c.feed([sent(req([user("go")]), 0), summary(1, 7_000)]) == []
    out = c.feed([sent(req([user("go")]), 2), summary(3, 5_000)])
    assert [v.invariant for v in out] == ["compaction_trigger"]
    assert out[0].detail.startswith("a summary asked for on 5,000 tokens of the conversation, under the 10,000")
    assert c.feed([sent(req([user("go")]), 4), summary(5, 5_000)]) == []
    c = Checker(frozenset({"compaction_trigger"}), {}, declared=Declared(compacts_above=10_000))
    dense = Sent(_estimated([user("go")], 9_000), 5_000, 32_000, False, "", 0, 0.0)   # estimated 1.8 x the truth
    assert c.feed([dense, summary(1, 5_000)]) == []    # 5,000 x 1.8 x 1.6 >= 10,000: as the strategy saw it
    c = Checker(frozenset({"compaction_trigger"}), {}, declared=Declared(compacts_above=10_000))
    refused = Sent(req([user("go")]), 40_000, 32_000, True, "overflow: prompt is too long", 0, 0.0)
    assert c.feed([refused, summary(1, 5_000)]) == []
    c = Checker(frozenset({"compaction_trigger"}), {}, declared=Declared(compacts_above=10_000))
    too_long = Sent(req([user("sum up")], kind="summary"), 40_000, 32_000, True, "overflow: prompt is too long", 1, 1.0)
    assert c.feed([sent(req([user("go")]), 0), too_long, summary(2, 5_000)]) == []   # Codex trims, asks again


# --- what an overflow follows -----------------------------------------------------------------------------

def _rejected(r: Request, call: int, tokens: int) -> Sent:
    return Sent(r, tokens, 1_000, True, "overflow: prompt is too long", call, float(call))


def test_an_overflow_after_a_resume_says_so():
    c = Checker(frozenset({"window"}), {})
    c.feed([Mark("session_start", "s1"), sent(req([user("a")]), 0), Mark("session_end", "s1"),
            Mark("session_start", "s2", resume=True)])
    out = c.feed([_rejected(req([user("a"), user("b")], rewrite=True), 1, 1_200),
                  Mark("on_rejected", "overflow", retried=False)])
    assert [v.invariant for v in out] == ["window"]
    assert out[0].detail.endswith("[the first request after resume #1 (the history the strategy resumed)]")


def test_an_overflow_after_sub_agents_says_so_and_every_span_closes():
    c = Checker(frozenset({"window", "false_rewrite"}), {})
    c.feed([Mark("session_start", "s1"), sent(req([user("a")]), 0)])
    for k in range(2):  # two sub-agents in a row: both spans close
        c.feed([Mark("subtask_start", f"t{k}", isolated=True), sent(req([user("sub")], kind="subagent"), 1 + k),
                Mark("subtask_end", f"t{k}")])
    assert c.where() == "session s1"
    out = c.feed([_rejected(req([user("a"), user("b")]), 3, 1_500), Mark("on_rejected", "overflow", retried=False)])
    assert out[0].detail.endswith("[the first request after a sub-agent returned (the parent's context, restored)]")


# --- a summary made and not used; a new launch that carries the old conversation in (issue #45) -------------

def _summarised(c: Checker, text: str, first: list[Message]) -> None:
    c.feed([sent(req(first), 0), sent(req([*first, user("summarise")], kind="summary"), 1),
            Mark("side_result", "summary", text=text)])


FIRST = [user("fix the flaky login test"), Message("assistant", (Block.text_block("reading the test now; " * 20),))]
SUMMARY_TEXT = "<summary>The user wants the flaky login test fixed; the test reads a stale token.</summary>"


def test_summary_used_by_the_rewrite_it_was_made_for():
    c = Checker(frozenset({"summary_used"}), {})
    _summarised(c, SUMMARY_TEXT, FIRST)
    # wrapped in the strategy's own words: any piece of it (its opening, middle or end) is proof
    used = [user("This session continues. " + SUMMARY_TEXT[9:-10] + " (end of summary)"), user("go on")]
    assert c.feed([sent(req(used, rewrite=True), 2)]) == []


def test_summary_used_a_later_summary_request_takes_an_earlier_summary_in_once():
    """cline passes its previous summary apart and folds what came after it: a fold that starts at the summary
    sends it twice (the text of the summary, 69 characters inside its tags, stands in two blocks) and is reported
    once; the same request with it once passes."""
    c = Checker(frozenset({"summary_used"}), {})
    _summarised(c, SUMMARY_TEXT, FIRST)
    kept = [user("Context summary:\n\n" + SUMMARY_TEXT), user("go on")]
    assert c.feed([sent(req(kept, rewrite=True), 2)]) == []
    once = [user("Previous summary:\n" + SUMMARY_TEXT + "\nConversation to fold:\nuser: go on")]
    assert c.feed([sent(req(once, kind="summary"), 3)]) == []
    c = Checker(frozenset({"summary_used"}), {})
    _summarised(c, SUMMARY_TEXT, FIRST)
    assert c.feed([sent(req(kept, rewrite=True), 2)]) == []
    twice = [user("Previous summary:\n" + SUMMARY_TEXT + "\nConversation to fold:\nuser: Context summary:\n\n"
                  + SUMMARY_TEXT + "\nuser: go on")]
    out = c.feed([sent(req(twice, kind="summary"), 3)])
    assert [v.invariant for v in out] == ["summary_used"]
    assert "the summary made at call 1 (" in out[0].detail and "is sent 2 times in this summary request" in out[0].detail
    assert c.feed([sent(req(twice, kind="summary"), 4)]) == []


def test_summary_made_and_thrown_away_by_the_rewrite_is_named():
    c = Checker(frozenset({"summary_used"}), {})
    _summarised(c, SUMMARY_TEXT, FIRST)
    out = c.feed([sent(req([user("The summary is consistent with the conversation."), user("go on")], rewrite=True), 2)])
    assert [v.invariant for v in out] == ["summary_used"]
    assert out[0].detail.startswith("the summary answered to request 1 ('<summary>The user wants the flaky")


def test_summary_not_used_is_excused_when_nothing_it_summarised_left_or_its_pipeline_failed():
    # no shorter than what it summarised (within 200 characters of framing): discarding it loses nothing
    c = Checker(frozenset({"summary_used"}), {})
    _summarised(c, SUMMARY_TEXT, FIRST[:1])
    assert c.feed([sent(req([user("[history truncated]"), user("go on")], rewrite=True), 2)]) == []
    # a rewrite that drops none of its input (a masking beside a summary the strategy discarded)
    c = Checker(frozenset({"summary_used"}), {})
    _summarised(c, SUMMARY_TEXT, FIRST)
    assert c.feed([sent(req([*FIRST, user("next")], rewrite=True), 2)]) == []
    # a side call after it failed (the verification of the summary): the strategy kept its history rightly
    c = Checker(frozenset({"summary_used"}), {})
    _summarised(c, SUMMARY_TEXT, FIRST)
    failed = Sent(req([*FIRST, user("verify")], kind="verify"), 100, 1_000, True, "injected failure", 2, 2.0)
    assert c.feed([failed, sent(req([user("[history truncated]"), user("go on")], rewrite=True), 3)]) == []
    # a summary of summaries: the first is used through the second's input
    c = Checker(frozenset({"summary_used"}), {})
    _summarised(c, SUMMARY_TEXT, FIRST)
    c.feed([sent(req([user(SUMMARY_TEXT), user("summarise again")], kind="summary"), 2),
            Mark("side_result", "summary", text="Shorter: fix the login test (stale token).")])
    assert c.feed([sent(req([user("Shorter: fix the login test (stale token)."), user("go on")], rewrite=True), 3)]) == []


# --- summarised -----------------------------------------------------------------------------------

ASK = "fix the flaky login test please"
ANSWER = "The token is stale; refreshing it in the fixture now."
LOGIN = "def test_login():\n    token = stale()\n    assert login(token)"


def _summarising(steps: list[Message]) -> Checker:
    """A checker for a strategy that declares it summarises what it drops, on a session whose texts
    and the result of tool use a are the trace's."""
    from ctxsim.harness.testing.declared import Declared

    fed = {b.digest for m in steps for b in m.blocks if b.type == "text"}
    return Checker(frozenset({"summarised"}), {"a": LOGIN}, trace_digests=fed, declared=Declared(summarises_dropped=True))


def test_summarised_what_leaves_the_main_window_went_into_a_summary_it_holds():
    """Codex-like: request 0 holds the ask, a Read and its result, and the answer. The summary call takes in
    the ask and the Read (the answer left out: the slice one message short); request 2 holds the summary
    alone: the answer left unsummarised, reported once. Summarised whole, or as a transcript holding each
    one's opening, nothing is reported; a result cleared in place (its id still sent) is no drop."""
    from ctxsim.harness.testing.declared import declared
    from ctxsim.strategies.codex import Codex
    from ctxsim.strategies.sliding_window import SlidingWindow

    assert declared(Codex, {}).summarises_dropped and not declared(SlidingWindow, {}).summarises_dropped
    steps = [user(ASK), calls("a"), results(("a", LOGIN)), Message("assistant", (Block.text_block(ANSWER),))]
    after = [user(SUMMARY_TEXT), user("go on")]

    def run(taken: list[Message], then: list[Message]) -> list:
        c = _summarising(steps)
        c.feed([sent(req(steps), 0), sent(req([*taken, user("summarise")], kind="summary"), 1),
                Mark("side_result", "summary", text=SUMMARY_TEXT)])
        return c.feed([sent(req(then, rewrite=True), 2)])

    out = run(steps[:3], after)
    assert [v.invariant for v in out] == ["summarised"]
    assert out[0].detail.startswith("assistant text 'The token is stale; refreshing it in the fixture now.', in "
                                    "request 0, left the main window")
    assert run(steps, after) == []
    transcript = user("\n".join(["User: " + ASK, "Read a:", LOGIN, "Assistant: " + ANSWER]))
    assert run([transcript], after) == []
    # the result cleared in place stays in the window (its id sent); the answer dropped is still reported
    cleared = [user(SUMMARY_TEXT), calls("a"), results(("a", "[cleared]")), user("go on")]
    assert [v.detail.split(" '")[0] for v in run([user(ASK)], cleared)] == ["assistant text"]


def test_user_messages_kept_across_a_compaction_are_the_users_own():
    """Codex declares it: after a rewrite the plain user messages are openings of ones the user wrote (a middle
    cut keeps 40 characters), or their start and end around a notice where the cut left less; the handoff marked as
    a summary is its own. A previous summary kept as a plain user message is reported, once a launch."""
    from ctxsim.harness.testing.declared import Declared
    from ctxsim.strategies.codex import Codex

    assert "user_messages" in promises(Codex)
    c = Checker(frozenset({"user_messages"}), {}, declared=Declared())
    first, second = "fix the flaky login test, it times out on CI", "now make the logout test pass as well, and the signup one too"
    c.feed([Mark("session_start", "s1"), Mark("user", text=first), sent(req([user(first)]), 0),
            Mark("user", text=second), sent(req([user(first), user(second)]), 1)])
    handoff = Message.user("Another language model started to solve this problem: the login token was stale.",
                           origin="summary")
    cut = user(second[:40] + " …[5 tokens truncated]…")
    assert c.feed([sent(req([user(first), cut, handoff], rewrite=True), 2)]) == []
    # cut to what the budget left, as Codex's middle_truncate cuts: its first 4 characters, a notice and its last 4
    # (the opening holds the notice; the start and the end are the user's around it)
    tiny = user(f"{second[:4]}…12 tokens truncated…{second[-4:]}")
    assert c.feed([sent(req([user(first), tiny, handoff], rewrite=True), 2)]) == []
    old = user("Another language model started to solve this problem: the login token was stale.")
    out = c.feed([sent(req([user(first), old, handoff], rewrite=True), 3)])
    assert [v.invariant for v in out] == ["user_messages"] and "none the user wrote" in out[0].detail
    assert c.feed([sent(req([user(first), old, handoff], rewrite=True), 4)]) == []


def test_summarised_is_not_judged_after_a_failed_side_call_nor_on_texts_too_short_to_tell():
    steps = [user(ASK), calls("a"), results(("a", LOGIN)), Message("assistant", (Block.text_block(ANSWER),))]
    c = _summarising(steps)
    failed = Sent(req([*steps, user("summarise")], kind="summary"), 100, 1_000, True, "injected failure", 1, 1.0)
    # the summary failed: a strategy may cut to fit (Codex trims the oldest items)
    assert c.feed([sent(req(steps), 0), failed, sent(req([user(ANSWER), user("go on")], rewrite=True), 2)]) == []
    # judged again from the next main request: the answer dropped now, no summary at all
    out = c.feed([sent(req([user("go on"), user("and more")], rewrite=True), 3)])
    assert [v.invariant for v in out] == ["summarised"] and "The token is stale" in out[0].detail
    short = [user("ok go"), Message("assistant", (Block.text_block("done."),))]
    c = _summarising(short)
    assert c.feed([sent(req(short), 0), sent(req([user("next one")], rewrite=True), 1)]) == []


def test_subagent_report_takes_in_the_sub_agents_work():
    """The summary asked for when a sub-agent ends whose text the parent then gets as a tool result (its
    report) takes in what only the sub-agent saw: a block of its last request the parent's did not hold,
    that block's opening in a rendered transcript, or its conclusion. One asked of the parent's context is
    reported; a summary the parent installs as a compaction is not a report."""
    parent = [user("fix the flaky login test"), calls("t")]
    sub = [user("Investigate the login test's token handling"), calls("r"),
           results(("r", "def refresh_token(): return cache.get('token')  # stale after 60 s"))]
    report = "Findings: the token cache never expires, so the login test reads a stale token."

    def ended(report_msgs, conclusion="The token cache never expires; the test reads a stale token.", landing=None):
        c = Checker(frozenset({"subagent_report"}), {})
        c.feed([sent(req(parent), 0), Mark("subtask_start", "t", isolated=True), sent(req(sub, kind="subagent"), 1),
                Mark("subtask_end", "t", text=conclusion),
                sent(req([*report_msgs, user("Report on your work.")], kind="summary"), 2),
                Mark("side_result", "summary", text=report)])
        return c.feed([sent(landing or req([*parent, results(("t", report))]), 3)])

    assert ended(sub) == []
    assert ended([user("Transcript:\nuser: Investigate the login test's token handling\n...")]) == []
    assert ended([user("The sub-agent concluded: The token cache never expires; the test reads a stale token.")]) == []
    out = ended(parent)
    assert [v.invariant for v in out] == ["subagent_report"] and out[0].call == 2
    assert "(its last request, call 1, nor its conclusion)" in out[0].detail
    # the parent compacted as the sub-agent returned: the summary is installed as a message, not a report
    assert ended(parent, landing=req([user(report), results(("t", "done"))], rewrite=True)) == []


def test_summary_in_the_window_leaves_it_only_into_a_later_summary():
    """A summary the main conversation holds goes only into a later summary's input: a second
    compaction that leaves the first summary out (cline folding only what came after it) loses what it
    held, reported once; one whose request took it in does not; a report handed back as a tool result
    is tool output and may be cleared. Summaries that share a summariser's fixed opening are told
    apart by their own pieces."""
    second = "<summary>The user wants the flaky login test fixed; then the retry limit made configurable.</summary>"

    def after_first():
        c = Checker(frozenset({"summary_used"}), {})
        _summarised(c, SUMMARY_TEXT, FIRST)
        c.feed([sent(req([user(SUMMARY_TEXT), user("now the retry limit")], rewrite=True), 2)])
        return c

    c = after_first()
    c.feed([sent(req([user("now the retry limit"), user("summarise")], kind="summary"), 3),
            Mark("side_result", "summary", text=second)])
    out = c.feed([sent(req([user(second), user("go on")], rewrite=True), 4)])
    assert [v.invariant for v in out] == ["summary_used"]
    assert "the summary answered to request 1" in out[0].detail and "in the window since request 2" in out[0].detail
    assert c.feed([sent(req([user(second), user("go on"), user("more")]), 5)]) == []
    c = after_first()
    c.feed([sent(req([user(SUMMARY_TEXT), user("now the retry limit"), user("summarise")], kind="summary"), 3),
            Mark("side_result", "summary", text=second)])
    assert c.feed([sent(req([user(second), user("go on")], rewrite=True), 4)]) == []
    c = Checker(frozenset({"summary_used"}), {})
    _summarised(c, SUMMARY_TEXT, FIRST)
    c.feed([sent(req([*FIRST, calls("t"), results(("t", SUMMARY_TEXT))]), 2)])
    assert c.feed([sent(req([*FIRST, calls("t"), results(("t", "[cleared]"))], rewrite=True), 3)]) == []


def test_a_summary_trimmed_from_a_request_refused_as_too_long_is_not_lost_by_a_defect():
    """Codex asks for its summary again without the oldest items when the request is refused as too long
    (codex-rs compact.rs): a summary among them leaves the window without a later summary taking it in,
    and that is the agent's design, not a lost summary."""
    second = "<summary>Second: the login test is fixed; the retry limit is next on the list.</summary>"

    def after_second(refused):
        c = Checker(frozenset({"summary_used"}), {})
        _summarised(c, SUMMARY_TEXT, FIRST)
        c.feed([sent(req([user(SUMMARY_TEXT), user("now the retry limit")], rewrite=True), 2)])
        ask = [user("now the retry limit"), user("summarise")]
        if refused:
            c.feed([Sent(req([user(SUMMARY_TEXT), *ask], kind="summary"), 100, 1_000, True,
                         "overflow: prompt is too long", 3, 3.0)])
        c.feed([sent(req(ask, kind="summary"), 4), Mark("side_result", "summary", text=second)])
        return [v.invariant for v in c.feed([sent(req([user(second), user("go on")], rewrite=True), 5)])]

    assert after_second(refused=False) == ["summary_used"]
    assert after_second(refused=True) == []


def test_call_model_holds_each_kind_to_its_declared_model():
    """goose declares its summaries on the fast model (claude-haiku-4-5 on Anthropic); a request with no
    model of its own goes on the run's. subagent_isolation declares the calls and the report of the
    sub-agents it starts itself (spans the log ran in its main context) on subagent_model: a recorded
    sub-agent (an isolated span) runs on the log's model."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.goose import Goose
    from ctxsim.strategies.subagent_isolation import SubagentIsolation

    haiku = "claude-haiku-4-5"
    assert dict(declared(Goose, {}).call_models) == {"summary": haiku}
    assert dict(declared(SubagentIsolation, {}).call_models) == {"report": haiku, "subagent": haiku,
                                                                 "subagent:summary": haiku}
    c = Checker(frozenset({"call_model"}), {}, declared=Declared(call_models=(("summary", haiku),)),
                run_model="claude-sonnet-4-6")
    out = c.feed([sent(req([user("go")]), 0), sent(req([user("go"), user("summarise")], kind="summary"), 1)])
    assert [(v.invariant, v.call, v.detail) for v in out] == [("call_model", 1, "a summary call was sent on "
                                                               "claude-sonnet-4-6; the strategy declares "
                                                               "claude-haiku-4-5 for it (call_models)")]
    on_haiku = Request(SYSTEM, TOOLS, History([user("summarise")]), kind="summary", model=haiku)
    c = Checker(frozenset({"call_model"}), {}, declared=Declared(call_models=(("summary", haiku),)), run_model="x")
    assert c.feed([sent(on_haiku, 0)]) == []
    own = (("subagent", haiku), ("report", haiku))
    c = Checker(frozenset({"call_model"}), {}, declared=Declared(call_models=own), run_model="claude-sonnet-4-6")
    c.feed([Mark("session_start", "s1"), sent(req([user("go")]), 0), Mark("subtask_start", "r", isolated=True)])
    assert c.feed([sent(req([user("recorded sub-agent")], kind="subagent"), 1)]) == []
    c.feed([Mark("subtask_end", "r"), Mark("subtask_start", "t", isolated=False)])
    out = c.feed([sent(req([user("delegated")], kind="subagent"), 2), Mark("subtask_end", "t"),
                  sent(req([user("delegated"), user("report")], kind="summary"), 3)])
    assert [v.detail.split(" was")[0] for v in out] == ["a sub-agent's call", "the report asked for as a sub-agent ended"]


def _launches(resume: bool) -> list[Message]:
    """Two launches of a recording: s1 (a call "a"), then s2, a resume or a new conversation."""
    rec = Recording(AppendOnly)
    from ctxsim.harness.model import trace as tr

    rec.note_events([tr.SessionStart(t=0.0, session="s1"), tr.UserEvent(t=1.0, text="fix the login test"),
                     tr.AssistantEvent(t=2.0, content=[tr.ToolUseContent(id="a", name="Read", input={})]),
                     tr.ToolResultEvent(t=3.0, tool_use_id="a", content="x"), tr.SessionEnd(t=4.0, session="s1"),
                     tr.SessionStart(t=5.0, session="s2", resume=resume), tr.UserEvent(t=6.0, text="add a feature")])
    c = Checker.for_recording(frozenset({"fresh_launch"}), rec)
    old = [user("fix the login test"), calls("a"), results(("a", "x"))]
    c.feed([Mark("session_start", "s1"), sent(req(old), 0), Mark("session_end", "s1"),
            Mark("session_start", "s2", resume=resume)])
    return c


def test_a_new_launch_that_carries_the_old_conversation_in_is_named():
    c = _launches(resume=False)
    out = c.feed([sent(req([user("fix the login test"), calls("a"), results(("a", "x")), user("add a feature")]), 1)])
    assert [v.invariant for v in out] == ["fresh_launch"]
    assert "holds user text of an earlier conversation (message 0: 'fix the login test')" in out[0].detail
    c = _launches(resume=False)
    out = c.feed([sent(req([calls("a"), results(("a", "x")), user("add a feature")]), 1)])
    assert "holds tool_use a of an earlier conversation" in out[0].detail
    assert _launches(resume=False).feed([sent(req([user("add a feature")]), 1)]) == []


def test_a_resume_continues_its_conversation():
    c = _launches(resume=True)
    assert c.feed([sent(req([user("fix the login test"), calls("a"), results(("a", "x")), user("add a feature")]), 1)]) == []


def test_a_message_marked_as_the_summary_that_is_not_it_keeps_no_promise():
    """The verifier's reply kept in place of the snapshot: the rewrite puts in a message it marks as a
    summary, which is not the summary it was given and holds none of the declared items."""
    from ctxsim.harness.testing.declared import Declared

    c = Checker(frozenset({"summary_keeps", "summary_used"}), {}, declared=Declared(summary_items=("Goal", "Next steps")))
    _summarised(c, "## Goal\nfix the flaky login test\n## Next steps\nrefresh the token before the assertion", FIRST)
    stand_in = Message("user", (Block.text_block("The summary is consistent with the conversation."),), {"origin": "summary"})
    out = c.feed([sent(req([stand_in, user("go on")], rewrite=True), 2)])
    assert sorted(v.invariant for v in out) == ["summary_keeps", "summary_used"]
    keeps = next(v for v in out if v.invariant == "summary_keeps")
    assert "is not the summary it was given and lacks 'Goal', 'Next steps'" in keeps.detail
    # the summary itself in the message marked so: kept
    c = Checker(frozenset({"summary_keeps", "summary_used"}), {}, declared=Declared(summary_items=("Goal", "Next steps")))
    text = "## Goal\nfix the flaky login test\n## Next steps\nrefresh the token before the assertion"
    _summarised(c, text, FIRST)
    kept = Message("user", (Block.text_block(text),), {"origin": "summary"})
    assert c.feed([sent(req([kept, user("go on")], rewrite=True), 2)]) == []


# --- kept_tail: what a compaction keeps verbatim besides its summary (issue #45) ---------------------------

TAIL_SUMMARY = "The user wants the three modules read; a and b were read and hold nothing of note."


def _tail_run(declared_tail, then: list[Message], came: list[Message] = (), opening: list[Message] = (),
              walked: bool = False, estimated: int | None = None) -> list[str]:
    """Request 0 holds ``opening`` (messages of the strategy's own), the task and the reads of a, b and c (7
    messages); ``came`` is what the engine gave the strategy since (the answer, a result); a summary is asked for
    (request 1), and request 2 holds it and ``then``. The invariants each violation names."""
    from ctxsim.harness.testing.declared import Declared

    steps = [*opening, *reads({"a": "A" * 100, "b": "B" * 100, "c": "C" * 100})]
    c = Checker(frozenset({"kept_tail"}), {}, declared=Declared(tail=tuple(declared_tail), tail_walked=walked))
    c.feed([sent(req(steps), 0), *(Mark("message", message=m) for m in came),
            sent(req([*steps[:3], user("summarise")], kind="summary"), 1), Mark("side_result", "summary", text=TAIL_SUMMARY)])
    summary = Message.user(TAIL_SUMMARY, origin="summary")
    r = req([summary, *then], rewrite=True)
    if estimated is not None:
        r = dataclasses.replace(r, estimated_tokens=estimated)
    return [v.detail for v in c.feed([sent(r, 2)])]


def test_kept_tail_holds_the_least_in_messages_unless_a_cap_kept_the_rest_out():
    """Declared: at least 4 messages. Request 0 is [go, call a, result a, call b, result b, call c, result c]; the
    compaction keeps [call b, result b, call c, result c] (4: held), or only [call c, result c] (2, with 5 messages
    before them: reported). With a cap besides, of 2 messages, the 2 before the tail ([call b, result b]) would carry
    it to 4, past the cap: the least yields. A note of the strategy's own after the summary is not the tail."""
    steps = reads({"a": "A" * 100, "b": "B" * 100, "c": "C" * 100})
    assert _tail_run([(4, None, "messages")], steps[3:]) == []
    out = _tail_run([(4, None, "messages")], steps[5:])
    assert len(out) == 1 and out[0].startswith("the compaction kept 2 messages verbatim after its summary, 2 messages, "
                                               "under the 4 messages")
    assert "the conversation held 5 messages before them" in out[0]
    assert _tail_run([(4, None, "messages"), (0, 2, "messages")], steps[5:]) == []
    note = Message.user("<restored-context>files read before</restored-context>", origin="restore")
    assert len(_tail_run([(4, None, "messages")], [note, *steps[5:]])) == 1
    # ... nor one it sent before as well (the same files restored at two compactions)
    out = _tail_run([(3, None, "messages")], [note, *steps[5:]], opening=[note])
    assert len(out) == 1 and "kept 2 messages verbatim after its summary, 2 messages, under the 3" in out[0]


def test_kept_tail_walked_the_finished_messages_kept_with_the_one_before_reach_the_bound():
    """aider keeps the newest finished messages while they stay under half its budget: a bound, not a floor. Declared
    walked, 5 messages: the finished messages kept are those before the user's latest message ("next", which came
    since request 0). Keeping [call b, result b, call c, result c] (4), with the result before them (back to its call:
    [call a, result a]) reaches 6: held. Keeping [call c, result c] with [call b, result b] before comes to 4, under 5:
    reported. Keeping none (the whole history summarised: aider's four messages or fewer) is not judged."""
    steps = reads({"a": "A" * 100, "b": "B" * 100, "c": "C" * 100})
    nxt = user("next")
    assert _tail_run([(5, None, "messages")], [*steps[3:], nxt], came=[nxt], walked=True) == []
    out = _tail_run([(5, None, "messages")], [*steps[5:], nxt], came=[nxt], walked=True)
    assert out == ["the compaction kept 2 finished messages verbatim after its summary, which with the 2 before them "
                   "come to 4 messages, under the 5 messages the strategy declares its walk from the newest stays under "
                   "(compaction_tail_walked): the walk stopped early (the messages sized in another unit?)"]
    assert _tail_run([(5, None, "messages")], [nxt], came=[nxt], walked=True) == []
    # not walked, the same 5 is a floor: the tail of 2 finished messages and "next" (3) is under it
    assert len(_tail_run([(5, None, "messages")], [*steps[5:], nxt], came=[nxt])) == 1
    # in tokens, at the rate of the strategy's own estimate of the request: with none, not judged. The request is 305
    # characters (system 23, tools 89, summary 82, call c 7, result c 100, "next" 4); the 4 messages [call b, result b,
    # call c, result c] are 214. Estimated at 305 tokens (one a character) they come to 214, and with a tenth for the
    # rate (235) under a bound of 250: reported; estimated at 610 (two a character), 428: held
    assert _tail_run([(250, None, "tokens")], [*steps[5:], nxt], came=[nxt], walked=True) == []
    assert _tail_run([(250, None, "tokens")], [*steps[5:], nxt], came=[nxt], walked=True, estimated=610) == []
    out = _tail_run([(250, None, "tokens")], [*steps[5:], nxt], came=[nxt], walked=True, estimated=305)
    assert len(out) == 1 and "come to about 214 tokens (as the strategy estimates), under the 250 tokens" in out[0]


def test_kept_tail_walked_past_its_bound_from_the_first_place_a_cut_may_fall():
    """The walk stays under its bound, then its split moves back to a place a cut may fall (after an assistant
    message, not before results): so what the tail holds after the first such place in it is under the bound. The
    conversation [go, call a, result a, answer 1, "more", call b, result b], then answer 2 and "next" came. A tail
    [answer 1, "more", call b, result b, answer 2, "next"] holds 5 finished messages; the first place a cut may fall
    is after answer 1: 4 after it. Walked under 5 messages: held (with the 2 before it, 7 reach 5). Under 3: the 4
    after the cut reach past it: reported."""
    from ctxsim.harness.testing.declared import Declared

    ans1, ans2 = Message("assistant", (Block.text_block("a read"),)), Message("assistant", (Block.text_block("b read"),))
    more, nxt = user("more"), user("next")
    conv = [user("go"), *read_step("a", "A" * 100), ans1, more, *read_step("b", "B" * 100)]

    def run(least: int) -> list[str]:
        c = Checker(frozenset({"kept_tail"}), {}, declared=Declared(tail=((least, None, "messages"),), tail_walked=True))
        c.feed([sent(req(conv), 0), Mark("message", message=ans2), Mark("message", message=nxt),
                sent(req([*conv[:3], user("summarise")], kind="summary"), 1), Mark("side_result", "summary", text=TAIL_SUMMARY)])
        summary = Message.user(TAIL_SUMMARY, origin="summary")
        return [v.detail for v in c.feed([sent(req([summary, *conv[3:], ans2, nxt], rewrite=True), 2)])]

    assert run(5) == []
    assert run(3) == ["the compaction kept 5 finished messages verbatim after its summary, the newest 4 of them after the "
                      "first place a cut may fall come to 4 messages, past the 3 messages the strategy declares its walk from "
                      "the newest stays under (compaction_tail_walked): the walk went past its bound (a bound read as "
                      "another?)"]


def test_kept_tail_walked_judges_the_first_round_of_a_chain_that_summarised_everything():
    """aider summarises everything where its summary and tail are still over its budget: a second round takes in the
    first summary and the tail the first kept out of it. The final tail is empty (not judged), but the first round's
    tail is the walk's. The conversation [u0, a1, u1, a2, u2, a3, u3, a4] (8 finished messages) and "next" came; the
    first summary takes in [u0, a1]; the second its text and [u1 .. a4] (6, rendered as one transcript). The first
    place a cut may fall in them is after a2: 4 messages after it. Walked under 3: past it, reported; under 4: held
    (4 is not past 4). A first summary of [u0 .. a3] leaves [u3, a4], with no place a cut may fall: held."""
    from ctxsim.harness.testing.declared import Declared

    said = ["please read the three modules of the package", "I will start with module a, then module b",
            "go on with module b and then with module c", "module b holds the parser and nothing else",
            "now the third module, c, if you would", "module c holds the printer and its tests",
            "and what about the fixtures in tests?", "the fixtures build a parser for each case"]
    conv = [user(t) if i % 2 == 0 else Message("assistant", (Block.text_block(t),)) for i, t in enumerate(said)]
    nxt = user("next")
    one, two = "SUMMARY ONE: the modules a and b were read.", "SUMMARY TWO: a, b and c were read; the fixtures too."

    def transcript(ms: list[Message], head: str = "") -> Request:
        text = head + "".join(f"# {m.role.upper()}\n{m.text}\n" for m in ms)
        return req([user(text)], kind="summary")

    def run(least: int, first: int = 2) -> list[str]:
        c = Checker(frozenset({"kept_tail"}), {}, declared=Declared(tail=((least, None, "messages"),), tail_walked=True))
        c.feed([sent(req(conv), 0), Mark("message", message=nxt),
                sent(transcript(conv[:first]), 1), Mark("side_result", "summary", text=one),
                sent(transcript(conv[first:], f"# USER\n{one}\n"), 2), Mark("side_result", "summary", text=two)])
        summary = Message.user(two, origin="summary")
        return [v.detail for v in c.feed([sent(req([summary, nxt], rewrite=True), 3)])]

    assert run(3) == ["the compaction summarised every finished message in 2 rounds; the first kept 6 of them out of its "
                      "summary for the next, the newest 4 of which, after the first place a cut may fall, come to 4 "
                      "messages, past the 3 messages the strategy declares its walk from the newest stays under "
                      "(compaction_tail_walked): the walk went past its bound (a bound read as another?)"]
    assert run(4) == []
    assert run(3, first=6) == []


def test_kept_tail_of_a_cut_counts_a_repeated_answer_where_it_stands():
    """A conversation [go, one, done, two] then the same answer "done" again and "three" came; a cut keeps [go, two,
    done, three]: after the gap, the newest 3 stand in a row in the conversation (the second "done" is the
    conversation's own, though it reads like the first). Declared at least 3 messages: held (counting the repeated
    answer once would find a tail of 1)."""
    from ctxsim.harness.testing.declared import Declared

    def done() -> Message:
        return Message("assistant", (Block.text_block("done"),))

    go, one, two, three = user("go"), user("one"), user("two"), user("three")
    c = Checker(frozenset({"kept_tail"}), {}, declared=Declared(tail=((3, None, "messages"),)))
    assert c.feed([sent(req([go, one, done(), two]), 0), Mark("message", message=done()), Mark("message", message=three)]) == []
    assert c.feed([sent(req([go, two, done(), three], rewrite=True), 1)]) == []


def test_kept_tail_caps_the_tail_and_counts_what_came_since_the_last_request():
    """Declared: at most 2 messages. The tail [call c, result c, answer] (3) is over; the answer came since request 0
    (the engine gave it to the strategy): it is the conversation's, and the tail's last message. A result cut since
    (a placeholder) is still found by its call's id."""
    steps = reads({"a": "A" * 100, "b": "B" * 100, "c": "C" * 100})
    answer = Message("assistant", (Block.text_block("all three read"),))
    out = _tail_run([(0, 2, "messages")], [*steps[5:], answer], came=[answer])
    assert len(out) == 1 and "kept 3 messages verbatim after its summary, 3 messages, over the 2 messages" in out[0]
    assert _tail_run([(0, 2, "messages")], [steps[5], results(("c", "[cut]"))]) == []
    # at least 3: the answer the engine gave counts among the 5 messages of the conversation before the 2 kept
    out = _tail_run([(3, None, "messages")], [answer], came=[answer])
    assert len(out) == 1 and "the conversation held 7 messages before them" in out[0]


def test_kept_tail_in_json_characters_as_the_api_takes_each_message():
    """Each Read step here is a call message of 96 JSON characters ('{"role": "assistant", "content": [{"type":
    "tool_use", "id": "c", "name": "Read", "input": {}}]}') and a result message of 208 (the 100 characters of its
    result and 108 of JSON around them): 304 a step. A least is judged with a tenth given for a strategy's rounding
    (a least of 400 under 360): the last step alone holds a least of 300, and is reported under one of 400."""
    import json

    steps = reads({"a": "A" * 100, "b": "B" * 100, "c": "C" * 100})
    assert [len(json.dumps(m.to_api(), ensure_ascii=False)) for m in steps[5:]] == [96, 208]
    assert _tail_run([(300, None, "json_chars")], steps[5:]) == []
    out = _tail_run([(400, None, "json_chars")], steps[5:])
    assert len(out) == 1 and "304 json_chars, under the 400 json_chars" in out[0]


def test_kept_tail_share_is_judged_where_a_typed_user_message_stands_within_it():
    """Declared: at most 30% of the conversation's JSON characters (gemini-cli's preserved fraction). The
    conversation [go, 3 Read steps] is 61 + 3 × 304 = 973 characters ('go' a message of 61); the last step alone is
    304 (31%). With no message the user typed within the last 30% the tail may start at the last one there is
    (gemini-cli's fallback): not judged. With the user's 'next' (63) after the reads, the tail [next] (6%) is held and
    [step c, next] (367 of 1,036, 35%) reported: the tail would start at the message the user typed."""
    steps = reads({"a": "A" * 100, "b": "B" * 100, "c": "C" * 100})
    assert _tail_run([(0, 0.3, "share")], steps[5:]) == []
    nxt = user("next")
    assert _tail_run([(0, 0.3, "share")], [nxt], came=[nxt]) == []
    out = _tail_run([(0, 0.3, "share")], [*steps[5:], nxt], came=[nxt])
    assert len(out) == 1 and "35% of the conversation's JSON characters, over the 30%" in out[0]


def test_kept_tail_declarations_of_the_compacting_peers():
    """NovaCode's N-COMP-6 (at least 10,000 tokens and 5 messages, at most 40,000; with tail_rule "either" no
    least), cline's preserved 20,000 tokens at 3 characters of JSON each, gemini-cli's preserved 30%. A hook of
    the wrong shape is refused, naming itself."""
    import pytest
    from ctxsim.harness.testing.declared import declared
    from ctxsim.strategies.cline import Cline
    from ctxsim.strategies.gemini_cli import GeminiCli
    from ctxsim.strategies.novacode.strategy import NovaCode

    assert declared(NovaCode, {}, 200_000, 32_000).tail == ((10_000, 40_000, "tokens"), (5, None, "messages"))
    assert declared(NovaCode, {"tail_rule": "either"}, 200_000, 32_000).tail == ((0, 40_000, "tokens"), (0, None, "messages"))
    assert declared(Cline, {}, 200_000, 32_000).tail == ((60_000, None, "json_chars"),)
    assert declared(GeminiCli, {}, 200_000, 32_000).tail == ((0, 0.3, "share"),)
    assert declared(NovaCode, {}).tail == ()   # no model: not judged

    class Odd(Cline):
        @classmethod
        def compaction_tail(cls, config, window, max_output_tokens):
            return ((1.5, None, "percent"),)

    with pytest.raises(ValueError, match=r"Odd.compaction_tail: \(least, most or None, unit among tokens"):
        declared(Odd, {}, 200_000, 32_000)


def test_kept_tail_of_a_cut_is_what_stands_after_its_note_and_no_longer_than_needed():
    """A cut with no summary (cut_no_summary): the tail is what stands after the strategy's own note. Declared: at
    least 2 messages, the shortest that holds it. Request 0 is [go, 3 Read steps]; the cut keeps [note, call c,
    result c] (held: without the call and its result nothing is left), or [note, call b, result b, call c,
    result c] (reported: the newest 2 already hold the least). A rewrite that leaves nothing out is no cut; a result
    the strategy made up for a call (after a crash) stands in the tail, not as its note."""
    from ctxsim.harness.testing.declared import Declared

    steps = reads({"a": "A" * 100, "b": "B" * 100, "c": "C" * 100})
    note = Message.user("[Earlier conversation was removed.]", origin="placeholder")

    def run(then: list[Message]) -> list[str]:
        c = Checker(frozenset({"kept_tail"}), {}, declared=Declared(tail=((2, None, "messages"),), tail_shortest=True))
        c.feed([sent(req(steps), 0)])
        return [v.detail for v in c.feed([sent(req(then, rewrite=True), 1)])]

    assert run([note, *steps[5:]]) == []
    out = run([note, *steps[3:]])
    assert len(out) == 1 and out[0].startswith("the compaction kept 4 messages verbatim after its note of the cut, where the "
                                               "newest 2 already hold every least it declares (2 messages)")
    assert run([note, *steps]) == []   # nothing left out: no cut
    made_up = Message("user", (Block.tool_result("c", "[no result: the session ended]"),), {"origin": "synthetic_result"})
    assert run([note, steps[5], made_up]) == []   # a result it made up for a call is no note of the cut
    assert len(run([note, *steps[6:]])) == 1   # one message: under the least, with 5 before it


def test_kept_tail_declarations_of_the_cutting_and_the_shortest():
    from ctxsim.harness.testing.declared import declared
    from ctxsim.strategies.cline import Cline
    from ctxsim.strategies.cut_no_summary import CutNoSummary
    from ctxsim.strategies.novacode.strategy import NovaCode

    d = declared(CutNoSummary, {}, 200_000, 32_000)
    assert d.tail == ((10_000, 40_000, "tokens"), (5, None, "messages")) and d.tail_shortest
    assert declared(NovaCode, {}, 200_000, 32_000).tail_shortest
    assert not declared(NovaCode, {"tail_rule": "either"}, 200_000, 32_000).tail_shortest
    assert not declared(Cline, {}, 200_000, 32_000).tail_shortest   # the cut moves back to the latest prompt


def test_compaction_only_as_a_turn_begins():
    """goose declares it summarises only as a user turn begins (compacts_only_at_turns). Request 0 answers the
    user; a summary asked for after it with no user message since is between the calls of the turn: reported. After
    the user's next message, or in reaction to a refused request, it is not."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.goose import Goose

    assert declared(Goose, {}).only_at_turns and not declared(AppendOnly, {}).only_at_turns
    steps = [user("fix it"), calls("a"), results(("a", "x"))]

    def run(*between) -> list[str]:
        c = Checker(frozenset({"compaction_trigger"}), {}, declared=Declared(only_at_turns=True))
        c.feed([Mark("user", text="fix it"), sent(req(steps[:1]), 0), *between,
                sent(req([*steps, user("summarise")], kind="summary"), 2)])
        return [v.detail for v in c.violations]

    out = run()
    assert len(out) == 1 and out[0].startswith("a summary asked for after request 0 of the main conversation, between")
    assert run(Mark("user", text="and the docs")) == []
    refused = Sent(req(steps), 5_000, 1_000, True, "prompt is too long", 1, 1.0)
    assert run(refused) == []


def test_results_kept_whole_within_the_declared_sizes():
    """NovaCode declares it spills past its threshold and its message budget only (keeps_results_whole): here 100
    characters a result, 150 a message. A 60-character result alone entering as a placeholder is reported; two of
    60 (120) with one replaced, too; a 120-character result (over 100) or three of 60 (180, over the budget) may
    be replaced."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.novacode.strategy import NovaCode

    assert declared(NovaCode, {}).whole_under == (50_000, 200_000)
    assert declared(NovaCode, {"spill": False}).whole_under is None

    def run(sizes: list[int], replaced: str) -> list[str]:
        ids = [chr(ord("a") + i) for i in range(len(sizes))]
        originals = {i: i * n for i, n in zip(ids, sizes, strict=True)}
        c = Checker(frozenset({"result_limit"}), originals, declared=Declared(whole_under=(100, 150)))
        entered = results(*((i, "[spilled]" if i in replaced else originals[i]) for i in ids))
        return [v.detail for v in c.feed([sent(req([user("go"), calls(*ids), entered]), 0)])]

    out = run([60], "a")
    assert len(out) == 1 and out[0].startswith("tool_result a entered changed ('[spilled]'), though its 60 characters "
                                               "and its message's 60 (those over 100 as sent) are within the 100 and 150")
    assert len(run([60, 60], "b")) == 1
    assert run([120], "a") == [] and run([60, 60, 60], "a") == [] and run([60], "") == []
    # the budget is met after the results over 100 are replaced (N-SPILL-1, then N-SPILL-2): 120 sent as its 9-character
    # placeholder and two of 60 come to 129, within 150, so replacing a 60 as well is reported; with a 90 beside the
    # two 60s (219, over 150) a 60 may go
    out = run([120, 60, 60], "ab")
    assert len(out) == 1 and "its message's 129 (those over 100 as sent)" in out[0]
    assert run([120, 60, 60], "a") == [] and run([90, 60, 60], "b") == []


def test_N_SPILL_2_a_message_over_its_budget_gives_up_its_largest_results_first():
    """N-SPILL-2: the results of a message over its budget spill largest first (spills_largest_first). Results of 70,
    40 and 30 characters: replacing the 70 holds; replacing the 30 while the 70 goes whole is reported; a read of the
    strategy's own spilled file may go whole whatever its size (N-SPILL-3)."""
    from pathlib import Path

    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.novacode.strategy import NovaCode

    assert declared(NovaCode, {}).largest_first and not declared(NovaCode, {"spill": False}).largest_first
    originals = {"a": "A" * 70, "b": "B" * 40, "c": "C" * 30}

    def run(replaced: str, spills: dict | None = None, inputs: dict | None = None) -> list[str]:
        c = Checker(frozenset({"result_limit"}), originals, declared=Declared(largest_first=True), inputs=inputs or {})
        c.spills.update(spills or {})
        entered = results(*((i, "[spilled]" if i in replaced else t) for i, t in originals.items()))
        return [v.detail for v in c.feed([sent(req([user("go"), calls(*originals), entered]), 0)])]

    assert run("a") == [] and run("") == []
    out = run("c")
    assert out == ["tool_result a entered whole at 70 characters while c of the same message, 30, entered replaced: "
                   "the strategy declares a message over its budget gives up its largest results first "
                   "(spills_largest_first: sorted the wrong way?)"]
    spill = str(Path("/run/s1/tool-results/x.txt"))
    assert len(run("bc")) == 1 and run("bc", spills={spill: "x"}, inputs={"a": {"file_path": spill}}) == []


def test_a_cut_keeps_no_more_of_the_start_than_declared():
    """Codex's cut keeps at most half its bytes and half its lines from the output's start (cut_keeps_head). The
    output here: 200 lines of 5 characters ('0000\\n' ... '0199\\n'), 1,000 characters. A cut holding its first 100
    characters (20 lines) and its last 100 under a header holds a declared 100 characters and 20 lines; one holding
    its first 400 (80 lines) is reported (over 100 by more than the 64 a cut's notices may add; over 20 lines by
    more than 8). The head is found where the output's opening first stands (after the cut's header)."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.codex import Codex
    from ctxsim.strategies.truncate import Truncate

    assert declared(Truncate, {}).head_at_most == ((5_120, "bytes"), (128, "lines"))
    assert declared(Codex, {}).head_at_most[0][1] == "chars"
    original = "".join(f"{i:04d}\n" for i in range(200))

    def run(head: int, at_most) -> list[str]:
        cut = f"Total output lines: 200\n\n{original[:head]}\n[... omitted ...]\n\n{original[-100:]}"
        c = Checker(frozenset({"result_limit"}), {"a": original}, declared=Declared(head_at_most=at_most))
        return [v.detail for v in c.feed([sent(req([user("go"), calls("a"), results(("a", cut))]), 0)])]

    assert run(100, ((100, "chars"), (20, "lines"))) == []
    out = run(400, ((100, "chars"),))
    assert len(out) == 1 and "keeping 400 chars of the output's start, over the 100 chars" in out[0]
    assert len(run(400, ((20, "lines"),))) == 1 and run(140, ((20, "lines"),)) == []


def test_a_cut_whose_head_takes_every_line_keeps_no_tail():
    """Codex's cut keeps its head's lines (128) and the tail from the lines after them: an output over the byte limit in
    fewer lines than the head takes (here 10 lines of 500 characters, 5,000 characters; a head of 20 lines) has no
    tail. A cut that keeps the first 1,000 characters and a notice passes; one that also keeps the last 1,000 (the
    tail's lines counted from the whole output, not after the head's) is reported; with 8 lines declared (the output's
    10 are more), not judged."""
    from ctxsim.harness.testing.declared import Declared

    original = "".join(f"{i:03d}" + "x" * 496 + "\n" for i in range(10))

    def run(cut: str, lines: int = 20) -> list[str]:
        c = Checker(frozenset({"result_limit"}), {"a": original}, declared=Declared(head_at_most=((lines, "lines"),)))
        return [v.detail for v in c.feed([sent(req([user("go"), calls("a"), results(("a", cut))]), 0)])]

    head = f"Total output lines: 10\n\n{original[:1_000]}\n[... omitted 0 of 10 lines ...]\n\n"
    assert run(head) == []
    assert run(head + original[-1_000:]) == [
        "tool_result a entered cut, though its 10 lines are no more than the 20 the strategy declares its head takes "
        "(cut_keeps_head), and it also keeps the output's last 1,001 characters: a tail taken from lines the head took "
        "(its lines not counted after the head's?)"]   # the notice's newline before it is the output's too
    assert run(head + original[-1_000:], lines=8) == []


def test_kept_tail_cap_in_tokens_is_judged_by_what_any_estimate_counts_at_the_least():
    """A tail sized at the strategy's own estimate: a cap in tokens is judged at 4 characters a token (the fewest
    tokens any estimator here counts; a calibrated rate may run far under a denser tail, so true tokens would report a
    correct strategy). Each Read step here holds 107 characters ('Read {}' and its 100-character result): the last
    step alone is 26.75 tokens so counted, within a cap of 50; the last two, 214 characters, 53.5: over it (by more
    than the 2% a strategy's comparison may add)."""
    steps = reads({"a": "A" * 100, "b": "B" * 100, "c": "C" * 100})
    assert _tail_run([(0, 50, "tokens")], steps[5:]) == []
    out = _tail_run([(0, 50, "tokens")], steps[3:])
    assert len(out) == 1 and "4 messages verbatim after its summary, 214 characters (at least 54 tokens at 4 a token), " \
                             "over the 50 tokens" in out[0]


def test_kept_tail_calibrated_N_COMP_6_a_cap_counted_at_the_rate_the_conversation_measured():
    """NovaCode counts its tail at no more characters a token than the conversation measured (calibrate_budgets). Request
    0 holds 112 characters of prompt and 323 of messages (the task, reads of a, b and c: 107 characters each step); its
    answer, 15 characters, was 200 input and 25 output tokens: 450 characters over 225 tokens, 2.0 a token. A cap of 60
    tokens (and the kit's tenth for the strategy's own count, 66): the last step and the answer, 122 characters, are 61
    tokens at that rate, held; the last two steps and the answer, 229 characters, are 114.5, over it: reported, where 4
    characters a token (57) holds the cap. Not declared, or measured at 4 characters a token, nothing is."""
    from ctxsim.harness.model.conversation import Block, Usage
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.harness.testing.invariants import TAIL_CALIBRATED_SLACK, _prompt_chars
    from ctxsim.strategies.novacode.strategy import NovaCode

    assert declared(NovaCode, {}, 200_000, 32_000).tail_calibrated
    assert not declared(NovaCode, {"calibrate_budgets": False}, 200_000, 32_000).tail_calibrated
    assert TAIL_CALIBRATED_SLACK == 1.1
    steps = reads({"a": "A" * 100, "b": "B" * 100, "c": "C" * 100})
    answer = Message("assistant", (Block.text_block("all three read."),))
    assert _prompt_chars(req(steps)) == 112 and sum(m.chars for m in steps) == 323 and answer.chars == 15

    def run(kept: list[Message], calibrated: bool = True, tokens: tuple[int, int] = (200, 25)) -> list[str]:
        c = Checker(frozenset({"kept_tail"}), {}, declared=Declared(tail=((0, 60, "tokens"),), tail_calibrated=calibrated))
        c.feed([Mark("session_start", "s1"), sent(req(steps), 0),
                Mark("message", message=answer, usage=Usage(input_uncached=tokens[0], output=tokens[1])),
                sent(req([*steps[:3], user("summarise")], kind="summary"), 1),
                Mark("side_result", "summary", text=TAIL_SUMMARY)])
        summary = Message.user(TAIL_SUMMARY, origin="summary")
        return [v.detail for v in c.feed([sent(req([summary, *kept, answer], rewrite=True), 2)])]

    assert run(steps[5:]) == []
    out = run(steps[3:])
    assert out == ["the compaction kept 5 messages verbatim after its summary, 229 characters: 114 tokens at the 2.00 "
                   "characters a token the conversation measured on its last answered request, over the 60 tokens the "
                   "strategy declares it keeps at most, counted at no more characters a token than that "
                   "(compaction_tail_calibrated: the tail sized at a fixed rate?)"]
    assert run(steps[3:], calibrated=False) == [] and run(steps[3:], tokens=(100, 12)) == []


def test_every_request_masks_all_but_the_newest_in_a_sub_agents_own_conversation_too():
    """observation_masking at polling 1 masks all but the newest n observations on every request (clears_above 0),
    in an isolated sub-agent's conversation as in the main one. Here n = 1: the sub-agent's second request sends its
    older result (a) whole beside the newest (b): reported; masked, nothing is."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.observation_masking import ObservationMasking

    assert declared(ObservationMasking, {}).clears_above == 0 and declared(ObservationMasking, {"polling": 2}).clears_above is None
    long_a, long_b = "a" * 100, "b" * 100

    def run(a_sent: str) -> list[str]:
        c = Checker(frozenset({"compaction_trigger", "recent_kept"}), {"a": long_a, "b": long_b},
                    declared=Declared(recent_kept=1, clears_all_but=(), clears_above=0))
        first = [user("the sub-agent's task"), calls("a"), results(("a", long_a))]
        return [v.detail for v in c.feed([
            Mark("subtask_start", "t1", isolated=True), sent(req(first, kind="subagent"), 0),
            sent(req([first[0], calls("a"), results(("a", a_sent)), calls("b"), results(("b", long_b))],
                     kind="subagent", rewrite=a_sent != long_a), 1)])]

    out = run(long_a)
    assert len(out) == 1 and out[0].startswith("1 result(s) older than the newest 1 tool uses go whole (of tool use a")
    assert run("Old environment output: (1 lines omitted)") == []


def test_compaction_trigger_held_past_failures_fewer_than_the_declared_breaker():
    """Claude Code stops auto-compacting after three failed summaries in a row (compaction_breaker 3); a good
    summary resets the count. Declared trigger 1,000: after summaries that failed, failed, then answered, then failed
    once, a request estimated at 1,100 with no summary asked for is reported (one failure in a row); after three in
    a row it is not (the breaker open). An empty answer is a failure too."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.claude_code import ClaudeCode

    assert declared(ClaudeCode, {}).breaker == 3
    msgs = [user("go")]

    def summary(call: int, answer: str | None) -> list:
        if answer is None:
            return [Sent(req([*msgs, user("summarise")], kind="summary"), 100, 1_000, True, "injected failure", call, 0.0)]
        return [sent(req([*msgs, user("summarise")], kind="summary"), call), Mark("side_result", "summary", text=answer)]

    def run(*answers) -> list[str]:
        c = Checker(frozenset({"compaction_trigger"}), {}, declared=Declared(compacts_above=1_000, breaker=3))
        entries = [Mark("session_start", "s1"), sent(_estimated(msgs, 1_000), 0)]   # at the trigger, as estimated
        for k, a in enumerate(answers):
            entries += [*summary(10 + k, a), sent(_estimated(msgs, 1_000), 20 + k)]
        return [v.detail for v in c.feed([*entries, sent(_estimated(msgs, 1_100), 99)])]

    assert len(run(None, None, "The user wants it fixed.", None)) == 1
    assert run(None, None, None) == [] and run(None, "", None) == []


def test_kept_tail_in_events_as_openhands_counts_them():
    """OpenHands V1 keeps the events from the first cut point (a message that is no result) at or after len − (max_size
    // 2 − keep_first − 1): at most that many, and the turn before would carry the tail past them (80 events, keep 4:
    35). Declared here 3 events: [go, calls a b (2 events), results a b (2), answer, next]; keeping [answer, next] (2)
    holds, the turn before making 6; keeping [next] (1) is reported, [answer] alone before it making 2; keeping
    [calls, results, answer, next] (6) is over. A tail repeating a message (the same answer twice) starts where the
    conversation holds it in a row, not where the repeat stands. Past the window, where the strategy says the tokens
    decide (compaction_tail_under_window), nothing is judged."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.openhands import OpenHands

    assert declared(OpenHands, {}, 200_000, 32_000).tail == ((35, 35, "events"),)
    assert declared(OpenHands, {}, 200_000, 32_000).tail_under_window
    assert declared(OpenHands, {"max_tokens": 100_000}, 200_000, 32_000).tail == ((0, 35, "events"),)
    assert declared(OpenHands, {"release": "v0"}, 200_000, 32_000).tail == ()
    go, nxt, answer = user("go"), user("next"), Message("assistant", (Block.text_block("both read"),))
    batch = [calls("a", "b"), results(("a", "A" * 100), ("b", "B" * 100))]
    conv = [go, *batch, answer, nxt]

    def run(conv, then, tail=((3, 3, "events"),), window=1_000, under=False) -> list[str]:
        k = Checker(frozenset({"kept_tail"}), {}, declared=Declared(tail=tail, tail_under_window=under))
        k.feed([sent(req(conv), 0), sent(req([user("summarise")], kind="summary"), 1),
                Mark("side_result", "summary", text=TAIL_SUMMARY)])
        summary = Message.user(TAIL_SUMMARY, origin="summary")
        return [v.detail for v in k.feed([sent(req([summary, *then], rewrite=True), 2, window=window)])]

    assert run(conv, [answer, nxt]) == []
    out = run(conv, [nxt])
    assert len(out) == 1 and "kept 1 messages verbatim after its summary, 1 events, under the 3 events" in out[0]
    out = run(conv, [*batch, answer, nxt])
    assert len(out) == 1 and "6 events, over the 3 events" in out[0]
    assert run(conv, [nxt], window=10, under=True) == []
    twice = [go, *batch, answer, nxt, answer, user("more")]
    assert run(twice, twice[3:], tail=((5, 5, "events"),)) == []   # 4 kept; the batch before would make 8


def test_kept_tail_a_least_yields_to_a_cap_at_the_densest_rate_the_conversation_grew_by():
    """A strategy that calibrates its rate on the growth between two usages (NovaCode) may count a message at the
    densest rate that growth showed: a result of CJK text took it to a token a character, and a mixed tail was then
    over its cap. Declared: at least 1,000 tokens, at most 1,500. Request 1 grew by step b (2,007 characters) and
    2,500 tokens: 1.25 a character. The compaction keeps nothing after its summary; the step before (call c, result
    c: 1,307 characters, a few hundred true tokens) is 1,628 tokens at that rate, past the cap: the least yields.
    Grown by 10 tokens instead, it is reported."""
    from ctxsim.harness.testing.declared import Declared
    from ctxsim.harness.testing.invariants import DENSE_MIN_CHARS

    assert DENSE_MIN_CHARS == 2_000
    go, a, b, c = user("go"), read_step("a", "A" * 100), read_step("b", "B" * 2_000), read_step("c", "C" * 1_300)
    assert sum(m.chars for m in b) == 2_007 and sum(m.chars for m in c) == 1_307

    def run(grown: int) -> list[str]:
        k = Checker(frozenset({"kept_tail"}), {}, declared=Declared(tail=((1_000, 1_500, "tokens"),)))
        k.feed([sent(req([go, *a]), 0, tokens=100), sent(req([go, *a, *b]), 1, tokens=100 + grown),
                sent(req([go, *a, *b, *c]), 2, tokens=200 + grown), sent(req([user("summarise")], kind="summary"), 3),
                Mark("side_result", "summary", text=TAIL_SUMMARY)])
        summary = Message.user(TAIL_SUMMARY, origin="summary")
        return [v.detail for v in k.feed([sent(req([summary, user("go on")], rewrite=True), 4)])]

    assert run(2_500) == []
    out = run(10)
    assert len(out) == 1 and "under the 1,000 tokens the strategy declares it keeps at least" in out[0]


def test_kept_tail_in_turns_keeps_the_newest_whole_where_they_fit_the_cap():
    """opencode keeps the newest 2 user turns verbatim where their characters fit its tail budget (compaction_tail in
    turns, with a cap in characters). The conversation [go, step a, next, step b, more, step c] (each result 100
    characters, a call 7: a step is 107); the summary keeps [more, step c] (1 turn, 111 characters): reported under a
    cap of 300 ([next, step b, more, step c] is 222), held under a cap of 150 (the two turns would not fit). [next,
    step b, more, step c] (2 turns) holds; with only [go, step a, next, step b] before the summary's request (the
    two turns are all there is) nothing is left to summarise before them: a tail of one turn is not judged. Three
    turns kept are over the most."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.opencode import OpenCode

    assert declared(OpenCode, {}, 200_000, 64_000).tail == ((2, 2, "turns"), (0, 32_000, "chars"))
    assert declared(OpenCode, {"tail_turns": 0}, 200_000, 64_000).tail == ((0, 0, "messages"),)
    go, nxt, more = user("go"), user("next"), user("more")
    a, b, c = (read_step(t, t.upper() * 100) for t in "abc")
    assert [m.chars for m in (go, *a, nxt, more)] == [2, 7, 100, 4, 4]
    summary = Message.user(TAIL_SUMMARY, origin="summary")

    def run(conv: list[Message], then: list[Message], cap: int) -> list[str]:
        k = Checker(frozenset({"kept_tail"}), {}, declared=Declared(tail=((2, 2, "turns"), (0, cap, "chars"))))
        k.feed([sent(req(conv), 0), sent(req([user("summarise")], kind="summary"), 1),
                Mark("side_result", "summary", text=TAIL_SUMMARY)])
        return [v.detail for v in k.feed([sent(req([summary, *then], rewrite=True), 2)])]

    conv = [go, *a, nxt, *b, more, *c]
    out = run(conv, [more, *c], 300)
    assert len(out) == 1 and out[0].startswith("the compaction kept 3 messages verbatim after its summary, 1 of the "
                                               "conversation's turns, under the 2 newest")
    assert run(conv, [more, *c], 150) == []
    assert run(conv, [nxt, *b, more, *c], 300) == []
    assert run([go, *a, nxt, *b], [nxt, *b], 300) == []
    out = run(conv, [go, *a, nxt, *b, more, *c], 1_000)
    assert len(out) == 1 and "3 turns, over the 2 turns the strategy declares it keeps at most" in out[0]


def test_kept_tail_of_a_cut_with_no_note_is_what_follows_its_gap():
    """amortized_forgetting forgets the middle with nothing in its place: the tail is the newest messages the request
    holds in a row as the conversation had them, after the gap. Declared: 2 to 3 messages (max_size 10, keep_first
    2: 5 − 2 = 3). Request 0 is [go, 3 Read steps]; [go, call a, | call c, result c] keeps 2 (held); [go, | call b,
    result b, call c, result c] keeps 4 (reported)."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.amortized_forgetting import AmortizedForgetting

    assert declared(AmortizedForgetting, {"max_size": 10, "keep_first": 2}, 32_000, 8_000).tail == ((2, 3, "messages"),)
    steps = reads({"a": "A" * 100, "b": "B" * 100, "c": "C" * 100})

    def run(then: list[Message]) -> list[str]:
        c = Checker(frozenset({"kept_tail"}), {}, declared=Declared(tail=((2, 3, "messages"),)))
        c.feed([sent(req(steps), 0)])
        return [v.detail for v in c.feed([sent(req(then, rewrite=True), 1)])]

    assert run([*steps[:2], *steps[5:]]) == []
    out = run([steps[0], *steps[3:]])
    assert len(out) == 1 and out[0].startswith("the compaction kept 4 messages verbatim after the gap of the cut, 4 "
                                               "messages, over the 3 messages")


def test_kept_tail_a_cut_keeps_its_declared_share_unless_the_total_or_the_kept_share_excuse_it():
    """cut_keeps_share: sliding_window (Cline's classic truncation) keeps at least half of what follows its first pair.
    Request 0 is [go, 5 Read steps of 1,000 characters] (11 messages: 2 + 5 × 1,007 = 5,037 characters; the system
    prompt's 23 and the tool's 89 make 5,149). The cut sends [go, call a, a "result missing", call e, result e] (1,030
    characters, 1,142 with the system and the tool) estimated at 1,142 tokens: one token a character. It kept 3 of the
    9 after the first 2, under 5 (half, rounded up). The conversation: 5,149 tokens; a request keeping the newest 7
    (the share and the pair before it: 4,021 characters) with the first 2 (9): 4,142. Declared (0.5, 2, 10,000,
    5,000): reported (5,149 × 1.1 within 10,000; 4,142 × 1.1 = 4,556 under 5,000). Under 4,500 instead: excused (that
    request could have had it cut again); within 5,600 instead of 10,000: excused (5,664 past it: a quarter chosen).
    Keeping 5 holds; a rewrite that leaves nothing out is no cut; a cut with no estimate is not judged."""
    from dataclasses import replace

    from ctxsim.harness.testing.declared import Declared

    steps = reads({k: k.upper() * 1_000 for k in "abcde"})
    cut = [*steps[:2], results(("a", "result missing")), *steps[-2:]]

    def run(then: list[Message], share=(0.5, 2, 10_000.0, 5_000.0), estimate: int | None = 1_142) -> list[str]:
        c = Checker(frozenset({"kept_tail"}), {}, declared=Declared(cut_share=share))
        c.feed([sent(req(steps), 0)])
        return [v.detail for v in c.feed([sent(replace(req(then, rewrite=True), estimated_tokens=estimate), 1)])]

    out = run(cut)
    assert out == ["the cut kept 3 of the 9 messages after the first 2, under the 50% (5) the strategy declares it keeps "
                   "(cut_keeps_share), though the conversation was estimated at about 5,149 tokens (at most 10,000) and "
                   "a request keeping the newest 7 at about 4,142, under the 5,000 that would have it cut again (a choice "
                   "between shares made the wrong way, a share read as another?)"]
    assert run(cut, (0.5, 2, 10_000.0, 4_500.0)) == []
    assert run(cut, (0.5, 2, 5_600.0, 5_000.0)) == []
    assert len(run(cut, (0.5, 2, None, 5_000.0))) == 1   # a share at any size: judged
    assert run([*steps[:2], results(("a", "result missing")), *steps[-4:]]) == []   # 5 kept
    assert run(steps) == [] and run(cut, estimate=None) == []


def test_kept_tail_declarations_of_the_sliding_window():
    """sliding_window's allowed size on a 200k window is 160,000 (Cline's table): half kept after the first pair,
    a quarter when the total is past twice that; "half" and "quarter" at any size; a reserve of its own moves both. A
    declaration of the wrong shape is refused, naming itself."""
    import pytest
    from ctxsim.harness.testing.declared import declared
    from ctxsim.strategies.sliding_window import SlidingWindow

    assert declared(SlidingWindow, {}, 200_000, 32_000).cut_share == (0.5, 2, 320_000.0, 160_000.0)
    assert declared(SlidingWindow, {"keep": "half"}, 200_000, 32_000).cut_share == (0.5, 2, None, 160_000.0)
    assert declared(SlidingWindow, {"keep": "quarter"}, 200_000, 32_000).cut_share == (0.25, 2, None, 160_000.0)
    assert declared(SlidingWindow, {"reserve_tokens": 50_000}, 200_000, 32_000).cut_share == (0.5, 2, 300_000.0, 150_000.0)
    assert declared(SlidingWindow, {}).cut_share is None   # no model: not judged

    class Odd(SlidingWindow):
        @classmethod
        def cut_keeps_share(cls, config, window, max_output_tokens):
            return (50, 2, None, 1_000)

    with pytest.raises(ValueError, match=r"Odd.cut_keeps_share: \(share 0-1, head messages"):
        declared(Odd, {}, 200_000, 32_000)


def test_the_user_messages_a_compaction_keeps_are_the_newest_in_order():
    """Codex keeps the newest user messages within its budget, in the order written, the oldest kept perhaps cut
    in its middle (keeps_newest_user_messages). The user wrote three; a rewrite keeping the second and third holds,
    as does one keeping a cut second; the first and second (the walk from the oldest), or the third before the
    second (reversed), are reported."""
    from ctxsim.harness.testing.declared import Declared, declared
    from ctxsim.strategies.codex import Codex

    assert declared(Codex, {}).newest_users and not declared(AppendOnly, {}).newest_users
    said = ["first: make the login test pass again, it fails since the token refactor",
            "second: and keep the fixture as it is, other tests share it with this one",
            "third: then run the whole suite please, and tell me what else broke"]
    handoff = Message.user("Handoff: the login test is being fixed.", origin="summary")

    def run(kept: list[str]) -> list[str]:
        c = Checker(frozenset({"user_messages"}), {}, declared=Declared(newest_users=True))
        c.feed([Mark("session_start", "s1"), *(Mark("user", text=t) for t in said), sent(req([user(t) for t in said]), 0)])
        return [v.detail for v in c.feed([sent(req([*(user(t) for t in kept), handoff], rewrite=True), 1)])]

    assert run(said[1:]) == [] and run([said[1][:45] + "…9 tokens truncated…" + said[1][-10:], said[2]]) == []
    out = run(said[:2])
    assert len(out) == 1 and out[0].startswith("the user messages kept after this rewrite are not the newest the user "
                                               "wrote, in order: counting from the newest, kept message 1 opens 'second: and keep")
    assert len(run([said[2], said[1]])) == 1


def test_an_early_summary_is_judged_on_the_conversation_with_what_came_since():
    """A summary request may send the conversation's results cut (Cline renders each to 2,000 characters), so the
    conversation it is asked on is at least the last main request and what the engine gave the strategy since. Declared
    trigger 1,000: request 0 was 100 tokens (estimated 100); a summary request of 100 tokens follows. With nothing since
    it fired early (100 × 1.6 < 1,000); after a result of about a thousand tokens came, it did not."""
    from ctxsim.harness.provider.tokenizer import get_tokenizer
    from ctxsim.harness.testing.declared import Declared

    big = results(("a", " ".join(f"line{i}" for i in range(600))))
    assert get_tokenizer().count(big.text) * 1.6 > 1_000

    def run(*came) -> list[str]:
        c = Checker(frozenset({"compaction_trigger"}), {}, declared=Declared(compacts_above=1_000))
        c.feed([Mark("session_start", "s1"), sent(_estimated([user("go")], 100), 0), *(Mark("message", message=m) for m in came),
                sent(req([user("go"), user("summarise")], kind="summary"), 1)])
        return [v.detail for v in c.violations]

    assert len(run()) == 1 and run(calls("a"), big) == []
