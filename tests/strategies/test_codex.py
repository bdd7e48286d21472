"""codex: compact at 90% of the window; newest user messages up to 20,000 tokens + a handoff
summary; drop the oldest item and retry when the compaction call is too long; tool output cut to
12,000 tokens (the 2025 rule, 10 KiB / 256 lines, as tool_output="bytes_lines"); the compaction
call sent without tools (with them: compaction_tools=True); server-side compaction as a mode.

Read at: openai/codex codex-rs, 2026 files (no release tag named); templates/compact/prompt.md at 928a707f6a5e.
The files read are named in the strategy's docstring."""

from __future__ import annotations

from ctxsim.harness.model.conversation import Block, Message, Usage
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.strategies.base import CallInfo
from ctxsim.strategies.codex import SUMMARY_PREFIX, middle_truncate, select_user_messages

from tests.helpers_traces import Builder
from tests.strategies.peer_env import FakeServices, fail, make, step, use


def test_limit_is_90_percent_of_the_window():
    assert make("codex", window=272_000).limit() == 244_800  # gpt-5: 0.9 · 272,000
    assert make("codex", window=200_000).limit() == 180_000
    assert make("codex", {"auto_compact_token_limit": 50_000}).limit() == 50_000


def test_a_configured_limit_can_only_lower_the_90_percent_default():
    """openai/codex protocol/src/openai_models.rs ``ModelInfo::auto_compact_token_limit`` (PR #11516,
    codex 0.100.0): ``config_limit.map_or(context_limit, |limit| std::cmp::min(limit, context_limit))``
    with ``context_limit = (context_window * 9) / 10``."""
    assert make("codex", {"auto_compact_token_limit": 250_000}, window=272_000).limit() == 244_800  # min(250k, 244.8k)
    assert make("codex", {"auto_compact_token_limit": 100_000}, window=272_000).limit() == 100_000
    # before 0.100.0 (issue #11805: "higher user-defined values are silently ignored" since) it replaced it
    old = make("codex", {"auto_compact_token_limit": 250_000, "auto_compact_clamp": False}, window=272_000)
    assert old.limit() == 250_000


def test_usable_window_is_95_percent():
    """openai_models.rs ``default_effective_context_window_percent() -> i64 { 95 }``; turn_context.rs
    ``model_context_window``: ``context_window.saturating_mul(effective_context_window_percent) / 100``
    (openai/codex issue #31860: 372,000 × 0.95 = 353,400; #19409: 272,000 → 258,400)."""
    assert make("codex", window=372_000).usable_window() == 353_400
    assert make("codex", window=272_000).usable_window() == 258_400
    assert make("codex", {"effective_context_window_percent": 90}, window=200_001).usable_window() == 180_000


def test_the_usable_window_is_no_trigger_in_the_total_scope_but_caps_body_after_prefix():
    """context_window.rs @ 11237ebb ``context_window_token_status``: Total scope compares the total
    with the clamped limit only; BodyAfterPrefix counts tokens after the prefill baseline against the
    configured limit (unclamped) and also stops at ``model_context_window``."""
    s = make("codex", {"auto_compact_fraction": 1.0}, window=200_000)  # limit 200,000; usable 190,000
    s.on_user(Message.user("task"))
    step(s, 0, "x", usage=Usage(input_uncached=195_000, output=1))  # 195,002: past 95%, under the limit
    assert not s.should_compact(CallInfo(1, 1.0))
    b = make("codex", {"auto_compact_scope": "body_after_prefix", "auto_compact_token_limit": 50_000},
             window=1_000_000)  # usable 950,000
    b.on_user(Message.user("t" * 400_000))
    assert not b.should_compact(CallInfo(0, 0.0))
    e0 = b.prefill  # the first request's estimate is the baseline (≈ 100,000: 400,000 chars / 4)
    assert e0 == b.estimate() and 100_000 <= e0 < 100_100
    b.on_response(Message("assistant", (use(0),)), Usage(input_uncached=e0 + 49_997, output=1))
    b.on_tool_results(Message("user", (Block.tool_result("tu_0", "abcd"),)))  # + 1 token: 49,999 after it
    assert not b.should_compact(CallInfo(1, 1.0))
    b.on_user(Message.user("abcd"))  # 50,000 after the baseline
    assert b.should_compact(CallInfo(1, 1.0))
    # in the Total scope the same history is far past min(50,000, 900,000)
    t = make("codex", {"auto_compact_token_limit": 50_000}, window=1_000_000)
    t.on_user(Message.user("t" * 400_000))
    assert t.should_compact(CallInfo(0, 0.0))
    # the usable window caps the total in body_after_prefix
    c = make("codex", {"auto_compact_scope": "body_after_prefix", "auto_compact_token_limit": 900_000},
             window=200_000)
    c.on_user(Message.user("task"))
    assert not c.should_compact(CallInfo(0, 0.0))
    c.on_response(Message("assistant", (use(0),)), Usage(input_uncached=189_998, output=1))
    c.on_tool_results(Message("user", (Block.tool_result("tu_0", "abcd"),)))
    assert c.estimate() == 190_000 and c.should_compact(CallInfo(1, 1.0))  # 95% of 200,000


def test_user_messages_newest_first_within_budget():
    # 4 bytes per token: a = 10 tokens, b = 20, c = 10; budget 25
    kept = select_user_messages(["a" * 40, "b" * 80, "c" * 40], 25, 4)
    # c fits (10 ≤ 25, 15 left); b (20) does not: cut to 15 tokens = 60 chars, 20 chars → 5 tokens
    # marked as truncated, and the walk stops (a is dropped)
    assert kept == ["b" * 30 + "…5 tokens truncated…" + "b" * 30, "c" * 40]
    assert middle_truncate("short", 10, 4) == "short"


def test_compaction_rebuilds_history_from_user_messages_and_summary():
    services = FakeServices("HANDOFF")
    s = make("codex", {"auto_compact_token_limit": 1_000}, services=services)
    s.on_user(Message.user("first request"))
    step(s, 0, "x" * 100)
    s.on_user(Message.user("second request"))
    step(s, 1, "y" * 100, usage=Usage(input_uncached=990, output=10))  # 1,000 reported → at the limit
    req = s.build_request(CallInfo(2, 2.0))
    assert req.rewrite
    texts = [m.text for m in s.history]
    assert texts == ["first request", "second request", f"{SUMMARY_PREFIX}\nHANDOFF"]
    assert texts[-1].startswith("You are resuming an in-progress task after context compaction. Another language "
                                "model produced a handoff summary.")
    assert texts[-1].endswith("Here is the summary:\n\nHANDOFF")  # the file's newline, then compact.rs's
    assert not any(m.has_tool_use or m.has_tool_result for m in s.history)
    # one summary call over the whole conversation, with Codex's own prompt
    (sreq, spec), = services.calls
    assert spec.kind == "summary" and "handoff summary" in spec.instructions and len(sreq.messages) == 6
    assert s.counters.compactions_succeeded == 1


def test_too_long_compaction_drops_oldest_item_and_retries():
    services = FakeServices(fail("prompt_too_long"), "OK")
    s = make("codex", {"auto_compact_token_limit": 1_000}, services=services)
    s.on_user(Message.user("task"))
    step(s, 0, "a")
    s.on_user(Message.user("next"))
    step(s, 1, "b", usage=Usage(input_uncached=1_000))
    s.build_request(CallInfo(2, 2.0))
    # u0 a0 r0 u1 a1 r1: 6 messages, then u0 dropped with a0 and its result r0 (the request must
    # start with a user message): u1 a1 r1 (3)
    assert [len(r.messages) for r, _ in services.calls] == [6, 3]
    assert all(r.messages[0].role == "user" for r, _ in services.calls)
    assert s.counters.extra["trimmed_before_compact"] == 1 and s.counters.compactions_succeeded == 1


def test_too_long_compaction_never_sends_a_request_that_starts_with_the_assistant():
    # u0 a0 r0 a1 r1, refused: dropping u0 leaves a0 first, and no user message follows it, so
    # nothing is left to summarise: the compaction fails (one call) and the history stays
    services = FakeServices(fail("prompt_too_long"), "OK")
    s = make("codex", {"auto_compact_token_limit": 1_000}, services=services)
    s.on_user(Message.user("task"))
    step(s, 0, "a")
    step(s, 1, "b", usage=Usage(input_uncached=1_000))
    s.build_request(CallInfo(2, 2.0))
    assert [len(r.messages) for r, _ in services.calls] == [5]
    assert s.counters.compactions_failed == 1 and len(s.history) == 5


def test_failed_compaction_retries_then_leaves_history():
    services = FakeServices(*[fail() for _ in range(10)])
    s = make("codex", {"auto_compact_token_limit": 1_000, "max_retries": 2}, services=services)
    s.on_user(Message.user("task"))
    step(s, 0, "a", usage=Usage(input_uncached=1_000))
    n = len(s.history)
    req = s.build_request(CallInfo(1, 1.0))
    assert len(services.calls) == 3  # the first try and 2 retries
    assert not req.rewrite and len(s.history) == n
    assert s.counters.compactions_failed == 1


def test_bytes_lines_tool_output_cut_to_the_2025_limits_on_arrival():
    s = make("codex", {"tool_output": "bytes_lines"})
    s.on_user(Message.user("task"))
    step(s, 0, "".join(f"{i}\n" for i in range(400)))
    out = s.history[-1].blocks[0].text
    assert "[... omitted 144 of 400 lines ...]" in out  # 400 − 256


def test_replay_200k_window_compacts_without_overflow():
    b = Builder().user("migrate the service")
    for i in range(120):
        b.call(f"step {i}", [f"out {i} " + "data " * 1_500])  # ~7,500 chars: under Codex's 10 KiB cut
    t = b.call("done").build()
    r = replay(t, "codex", None, RunConfig(window=100_000))
    m = r.metrics
    assert m["overflows"] == 0 and m["pairing_violations"] == 0 and m["compactions"]["succeeded"] >= 2
    assert (r.calls["kind"] == "summary").sum() == m["compactions"]["succeeded"]


def test_tool_output_cut_to_12k_tokens_in_the_middle_with_no_line_cap():
    s = make("codex")
    s.on_user(Message.user("task"))
    lines = "".join(f"{i}\n" for i in range(400))
    step(s, 0, lines)  # 1,290 chars: far under 12,000 tokens, and 400 lines are no longer a limit
    assert s.history[-1].blocks[0].text == lines
    step(s, 1, "h" * 30_000 + "t" * 30_000)
    out = s.history[-1].blocks[0].text
    # budget 12,000 tokens · 4 = 48,000 chars: 24,000 head, 24,000 tail; 12,000 chars = 3,000 tokens cut
    assert out == "h" * 24_000 + "…3000 tokens truncated…" + "t" * 24_000
    assert s.counters.extra["truncated_results"] == 1


def _at_limit(s):
    s.on_user(Message.user("task"))
    step(s, 0, "a")
    step(s, 1, "b", usage=Usage(input_uncached=1_000))


def test_compaction_call_is_sent_without_tools_and_reads_no_cache():
    services = FakeServices("S")
    s = make("codex", {"auto_compact_token_limit": 1_000}, services=services)
    _at_limit(s)
    s.build_request(CallInfo(2, 2.0))
    (req, spec), = services.calls
    assert len(req.tools) == 0 and req.breakpoints == () and req.system is s.env.system
    old = FakeServices("S")
    s = make("codex", {"auto_compact_token_limit": 1_000, "compaction_tools": True}, services=old)
    _at_limit(s)
    s.build_request(CallInfo(2, 2.0))
    (req, _), = old.calls
    assert req.tools is s.env.tools and len(req.breakpoints) == 2


def test_remote_compaction_replaces_history_with_user_messages_and_an_opaque_item():
    services = FakeServices("ENCRYPTED")
    s = make("codex", {"auto_compact_token_limit": 1_000, "compaction": "remote"}, services=services)
    _at_limit(s)
    assert s.build_request(CallInfo(2, 2.0)).rewrite
    (req, spec), = services.calls
    assert spec.instructions == "" and len(req.tools) == 0  # /responses/compact: the history alone
    assert [m.text for m in s.history] == ["task", "ENCRYPTED"] and s.history[-1].meta["opaque"]
    assert s.counters.extra["remote_compactions"] == 1


def test_compaction_calls_pay_full_input_and_the_older_reading_reads_the_cache():
    b = Builder().user("migrate the service")
    for i in range(60):
        b.call(f"step {i}", [f"out {i} " + "data " * 1_500])
    t = b.call("done").build()
    new = replay(t, "codex", None, RunConfig(window=100_000)).calls
    old = replay(t, "codex", {"compaction_tools": True}, RunConfig(window=100_000)).calls
    sn, so = new[new["kind"] == "summary"], old[old["kind"] == "summary"]
    assert len(sn) >= 1 and len(so) >= 1
    assert (sn["cache_read"] == 0).all()
    assert (so["cache_read"] > 0.9 * so["context_tokens"]).all()


def test_summary_prompt_opens_with_the_active_task_as_codex_prompt_md_928a707():
    """openai/codex codex-rs/core/templates/compact/prompt.md @ 928a707f6a5e: "continue the single
    active task (the most recent user request that is still in progress)", format items Active task /
    Progress so far / Next steps (active task only) / Key context / constraints / preferences (still
    relevant only) / Completed tasks (optional, brief). The simulated summariser routes a goal fact
    by the word "request" (ctxsim.harness.llm.simulated FACT_ROUTES): it lands in the Active task item."""
    from ctxsim.harness.llm.simulated import _route
    from ctxsim.strategies.codex import SUMMARY_SECTIONS, SUMMARY_SECTIONS_2025

    services = FakeServices("HANDOFF")
    s = make("codex", {"auto_compact_token_limit": 1_000}, services=services)
    s.on_user(Message.user("first request"))
    step(s, 0, "x" * 100, usage=Usage(input_uncached=990, output=10))
    s.build_request(CallInfo(1, 1.0))
    (_, spec), = services.calls
    assert spec.sections == SUMMARY_SECTIONS and len(spec.sections) == 5
    assert spec.sections[0].startswith("Active task") and "single active task" in spec.instructions
    assert _route("goal", SUMMARY_SECTIONS) == SUMMARY_SECTIONS[0]
    # the older reading: four items, no task item (the goal falls to "Progress and key decisions")
    services = FakeServices("HANDOFF")
    s = make("codex", {"auto_compact_token_limit": 1_000, "summary_prompt": "handoff_2025"}, services=services)
    s.on_user(Message.user("first request"))
    step(s, 0, "x" * 100, usage=Usage(input_uncached=990, output=10))
    s.build_request(CallInfo(1, 1.0))
    (_, spec), = services.calls
    assert spec.sections == SUMMARY_SECTIONS_2025 and "single active task" not in spec.instructions
    assert _route("goal", SUMMARY_SECTIONS_2025) == "Progress and key decisions"
