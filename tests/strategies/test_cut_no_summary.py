"""cut_no_summary (N-COMP-13): NovaCode's triggers and tail, the prefix dropped with no summary."""

from __future__ import annotations

from ctxsim.harness.model.conversation import Message, Usage
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.strategies.base import CallInfo
from ctxsim.strategies.cut_no_summary import NOTICE

from tests.helpers_traces import Builder
from tests.strategies.peer_env import FakeServices, make, step

TEN_K = "y" * 35_000  # 35,000 chars / 3.5 = 10,000 tokens (N-COMP-5)


def test_n_comp_13_cut_at_soft_line_keeps_tail_and_drops_prefix_without_summary():
    services = FakeServices()
    s = make("cut_no_summary", services=services)  # 200k: soft line 200,000 − 20,000 − 13,000 = 167,000
    s.on_user(Message.user("task"))
    for i in range(16):
        step(s, i, TEN_K)  # each step: assistant 'Bash {"command": "cN"}' (22 chars → 7 tokens) + 10,000
    # no usage reported: the estimate is all characters / 3.5: 16 · 10,007 + 2 ("task") + 1 ("sys") +
    # tools; under 167,000 → no cut
    assert s.estimate() < 167_000
    req = s.build_request(CallInfo(16, 16.0))
    assert not req.rewrite
    s.on_response(Message("assistant", ()), Usage(input_uncached=166_990, output=10))  # 167,000 exactly
    req = s.build_request(CallInfo(17, 17.0))
    assert req.rewrite
    # tail (N-COMP-6): from the newest: [empty answer 0 tok, r15 10,000, a15 7, r14 10,000, a14 7] = 5
    # messages and 20,014 tokens ≥ 10,000: stop at r14, which carries a tool_result → back one to a14
    # (N-COMP-7): the tail is a14 r14 a15 r15 answer (5 messages), after the one-line notice
    h = list(s.history)
    assert len(h) == 6 and h[0].meta["origin"] == "placeholder"
    assert h[1].role == "assistant" and h[1].blocks[0].id == "tu_14"
    assert h[0].text == NOTICE  # says that something was removed, not what
    assert services.calls == []  # no side call at all
    assert s.counters.compactions_succeeded == 1 and s.counters.extra["messages_dropped"] == 29  # 1 + 2·14


def test_n_comp_8_small_prefix_is_not_cut():
    s = make("cut_no_summary", {"soft_margin_tokens": 0}, window=40_000)  # soft line 40,000 − 20,000 = 20,000
    s.on_user(Message.user("task"))
    step(s, 0, "short")
    step(s, 1, TEN_K)
    step(s, 2, TEN_K)
    # u0 2 + a0 7 + r0 2 + a1 7 + r1 10,000 + a2 7 + r2 10,000 ≥ 20,000 → trigger. Tail from the newest:
    # r2, a2, r1, a1, r0 = 5 messages, 20,016 tokens (≤ 40,000); r0 carries a result → back to a0
    # (N-COMP-7): boundary 1, prefix = u0 = 2 tokens < 2,000 (N-COMP-8) → no cut
    n = len(s.history)
    req = s.build_request(CallInfo(3, 3.0))
    assert not req.rewrite and len(s.history) == n
    assert s.counters.extra["cut_skipped_small_prefix"] == 1 and s.counters.compactions_attempted == 0


def test_replay_keeps_window_and_pairs_and_makes_no_side_calls():
    b = Builder().user("port the module")
    for i in range(80):
        b.call(f"step {i}", [f"result {i} " + "lorem ipsum " * 400])  # ~4,800 chars each
    t = b.call("done").build()
    r = replay(t, "cut_no_summary", None, RunConfig(window=60_000))
    m = r.metrics
    assert m["overflows"] == 0 and m["pairing_violations"] == 0
    assert m["compactions"]["succeeded"] >= 1
    assert set(r.calls["kind"]) == {"main"}


def _underestimated():
    """Three 6,000-token steps, then a 45,000-token result. With chars_per_token 20 on text of 2
    characters per token the estimate of new text is 10× low: the request at call 4 holds 63,383
    tokens (four Bash calls of 20 tokens each in Claude's format and their results' framing among them)
    while the strategy estimates 22,843, under the soft line (60,000 − 20,000 − 13,000)."""
    b = Builder().user("task")
    for i in range(3):
        b.call(f"s{i}", [f"r{i} " + "x " * 6000])
    return b.call("s3", ["big " + "x " * 45000]).call("done").build()


def test_prompt_too_long_cuts_at_once_and_sends_again():
    p = {"chars_per_token": 20, "min_prefix_tokens": 1000, "tail_min_tokens": 1000, "tail_min_messages": 2}
    r = replay(_underestimated(), "cut_no_summary", p, RunConfig(window=60_000))
    c, m = r.calls, r.metrics
    at4 = c[c["call"] == 4]
    assert at4["estimated_tokens"].iloc[0] == 22_843 and at4["context_tokens"].iloc[0] == 63_383
    assert at4["rejected"].tolist() == [True, False] and at4["attempt"].tolist() == [1, 2]
    # the tail: [a3, big result] (≥ 2 messages, 4,5xx estimated tokens ≥ 1,000) after the notice
    assert at4["context_tokens"].iloc[1] == 45_180 and at4["cost_usd"].iloc[1] > 0
    assert m["completed"] is True and m["compactions"]["succeeded"] == 1 and m["retries"] == 1


def test_no_cut_possible_ends_the_session():
    # default N-COMP-6/8 limits: the whole history is under 10,000 estimated tokens, nothing to cut
    r = replay(_underestimated(), "cut_no_summary", {"chars_per_token": 20}, RunConfig(window=60_000))
    assert r.metrics["completed"] is False and r.metrics["failed_at_call"] == 4
    assert r.metrics["strategy_counters"]["cut_skipped_small_prefix"] == 1
