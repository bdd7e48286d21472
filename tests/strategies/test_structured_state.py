"""structured_state: state files outside the conversation, a short window; and the shared windowing
mechanics (token gauge, pair-safe cut) the windowed families build on."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import protocol
from harness.conversation import Block, History, Message, Request, SystemPrompt, ToolSet, Usage
from harness.engine import RunConfig, replay
from harness.llm import SUMMARY
from strategies.base import CallInfo
from strategies.registry import StrategyError, get, make_config
from strategies.structured_state import (
    STATE_SECTIONS,
    StructuredState,
    TokenGauge,
    pair_safe_start,
    parse_sections,
)
from tests.fakes import IndexedServices, strategy_env
from tests.helpers_traces import Builder

FakeServices = IndexedServices


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


def test_parse_sections_routes_lines_under_known_headings():
    reply = "<summary>\n## Plan and goal\n- fix it\n## Unknown\n- stays with plan\n## decisions and key facts\n- trie\n</summary>"
    out = parse_sections(reply, list(STATE_SECTIONS))
    assert out["Plan and goal"] == ["- fix it", "- stays with plan"]
    assert out["Decisions and key facts"] == ["- trie"]
    assert out["Errors"] == []


# --- the strategy ----------------------------------------------------------------------------------

REPLY = "## Plan and goal\n- fix the parser\n## Decisions and key facts\n- use a trie\n## Errors\n- E42"


def _drive_to_first_cut(s: StructuredState):
    """user 1400 chars (404 tok), then turns of assistant (350 chars: 104) + result (1050: 304)."""
    s.on_user(user(1400))
    reqs = []
    for i in range(3):
        reqs.append(s.build_request(CallInfo(i, float(i))))
        s.on_response(asst_tool(f"t{i}"), Usage(input_uncached=reqs[-1].estimated_tokens))
        s.on_tool_results(result(f"t{i}", 1050))
    return reqs


def test_state_update_and_cut_at_the_trigger(tmp_path):
    svc = FakeServices(REPLY)
    s = make(tmp_path, svc, trigger_tokens=1_000, keep_tokens=300)
    reqs = _drive_to_first_cut(s)
    # before call 2 the history is 404 + 2 x 408 = 1,220 tokens (+ system/tools) >= 1,000: cut there.
    # Candidates 1 and 3; from 3: 104 + 304 = 408 > 300, the newest turn, kept anyway -> start 3.
    assert [r.rewrite for r in reqs] == [False, False, True]
    assert len(svc.calls) == 1
    req, spec = svc.calls[0]
    assert spec.kind == SUMMARY and spec.sections == tuple(STATE_SECTIONS) and spec.max_output_tokens == 4_000
    assert len(req.messages) == 3  # the dropped prefix: user, assistant t0, result t0
    sent = reqs[2].messages
    assert len(sent) == 3 and sent[0].meta["origin"] == "summary"
    assert sent[1].tool_use_ids() == ["t1"] and sent[2].tool_result_ids() == ["t1"]
    # the files, one per kind of state
    d = tmp_path / "state"
    assert (d / "plan.md").read_text() == "## Plan and goal\n- fix the parser\n"
    assert (d / "decisions.md").read_text() == "## Decisions and key facts\n- use a trie\n"
    assert (d / "notes.md").read_text() == "## Errors\n- E42\n"
    assert (d / "tasks.md").read_text() == ""
    assert "- use a trie" in sent[0].text and str(d / "plan.md") in sent[0].text
    assert s.counters.compactions_succeeded == 1 and s.counters.extra["state_updates"] == 1
    assert reqs[2].breakpoints[1].at == 0  # the state block is cached behind its own breakpoint


def test_failed_state_update_still_cuts_behind_a_placeholder(tmp_path):
    s = make(tmp_path, FakeServices(REPLY, fail={0}), trigger_tokens=1_000, keep_tokens=300)
    reqs = _drive_to_first_cut(s)
    sent = reqs[2].messages
    assert sent[0].meta["origin"] == "placeholder" and sent[1].role == "assistant"
    assert s.counters.compactions_failed == 1 and s.counters.compactions_succeeded == 0


def test_a_new_session_starts_from_the_state_files(tmp_path):
    s = make(tmp_path, FakeServices(REPLY), trigger_tokens=1_000, keep_tokens=300)
    _drive_to_first_cut(s)
    s.on_session_start("s2", resume=False, now=10.0)
    assert len(s.history) == 1 and "- fix the parser" in s.history[0].text and s.pinned == 1


def test_config_rejects_keep_at_or_above_trigger():
    assert get("structured_state") is StructuredState
    with pytest.raises(StrategyError):
        make_config(StructuredState, {"trigger_tokens": 5_000, "keep_tokens": 5_000})


def test_replay_keeps_the_window_and_every_pair(tmp_path):
    rng = np.random.default_rng(1)
    b = Builder()
    b.user("Goal: make the parser tests pass.")
    for i in range(30):
        b.call(f"step {i}", results=[" ".join(rng.choice(["alpha", "beta", "def", "x", "=", "42"], 2000))])
    r = replay(b.build(), "structured_state", {"trigger_tokens": 20_000, "keep_tokens": 8_000},
               RunConfig(session_dir=tmp_path))
    m = r.metrics
    assert m["pairing_violations"] == 0 and m["overflows"] == 0
    assert m["by_kind"]["summary"]["calls"] == m["compactions"]["succeeded"] >= 2
    # each call adds one ~2,000-token result: a request is at most the trigger plus one turn
    assert r.calls[r.calls.kind == "main"].context_tokens.max() < 20_000 + 4_000
    assert (tmp_path / "state" / "plan.md").exists()


def test_state_is_additive_and_trimmed_least_durable_first(tmp_path):
    s = make(tmp_path, state_max_tokens=200)
    s.merge_state("## Decisions and key facts\n- a\n## Current work\n- w1")
    s.merge_state("## Decisions and key facts\n- a\n- b\n## Current work\n- w2")
    # decisions only gain lines (no duplicate '- a'); current work is replaced
    assert s.state["Decisions and key facts"] == ["- a", "- b"] and s.state["Current work"] == ["- w2"]
    assert (tmp_path / "state" / "tasks.md").read_text() == "## Current work\n- w2\n"
    t = make(tmp_path / "t", state_max_tokens=200)
    lines = "\n".join(f"- {k}" + "d" * 96 for k in range(10))  # 10 lines of 99 chars (+1 newline each)
    t.merge_state(f"## Current work\n- w\n## Decisions and key facts\n{lines}")
    # budget 200 tokens x 3.5 = 700 chars; state 4 + 1,000 = 1,004: current work goes first (-> 1,000),
    # then the three oldest decisions (-> 700)
    assert t.state["Current work"] == [] and len(t.state["Decisions and key facts"]) == 7
    assert t.state["Decisions and key facts"][0].startswith("- 3")
    assert t.counters.extra["state_lines_trimmed"] == 4


def test_session_end_saves_the_state_for_the_next_launch(tmp_path):
    """The state outlives the launch; a call left open is answered first (as N-TRANS-5)."""
    svc = FakeServices(REPLY)
    s = make(tmp_path, svc)
    s.on_user(user(700))
    s.build_request(CallInfo(0, 0.0))
    s.on_response(asst_tool("t0"), None)  # the launch ends with this call's result missing
    s.on_session_end("s1", 5.0)
    req, _ = svc.calls[0]
    # user, assistant (t0), and the repair's error result for t0, so the update request is valid
    assert len(req.messages) == 3 and req.messages[2].tool_result_ids() == ["t0"]
    assert protocol.pairing_error(req) == ""
    s.on_session_start("s2", resume=False, now=100.0)
    assert len(s.history) == 1 and "- use a trie" in s.history[0].text
    off = make(tmp_path / "off", FakeServices(REPLY), update_on_session_end=False)
    off.on_user(user(700))
    off.on_session_end("s1", 5.0)
    assert off.env.services.calls == []


def test_repair_dangling_answers_every_open_call():
    """As N-TRANS-5: after a crash every open tool call gets an error result before the next request."""
    from strategies.structured_state import INTERRUPTED, repair_dangling

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
