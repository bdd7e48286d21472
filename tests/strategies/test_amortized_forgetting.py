"""amortized_forgetting: OpenHands' halving without a summary."""

from __future__ import annotations

from harness.conversation import Message
from harness.engine import RunConfig, replay
from strategies.base import CallInfo
from strategies.openhands import halving_cut
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
