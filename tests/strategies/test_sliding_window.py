"""sliding_window: Cline's classic truncation (allowed = window − 40k on 200k; drop half after the
first exchange; never split a pair)."""

from __future__ import annotations

from harness.conversation import Block, Message, Usage
from harness.engine import RunConfig, replay
from strategies.base import CallInfo
from strategies.sliding_window import allowed_tokens, first_exchange_end, removal_count, truncation_range
from tests.helpers_traces import Builder, convo
from tests.strategies.peer_env import make, step


def test_allowed_size_table():
    assert allowed_tokens(200_000) == 160_000  # 200k − 40k
    assert allowed_tokens(128_000) == 98_000  # 128k − 30k
    assert allowed_tokens(64_000) == 37_000  # 64k − 27k
    assert allowed_tokens(1_000_000) == 960_000  # max(1M − 40k, 0.8 · 1M = 800k)
    assert allowed_tokens(30_000) == 24_000  # max(−10k, 0.8 · 30k)


def test_removal_counts_are_even():
    assert removal_count(10, "half") == 4  # floor(10 / 4) · 2
    assert removal_count(10, "quarter") == 6  # floor(10 · 3 / 4 / 2) · 2 = floor(3.75) · 2
    assert removal_count(3, "half") == 0


def test_first_exchange_keeps_the_first_answers_results():
    m = convo(6)  # u0 a1 r2 a3 r4 ... r12 (13 messages)
    assert first_exchange_end(m) == 3  # u0, a1 and a1's result r2
    # rest = 13 − 3 = 10 → drop 4: [3, 7) = a3 r4 a5 r6; the last dropped (r6) is a user message
    assert truncation_range(m, "half") == (3, 7)
    # quarter: drop 6 → [3, 9) = a3..r8
    assert truncation_range(m, "quarter") == (3, 9)


def test_trigger_at_allowed_size_counting_pending_messages():
    s = make("sliding_window", window=30_000)  # allowed 24,000
    s.on_user(Message.user("task"))
    for i in range(6):
        step(s, i, f"out {i}")
    # reported through the last answer: 23,000 input + 500 output = 23,500 < 24,000
    s.on_response(Message("assistant", (Block.tool_use("tu_9", "Bash", {"c": 9}),)), Usage(input_uncached=23_000, output=500))
    s.on_tool_results(Message("user", (Block.tool_result("tu_9", "y" * 1_996),)))
    # pending result: 1,996 chars / 4 = 499 tokens → 23,999: still under
    assert not s.should_compact(CallInfo(9, 9.0))
    s.on_tool_results(Message("user", (Block.text_block("zzzz"),)))  # 4 more chars → 1 token → 24,000
    assert s.should_compact(CallInfo(10, 10.0))
    n = len(s.history)
    req = s.build_request(CallInfo(10, 10.0))
    assert req.rewrite  # the request declares the rewrite
    # 16 messages: u0, a1 r2 (first exchange), a3 r4 … a13 r14 (tu_9), z15.
    # round 1: rest = 16 − 3 = 13 → drop floor(13/4)·2 = 6 → [3, 9) (index 8 is a user message) and
    #   insert the notice: 11 messages; the dropped ones were tiny (~21 tokens), so still over: drop again
    # round 2: start after the notice = 4, rest = 11 − 4 = 7 → drop 2 → 9 messages
    # round 3: rest = 9 − 4 = 5 → drop 2 → 7 messages; round 4: rest = 3 → floor(3/4)·2 = 0: stop
    assert n == 16 and len(s.history) == 7
    assert s.history[0].text == "task" and s.history[3].meta["origin"] == "truncation_notice"
    assert [m.role for m in s.history] == ["user", "assistant", "user", "user", "assistant", "user", "user"]
    assert s.counters.extra["messages_dropped"] == 10
    assert s.counters.compactions_succeeded == 1


def test_without_pending_count_only_the_reported_total_triggers():
    s = make("sliding_window", {"count_pending": False}, window=30_000)
    step(s, 0, "a")
    s.on_response(Message("assistant", (Block.tool_use("tu_9", "Bash", {"c": 9}),)), Usage(input_uncached=23_000, output=500))
    s.on_tool_results(Message("user", (Block.tool_result("tu_9", "y" * 40_000),)))  # +10,000 pending, not counted
    assert not s.should_compact(CallInfo(2, 2.0))


def test_replay_small_window_no_overflow_no_pairing_violation():
    b = Builder().user("refactor the parser")
    for i in range(60):
        b.call(f"step {i}", [f"result {i} " + "word " * 600])  # ~3,000 chars each
    t = b.call("done").build()
    r = replay(t, "sliding_window", None, RunConfig(window=30_000))
    m = r.metrics
    assert m["overflows"] == 0 and m["pairing_violations"] == 0
    assert m["compactions"]["succeeded"] >= 2
    assert replay(t, "append_only", None, RunConfig(window=30_000)).metrics["overflows"] > 0
