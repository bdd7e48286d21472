"""context_editing: Anthropic clear_tool_uses_20250919 (trigger 100,000 input tokens, keep 3,
clear_at_least, exclude_tools, clear_tool_inputs) and the cache re-write it causes: the documented
behaviour (mode per_request, the default: the server clears each request of the full history the
client keeps) and the older reading (mode episodic: cleared results stay cleared).

Read at: the Anthropic context-editing docs (beta context-management-2025-06-27), read 2026-12.
The files read are named in the strategy's docstring."""

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


def test_episodic_clears_all_but_last_3_tool_results_over_100k():
    s = make("context_editing", EPISODIC)
    six_steps(s)
    over_trigger(s, 100_000)  # 100,000 is not over the trigger
    assert not s.build_request(CallInfo(6, 6.0)).rewrite
    over_trigger(s)  # 100,001 > 100,000
    req = s.build_request(CallInfo(7, 7.0))
    assert req.rewrite
    # 6 tool uses, keep 3: the oldest 3 results are replaced by the placeholder
    assert results(s) == ["[cleared]"] * 3 + ["3" * 4_000, "4" * 4_000, "5" * 4_000]
    # the estimate drops by 3 · (4,000 − 9) / 4 = 2,993 tokens
    assert s.counters.extra["cleared_input_tokens_est"] == 2_993
    assert req.estimated_tokens == 100_001 - 2_993


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
    s = make("context_editing")
    six_steps(s)
    over_trigger(s, 100_000)  # 100,000 is not over the trigger: the full history goes out
    req = s.build_request(CallInfo(6, 6.0))
    assert not req.rewrite and results(s, req.messages)[0] == "0" * 4_000
    over_trigger(s)  # 100,001 > 100,000
    req = s.build_request(CallInfo(7, 7.0))
    assert req.rewrite
    # the server edits the request: 6 tool uses, keep 3, the oldest 3 results cleared
    assert results(s, req.messages) == ["[cleared]"] * 3 + ["3" * 4_000, "4" * 4_000, "5" * 4_000]
    # ... and the client keeps its full, unmodified history
    assert results(s) == [str(i) * 4_000 for i in range(6)]
    # cleared: 3 · (4,000 − 9) = 11,973 chars = 2,993 tokens; sent: 100,001 − 2,993
    assert s.counters.extra["cleared_input_tokens_est"] == 2_993
    assert req.estimated_tokens == 100_001 - 2_993


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
    runs = cache_run({"clear_at_least": 1_500})
    assert [r.rewrite for r, _, _ in runs] == [False] * 5 + [True, False, True]
    assert [o.read for _, o, _ in runs][4:] == [5_016, 2_001, 5_030, 2_001]
    assert [o.write_5m for _, o, _ in runs][4:7] == [1_005, 3_029, 1_005]
    # the older reading (scope "first"): only the first clearing is held to 1,500; r_6 clears res2
    # alone and re-writes everything after "task" again
    first = cache_run({"clear_at_least": 1_500, "clear_at_least_scope": "first"})
    assert [r.rewrite for r, _, _ in first] == [False] * 5 + [True] * 3
    assert [o.read for _, o, _ in first][4:] == [5_016, 2_001, 2_001, 2_001]


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
