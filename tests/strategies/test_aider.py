"""aider: the chat-history budget min(max(window/16, 1024), 8192), ChatSummary's split (the tail
under half the budget, the head ending on an assistant message, recursion), cache markers through
the finished exchanges, and no retry on a rejected request.

Read at: Aider-AI/aider v0.86 (args.py: v0.86.2, 253f0368).
The files read are named in the strategy's docstring."""

from __future__ import annotations

from ctxsim.harness.model.conversation import Block, Breakpoint, Message
from ctxsim.strategies.aider import SUMMARY_PREFIX, history_budget
from ctxsim.strategies.base import CallInfo

from tests.strategies.peer_env import FakeServices, make, reject


def test_history_budget():
    assert history_budget(200_000) == 8_192  # 12,500 capped
    assert history_budget(32_000) == 2_000
    assert history_budget(8_000) == 1_024  # 500 raised to the floor
    assert make("aider", window=1_000_000).budget() == 8_192


def exchange(s, i: int) -> None:
    s.on_user(Message.user(f"question {i:02d}".ljust(40, ".")))  # 40 chars = 10 tokens
    s.build_request(CallInfo(i, float(i)))
    s.on_response(Message("assistant", (Block.text_block("a" * 160),)), None)  # 40 tokens


def test_finished_exchanges_over_budget_are_summarised_when_the_next_starts():
    services = FakeServices("S")
    s = make("aider", {"max_chat_history_tokens": 100}, services=services)
    for i in range(4):
        exchange(s, i)  # done: 4 · 50 = 200 tokens after the 4th, checked when the 5th starts
    assert len(services.calls) == 1  # the 4th exchange started with 150 done tokens: summarised then
    s = make("aider", {"max_chat_history_tokens": 100}, services=FakeServices("S", "T"))
    for i in range(3):
        exchange(s, i)
    s.on_user(Message.user("question 99".ljust(40, ".")))
    # done = U0 A0 U1 A1 U2 A2 = 150 > 100; the tail under 50: A2 (40), then U2 would make 50: split 5,
    # moved back to end the head on an assistant: 4 = MIN_SPLIT → all six summarised at once
    assert s.build_request(CallInfo(3, 3.0)).rewrite
    texts = [m.text for m in s.history]
    assert texts == [SUMMARY_PREFIX + "S", "Ok.", "question 99".ljust(40, ".")]


def test_split_keeps_the_tail_under_half_the_budget():
    services = FakeServices("S")
    s = make("aider", {"max_chat_history_tokens": 100}, services=services)
    for i in range(4):
        s.on_user(Message.user(f"question {i:02d}".ljust(40, ".")))
        s.on_response(Message("assistant", (Block.text_block("a" * 160),)), None)
    s.on_user(Message.user("next"))
    s.build_request(CallInfo(4, 4.0))
    # done = 8 messages, 200 tokens: tail A3 (40) → split 7 → back to 6 (A2 ends the head): U0..A2
    # summarised, U3 A3 kept (50 + the summary's 14 < 100)
    (req, _), = services.calls
    assert req.messages[0].text.startswith("# USER\nquestion 00") and "question 03" not in req.messages[0].text
    assert [m.text[:11] for m in s.history] == [SUMMARY_PREFIX[:11], "question 03", "a" * 11, "next"]


def test_no_cache_markers_by_default_as_aider_args_py_v0_86_2():
    """aider/args.py @ v0.86.2 (253f0368): ``--cache-prompts`` default=False; base_coder.py sets
    add_cache_headers only when it is on: a request carries no cache_control at all."""
    s = make("aider", {"max_chat_history_tokens": 10_000})
    for i in range(2):
        exchange(s, i)
    req = s.build_request(CallInfo(2, 2.0))
    assert req.breakpoints == ()
    assert s.config.cache_prompts is False


def test_cache_markers_through_the_finished_exchanges_only():
    s = make("aider", {"max_chat_history_tokens": 10_000, "cache_prompts": True})
    for i in range(2):
        exchange(s, i)
    s.on_response(Message("assistant", (Block.text_block("more"),)), None)
    req = s.build_request(CallInfo(2, 2.0))
    # U0 A0 U1 A1 A1': the current exchange starts at U1 (2): the marker sits on A0 (1)
    assert req.breakpoints == (Breakpoint("system"), Breakpoint(1))


def test_a_rejected_request_ends_the_exchange():
    s = make("aider")
    s.on_user(Message.user("t"))
    assert reject(s) is False
