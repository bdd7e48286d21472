"""amortized_forgetting: OpenHands' halving without a summary."""

from __future__ import annotations

from ctxsim.harness.model.conversation import Message
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.strategies.base import CallInfo
from ctxsim.strategies.openhands import halving_cut

from tests.helpers_traces import Builder, convo
from tests.strategies.peer_env import FakeServices, make, step


def test_halving_cut_without_summary_slot():
    m = convo(60)  # 121 messages
    # tail: 120 // 2 − 4 = 56 → start 121 − 56 = 65 = a32 (an assistant message: safe); head 4 → 3
    assert halving_cut(m, 4, 120, False) == (3, 65)


def test_forgets_the_middle_with_no_side_call():
    services = FakeServices()
    s = make("amortized_forgetting", {"max_size": 20, "keep_first": 2}, services=services)
    s.on_user(Message.user("task"))
    for i in range(10):
        step(s, i, f"out {i}")
    req = s.build_request(CallInfo(10, 10.0))
    # 21 messages; head 2 → 1 (u0); tail 20 // 2 − 2 = 8 → start 13 = a6: keep u0 + 8 = 9 messages
    assert req.rewrite and len(s.history) == 9
    assert s.history[0].text == "task" and s.history[1].blocks[0].id == "tu_6"
    assert services.calls == [] and s.counters.extra["events_forgotten"] == 12


def test_replay_pairs_hold():
    b = Builder().user("triage the crash")
    for i in range(140):
        b.call(f"step {i}", [f"out {i}"])
    t = b.call("done").build()
    r = replay(t, "amortized_forgetting", None, RunConfig())
    m = r.metrics
    assert m["pairing_violations"] == 0 and m["compactions"]["succeeded"] >= 2
    assert set(r.calls["kind"]) == {"main"}


def _nine_k_steps(n: int):
    b = Builder().user("task")
    for i in range(n):
        b.call(f"s{i}", [f"r{i} " + "x " * 9000])
    return b.call("done").build()


def test_prompt_too_long_forces_a_halving_and_the_call_is_sent_again():
    """OpenHands turns a context-window error into a condensation request. Call k holds 96 + 9,072·k
    tokens (a step: its result and its framing, its assistant text and its Bash call, 20 tokens in
    Claude's format); at a 20,000 window with max_size 8 the event trigger never fires before call 3 (7
    messages, 27,312 tokens) is rejected. Forced halving: head_end(1) = 1, tail 8 // 2 − 1 = 3
    messages → start 4 = r1 (a result) → 5; kept [u, a2, r2] = 96 + 9,072 = 9,168 tokens, billed."""
    r = replay(_nine_k_steps(5), "amortized_forgetting", {"max_size": 8, "keep_first": 1}, RunConfig(window=20_000))
    c, m = r.calls, r.metrics
    at3 = c[c["call"] == 3]
    assert at3["context_tokens"].tolist() == [27_312, 9_168] and at3["rejected"].tolist() == [True, False]
    assert at3["attempt"].tolist() == [1, 2] and at3["cost_usd"].iloc[1] > 0 and bool(at3["compaction"].iloc[1])
    assert m["completed"] is True and m["retries"] == 2 and m["rejected_requests"] == 2  # again at call 5
    assert m["compactions"]["succeeded"] == 2 and m["compactions"]["attempted"] == 2


def test_nothing_left_to_forget_ends_the_session():
    t = Builder().user("task").call("s0", ["x " * 25000]).call("done").build()  # one result over the window
    r = replay(t, "amortized_forgetting", {"max_size": 8, "keep_first": 1}, RunConfig(window=20_000))
    assert r.metrics["completed"] is False and r.metrics["failed_at_call"] == 1
    assert r.metrics["compactions"]["attempted"] == 0 and r.metrics["rejected_requests"] == 1
