"""A fork of the conversation (trace SubtaskStart.fork; harness/replay/fork.py): Claude Code's side question
(/btw) and prompt suggestion send the main conversation as it stands with their own prompt after it, read what
the main loop cached, and leave nothing in it. The replay sends the strategy's last request, its answer (where it
holds no tool use) and the fork's messages; the strategy is never told."""

from __future__ import annotations

import pytest
from ctxsim.harness.model import trace as tr
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.strategies.registry import names

from tests.helpers_traces import Builder

SIDE = "<system-reminder>This is a side question from the user.</system-reminder> why a.py?"


def _fork(b: Builder, at: float) -> None:
    b.event(tr.SubtaskStart(t=at, id="aside_question-1", description="side question", isolated=True, fork=True))
    b.event(tr.UserEvent(t=at, text=SIDE))
    b.event(tr.AssistantEvent(t=at + 1, content=[tr.TextContent(text="Because parse() lives there.")]))
    b.event(tr.SubtaskEnd(t=at + 1, id="aside_question-1"))
    b.t = at + 1


def _session(mid_turn: bool = False) -> tr.Trace:
    b = Builder()
    b.user("find parse()")
    b.call("Reading.", ["a.py holds parse()"])
    if mid_turn:   # asked while the next call's tool ran: between that call and its result
        b.call("Checking b.py too.", ["b.py holds lex()"])
        res = b.events.pop()
        _fork(b, b.t + 0.1)
        b.events.append(res.model_copy(update={"t": b.t + 0.5}))
    b.call("Done: parse() is in a.py.")
    if not mid_turn:
        _fork(b, b.t + 1)
    b.user("thanks")
    b.call("bye")
    return b.build()


def _text(req) -> str:
    return "\n".join(blk.text for m in req.messages for blk in m.blocks if blk.type == "text")


def test_a_fork_sends_the_last_request_its_answer_and_its_question_reading_what_that_request_cached():
    """Calls: 0 main, 1 main (its answer a turn's last: no tool use), 2 the fork, 3 main. The fork's request is
    call 1's messages, call 1's answer and the side question; it reads from the cache exactly what call 1 read
    and wrote (the breakpoint call 1 set), pays the answer and the question uncached, and is a sub-agent's call.
    The strategy never sees the question: the next main request lacks it, and the user's turns are two."""
    seen = []
    res = replay(_session(), "append_only", {}, RunConfig(observer=lambda req, info: seen.append(req)))
    c = res.calls
    assert list(c["kind"]) == ["main", "main", "subagent", "main"] and list(c["call"]) == [0, 1, 2, 3]
    one, f = c.iloc[1], c.iloc[2]
    msgs = list(seen[2].messages)
    assert msgs[:-2] == list(seen[1].messages)
    assert [m.role for m in msgs[-2:]] == ["assistant", "user"]
    assert msgs[-2].blocks[0].text == "Done: parse() is in a.py." and msgs[-1].blocks[0].text == SIDE
    assert f["cache_read"] == one["cache_read"] + one["cache_write_5m"] + one["cache_write_1h"]
    assert f["cache_write_5m"] + f["cache_write_1h"] == 0
    assert f["input_uncached"] == f["context_tokens"] - f["cache_read"] > 0
    assert SIDE not in _text(seen[3]) and "Because parse()" not in _text(seen[3])
    assert res.metrics["turns"] == 2 and res.metrics["completed"]


def test_a_fork_while_a_calls_tools_run_leaves_that_call_out_and_its_results_reach_the_strategy_once():
    """Asked while call 1's tool ran (between call 1 and its result): the fork sends call 1's request without
    call 1's answer (its tool use has no result yet: with it the request would be refused), and the result
    reaches the strategy once, after the fork, in one message."""
    seen = []
    res = replay(_session(mid_turn=True), "append_only", {}, RunConfig(observer=lambda req, info: seen.append(req)))
    c = res.calls
    assert list(c["kind"]) == ["main", "main", "subagent", "main", "main"]
    assert list(seen[2].messages)[:-1] == list(seen[1].messages)
    assert res.metrics["pairing_violations"] == 0 and res.metrics["rejected_requests"] == 0
    results = [blk for m in seen[3].messages for blk in m.blocks if blk.type == "tool_result"]
    assert [r.text for r in results] == ["a.py holds parse()", "b.py holds lex()"]


def test_a_fork_before_any_call_sends_the_system_prompt_and_its_question():
    b = Builder()
    _fork(b, 1.0)
    b.user("go")
    b.call("ok")
    seen = []
    res = replay(b.build(), "append_only", {}, RunConfig(observer=lambda req, info: seen.append(req)))
    assert list(res.calls["kind"]) == ["subagent", "main"]
    assert [m.blocks[0].text for m in seen[0].messages] == [SIDE]


def test_a_fork_the_api_would_refuse_is_recorded_refused_and_the_session_goes_on():
    """Over the window: refused, not billed, and the main conversation goes on (Claude Code's does). Sizes: call 0
    sends 3,096 tokens, the fork 3,126 (its question is longer than the user's next message), call 2 3,107: a
    3,115-token window refuses only the fork."""
    seen = []
    b = Builder()
    b.user("x " * 3000)
    b.call("ok")
    _fork(b, b.t + 1)
    b.user("go on")
    b.call("done")
    res = replay(b.build(), "append_only", {}, RunConfig(window=3_115, observer=lambda req, info: seen.append(req)))
    c = res.calls
    assert list(c["kind"]) == ["main", "subagent", "main"] and list(c["call"]) == [0, 1, 2]
    fork_row = c[c["kind"] == "subagent"].iloc[0]
    assert fork_row["rejected"] and fork_row["overflow"] and fork_row["cost_usd"] == 0
    assert res.metrics["completed"]


@pytest.mark.parametrize("strategy", [s for s in names() if s != "recorded"])
def test_no_strategy_sees_a_fork(strategy):
    seen = []
    res = replay(_session(), strategy, {}, RunConfig(observer=lambda req, info: seen.append(req)))
    m = res.metrics
    assert m["completed"] and m["pairing_violations"] == 0 and m["turns"] == 2
    assert not any(SIDE in _text(r) for r in seen if r.kind != "subagent")
    assert sum(r.kind == "subagent" and SIDE in _text(r) for r in seen) == 1


def test_a_fork_must_be_isolated():
    with pytest.raises(ValueError, match="fork without isolated"):
        tr.SubtaskStart(t=0, id="f", fork=True)


@pytest.mark.parametrize("mid_turn", [False, True])
@pytest.mark.parametrize("strategy", ["claude_code", "novacode", "append_only", "codex", "context_editing"])
def test_the_property_kit_holds_a_strategy_to_its_own_requests_not_to_a_forks(strategy, mid_turn, tmp_path, capsys):
    """A fork's request is the engine's: it lacks the strategy's cache marks and its question leaves the window
    after it, which the kit took for the strategy's broken promises (cache_marks, summarised, path_back)."""
    from ctxsim.harness.cli import main as cli

    path = tmp_path / "fork.jsonl"
    tr.write(_session(mid_turn=mid_turn), path)
    assert cli(["check-strategy", strategy, "--replay", str(path)]) == 0
    assert "every invariant held" in capsys.readouterr().out
