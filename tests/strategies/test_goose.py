"""goose: the 0.8 threshold checked when a reply starts, the whole conversation summarised by the
fast model (tool responses removed middle out when that is too long), the continuation messages,
and the recovery on a rejected request (once per reply).

Read at: block/goose, 2026 files (no release tag named).
The files read are named in the strategy's docstring."""

from __future__ import annotations

from ctxsim.harness.model.conversation import Message, Usage
from ctxsim.strategies.base import CallInfo
from ctxsim.strategies.goose import (
    CONVERSATION_CONTINUATION,
    FAST_MODEL,
    TOOL_LOOP_CONTINUATION,
    remove_tool_responses,
)

from tests.helpers_traces import convo
from tests.strategies.peer_env import FakeServices, fail, make, reject, step


def test_tool_responses_removed_from_the_middle_out():
    m = convo(10)  # results at 2, 4, ..., 20
    left = lambda out: [i for i in range(2, 21, 2) if m[i] not in out]  # noqa: E731
    assert left(remove_tool_responses(m, 20)) == [10, 12]  # 2 of 10: idx[4], idx[5]
    assert left(remove_tool_responses(m, 50)) == [6, 8, 10, 12, 14]  # idx[4], [5], [3], [6], [2]
    assert left(remove_tool_responses(m, 1)) == [10]  # at least one
    assert remove_tool_responses(m, 0) == m


def _over(s, total):
    s.on_user(Message.user("fix the build"))
    step(s, 0, "log", usage=Usage(input_uncached=total - 1, output=1))


def test_threshold_is_checked_only_when_a_reply_starts():
    services = FakeServices("SUMMARY")
    s = make("goose", services=services, window=200_000)
    _over(s, 160_001)  # > 0.8 · 200,000, but inside a reply: no check
    assert not s.build_request(CallInfo(1, 1.0)).rewrite
    s.on_user(Message.user("and the tests"))
    req = s.build_request(CallInfo(2, 2.0))
    assert req.rewrite
    assert [m.text for m in s.history] == ["SUMMARY", CONVERSATION_CONTINUATION, "and the tests"]
    (sreq, _), = services.calls
    # the fast model, the conversation in its system prompt, no tools
    assert sreq.model == FAST_MODEL and not sreq.tools.tools and "fix the build" in sreq.system.text
    t = make("goose", window=200_000)
    _over(t, 160_000)
    t.on_user(Message.user("next"))
    assert not t.build_request(CallInfo(2, 2.0)).rewrite  # 160,000 is not over 0.8


def test_a_too_long_summary_request_drops_tool_responses_and_retries():
    services = FakeServices(fail("prompt_too_long"), "S")
    s = make("goose", services=services, window=200_000)
    s.on_user(Message.user("task"))
    for i in range(4):
        step(s, i, f"output number {i}")
    assert reject(s, call=4)
    first, second = (r.system.text for r, _ in services.calls)
    assert "output number 1" in first and "output number 1" not in second  # 10% of 4 → 1, idx[1]
    assert s.counters.extra["summary_failed_prompt_too_long"] == 1


def test_a_rejected_request_compacts_once_per_reply():
    s = make("goose", services=FakeServices("S1", "S2"), window=200_000)
    s.on_user(Message.user("task"))
    step(s, 0, "x")
    assert reject(s, call=1)
    assert [m.text for m in s.history] == ["S1", TOOL_LOOP_CONTINUATION, "task"]
    assert not reject(s, call=1, attempt=2)  # "Unable to continue" in the same reply
    s.on_user(Message.user("try again"))
    assert reject(s, call=2)
