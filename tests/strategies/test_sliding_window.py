"""sliding_window: Cline's classic truncation (allowed = window − 40k on 200k; duplicate file reads
first; drop half after the first pair, the range ending on an assistant message, pairs repaired as
Cline does; a quarter and one retry on a rejected request) and the older reading (range_end user,
no duplicate-read step).

Read at: cline/cline v3.89.0 (the VS Code extension's ContextManager.ts).
The files read are named in the strategy's docstring."""

from __future__ import annotations

from ctxsim.harness.model.conversation import Block, Message, Usage
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.strategies.base import CallInfo
from ctxsim.strategies.sliding_window import (
    DUPLICATE_READ_NOTICE,
    MISSING_RESULT,
    NOTICE,
    allowed_tokens,
    cline_range,
    first_exchange_end,
    removal_count,
    truncation_range,
)

from tests.helpers_traces import Builder, convo
from tests.strategies.peer_env import make, reject, step, use

OLD = {"range_end": "user", "duplicate_file_reads": False}


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


def test_older_reading_first_exchange_keeps_the_first_answers_results():
    m = convo(6)  # u0 a1 r2 a3 r4 ... r12 (13 messages)
    assert first_exchange_end(m) == 3  # u0, a1 and a1's result r2
    # rest = 13 − 3 = 10 → drop 4: [3, 7) = a3 r4 a5 r6; the last dropped (r6) is a user message
    assert truncation_range(m, "half") == (3, 7)
    # quarter: drop 6 → [3, 9) = a3..r8
    assert truncation_range(m, "quarter") == (3, 9)


def test_older_reading_trigger_at_allowed_size_counting_pending_messages():
    s = make("sliding_window", OLD, window=30_000)  # allowed 24,000
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
    for params in (None, OLD):
        m = replay(t, "sliding_window", params, RunConfig(window=30_000)).metrics
        assert m["overflows"] == 0 and m["pairing_violations"] == 0, params
        assert m["compactions"]["succeeded"] >= 2, params
    assert replay(t, "append_only", None, RunConfig(window=30_000)).metrics["overflows"] > 0


# --- Cline v3.89 (the default) --------------------------------------------------------------------

def test_cline_range_ends_on_an_assistant_message():
    m = convo(6)  # u0 a1 r2 a3 r4 a5 r6 ... a11 r12 (13 messages)
    # rest = 13 − 2 = 11: half drops floor(11/4)·2 = 4 → [2, 6), the last dropped a5 an assistant
    assert cline_range(m, "half") == (2, 6)
    # quarter: floor(11·3/4/2)·2 = 8 → [2, 10), a9
    assert cline_range(m, "quarter") == (2, 10)
    # a plain user message at 3 shifts the roles: [2, 6) would end on r5 (a user message) → [2, 5)
    shifted = [m[0], m[1], m[2], Message.user("more"), *m[3:12]]
    assert shifted[5].role == "user" and cline_range(shifted, "half") == (2, 5)


def _first_pair_and_loop(s, n=6):
    s.on_user(Message.user("task"))
    for i in range(n):
        step(s, i, f"out {i}")


def test_cut_repairs_the_pairs_as_cline_does():
    s = make("sliding_window", window=30_000)  # allowed 24,000
    _first_pair_and_loop(s)
    # u0 a0 r0 a1 r1 ... a5 r5 (13 messages); the reported total is at the allowed size
    s.on_response(Message("assistant", (Block.text_block("thinking aloud"),)), Usage(input_uncached=23_999, output=1))
    s.on_user(Message.user("next"))  # 15 messages
    s.compact(CallInfo(7, 7.0), force="half")
    h = list(s.history)
    # rest 13 → drop floor(13/4)·2 = 6: [2, 8) = r0 a1 r1 a2 r2 a3 (the last dropped, a3, an assistant);
    # the first kept, r3, answered a3: its result goes, and a0's tool use gets "result missing"
    assert h[1].blocks[0].text == NOTICE and h[1].blocks[1].id == "tu_0"
    assert [(b.id, b.text) for b in h[2].blocks] == [("tu_0", MISSING_RESULT)]
    assert h[3].blocks[0].id == "tu_4" and len(h) == 15 - 6
    assert s.counters.extra["messages_dropped"] == 6


def test_duplicate_file_reads_go_first_and_enough_saving_spares_the_cut():
    s = make("sliding_window", window=30_000)
    s.on_user(Message.user("task"))
    for i in range(3):  # a.py read three times (8,000 chars each), one small command between
        s.build_request(CallInfo(2 * i, 0.0))
        s.on_response(Message("assistant", (Block.tool_use(f"r{i}", "Read", {"file_path": "a.py"}),)), None)
        s.on_tool_results(Message("user", (Block.tool_result(f"r{i}", "a" * 8_000),)))
        step(s, 2 * i + 1, "ok")
    s.on_response(Message("assistant", (Block.text_block("x"),)), Usage(input_uncached=24_000))
    n = len(s.history)
    assert s.should_compact(CallInfo(9, 9.0))
    assert s.compact(CallInfo(9, 9.0))
    reads = [b.text for m in s.history for b in m.blocks if b.type == "tool_result" and b.id.startswith("r")]
    # the two earlier reads become the 153-char notice: 2 · 7,847 of ~24,100 chars ≥ 30%: no cut
    assert reads == [DUPLICATE_READ_NOTICE] * 2 + ["a" * 8_000] and len(s.history) == n
    assert s.counters.extra["messages_dropped"] == 0
    old = make("sliding_window", OLD, window=30_000)
    old.on_user(Message.user("task"))
    old.on_response(Message("assistant", (Block.text_block("x"),)), Usage(input_uncached=24_000))
    assert not any(b.text == DUPLICATE_READ_NOTICE for m in old.history for b in m.blocks)


def test_a_rejected_request_is_cut_to_a_quarter_and_retried_once():
    s = make("sliding_window", window=30_000)
    _first_pair_and_loop(s, 10)  # 21 messages
    assert reject(s, call=10)
    # quarter: rest 19 → floor(19·3/4/2)·2 = 14 → [2, 16) ends on a7 (index 15): 21 − 14 = 7 kept
    assert len(s.history) == 7 and s.history[3].blocks[0].id == "tu_8"
    assert not reject(s, call=10, attempt=2)  # then Cline stops and asks the user


def test_the_notice_goes_after_the_first_answers_thinking_which_stays_unchanged():
    from ctxsim.strategies.sliding_window import with_notice

    think = Block("thinking", "let me look")
    use = Block.tool_use("tu_0", "Read", {"file_path": "a.py"})
    # thinking then a tool use (no text): the notice is put after the thinking, which stays first
    out = with_notice(Message("assistant", (think, use)))
    assert [b.type for b in out.blocks] == ["thinking", "text", "tool_use"]
    assert out.blocks[0] is think and out.blocks[1].text == NOTICE and out.meta["truncation_notice"]
    # thinking then text: that text becomes the notice, the thinking is kept as it was
    out = with_notice(Message("assistant", (think, Block.text_block("I will read a.py"), use)))
    assert [(b.type, b.text) for b in out.blocks[:2]] == [("thinking", "let me look"), ("text", NOTICE)]
    assert len(out.blocks) == 3
    # no thinking: unchanged rule (the first text becomes the notice, or one is put first)
    assert [b.text for b in with_notice(Message("assistant", (use,))).blocks][0] == NOTICE


def test_a_cut_that_would_leave_two_answers_in_a_row_is_a_pair_shorter():
    def text(t):
        return Message("assistant", (Block.text_block(t),))

    s = make("sliding_window")
    s.on_user(Message.user("task"))
    s.on_response(text("ok"), None)  # the first answer: no tool use
    s.on_user(Message.user("u1"))
    step(s, 1, "r1")
    s.on_response(text("a1 done"), None)
    s.on_user(Message.user("u2"))
    step(s, 2, "r2")
    s.on_response(text("a2 done"), None)
    s.on_user(Message.user("u3"))
    # u0 a0 u1 a1 r1 a1' u2 a2 r2 a2' u3: 11 messages, rest 9; quarter drops floor(9·3/4/2)·2 = 6:
    # [2, 8) = u1 a1 r1 a1' u2 a2, and the first kept, r2, answers a2: its result goes and nothing is
    # left (a0 has no tool use), so a0 and a2' would be one turn: [2, 6) instead, u2 first kept
    assert s.compact(CallInfo(3, 3.0), force="quarter")
    h = list(s.history)
    assert [m.text for m in h] == ["task", NOTICE, "u2", 'Bash {"command": "c2"}', "r2", "a2 done", "u3"]
    assert [m.role for m in h] == ["user", "assistant", "user", "assistant", "user", "assistant", "user"]
    assert s.counters.extra["messages_dropped"] == 4
    # u0 a0 u1 a1 r1: rest 3 → drop 2 (u1 a1), r1 left empty; a pair shorter drops nothing: no cut
    s = make("sliding_window")
    s.on_user(Message.user("task"))
    s.on_response(text("ok"), None)
    s.on_user(Message.user("u1"))
    step(s, 1, "r1")
    assert not s.compact(CallInfo(2, 2.0), force="quarter") and len(s.history) == 5


def test_a_result_missing_put_for_a_dropped_error_result_keeps_is_error():
    s = make("sliding_window", window=30_000)
    s.on_user(Message.user("task"))
    s.build_request(CallInfo(0, 0.0))
    s.on_response(Message("assistant", (use(0), use(1))), None)  # the first answer: two calls
    s.on_tool_results(Message("user", (Block.tool_result("tu_0", "ok"), Block.tool_result("tu_1", "boom", True))))
    for i in range(2, 7):
        step(s, i, f"out {i}")
    # u0 a0 r0 a2 r2 ... a6 r6 (13 messages): half drops floor(11/4)·2 = 4: [2, 6) = r0 a2 r2 a3;
    # the first kept, r3, answered a3: a0's calls get "result missing", tu_1's marked as the error it was
    assert s.compact(CallInfo(7, 7.0), force="half")
    assert [(b.id, b.text, b.is_error) for b in s.history[2].blocks] == [
        ("tu_0", MISSING_RESULT, False), ("tu_1", MISSING_RESULT, True)]


def test_the_estimate_after_a_cut_keeps_the_density_the_usage_measured():
    """Issue #45 (the kit's known finding, +71-86% after a cut of dense output): the dropped messages
    were taken away at 4 characters per token from a usage that counted them at their true density.
    Now the anchored estimate is scaled by the new request's share of the old one, both from
    characters (templates.rebased_estimate, as roo_code's, openhands' and context_editing's): the
    results here are 2 characters per token, half of the old rule's assumption, so the old rule
    left more than the new request's tokens standing."""
    from ctxsim.strategies.templates import UsageAnchor

    s = make("sliding_window", window=30_000)  # allowed 24,000
    s.on_user(Message.user("task"))
    for i in range(6):
        step(s, i, "ab " * 1_300)     # 3,900 characters each
    s.on_response(Message("assistant", (Block.text_block("thinking aloud"),)), Usage(input_uncached=23_999, output=1))
    s.on_user(Message.user("next"))
    before = list(s.history)
    est = s.estimate()
    s.compact(CallInfo(7, 7.0), force="half")
    chars = UsageAnchor(s.config.chars_per_token)

    def of(msgs) -> int:
        return chars.estimate(list(msgs), s.env.system, s.env.tools)
    assert s.estimate() == round(est * of(s.history) / of(before))
    assert s.estimate() < est - s.counters.extra["messages_dropped"] * 1_300 * 0.5   # most of the dropped text
