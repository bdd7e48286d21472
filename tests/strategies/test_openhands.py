"""openhands: LLMSummarizingCondenser as the V1 SDK's default agent runs it (80 events, keep 4, one
event per action or observation, a token trigger, condensation on a rejected request), and the V0
reading (release v0: one event per message, the production 120 / 4).

Read at: OpenHands/software-agent-sdk v1.43.1.
The files read are named in the strategy's docstring."""

from __future__ import annotations

import pytest
from ctxsim.harness.model.conversation import Block, Message, Usage
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.strategies.base import CallInfo
from ctxsim.strategies.openhands import OpenHands, halving_cut, middle_cut
from ctxsim.strategies.registry import StrategyError, make_config

from tests.helpers_traces import Builder, convo
from tests.strategies.peer_env import FakeServices, make, reject, step

V0 = {"release": "v0"}


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
    assert make_config(OpenHands, {}).size() == 80 and make_config(OpenHands, V0).size() == 120


def test_middle_cut_at_10000_chars():
    out = middle_cut("a" * 6_000 + "b" * 6_000, 10_000)
    assert out.startswith("a" * 5_000 + "\n<response clipped>") and out.endswith("b" * 5_000)


def test_v0_condensation_summarises_the_middle_with_one_fresh_call():
    services = FakeServices("STATE: first summary")
    s = make("openhands", {**V0, "max_size": 20, "keep_first": 2}, services=services)
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


def test_v0_second_condensation_feeds_back_the_previous_summary():
    services = FakeServices("STATE: one", "STATE: two")
    s = make("openhands", {**V0, "max_size": 20, "keep_first": 2}, services=services)
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


# --- V1 (the default) ------------------------------------------------------------------------------

def parallel_step(s, i: int, k: int = 3, size: int = 10) -> None:
    s.build_request(CallInfo(i, float(i)))
    s.on_response(Message("assistant", tuple(Block.tool_use(f"t{i}_{j}", "Read", {"p": j}) for j in range(k))), None)
    s.on_tool_results(Message("user", tuple(Block.tool_result(f"t{i}_{j}", "x" * size) for j in range(k))))


def test_v1_counts_parallel_calls_as_separate_events():
    services = FakeServices("STATE")
    s = make("openhands", {"max_size": 20, "keep_first": 2}, services=services)
    s.on_user(Message.user("task"))
    for i in range(4):
        parallel_step(s, i)
    # 9 messages, but 1 (system) + 1 (task) + 4 · (3 actions + 3 observations) = 26 events > 20
    req = s.build_request(CallInfo(4, 4.0))
    assert req.rewrite
    # events start: task 1, a0 2, r0 5, a1 8, r1 11, a2 14, r2 17, a3 20, r3 23; tail 20//2 − 2 − 1 = 7
    # → forget from the first cut ≥ 2 (a0) to the first cut ≥ 26 − 7 = 19 (a3): a0..r2, 18 events
    assert [m.meta.get("origin") for m in s.history[:2]] == [None, "summary"]
    assert s.history[2].blocks[0].id == "t3_0" and len(s.history) == 4
    assert s.counters.extra["events_forgotten"] == 18
    # the summariser gets the forgotten events as text, uncut, in one message of its own
    (sreq, _), = services.calls
    assert len(sreq.messages) == 1 and not sreq.tools.tools and sreq.messages[0].text.count("<EVENT>") == 6
    # the V0 reading counts 9 messages: nothing to condense yet
    v0 = make("openhands", {**V0, "max_size": 20, "keep_first": 2})
    v0.on_user(Message.user("task"))
    for i in range(4):
        parallel_step(v0, i)
    assert not v0.build_request(CallInfo(4, 4.0)).rewrite


def test_v1_token_trigger_keeps_the_suffix_under_half_the_limit():
    s = make("openhands", {"max_size": 40, "keep_first": 2, "max_tokens": 1_000})
    s.on_user(Message.user("task"))
    for i in range(4):
        step(s, i, "r" * 1_000, usage=Usage(input_uncached=1_001) if i == 3 else None)
    assert s.build_request(CallInfo(4, 4.0)).rewrite
    # estimate 1,001 + r3 (1,000 chars = 250) = 1,251 > 1,000: reduce by 1,251 − 500 = 751 tokens from
    # a0 on: a0 6 ('Bash {"command": "c0"}' = 22 chars), r0 250, a1 6, r1 250, a2 6, r2 250 → 768 ≥ 751
    # at a3 (event 8 of 10): keep 2 events (a3, r3)
    assert [m.blocks[0].id or m.meta.get("origin") or m.text for m in s.history] == ["task", "summary", "tu_3", "tu_3"]


def test_v1_token_limit_is_the_smaller_of_max_tokens_and_the_models_input_limit():
    """software-agent-sdk v1.43.1 llm_summarizing_condenser.py L96-115 ``_effective_max_tokens``:
    ``min(limits)`` over ``self.max_tokens`` and ``agent_llm.effective_max_input_tokens`` (here the
    window); ``max_tokens`` None: the model's limit alone (settings/model.py ``build_condenser`` inherits it)."""
    assert make("openhands", window=200_000)._limit() == 200_000
    assert make("openhands", {"max_tokens": 120_000}, window=200_000)._limit() == 120_000
    assert make("openhands", {"max_tokens": 500_000}, window=200_000)._limit() == 200_000  # capped at the window
    # the trigger follows the capped limit: 200,001 estimated tokens condense with max_tokens 500,000
    s = make("openhands", {"max_tokens": 500_000}, window=200_000)
    s.on_user(Message.user("task"))
    step(s, 0, "r", usage=Usage(input_uncached=199_999, output=1))  # 200,000 + 1 ("r") = 200,001
    assert "tokens" in s._reasons(s._starts())


def test_v1_rejected_request_condenses_half_the_view_and_retries():
    s = make("openhands", {"max_size": 40, "keep_first": 2})
    s.on_user(Message.user("task"))
    for i in range(10):
        step(s, i, f"out {i}")
    # 22 events: a request keeps 22 // 2 − 2 − 1 = 8 → forget a0 .. up to the first cut ≥ 14 (a6)
    assert reject(s, call=10)
    assert s.history[2].blocks[0].id == "tu_6" and len(s.history) == 2 + 8
    assert s.counters.compactions_succeeded == 1


def test_v1_hard_context_reset_when_nothing_can_be_forgotten():
    s = make("openhands", {"max_size": 40, "keep_first": 2})
    s.on_user(Message.user("a task " * 10))
    assert reject(s, call=0)  # the head is everything: the whole view is summarised
    assert [m.meta.get("origin") for m in s.history] == ["summary"]
    assert s.counters.extra["hard_context_resets"] == 1


def test_v1_failed_summary_on_a_hard_requirement_falls_back_to_a_hard_context_reset():
    """software-agent-sdk v1.43.1 condenser/base.py RollingCondenser.condense: a HARD requirement whose
    get_condensation raises (the summary call failed) → hard_context_reset (llm_summarizing_condenser.py):
    every event, first whole, then each event cut by maybe_truncate to 0.8 × the longest, 5 tries."""
    from ctxsim.strategies.openhands import TRUNCATE_NOTICE, maybe_truncate

    from tests.strategies.peer_env import fail

    services = FakeServices(fail(), fail(), "S")
    s = make("openhands", {"max_size": 40, "keep_first": 2}, services=services)
    s.on_user(Message.user("TASK-7"))
    step(s, 0, "r" * 1_000)
    for i in range(1, 10):
        step(s, i, f"out {i}")
    assert reject(s, call=10)  # a condensation request: HARD
    ranged, whole, cut = (req.messages[0].text for req, _ in services.calls)
    assert "out 9" not in ranged and "TASK-7" not in ranged  # the range of the first try (a0 .. a5)
    assert "TASK-7" in whole and "out 9" in whole and "r" * 1_000 in whole  # the hard reset's first try: all, whole
    # the longest event is r0: "[tool result]: " (15) + 1,000 = 1,015 chars → cut to int(1,015 · 0.8) = 812:
    # head (812 − 113 notice) = 699 → 350 head (the 15-character prefix + 335) + 349 tail characters around the notice
    assert len(TRUNCATE_NOTICE) == 113 and "r" * 1_000 not in cut
    assert f"[tool result]: {'r' * 335}{TRUNCATE_NOTICE}{'r' * 349}" in cut
    assert maybe_truncate("x" * 1_015, 812) == "x" * 350 + TRUNCATE_NOTICE + "x" * 349
    assert [m.meta.get("origin") for m in s.history] == ["summary"] and s.history[0].text == "S"
    assert s.counters.extra["hard_context_resets"] == 1 and s.counters.extra["hard_reset_failed_attempts"] == 1
    # five failures in all: the compaction fails (1 ranged + 5 hard-reset tries = 6 calls)
    services = FakeServices(*[fail()] * 6)
    s = make("openhands", {"max_size": 40, "keep_first": 2}, services=services)
    s.on_user(Message.user("TASK-7"))
    for i in range(10):
        step(s, i, f"out {i}")
    assert not reject(s, call=10) and len(services.calls) == 6
    # the older reading: a failed summary keeps the history (one call)
    services = FakeServices(fail())
    s = make("openhands", {"max_size": 40, "keep_first": 2, "failed_summary": "keep"}, services=services)
    s.on_user(Message.user("TASK-7"))
    for i in range(10):
        step(s, i, f"out {i}")
    assert not reject(s, call=10) and len(services.calls) == 1 and len(s.history) == 21


def test_v1_estimate_after_a_condensation_keeps_the_measured_density():
    """Known finding #18: the re-based estimate subtracted the forgotten events at 4 characters per
    token, 60-80% high on dense text. Now the anchored estimate is scaled by the new request's share of
    the old one, both from characters. Same session as the token-trigger test: anchored 1,001 + r3 250
    = 1,251; from characters the old request is 181 (system and tools) + 4 + 4 · 22 + 4 · 1,000 = 4,273
    chars → 1,069 tokens, the new one 181 + 4 + 28 (the summary "<summary>summary 1</summary>") + 22 +
    1,000 = 1,235 chars → 309: 1,251 · 309 / 1,069 = 361.6 → 362 (the old rule: 1,251 − 767 + 7 = 491)."""
    s = make("openhands", {"max_size": 40, "keep_first": 2, "max_tokens": 1_000})
    s.on_user(Message.user("task"))
    for i in range(4):
        step(s, i, "r" * 1_000, usage=Usage(input_uncached=1_001) if i == 3 else None)
    req = s.build_request(CallInfo(4, 4.0))
    assert req.rewrite and req.estimated_tokens == 362


def test_v0_head_is_per_history_an_isolated_sub_agent_starts_its_own():
    """Issue #45 (found by the kit: openhands v0, max_size 24, keep_first 4, corpus session 36): the
    head fixed at the main history's first condensation was applied to a sub-agent's history and
    cut a tool_use from its result there."""
    from ctxsim.harness.testing.invariants import split_pairs

    s = make("openhands", {**V0, "max_size": 20, "keep_first": 2}, services=FakeServices("STATE: main"))
    s.on_user(Message.user("task"))
    s.on_response(Message("assistant", (Block.text_block("which file?"),)), None)
    s.on_user(Message.user("parser.py"))   # messages[2] is a typed message: the main head is 2
    for i in range(9):
        step(s, i, f"out {i}")                # 21 messages: the main condenses at the next call
    s.build_request(CallInfo(9, 9.0))
    assert s.head_len == 2 and s.history[2].meta["origin"] == "summary"
    s.on_subtask_start("t1", "look around", True)
    assert s.head_len is None
    s.on_user(Message.user("sub task"))
    for i in range(100, 110):
        step(s, i, f"sub {i}")                # the sub-agent's messages[2] is a result: its head is 1
    req = s.build_request(CallInfo(110, 110.0))
    assert req.rewrite and s.head_len == 1 and split_pairs(req) == ""
    s.on_subtask_end("t1", "done")
    assert s.head_len == 2 and s.history[2].text == "STATE: main"
