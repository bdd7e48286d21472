"""anthropic_compaction: the server compaction compact_20260112 (trigger 150,000 input tokens, the
summary step billed on the request's prefix, the conversation going on from the compaction block,
instructions, pause_after_compaction).

Read at: the Anthropic compaction docs (beta compact-2026-01-12), read 2026-12.
The files read are named in the strategy's docstring."""

from __future__ import annotations

import pytest
from ctxsim.harness.model.conversation import Message, Usage
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.strategies.anthropic_compaction import DEFAULT_INSTRUCTIONS, AnthropicCompaction
from ctxsim.strategies.base import CallInfo
from ctxsim.strategies.registry import StrategyError, make_config

from tests.helpers_traces import Builder
from tests.strategies.peer_env import FakeServices, make, reject, step


def _session(s, input_tokens):
    s.on_user(Message.user("task"))
    step(s, 0, "a")
    step(s, 1, "b", usage=Usage(input_uncached=input_tokens - 1, output=1))


def test_compacts_past_150k_and_goes_on_from_the_summary():
    s = make("anthropic_compaction", services=FakeServices("S"), window=200_000)
    _session(s, 149_999)  # 149,999 + "b" (1 char → 1 token) = 150,000: not past the trigger
    assert not s.build_request(CallInfo(2, 2.0)).rewrite
    services = FakeServices("<summary>state</summary>")
    s = make("anthropic_compaction", services=services, window=200_000)
    _session(s, 150_000)  # 150,001 > 150,000
    req = s.build_request(CallInfo(2, 2.0))
    assert req.rewrite and [m.text for m in req.messages] == ["<summary>state</summary>"]
    (sreq, spec), = services.calls
    # the summary step runs on the request as sent (same prefix), with the default instructions
    assert sreq.tools is s.env.tools and sreq.system is s.env.system and len(sreq.messages) == 5
    assert spec.instructions == DEFAULT_INSTRUCTIONS and s.counters.compactions_succeeded == 1


def test_instructions_replace_the_default_and_pause_keeps_the_newest_messages():
    services = FakeServices("S")
    s = make("anthropic_compaction", {"instructions": "Keep every file path.", "pause_after_compaction": True,
                                      "preserve_recent_messages": 3}, services=services, window=200_000)
    _session(s, 160_000)
    s.build_request(CallInfo(2, 2.0))
    assert services.calls[0][1].instructions == "Keep every file path."
    # u0 a0 r0 a1 r1: the newest 3 are r0 a1 r1; r0 answers a0 (gone): start at a1
    assert [m.meta.get("origin") or m.role for m in s.history] == ["summary", "assistant", "user"]
    with pytest.raises(StrategyError):
        make_config(AnthropicCompaction, {"preserve_recent_messages": 2})


def test_a_rejected_request_ends_the_turn():
    s = make("anthropic_compaction")
    s.on_user(Message.user("t"))
    assert reject(s) is False


def test_replay_compacts_and_bills_the_summary_step():
    b = Builder().user("write the report")
    for i in range(80):
        b.call(f"step {i}", [f"out {i} " + "data " * 1_200])
    t = b.call("done").build()
    r = replay(t, "anthropic_compaction", AnthropicCompaction.check_params(60_000), RunConfig(window=60_000))
    m = r.metrics
    assert m["overflows"] == 0 and m["pairing_violations"] == 0 and m["compactions"]["succeeded"] >= 2
    steps = r.calls[r.calls["kind"] == "summary"]
    assert len(steps) == m["compactions"]["succeeded"] and (steps["cost_usd"] > 0).all()
