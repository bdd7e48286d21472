"""openhands: LLMSummarizingCondenser with the production defaults (keep_first 4, max_size 120)."""

from __future__ import annotations

import pytest

from harness.conversation import Message
from harness.engine import RunConfig, replay
from strategies.base import CallInfo
from strategies.openhands import OpenHands, halving_cut, middle_cut
from strategies.registry import StrategyError, make_config
from tests.helpers_traces import Builder, convo
from tests.strategies.peer_env import FakeServices, make, step


def test_halving_cut_with_summary_slot():
    m = convo(60)  # 121 messages > 120
    head, start = halving_cut(m, 4, 120, True)
    # head: keep_first 4 = u0 a1 r2 a3, but a3's result r4 would be forgotten → shrink to 3
    # tail: 120 // 2 − 4 − 1 = 55 newest → start 121 − 55 = 66 = r32 (a result) → forward to 67
    assert (head, start) == (3, 67)
    # condensed: 3 + summary + 54 = 58 ≤ 60 (the target size)
    assert head + 1 + (121 - start) == 58


def test_config_rejects_keep_first_at_half():
    with pytest.raises(StrategyError):
        make_config(OpenHands, {"max_size": 10, "keep_first": 5})


def test_middle_cut_at_10000_chars():
    out = middle_cut("a" * 6_000 + "b" * 6_000, 10_000)
    assert out.startswith("a" * 5_000 + "\n<response clipped>") and out.endswith("b" * 5_000)


def test_condensation_summarises_the_middle_with_one_fresh_call():
    services = FakeServices("STATE: first summary")
    s = make("openhands", {"max_size": 20, "keep_first": 2}, services=services)
    s.on_user(Message.user("task"))
    for i in range(10):
        step(s, i, f"out {i}")  # 21 messages after step 9's result
    req = s.build_request(CallInfo(10, 10.0))
    assert req.rewrite
    # head: keep_first 2 = u0 a0 → a0's result would go → shrink to 1 (u0)
    # tail: 20 // 2 − 2 − 1 = 7 → start 21 − 7 = 14 = r6 (a result) → 15 (a7)
    h = list(s.history)
    assert len(h) == 1 + 1 + 6 and h[1].meta["origin"] == "summary" and h[1].text == "STATE: first summary"
    assert h[2].blocks[0].id == "tu_7"
    (sreq, spec), = services.calls
    # a single user message, no system prompt, no tools, no cache markers (caching off)
    assert len(sreq.messages) == 1 and not sreq.system.blocks and not sreq.tools.tools and not sreq.breakpoints
    prompt = sreq.messages[0].text
    assert "No events summarized" in prompt and "<EVENT id=1>" in prompt and "<EVENT id=14>" in prompt
    assert "<EVENT id=15>" not in prompt
    assert s.counters.extra["events_forgotten"] == 14  # messages 1..14


def test_second_condensation_feeds_back_the_previous_summary():
    services = FakeServices("STATE: one", "STATE: two")
    s = make("openhands", {"max_size": 20, "keep_first": 2}, services=services)
    s.on_user(Message.user("task"))
    for i in range(10):
        step(s, i, f"out {i}")
    # the first condensation ran at step 10's call (21 messages → 8); 8 + 2·7 = 22 > 20 at step 17's
    for i in range(10, 18):
        step(s, i, f"out {i}")
    assert len(services.calls) == 2
    prompt = services.calls[1][0].messages[0].text
    assert "<PREVIOUS SUMMARY>\nSTATE: one\n</PREVIOUS SUMMARY>" in prompt
    assert "STATE: one" not in prompt.split("</PREVIOUS SUMMARY>")[1]  # not also a forgotten event
    assert s.history[0].text == "task" and s.history[1].text == "STATE: two"


def test_replay_with_production_defaults():
    b = Builder().user("implement the endpoint")
    for i in range(150):
        b.call(f"step {i}", [f"out {i} " + "z " * 300])
    t = b.call("done").build()
    r = replay(t, "openhands", None, RunConfig())
    m = r.metrics
    assert m["pairing_violations"] == 0 and m["compactions"]["succeeded"] >= 2
    summaries = r.calls[r.calls["kind"] == "summary"]
    assert len(summaries) == m["compactions"]["succeeded"]
    assert (summaries["cache_read"] == 0).all()  # no caching for the summariser
