"""strategies/templates.py: the usage anchor, pair-safe boundaries, client breakpoints and the
threshold-compactor counters."""

from __future__ import annotations

import pytest
from ctxsim.harness.model.conversation import (
    Block,
    Breakpoint,
    History,
    Message,
    Request,
    SystemPrompt,
    ToolSet,
    Usage,
)
from ctxsim.harness.provider.protocol import pairing_error
from ctxsim.strategies.base import Strategy
from ctxsim.strategies.templates import (
    ThresholdCompactor,
    UsageAnchor,
    answer_dangling,
    breakpoints_for,
    chars_to_tokens,
    drop_range,
    head_end,
    tail_start,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers_traces import convo


def test_chars_to_tokens_rounds_up():
    assert chars_to_tokens(0) == 0
    assert chars_to_tokens(1) == 1  # ceil(1/4)
    assert chars_to_tokens(400) == 100
    assert chars_to_tokens(401) == 101
    with pytest.raises(ValueError):
        chars_to_tokens(10, 0)


def test_usage_anchor_adds_new_messages_at_four_chars():
    a = UsageAnchor()
    h = [Message.user("x" * 40), Message("assistant", (Block.text_block("y" * 8),))]
    system, tools = SystemPrompt.of("s" * 12), ToolSet()
    # no anchor: whole request from characters: (12 + 40 + 8) / 4 = 15
    assert a.estimate(h, system, tools) == 15
    a.record(Usage(input_uncached=1_000, cache_read=2_000, output=50), len(h))
    assert a.last_input == 3_000
    h2 = h + [Message.user("z" * 400)]
    # 1,000 + 2,000 + 50 = 3,050 through the answer, + 400 / 4 = 100 for the new message
    assert a.estimate(h2, system, tools) == 3_150
    a.record(None, len(h2))  # a rejected call keeps the old anchor
    assert a.estimate(h2, system, tools) == 3_150
    a.rebase(500, 1)
    assert a.estimate(h2[:1], system, tools) == 500


def test_tail_start_and_head_end_skip_result_messages():
    m = convo(3)  # u0 a1 r2 a3 r4 a5 r6
    assert tail_start(m, 2) == 3  # r2 cannot open a tail: forward to a3
    assert tail_start(m, 2, "back") == 1  # or back to a1 (keeps the pair)
    assert tail_start(m, 3) == 3
    assert tail_start(m, 7) == 7
    assert head_end(m, 2) == 1  # head [u0, a1] would lose a1's result r2: shrink to [u0]
    assert head_end(m, 3) == 3  # [u0, a1, r2] is whole
    assert drop_range(m, 2, 4) == (1, 5)  # dropping r2..a3 would split two pairs: widen to a1..r4


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 8), st.integers(0, 20), st.integers(0, 20))
def test_dropping_a_pair_safe_range_never_splits_a_pair(steps, a, b):
    m = convo(steps)
    start, end = drop_range(m, min(a, b), max(a, b))
    kept = History(m[:start] + m[end:])
    assert pairing_error(Request(SystemPrompt(), ToolSet(), kept)) == ""


def test_breakpoint_styles():
    h = convo(2)  # u0 a1 r2 a3 r4
    assert breakpoints_for("system_last", h) == (Breakpoint("system"), Breakpoint(4))
    assert breakpoints_for("last_two_user", h) == (Breakpoint(2), Breakpoint(4))
    assert breakpoints_for("none", h) == ()
    assert breakpoints_for("system_last", []) == ()


class _Scripted(ThresholdCompactor):
    name = ""  # not registered

    def __init__(self, results):
        from ctxsim.strategies.base import Counters

        self.counters = Counters()
        self.results = list(results)

    def should_compact(self, call):
        return True

    def compact(self, call):
        return self.results.pop(0)


def test_threshold_compactor_counts_true_false_none():
    s = _Scripted([True, False, None])
    for _ in range(3):
        s.prepare(None)
    c = s.counters
    # None (nothing worth doing) is not an attempt
    assert (c.compactions_attempted, c.compactions_succeeded, c.compactions_failed) == (2, 1, 1)


def test_compact_now_is_counted_and_says_whether_to_send_again():
    s = _Scripted([True, False, None])
    assert [s.compact_now(None) for _ in range(3)] == [True, False, False]
    c = s.counters
    assert (c.compactions_attempted, c.compactions_succeeded, c.compactions_failed) == (2, 1, 1)
    # the template's own reaction to a rejection is the base's: give up
    assert ThresholdCompactor.on_rejected is Strategy.on_rejected



def test_unanswered_call_gets_synthetic_result_before_next_request():
    from ctxsim.strategies.base import CallInfo

    from tests.strategies.peer_env import make

    h = History(convo(1)[:2])  # u0, a1 with tool use t0 and no result (the agent died mid-call)
    fixed, n = answer_dangling(h)
    assert n == 1 and fixed[-1].blocks[0].id == "t0" and fixed[-1].blocks[0].is_error
    assert pairing_error(Request(SystemPrompt(), ToolSet(), fixed)) == ""
    assert answer_dangling(fixed) == (fixed, 0)
    s = make("truncate")
    s.on_user(Message.user("task"))
    s.on_response(Message("assistant", (Block.tool_use("t9", "Bash", {}),)), None)
    s.on_session_start("s2", True, 0.0)  # resumed: the call is still unanswered
    s.on_user(Message.user("continue"))
    req = s.build_request(CallInfo(1, 1.0))
    assert pairing_error(req) == "" and s.counters.extra["synthetic_results"] == 1


def test_the_parents_own_usage_anchors_its_estimate_again_after_an_isolated_sub_agent():
    """Issue #45: the anchor was cleared when an isolated sub-agent returned, so the parent's next
    request was estimated from characters alone (39% low on dense output, a context_editing subclass on
    check-strategy's random sample), and gemini_cli's trigger read the sub-agent's last input. The parent's
    last usage (1,000 tokens through its answer, 3 messages) anchors it again: 1,000 + the Task result's
    40 characters at 4 a token = 1,010; the sub-agent's own usage (20,000) counts for nothing there."""
    from ctxsim.harness.model.conversation import Block, Message, Usage

    from tests.strategies.peer_env import make

    s = make("codex")
    s.on_user(Message.user("task"))
    s.on_response(Message("assistant", (Block.tool_use("t1", "Task", {"description": "look"}),)),
                  Usage(input_uncached=990, output=10))
    assert (s.anchor.anchor, s.anchor.anchor_len, s.anchor.last_input) == (1_000, 2, 990)
    s.on_subtask_start("a1", "look", isolated=True)
    s.on_user(Message.user("look around"))
    s.on_response(Message("assistant", (Block.text_block("found it"),)), Usage(input_uncached=19_990, output=10))
    s.on_subtask_end("a1", "found it")
    assert (s.anchor.anchor, s.anchor.anchor_len, s.anchor.last_input) == (1_000, 2, 990)
    s.on_tool_results(Message("user", (Block.tool_result("t1", "c" * 40),)))
    assert s.estimate() == 1_010


def test_a_crash_after_some_parallel_results_gets_the_missing_ones_in_their_message():
    """Three parallel calls, the first result written before the crash: the two missing results join
    its message, after it and before any text there (tool results come first in a user turn); the
    history keeps its three messages and the request is pairing-valid. Nothing to add the second time."""
    from ctxsim.strategies.base import UNANSWERED_RESULT

    call = Message("assistant", tuple(Block.tool_use(f"t{i}", "Read", {"file_path": f"f{i}"}) for i in range(3)))
    got = Message("user", (Block.tool_result("t0", "one"), Block.text_block("note")))
    h = History([Message.user("task"), call, got])
    fixed, n = answer_dangling(h)
    assert n == 2 and len(fixed) == 3
    assert [(b.type, b.id) for b in fixed[-1].blocks] == [("tool_result", "t0"), ("tool_result", "t1"),
                                                          ("tool_result", "t2"), ("text", None)]
    assert [b.text for b in fixed[-1].blocks[1:3]] == [UNANSWERED_RESULT] * 2 and fixed[-1].blocks[1].is_error
    assert pairing_error(Request(SystemPrompt(), ToolSet(), fixed)) == ""
    assert answer_dangling(fixed) == (fixed, 0)
    # every result back: nothing to do
    whole = History([Message.user("task"), call, Message("user", tuple(Block.tool_result(f"t{i}", "x") for i in range(3)))])
    assert answer_dangling(whole) == (whole, 0)
