"""context_editing: Anthropic clear_tool_uses_20250919 (trigger 100,000 input tokens or a number of
tool uses, keep 3, clear_at_least in its two readings, exclude_tools, clear_tool_inputs as a bool or
a list of tools), clear_thinking_20251015 (keep, its model-specific default), the estimate after a
clearing (issue #45), and the cache re-write a clearing causes: the documented behaviour (mode
per_request, the default: the server clears each request of the full history the client keeps) and
the older reading (mode episodic: cleared results stay cleared).

Read at: the Anthropic context-editing docs (beta context-management-2025-06-27), read 2026-12, and
anthropics/anthropic-sdk-python @ 887ee67f90b7bbaa97ade97ae892cc34d2c9fa45; each quote below is as
/work/scratch/46/peers.md section 4 gives it. The files read are named in the strategy's docstring."""

from __future__ import annotations

from ctxsim.harness.model.conversation import Message, Usage
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.strategies.base import CallInfo

from tests.helpers_traces import Builder
from tests.strategies.peer_env import make, step

EPISODIC = {"mode": "episodic"}


def results(s, messages=None) -> list[str]:
    return [b.text for m in (s.history if messages is None else messages) for b in m.blocks if b.type == "tool_result"]


def six_steps(s, size=4_000, tools=("Bash",) * 6):
    s.on_user(Message.user("task"))
    for i in range(6):
        step(s, i, f"{i}" * size, tool=tools[i])


def over_trigger(s, input_tokens=100_001):
    s.on_response(Message("assistant", ()), Usage(input_uncached=input_tokens - 1, output=1))


# The sizes every estimate below works from. make()'s prompt: system "sys" (3 chars) and two tools of
# 89 characters each: 181. six_steps(): "task" (4), six tool uses 'Bash {"command": "cN"}' (22 each) and
# six 4,000-character results: 24,136 characters of history; from characters alone, ceil((181 + 24,136)
# / 4) = 6,080 tokens. Clearing the oldest three results frees 3 · (4,000 − 9) = 11,973 characters
# (2,993 tokens at 4 a token), leaving 12,163: ceil(12,344 / 4) = 3,086 tokens from characters.
# TRIGGER: a reported usage of 8,001 tokens for those 24,136 characters is ~3 characters a token, what
# tool output commonly runs at (the kit's LOG_POOL: 2.7).
TRIGGER = {"trigger_input_tokens": 8_000}


def test_the_defaults_are_the_docs():
    """Option table: trigger "100,000 input tokens", keep "3 tool uses", clear_at_least "None",
    clear_tool_inputs "false"; the trigger "in either input_tokens or tool_uses"."""
    from ctxsim.strategies.context_editing import ContextEditing
    from ctxsim.strategies.registry import make_config

    c = make_config(ContextEditing, {})
    assert (c.trigger_type, c.trigger_input_tokens, c.keep_tool_uses) == ("input_tokens", 100_000, 3)
    assert c.clear_at_least is None and c.clear_tool_inputs is False and c.exclude_tools == ()
    assert c.clear_at_least_scope == "per_request" and c.clear_thinking is False


def test_episodic_clears_all_but_last_3_tool_results_over_the_trigger():
    s = make("context_editing", {**EPISODIC, **TRIGGER})
    six_steps(s)
    over_trigger(s, 8_000)  # 8,000 is not over the trigger
    assert not s.build_request(CallInfo(6, 6.0)).rewrite
    over_trigger(s, 8_001)  # 8,001 > 8,000
    req = s.build_request(CallInfo(7, 7.0))
    assert req.rewrite
    # 6 tool uses, keep 3: the oldest 3 results are replaced by the placeholder
    assert results(s) == ["[cleared]"] * 3 + ["3" * 4_000, "4" * 4_000, "5" * 4_000]
    # what the clearing frees, as the strategy estimates text: 11,973 / 4 = 2,993 tokens
    assert s.counters.extra["cleared_input_tokens_est"] == 2_993
    # the estimate (issue #45): the reported 8,001 scaled by the new request's share of the old one,
    # both from characters: 8,001 · 3,086 / 6,080 = 4,061.0 (not 8,001 − 2,993 = 5,008: the usage
    # counted the cleared text at its ~3 characters a token, not at 4)
    assert req.estimated_tokens == 4_061


def test_episodic_cleared_results_stay_cleared_and_next_episode_waits_for_trigger():
    s = make("context_editing", EPISODIC)
    six_steps(s)
    over_trigger(s)
    s.build_request(CallInfo(6, 6.0))
    step(s, 6, "6" * 4_000, usage=Usage(input_uncached=90_000))  # back under the trigger
    req = s.build_request(CallInfo(7, 7.0))
    assert not req.rewrite  # under 100,000: nothing new cleared; cleared ones stay cleared
    assert results(s)[:3] == ["[cleared]"] * 3 and results(s)[3] == "3" * 4_000


def test_episodic_clear_at_least_skips_small_episodes():
    s = make("context_editing", {**EPISODIC, "clear_at_least": 5_000})
    six_steps(s)
    over_trigger(s)
    # it would free 2,993 < 5,000 tokens: no episode, no cache break
    assert not s.build_request(CallInfo(6, 6.0)).rewrite
    assert results(s)[0] == "0" * 4_000 and s.counters.extra["clear_skipped"] == 1
    s2 = make("context_editing", {**EPISODIC, "clear_at_least": 2_000})
    six_steps(s2)
    over_trigger(s2)
    assert s2.build_request(CallInfo(6, 6.0)).rewrite


def test_exclude_tools_and_clear_tool_inputs():
    for mode in ("per_request", "episodic"):
        s = make("context_editing", {"mode": mode, "exclude_tools": ["Read"], "clear_tool_inputs": True})
        six_steps(s, tools=("Bash", "Read", "Bash", "Bash", "Bash", "Bash"))
        over_trigger(s)
        sent = s.build_request(CallInfo(6, 6.0)).messages
        # the oldest three are tu_0 (Bash), tu_1 (Read: excluded), tu_2 (Bash)
        assert results(s, sent)[:3] == ["[cleared]", "1" * 4_000, "[cleared]"], mode
        inputs = {b.id: dict(b.input or {}) for m in sent for b in m.blocks if b.type == "tool_use"}
        assert inputs["tu_0"] == {} and inputs["tu_2"] == {} and inputs["tu_1"] == {"command": "c1"}, mode


def eighty_steps():
    b = Builder().user("investigate the failures")
    for i in range(80):
        b.call(f"step {i}", [f"log {i}\n" + "entry " * 1_000])  # ~6,000 chars, ~1,000+ tokens each
    return b.call("done").build()


def test_episodic_clearing_is_paid_in_cache_writes():
    t = eighty_steps()
    r = replay(t, "context_editing", {**EPISODIC, "trigger_input_tokens": 40_000}, RunConfig())
    c = r.calls[r.calls["kind"] == "main"]
    m = r.metrics
    assert m["pairing_violations"] == 0 and m["compactions"]["succeeded"] >= 2
    cleared = c[c["compaction"]]
    steady = c[~c["compaction"]].iloc[10:]
    # a clearing call changes the prompt at the first cleared result: nothing behind it can be read
    # from the cache, all of it is written again (here the first episode clears from r0: the whole
    # prompt; the tiny system prompt is under the minimum cacheable length, so no read at all)
    assert (cleared["cache_read"] == 0).all()
    assert (cleared["cache_write_5m"] >= 0.95 * cleared["context_tokens"]).all()
    # a call that only appends one step reads the prefix and writes just the step (~1,040 tokens)
    assert (steady["cache_read"] / steady["context_tokens"]).median() > 0.9
    assert cleared["cache_write_5m"].min() > 4 * steady["cache_write_5m"].median()


def test_exclude_tools_from_the_command_line():
    from ctxsim.strategies.context_editing import ContextEditing
    from ctxsim.strategies.registry import make_config

    assert make_config(ContextEditing, {"exclude_tools": "Read, Grep"}).exclude_tools == ("Read", "Grep")


# --- the documented behaviour (mode per_request, the default) ------------------------------------

def test_per_request_clears_the_request_and_keeps_the_client_history_whole():
    s = make("context_editing", TRIGGER)
    six_steps(s)
    over_trigger(s, 8_000)  # 8,000 is not over the trigger: the full history goes out
    req = s.build_request(CallInfo(6, 6.0))
    assert not req.rewrite and results(s, req.messages)[0] == "0" * 4_000
    over_trigger(s, 8_001)  # 8,001 > 8,000
    req = s.build_request(CallInfo(7, 7.0))
    assert req.rewrite
    # the server edits the request: 6 tool uses, keep 3, the oldest 3 results cleared
    assert results(s, req.messages) == ["[cleared]"] * 3 + ["3" * 4_000, "4" * 4_000, "5" * 4_000]
    # ... and the client keeps its full, unmodified history
    assert results(s) == [str(i) * 4_000 for i in range(6)]
    # cleared: 3 · (4,000 − 9) = 11,973 chars = 2,993 tokens; sent (issue #45): 8,001 · 3,086 / 6,080
    assert s.counters.extra["cleared_input_tokens_est"] == 2_993
    assert req.estimated_tokens == 4_061


def cleared_then_one_more(reported: int):
    """Six steps past TRIGGER (8,001 reported): the request that clears tu_0..tu_2 is sent and reported at
    ``reported`` input tokens (and 1 output), then tu_6's 4,000-character step: the strategy and its next request."""
    s = make("context_editing", TRIGGER)
    six_steps(s)
    over_trigger(s, 8_001)
    s.build_request(CallInfo(6, 6.0))
    step(s, 6, "6" * 4_000, usage=Usage(input_uncached=reported, output=1))
    return s, s.build_request(CallInfo(7, 7.0))


def test_the_estimate_after_a_clearing_keeps_the_density_the_usage_measured():
    """Issue #45. The API reports 4,061 input + 1 output for the cleared request and its answer (which
    holds tu_6's use): 4,062 tokens through it, at 12,163 + 22 characters; tu_6's 4,000-character
    result comes after it: 4,062 + 1,000 = 5,062, for a request of ceil((181 + 16,185) / 4) = 4,092
    tokens from characters. Every other size is 5,062 scaled by its share of that."""
    s, req = cleared_then_one_more(4_061)
    # the full prompt: 28,158 characters, ceil(28,339 / 4) = 7,085: 5,062 · 7,085 / 4,092 = 8,764.6 > 8,000,
    # so tu_3 is cleared too (keep 3 of 7 tool uses): 3,991 characters more
    assert req.rewrite and results(s, req.messages).count("[cleared]") == 4
    # sent: 16,185 − 3,991 = 12,194 characters, ceil(12,375 / 4) = 3,094: 5,062 · 3,094 / 4,092 = 3,827.4
    # (taking tu_3 away at 4 characters a token would say 5,062 − 997 = 4,065)
    assert req.estimated_tokens == 3_827


def test_the_full_prompt_counts_what_was_cleared_at_the_density_it_was_sent_at():
    """The server judges its trigger on the full prompt; the client knows what it sends (the usage) and what was
    cleared from it (at the density of the request that sent it whole). The first clearing takes tu_0..tu_2 out,
    11,973 characters at 8,001 / 6,080 tokens a character-token: round(1.3160 · 2,993.25) = 3,939 tokens. The
    cleared request is then reported at 3,101 tokens with its answer: sparser text is left. With tu_6's result,
    4,101 tokens for 4,092 from characters; the full prompt is 4,101 + 3,939 = 8,040 > 8,000: tu_3 is cleared too.
    (At the sent request's density the full prompt would be 4,101 · 7,085 / 4,092 = 7,101: under the trigger, a
    prompt past it sent with its older results whole, as the kit's random sample found on a correct twin.)"""
    s, req = cleared_then_one_more(3_100)
    assert req.rewrite and results(s, req.messages).count("[cleared]") == 4


def test_per_request_clears_one_more_result_on_every_request_past_the_trigger():
    s = make("context_editing")
    six_steps(s)
    over_trigger(s)
    s.build_request(CallInfo(6, 6.0))
    # the server reported the edited request (97,008 input, 1 output); one more 4,000-char step
    step(s, 6, "6" * 4_000, usage=Usage(input_uncached=97_007, output=1))
    req = s.build_request(CallInfo(8, 8.0))
    # the full prompt: 97,008 + (assistant "Bash {...}" + 4,000 chars)/4 + 2,993 cleared > 100,000:
    # still triggered; 7 tool uses, keep 3: tu_3 is cleared too, so the request rewrites at r3
    assert req.rewrite
    assert results(s, req.messages) == ["[cleared]"] * 4 + [str(i) * 4_000 for i in (4, 5, 6)]
    assert s.counters.compactions_succeeded == 2 and s.counters.extra["cleared_tool_results"] == 4
    # r3's 3,991 chars: 997 tokens more (each activation's share rounded down)
    assert s.counters.extra["cleared_input_tokens_est"] == 2_993 + 997


def test_per_request_clear_at_least_holds_back_only_the_first_activation():
    """Option table, clear_at_least: "Ensures a minimum number of tokens is cleared each time the
    strategy activates. If the API can't clear at least the specified amount, the strategy will not be
    applied." (the default reading, per_request: all or nothing on each request)."""
    s = make("context_editing", {"clear_at_least": 5_000})
    six_steps(s)
    over_trigger(s)
    # it would clear 2,993 < 5,000 tokens: the request goes out whole, no cache break
    req = s.build_request(CallInfo(6, 6.0))
    assert not req.rewrite and results(s, req.messages)[0] == "0" * 4_000
    assert s.counters.extra["clear_skipped"] == 1


def test_per_request_breaks_the_cache_on_every_call_past_the_trigger():
    """The cost the docs imply: each request past the trigger matches no earlier cache entry (each
    holds a result that is now cleared), so it is written again in full; the older episodic reading
    reads most of its prompt from the cache between episodes and costs less."""
    t = eighty_steps()
    per = replay(t, "context_editing", {"trigger_input_tokens": 40_000}, RunConfig())
    epi = replay(t, "context_editing", {**EPISODIC, "trigger_input_tokens": 40_000}, RunConfig())
    c = per.calls[per.calls["kind"] == "main"]
    past = c[c["compaction"]]
    assert per.metrics["pairing_violations"] == 0
    assert len(past) >= 40 and (past["cache_read"] == 0).all()
    # once past the trigger every later call clears (the full history only grows)
    first = int(past["index"].min())
    assert c[c["index"] > first]["compaction"].all()
    assert per.metrics["cache_hit_rate"] < epi.metrics["cache_hit_rate"]
    assert per.metrics["cost_usd"] > epi.metrics["cost_usd"]


# --- the cache, worked by hand through ctxsim.harness.provider.cache (issue #33) ------------------------
# Anthropic docs "Context editing" (platform.claude.com/docs/en/build-with-claude/context-editing,
# read 2026-12), "Context editing and prompt caching": "Context editing invalidates cached prompt
# prefixes because clearing content modifies the prompt structure ... Use the clear_at_least parameter
# to ensure a minimum number of tokens is cleared each time. ... you'll incur cache write costs each
# time content is cleared, but subsequent requests can reuse the newly cached prefix."

SYS_TOKENS = 2_000  # a cacheable system prompt (the minimum is 1,024 here)


def cache_run(params: dict, n: int = 8) -> list:
    """Requests r_0 .. r_{n-1} (r_k before step k's answer), each priced by the Anthropic cache model
    with every message worth chars // 4 tokens: "task" 1, a tool use 'Bash {"command": "ck"}' 22 chars
    → 5, a 4,000-character result 1,000, the placeholder "[cleared]" 9 chars → 2."""
    from ctxsim.harness.model.conversation import Block
    from ctxsim.harness.provider.cache import AnthropicCache, Layout

    s = make("context_editing", {"trigger_input_tokens": 3_500, **params})
    s.on_user(Message.user("task"))
    cache = AnthropicCache(min_cacheable=1_024)
    out = []
    for k in range(n):
        req = s.build_request(CallInfo(k, float(k)))
        sizes = [m.chars // 4 for m in req.messages]
        lay = Layout(req, 0, SYS_TOKENS, lambda i, sizes=sizes: sum(sizes[:i + 1]))
        out.append((req, cache.process(lay, now=float(k)), lay.total()))
        s.on_response(Message("assistant", (Block.tool_use(f"tu_{k}", "Bash", {"command": f"c{k}"}),)), None)
        s.on_tool_results(Message("user", (Block.tool_result(f"tu_{k}", str(k) * 4_000),)))
    return out


def test_a_clear_rewrites_everything_after_the_first_message_not_only_what_follows_the_new_clear():
    """r_0 .. r_3 append a step each (≈ 3,045 tokens by the strategy's estimate at r_3, under 3,500);
    from r_4 on the full prompt is over the trigger and each request clears one more result (keep 3).
    r_5 clears res1 besides res0: its messages 0..3 (task, a0, [cleared], a1) are byte-identical to
    r_4's, but no request ever wrote an entry there: entries sit at breakpoints only (the system block
    and each request's last message), and each earlier last-message entry holds a result that is now
    cleared (r_4's holds res1 whole; r_1 .. r_3's hold res0 whole). The only live match is r_0's entry
    at message 0 ("task"): r_5 reads 2,000 + 1 and writes the other 3,029 of its 5,030 tokens."""
    runs = cache_run({})
    reads = [o.read for _, o, _ in runs]
    writes = [o.write_5m for _, o, _ in runs]
    totals = [t for _, _, t in runs]
    # r_0: 2,001 written (system 2,000 + task 1); r_1..r_3 read the last request's prefix, write a step
    assert reads[:4] == [0, 2_001, 3_006, 4_011] and writes[:4] == [2_001, 1_005, 1_005, 1_005]
    # r_4 clears res0: task(1) a0(5) [cleared](2) a1 res1 a2 res2 a3 res3 = 5,023 tokens; r_5: 5,030
    assert totals[4] == 2_001 + 5 + 2 + 3 * 1_005 and totals[5] == 5_030
    assert [r.rewrite for r, _, _ in runs] == [False] * 4 + [True] * 4
    assert reads[4:] == [2_001] * 4  # system + "task": nothing after the first message is read again
    assert writes[5] == 3_029 == totals[5] - 2_001
    # "only what follows the newly cleared block" would have read through a1 (2,001 + 5 + 2 + 5) and
    # written 3,017: it needs an entry ending at a1, which none of the breakpoints ever wrote
    assert all(w == t - 2_001 for w, t in zip(writes[4:], totals[4:]))


def test_clear_at_least_holds_each_clearing_back_so_the_next_requests_reuse_the_cleared_prefix():
    """clear_at_least 1,500 ("each time", the docs): r_4 could clear res0 alone (3,991 chars → 997
    tokens < 1,500): not applied, r_4 reads r_3's prefix (5,016) and writes its step (1,005). r_5 can
    clear res0 + res1 (1,994): applied, read 2,001, write 3,029. r_6 could clear res2 only (997): held
    back, so r_6 sends r_5's cleared set and reads all of r_5 (5,030), writing its step (1,005): the
    "subsequent requests can reuse the newly cached prefix" of the docs. r_7: res2 + res3 (1,994)."""
    runs = cache_run({"clear_at_least": 1_500, "clear_at_least_scope": "per_clearing"})
    assert [r.rewrite for r, _, _ in runs] == [False] * 5 + [True, False, True]
    assert [o.read for _, o, _ in runs][4:] == [5_016, 2_001, 5_030, 2_001]
    assert [o.write_5m for _, o, _ in runs][4:7] == [1_005, 3_029, 1_005]
    # the option table's reading (per_request, the default): r_5's request clears 1,994 >= 1,500 in
    # all; from then on every request clears in all more than that, so r_6 clears res2 too and re-writes
    # everything after "task" again (the older name "first" is this behaviour; "each" is per_clearing)
    for params in ({"clear_at_least": 1_500}, {"clear_at_least": 1_500, "clear_at_least_scope": "first"}):
        per = cache_run(params)
        assert [r.rewrite for r, _, _ in per] == [False] * 5 + [True] * 3
        assert [o.read for _, o, _ in per][4:] == [5_016, 2_001, 2_001, 2_001]
    assert [r.rewrite for r, _, _ in cache_run({"clear_at_least": 1_500, "clear_at_least_scope": "each"})] == \
        [r.rewrite for r, _, _ in runs]


def test_keep_counts_tool_uses_from_the_newest():
    """keep {type: tool_uses, value: N}: the newest N tool uses keep their results; older go first."""
    for keep, whole in ((1, ["5"]), (3, ["3", "4", "5"]), (6, ["0", "1", "2", "3", "4", "5"])):
        s = make("context_editing", {"keep_tool_uses": keep})
        six_steps(s, size=10)
        over_trigger(s)
        sent = results(s, s.build_request(CallInfo(6, 6.0)).messages)
        assert [r[0] for r in sent if r != "[cleared]"] == whole and sent.count("[cleared]") == 6 - keep


def test_the_parents_cleared_set_survives_an_isolated_sub_agent():
    """Issue #29 item 5: after an isolated sub-agent the parent's next request is sent with the same
    results cleared (its prefix unchanged, so no rewrite to declare). Before, the view was reset: with
    the reported usage gone (the anchor clears across a sub-agent) the character estimate (~6k) was
    under the trigger and the request went out whole, un-clearing 3 results without a declared rewrite."""
    s = make("context_editing")
    six_steps(s)
    over_trigger(s)
    before = s.build_request(CallInfo(6, 6.0))
    assert results(s, before.messages)[:3] == ["[cleared]"] * 3
    s.on_subtask_start("sub", "look something up", True)
    step(s, 100, "sub-agent output")
    sub = s.build_request(CallInfo(101, 101.0))
    assert sub.kind == "subagent" and results(s, sub.messages) == ["sub-agent output"]
    s.on_subtask_end("sub", "found it")
    after = s.build_request(CallInfo(102, 102.0))
    assert not after.rewrite
    assert results(s, after.messages) == results(s, before.messages) == ["[cleared]"] * 3 + [str(i) * 4_000 for i in (3, 4, 5)]
    assert [m.text for m in after.messages[:len(before.messages)]] == [m.text for m in before.messages]


def test_a_boundary_breakpoint_makes_a_clear_rewrite_only_what_follows_the_new_clear():
    """boundary_breakpoint (assumed client behaviour): the client also marks the message before the
    oldest result still sent whole, and keeps the previous request's mark. r_4 (clears res0) marks 1
    (the old boundary, a0) and 3 (a1): it reads r_1's entry at a0 (2,000 + 1 + 5 = 2,006) and writes
    [cleared] + a1 (7) and the rest (3,010). r_5 (clears res1) marks 3 and 5: it reads r_4's entry at
    a1 (2,013), and writes 7 + 3,010 again: only what follows the newly cleared block (without the
    mark: read 2,001, write 3,029)."""
    from ctxsim.harness.model.conversation import Breakpoint

    runs = cache_run({"boundary_breakpoint": True})
    assert runs[5][0].breakpoints == (Breakpoint("system"), Breakpoint(3), Breakpoint(5), Breakpoint(10))
    assert [o.read for _, o, _ in runs][:6] == [0, 2_001, 3_006, 4_011, 2_006, 2_013]
    assert [o.write_5m for _, o, _ in runs][4:6] == [3_017, 3_017]
    assert all(len(r.breakpoints) <= 4 for r, _, _ in runs)


# --- issue #46: the trigger in tool uses, inputs of some tools, thinking, the two readings ---------------

def test_a_trigger_in_tool_uses():
    """Option table, trigger: "Once the prompt exceeds this threshold, clearing begins. You can specify
    this value in either input_tokens or tool_uses"; SDK: ``BetaToolUsesTriggerParam{type:
    Literal["tool_uses"], value: int}``. Five tool uses do not exceed 5; six do: keep 3, clear 3."""
    from ctxsim.strategies.context_editing import ContextEditing
    from ctxsim.strategies.registry import StrategyError, make_config

    for mode in ("per_request", "episodic"):
        s = make("context_editing", {"mode": mode, "trigger_type": "tool_uses", "trigger_tool_uses": 5})
        s.on_user(Message.user("task"))
        for i in range(5):
            step(s, i, f"{i}" * 400)
        assert not s.build_request(CallInfo(5, 5.0)).rewrite, mode  # 5 tool uses: not over 5
        step(s, 5, "5" * 400)
        req = s.build_request(CallInfo(6, 6.0))  # 6 > 5, whatever the input tokens (~700)
        assert req.rewrite and results(s, req.messages) == ["[cleared]"] * 3 + ["3" * 400, "4" * 400, "5" * 400], mode
    try:
        make_config(ContextEditing, {"trigger_type": "tool_uses"})
        raise AssertionError("a tool_uses trigger without a value was accepted")
    except StrategyError as e:
        assert "trigger_tool_uses" in str(e)


def test_clear_tool_inputs_takes_a_list_of_tools():
    """SDK: ``clear_tool_inputs: Union[bool, SequenceNotStr[str], None]``, "Whether to clear all tool
    inputs (bool) or specific tool inputs to clear (list)". Cleared: tu_0 (Bash), tu_1 (Read), tu_2
    (Bash); with ["Read"] only tu_1 loses its input, with true all three, with false none."""
    from ctxsim.strategies.context_editing import ContextEditing
    from ctxsim.strategies.registry import make_config

    tools = ("Bash", "Read", "Bash", "Bash", "Bash", "Bash")
    for value, emptied in ((["Read"], {"tu_1"}), (True, {"tu_0", "tu_1", "tu_2"}), (False, set())):
        for mode in ("per_request", "episodic"):
            s = make("context_editing", {"mode": mode, "clear_tool_inputs": value})
            six_steps(s, tools=tools)
            over_trigger(s)
            sent = s.build_request(CallInfo(6, 6.0)).messages
            assert results(s, sent)[:3] == ["[cleared]"] * 3, (value, mode)
            inputs = {b.id: dict(b.input or {}) for m in sent for b in m.blocks if b.type == "tool_use"}
            assert {i for i, inp in inputs.items() if not inp} == emptied, (value, mode)
    # from the command line: a list of names, or a bool
    assert make_config(ContextEditing, {"clear_tool_inputs": "Read, Grep"}).clear_tool_inputs == ("Read", "Grep")
    assert make_config(ContextEditing, {"clear_tool_inputs": "true"}).clear_tool_inputs is True


def test_the_thinking_keep_default_is_the_models():
    """Docs (current): keep default "Model-specific ... Opus 4.5+ and Sonnet 4.6+: all turns. Fable and
    Mythos models: all turns. Earlier Opus/Sonnet and all Haiku: last turn only." (None: all turns.)"""
    from ctxsim.strategies.context_editing import default_thinking_keep

    every = {"claude-opus-4-6": None, "claude-opus-4-5-20251101": None, "claude-opus-5": None,
             "claude-sonnet-4-6": None, "claude-sonnet-5-5": None, "claude-fable-5-1": None,
             "claude-mythos-preview": None, "anthropic.claude-opus-4-5-20251101-v1:0": None,
             "claude-opus-4-1-20250805": 1, "claude-opus-4-20250514": 1, "claude-sonnet-4-5-20250929": 1,
             "claude-sonnet-4-20250514": 1, "claude-haiku-4-5-20251001": 1, "claude-haiku-5-5": 1,
             "claude-3-7-sonnet-20250219": 1}
    assert {m: default_thinking_keep(m) for m in every} == every


def thinking_turns(params: dict, model: str = "claude-sonnet-4-6"):
    """Two user turns: turn 1 is a tool loop (thinking 't1a' + tu_0, its result, then thinking 't1b' +
    an answer), turn 2 one call (thinking 't2' + tu_1) and its result; the request after it."""
    import numpy as np
    from ctxsim.harness.model.conversation import Block, SystemPrompt, ToolDef, ToolSet
    from ctxsim.strategies.base import StrategyEnv
    from ctxsim.strategies.registry import build

    from tests.strategies.peer_env import FakeServices

    env = StrategyEnv(session_dir=__import__("pathlib").Path("/nonexistent"), services=FakeServices(), now=lambda: 0.0,
                      window=200_000, max_output_tokens=64_000, model=model, provider="anthropic",
                      system=SystemPrompt.of("sys"), tools=ToolSet((ToolDef("Bash"),)), rng=np.random.default_rng(0))
    s = build("context_editing", {"clear_thinking": True, **params}, env)
    s.on_user(Message.user("task 1"))
    s.build_request(CallInfo(0, 0.0))
    s.on_response(Message("assistant", (Block("thinking", "t1a " * 50), Block.tool_use("tu_0", "Bash", {"command": "a"}))), None)
    s.on_tool_results(Message("user", (Block.tool_result("tu_0", "out"),)))
    s.build_request(CallInfo(1, 1.0))
    s.on_response(Message("assistant", (Block("thinking", "t1b " * 50), Block.text_block("done"))), None)
    s.on_user(Message.user("task 2"))
    s.build_request(CallInfo(2, 2.0))
    s.on_response(Message("assistant", (Block("thinking", "t2 " * 50), Block.tool_use("tu_1", "Bash", {"command": "b"}))), None)
    s.on_tool_results(Message("user", (Block.tool_result("tu_1", "out"),)))
    return s, s.build_request(CallInfo(3, 3.0))


def thinking_of(req) -> list[str]:
    return [b.text.split()[0] for m in req.messages for b in m.blocks if b.type == "thinking"]


def test_clear_thinking_keeps_the_newest_turns():
    """SDK: keep is "Number of most recent assistant turns to keep thinking blocks for. Older turns will
    have their thinking blocks removed"; docs: "Assistant conversation turns may include multiple
    content blocks (e.g., when using tools)". keep 1: turn 1's two messages lose their thinking, turn 2
    (the open tool loop) keeps it: a rewrite (the cache "is invalidated at the point where clearing
    occurs"); keep 2 or "all": nothing is cleared."""
    s, req = thinking_turns({"keep_thinking_turns": 1})
    assert thinking_of(req) == ["t2"] and req.rewrite
    assert s.counters.extra["cleared_thinking_messages"] == 2 and s.counters.compactions_succeeded == 1
    assert [b.type for b in req.messages[1].blocks] == ["tool_use"]  # the call kept, its thinking gone
    assert len([b for m in s.history for b in m.blocks if b.type == "thinking"]) == 3  # the client's history is whole
    for keep in (2, "all"):
        _, req = thinking_turns({"keep_thinking_turns": keep})
        assert thinking_of(req) == ["t1a", "t1b", "t2"] and not req.rewrite


def test_clear_thinking_uses_the_models_default_keep():
    """No keep given: claude-sonnet-4-6 keeps all turns; claude-sonnet-4-5 and claude-haiku-4-5 the last."""
    assert thinking_of(thinking_turns({})[1]) == ["t1a", "t1b", "t2"]
    for model in ("claude-sonnet-4-5-20250929", "claude-haiku-4-5-20251001"):
        assert thinking_of(thinking_turns({}, model)[1]) == ["t2"], model


def test_the_two_readings_of_clear_at_least_are_listed_and_declared():
    """``ctxsim strategies context_editing`` explains the choice (a reading, with its default), a report
    lists the reading in effect, and the property kit holds each clearing to the minimum as read."""
    from ctxsim.strategies.context_editing import ContextEditing
    from ctxsim.strategies.departures import in_effect, listing
    from ctxsim.strategies.registry import make_config

    lines = "\n".join(listing(ContextEditing))
    assert "clear_at_least_scope = 'per_request'" in lines and "per_clearing" in lines
    assert any("clear_at_least_scope='per_clearing'" in p for p in in_effect(ContextEditing, {"clear_at_least_scope": "per_clearing"}))
    cm = ContextEditing.clear_minimum
    assert cm(make_config(ContextEditing, {})) is None
    assert cm(make_config(ContextEditing, {"clear_at_least": 900})) == (900, "request")
    assert cm(make_config(ContextEditing, {"clear_at_least": 900, "clear_at_least_scope": "per_clearing"})) == (900, "clearing")
    assert cm(make_config(ContextEditing, {"clear_at_least": 900, "mode": "episodic"})) == (900, "clearing")
