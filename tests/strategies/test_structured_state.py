"""structured_state: the task state (the user's requests verbatim, a TodoWrite list) written as the
work happens, per agent context, a window cut at the auto-compact line behind the state block; and
the shared windowing mechanics (token gauge, pair-safe tails, window rules, the reaction to a
rejected request) the windowed families build on."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from ctxsim.harness.model.conversation import Block, History, Message, Request, SystemPrompt, ToolSet, Usage
from ctxsim.harness.provider import protocol
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.strategies import base
from ctxsim.strategies.base import CallInfo
from ctxsim.strategies.registry import StrategyError, get, make_config
from ctxsim.strategies.structured_state import (
    TODO_RESULT,
    StructuredState,
    TokenGauge,
    auto_compact_line,
    is_task_message,
    pair_safe_start,
    tail_start,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fakes import IndexedServices, strategy_env
from tests.helpers_traces import Builder

FakeServices = IndexedServices


def rejection(reasons=("overflow",), tokens=0, attempt=1, window=200_000):
    """What the engine hands ``on_rejected`` (ctxsim.strategies.base.Rejection once it has landed)."""
    cls = getattr(base, "Rejection", None)
    kw = dict(reasons=tuple(reasons), detail="prompt is too long", tokens=tokens, window=window, attempt=attempt)
    return cls(**kw) if cls is not None else SimpleNamespace(**kw)


def make(tmp_path: Path, services=None, window: int = 200_000, **params) -> StructuredState:
    return StructuredState(make_config(StructuredState, params), strategy_env(tmp_path, services or FakeServices(), window))


def user(n: int, ch: str = "u") -> Message:
    return Message.user(ch * n)


def asst_tool(tid: str, text_chars: int = 346) -> Message:
    # text + tool_use 'R {}' (payload "R {}": 4 chars) = text_chars + 4 characters
    return Message("assistant", (Block.text_block("a" * text_chars), Block.tool_use(tid, "R", {})))


def result(tid: str, n: int) -> Message:
    return Message("user", (Block.tool_result(tid, "r" * n),))


# --- the gauge and the cut ------------------------------------------------------------------------

def test_gauge_starts_at_3_5_chars_per_token_and_learns_from_usage():
    """N-COMP-5's 3.5 characters per token until the API reports usage, then the learned ratio."""
    g = TokenGauge(3.5, opaque=100)
    # 100 opaque + 700/3.5 = 200 + 2 messages x 4 framing = 308
    assert g.tokens(700, 2) == 308
    # the API billed 608 for 1,000 chars in 2 messages: (608 - 100 - 8) / 1000 = 0.5 token per char
    g.observe(1000, 2, Usage(input_uncached=600, cache_read=8))
    assert g.ratio == pytest.approx(0.5)
    assert g.tokens(700, 2) == 100 + 350 + 8
    g.observe(1000, 2, None)  # a rejected request teaches nothing
    assert g.ratio == pytest.approx(0.5)


def _history() -> History:
    return History([
        user(3500),            # 0: 3500/3.5 = 1000 + 4 = 1004
        asst_tool("t1"),       # 1: 350 chars -> 100 + 4 = 104
        result("t1", 3500),    # 2: 1004
        asst_tool("t2"),       # 3: 104
        result("t2", 3500),    # 4: 1004
        Message("assistant", (Block.text_block("a" * 350),)),  # 5: 104
        user(350),             # 6: 104
    ])


def test_pair_safe_start_keeps_the_newest_turns_that_fit():
    h, g = _history(), TokenGauge(3.5)
    # candidates are the assistant messages after a user message: 1, 3, 5
    # kept from 5: 104 + 104 = 208; from 3: 208 + 104 + 1004 = 1316; from 1: 1316 + 104 + 1004 = 2424
    assert pair_safe_start(h, 1, 1316, g) == 3
    assert pair_safe_start(h, 1, 1315, g) == 5
    assert pair_safe_start(h, 1, 2424, g) == 1
    assert pair_safe_start(h, 1, 50, g) == 5      # the newest turn is kept even when it alone is too big
    assert pair_safe_start(h, 6, 10_000, g) == 7  # nothing to cut at or after index 6: len(h)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 5000)), min_size=1, max_size=12),
       st.integers(0, 6000))
def test_pair_safe_start_never_splits_a_tool_pair(turns, keep):
    """Any session of turns (k parallel tool calls of a given size each), any keep budget: the
    window from the chosen start, behind a user placeholder, passes the API's pairing check."""
    msgs, n = [user(100)], 0
    for k, size in turns:
        ids = [f"t{n + j}" for j in range(k)]
        n += k
        msgs.append(Message("assistant", (Block.text_block("x"), *(Block.tool_use(i, "R", {}) for i in ids))))
        if ids:
            msgs.append(Message("user", tuple(Block.tool_result(i, "r" * size) for i in ids)))
        else:
            msgs.append(user(size))
    h = History(msgs)
    start = pair_safe_start(h, 1, keep, TokenGauge(3.5))
    kept = History([Message.user("[dropped]"), *h[start:]])
    req = Request(SystemPrompt.of("s"), ToolSet(), kept)
    assert protocol.pairing_error(req) == ""


def test_tail_start_is_n_comp_6_on_pair_safe_boundaries():
    """N-COMP-6/7: walk back until the tail has min tokens and messages, never past the cap; start on a
    turn (an assistant message after a user message); the newest turn is kept whatever its size."""
    h, g = _history(), TokenGauge(3.5)
    # from 7 back: 6 (104), 5 (208, 2 messages): done; 5 is a turn start
    assert tail_start(h, 1, g, 200, 2, 2_000) == 5
    # 1,000 tokens: back to 4 (1,212); 4 is a result, the turn starts at 3 (1,316 <= 2,000)
    assert tail_start(h, 1, g, 1_000, 2, 2_000) == 3
    # a cap of 1,300 forbids 3 (1,316): the next turn start after the walk, 5
    assert tail_start(h, 1, g, 1_000, 2, 1_300) == 5
    # a cap below the newest message: the newest turn all the same
    assert tail_start(h, 1, g, 1_000, 2, 100) == 5
    assert tail_start(h, 6, g, 0, 1, 100) == 7  # no turn start at or after 6: nothing to cut


def test_trigger_moves_with_the_window_n_win_1(tmp_path):
    """N-WIN-1 / N-COMP-1..2 (Claude Code's auto-compact line, reported): window - min(max output,
    20,000) - 13,000, whatever the window; an explicit trigger is clamped below window - reserve."""
    assert auto_compact_line(200_000, 64_000) == 167_000
    assert auto_compact_line(1_000_000, 64_000) == 967_000
    assert auto_compact_line(200_000, 8_000) == 179_000
    assert make(tmp_path / "a").trigger == 167_000
    assert make(tmp_path / "b", window=1_000_000).trigger == 967_000
    assert make(tmp_path / "c", trigger_tokens=50_000).trigger == 50_000
    assert make(tmp_path / "d", trigger_tokens=190_000).trigger == 180_000  # window - reserve 20,000


def test_only_typed_messages_are_tasks():
    assert is_task_message(Message.user("Fix the parser, ticket LED-7."))
    for text in ("<task-notification>\n<task-id>b0be39e</task-id>", "<system-reminder>\nPostToolUse:Edit hook",
                 "[Request interrupted by user for tool use]", "<local-command-stdout></local-command-stdout>",
                 "<command-name>/clear</command-name>", "   ",
                 "Caveat: The messages below were generated by the user while running local commands."):
        assert not is_task_message(Message.user(text)), text
    assert not is_task_message(Message.user("summary", origin="summary"))
    assert not is_task_message(Message("user", (Block.tool_result("t", "out"),)))


# --- the strategy ----------------------------------------------------------------------------------

GOAL = "Goal: fix parse_header in src/parser.py (ticket LED-100037)."


def test_the_request_is_kept_verbatim_and_the_todo_list_written_as_work_happens(tmp_path):
    svc = FakeServices()
    s = make(tmp_path, svc, todo_every=2)
    assert get("structured_state") is StructuredState and "TodoWrite" in s.tools.names()
    s.on_user(Message.user(GOAL))
    assert (tmp_path / "state" / "main" / "requests.md").read_text() == GOAL + "\n\n"  # on arrival, no call
    req = s.build_request(CallInfo(0, 0.0))
    # the TodoWrite step: one billed call on the context before it, then its pair in history
    (sreq, spec), = svc.calls
    assert spec.kind == "todo_write" and len(sreq.messages) == 1
    tu = req.messages[1].blocks[0]
    assert tu.name == "TodoWrite" and spec.params["expected_output"] == tu.payload
    assert tu.input["todos"] == [{"content": GOAL, "status": "in_progress", "activeForm": GOAL}]
    assert req.messages[2].blocks[0].text == TODO_RESULT and len(req.messages) == 3
    assert protocol.pairing_error(req) == ""
    # hook output and a task notification are not tasks: no new item, no call
    s.on_response(Message("assistant", (Block.text_block("ok"),)), Usage(input_uncached=100))
    s.on_user(Message.user("<system-reminder>\nPostToolUse:Edit hook additional context</system-reminder>"))
    s.build_request(CallInfo(1, 1.0))
    assert len(svc.calls) == 1
    # two calls into the task: the list is written again (todo_every=2)
    s.on_response(Message("assistant", (Block.text_block("ok"),)), Usage(input_uncached=100))
    s.build_request(CallInfo(2, 2.0))
    assert len(svc.calls) == 2
    # a new request: the first item completed, the second in progress, a write at the next call
    s.on_response(Message("assistant", (Block.text_block("ok"),)), Usage(input_uncached=100))
    s.on_user(Message.user("Now also add a test\nfor the empty header."))
    s.build_request(CallInfo(3, 3.0))
    todos = json.loads((tmp_path / "state" / "main" / "todos.json").read_text())
    assert [(t["content"], t["status"]) for t in todos] == [(GOAL, "completed"), ("Now also add a test", "in_progress")]
    assert s.counters.extra["todo_write_calls"] == 3


def _drive(s: StructuredState, turns: int = 3, size: int = 3_500):
    """The goal, then turns of an assistant tool call and a result of ``size`` characters."""
    s.on_user(Message.user(GOAL))
    reqs = []
    for i in range(turns):
        reqs.append(s.build_request(CallInfo(i, float(i))))
        s.on_response(asst_tool(f"t{i}"), None)
        s.on_tool_results(result(f"t{i}", size))
    reqs.append(s.build_request(CallInfo(turns, float(turns))))
    return reqs


def test_the_cut_leaves_the_state_block_in_front(tmp_path):
    s = make(tmp_path, trigger_tokens=2_500, keep_tokens=1_200, todo_every=0)
    reqs = _drive(s)
    # system + tools (Read, TodoWrite) 590 chars = 169 tokens; goal and the TodoWrite pair: 301 at call
    # 0; each turn adds 104 + 1,004 = 1,108: 1,409, then 2,517 >= 2,500 at call 2: cut to the newest
    # turn (1,108 <= keep 1,200) behind the state block and the note naming the transcript:
    # (590 + block + note + 3,850) / 3.5 + 4 x 4 framing (both depend on the run directory's path);
    # call 3 is past 2,500 again: a second cut
    sent = reqs[2].messages
    block, note = len(sent[0].text), len(sent[1].text)
    assert [r.estimated_tokens for r in reqs] == [301, 1_409] + [-(-(590 + block + note + 3_850) * 2 // 7) + 16] * 2
    assert [r.rewrite for r in reqs] == [False, False, True, True]
    assert sent[0].meta["origin"] == "state" and GOAL in sent[0].text
    assert str((tmp_path / "state" / "main" / "requests.md").resolve()) in sent[0].text
    transcript = (tmp_path / "transcripts" / "main.jsonl").resolve()
    assert sent[1].meta["origin"] == "placeholder" and str(transcript) in sent[1].text
    assert GOAL in transcript.read_text()  # the path back: the dropped messages, on disk
    assert sent[2].role == "assistant" and protocol.pairing_error(reqs[2]) == ""
    assert reqs[2].breakpoints[1].at == 1  # the head is cached behind its own breakpoint
    c = s.counters
    assert c.compactions_attempted == c.compactions_succeeded == c.extra["window_cuts"] == 2
    assert "summary" not in {spec.kind for _, spec in s.env.services.calls}  # the state replaces a summary


def test_a_rejected_request_is_compacted_and_retried(tmp_path):
    s = make(tmp_path, todo_every=0)
    reqs = _drive(s, turns=4)
    n = len(reqs[-1].messages)
    call = CallInfo(4, 4.0)
    # the API said 250,000 tokens (far above the estimate): the gauge re-learns, the tail shrinks
    assert s.on_rejected(rejection(tokens=250_000), call) is True
    assert len(s.history) < n and s.counters.compactions_succeeded == 1
    assert s.counters.extra["reactive_compactions"] == 1
    assert protocol.pairing_error(s.build_request(call)) == ""
    assert s.on_rejected(rejection(("pairing",)), call) is False  # not the agent's to repair


def test_a_sub_agent_has_its_own_state(tmp_path):
    s = make(tmp_path, todo_every=0)
    s.on_user(Message.user(GOAL))
    s.build_request(CallInfo(0, 0.0))
    s.on_response(Message("assistant", (Block.tool_use("task1", "Task", {"prompt": "find it"}),)), None)
    s.on_subtask_start("st1", "Find the parser", isolated=True)
    assert len(s.history) == 0 and s.tasks.requests == []
    s.on_user(Message.user("Find where parse_header is defined."))
    sub = s.build_request(CallInfo(1, 1.0))
    assert GOAL not in " ".join(m.text for m in sub.messages) and sub.kind == "subagent"
    assert "parse_header is defined" in (tmp_path / "state" / "agent-001" / "requests.md").read_text()
    s.on_response(Message("assistant", (Block.text_block("In src/parser.py."),)), None)
    s.on_subtask_end("st1", "In src/parser.py.")
    assert [t for _, t in s.tasks.requests] == [GOAL] and s.history[0].text == GOAL


def test_a_recorded_todo_list_is_the_state_and_no_call_is_added(tmp_path):
    s = make(tmp_path)
    s.on_user(Message.user(GOAL))
    todos = [{"content": "Read the parser", "status": "in_progress", "activeForm": "Reading the parser"}]
    s.on_response(Message("assistant", (Block.tool_use("tw", "TodoWrite", {"todos": todos}),)), None)
    s.on_tool_results(Message("user", (Block.tool_result("tw", TODO_RESULT),)))
    s.build_request(CallInfo(1, 1.0))
    assert s.env.services.calls == [] and s.tasks.todos == todos and s.tasks.recorded


def test_a_new_session_starts_from_the_state(tmp_path):
    s = make(tmp_path, todo_every=0)
    _drive(s, turns=1)
    s.on_session_start("s2", resume=False, now=10.0)
    assert len(s.history) == 1 and s.pinned == 1 and GOAL in s.history[0].text


def test_requests_over_the_budget_go_oldest_first_but_the_goal_stays(tmp_path):
    s = make(tmp_path, requests_max_tokens=1_000)
    s.on_session_start("s1", resume=False, now=0.0)
    s.on_user(Message.user(GOAL))
    for k in range(3):  # three requests of 1,400 chars = 400 tokens each
        s.on_user(Message.user(str(k) * 1_400))
    # goal (18) + 3 x 400 = 1,218 > 1,000: the oldest after the goal goes
    assert [t[:1] for _, t in s.tasks.requests] == ["G", "1", "2"]
    assert s.counters.extra["requests_trimmed"] == 1


def test_config_rejects_keep_at_or_above_trigger():
    with pytest.raises(StrategyError):
        make_config(StructuredState, {"trigger_tokens": 5_000, "keep_tokens": 5_000})


def _long_trace():
    rng = np.random.default_rng(1)
    b = Builder()
    b.user(GOAL)
    b.event(__import__("ctxsim.harness.model.trace", fromlist=["FactEvent"]).FactEvent(t=b.t, id="g", category="goal", text=GOAL))
    for i in range(30):
        b.call(f"step {i}", results=[" ".join(rng.choice(["alpha", "beta", "def", "x", "=", "42"], 2000))])
        if i % 5 == 4:
            b.event(__import__("ctxsim.harness.model.trace", fromlist=["ProbeEvent"]).ProbeEvent(t=b.t, id=f"p{i}", needs=["g"]))
    b.call("done")
    return b.build()


def test_replay_keeps_the_window_every_pair_and_the_goal_on_every_seed(tmp_path):
    """The fast equivalent of the 8-seed check: the goal is held by the state verbatim, no draw
    decides it, so its retention is the same on every run seed."""
    t = _long_trace()
    goals = set()
    for seed in range(3):
        r = replay(t, "structured_state", {"trigger_tokens": 20_000}, RunConfig(seed=seed))
        m = r.metrics
        assert m["pairing_violations"] == 0 and m["overflows"] == 0
        assert m["compactions"]["succeeded"] == m["strategy_counters"]["window_cuts"] >= 2
        assert r.calls[r.calls.kind == "main"].context_tokens.max() < 20_000 + 4_000
        assert (r.probes["where"] == "window").all()
        goals.add(round(m["retention"]["goal"], 9))
    assert len(goals) == 1


def test_repair_dangling_answers_every_open_call():
    """As N-TRANS-5: after a crash every open tool call gets an error result before the next request."""
    from ctxsim.strategies.structured_state import INTERRUPTED, repair_dangling

    two = Message("assistant", (Block.tool_use("a", "R", {}), Block.tool_use("b", "R", {})))
    # the launch stopped right after the call: a new result message, nothing rewritten
    h, rewrote = repair_dangling(History([user(10), two]))
    assert not rewrote and h[2].tool_result_ids() == ["a", "b"] and h[2].blocks[0].text == INTERRUPTED
    # one of two results arrived: the message is completed (a rewrite of a sent message)
    h, rewrote = repair_dangling(History([user(10), two, result("a", 5)]))
    assert rewrote and h[2].tool_result_ids() == ["a", "b"] and len(h) == 3
    # nothing open: unchanged
    ok = History([user(10), two, Message("user", (Block.tool_result("a", "x"), Block.tool_result("b", "y")))])
    assert repair_dangling(ok) == (ok, False)
    for hist in (repair_dangling(History([user(10), two]))[0], repair_dangling(History([user(10), two, result("a", 5)]))[0]):
        assert protocol.pairing_error(Request(SystemPrompt.of("s"), ToolSet(), hist)) == ""


def test_a_rejection_the_estimate_did_not_see_coming_is_recovered_through_the_engine():
    """The gauge learns about 4 characters a token on code-like text; then a result of about one
    token a character (CJK) arrives: the request goes over the window, the API's 400 states its size,
    the strategy re-learns and compacts, and the billed retry goes through (the session completes)."""
    rng = np.random.default_rng(0)
    b = Builder()
    b.user("Goal: translate the notes.")
    for i in range(4):
        b.call(f"step {i}", results=[" ".join(rng.choice(["alpha", "beta", "def", "x", "="], 1200))])
    b.call("read the notes", results=["\u7ed3\u679c\u4e0d\u4e00\u81f4 " * 4700])  # 28,200 characters, ~28,200 tokens
    b.call("translating")
    b.call("done")
    params = {"reserve_tokens": 4_000, "margin_tokens": 2_000, "todo_every": 0}
    r = replay(b.build(), "structured_state", params, RunConfig(window=32_000))
    m = r.metrics
    assert m["completed"] and m["rejected_requests"] == 1 and m["retries"] == 1
    assert m["strategy_counters"]["reactive_compactions"] == 1 and m["pairing_violations"] == 0


from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_TODO = st.dictionaries(st.sampled_from(["content", "status", "activeForm", "id"]),
                        st.text(max_size=12), min_size=1, max_size=4)


@given(st.lists(st.lists(_TODO, max_size=6), min_size=1, max_size=4))
def test_todos_json_is_the_indented_dump_of_the_list_at_every_write(lists):
    """todos.json is made from each item's cached dump: at each write (the list as it then is, a
    growing or changed list) it is exactly ``json.dumps(todos, indent=1, ensure_ascii=False)``."""
    from ctxsim.strategies.structured_state import StructuredState

    owner, tasks = SimpleNamespace(_todos_memo=None, _todo_frags={}), SimpleNamespace(todos=[])
    for todos in lists:
        tasks.todos = [dict(x) for x in todos]
        assert StructuredState._todos_json(owner, tasks) == json.dumps(tasks.todos, indent=1, ensure_ascii=False) + "\n"
