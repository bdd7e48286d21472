"""The recorded setting travels with the trace: a replay with no options prices each call on its
own model, on the window and with the cache TTL the agent ran with, starts with the prefix an
earlier session cached; options override it with a one-line warning; `ctxsim run --strategy
recorded` is the replay `ctxsim fidelity` compares."""

from __future__ import annotations

import json

import pytest
from ctxsim.harness.cli import main as cli
from ctxsim.harness.model import trace as tr
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.harness.replay.setting import override_warnings

from tests.helpers_claude_code import asst, result, text, user, write

OPUS, HAIKU = "claude-opus-4-6", "claude-haiku-4-5"


def mixed(recorded: tr.RecordedSetting | None = None, prefix: int = 6000) -> tr.Trace:
    """Main loop on Opus, one Skill call on Haiku, then Opus again."""
    evs = [tr.UserEvent(t=0, text="fix the parser " * 200),
           tr.AssistantEvent(t=1, content=[tr.TextContent(text="a" * 400)], model=OPUS),
           tr.UserEvent(t=2, text="and the lexer " * 100),
           tr.AssistantEvent(t=3, content=[tr.TextContent(text="b" * 400)], model=HAIKU),
           tr.UserEvent(t=4, text="thanks"),
           tr.AssistantEvent(t=5, content=[tr.TextContent(text="c" * 400)], model=OPUS)]
    rec = recorded or tr.RecordedSetting(models={OPUS: {"main": 2}, HAIKU: {"main": 1}}, window=200_000,
                                         window_evidence="test", cache_ttl="1h", cache_ttl_evidence="test")
    return tr.validate_events(tr.Header(name="mixed", model=OPUS, prefix_tokens=prefix, recorded=rec), evs)


def test_each_call_is_priced_on_its_own_model():
    """No caching, so every input token is uncached: Opus 4.6 5 / 25, Haiku 4.5 1 / 5 per million
    (models.toml). Each row's cost is its own tokens at its own model's rates."""
    res = replay(mixed(), "recorded", {}, RunConfig(cache=False))
    c = res.calls
    assert list(c["model"]) == [OPUS, HAIKU, OPUS]
    rates = {OPUS: (5e-6, 25e-6), HAIKU: (1e-6, 5e-6)}
    for _, r in c.iterrows():
        i, o = rates[r["model"]]
        assert r["cost_usd"] == pytest.approx(r["input_uncached"] * i + r["output"] * o)
    assert res.model == OPUS and res.window == 200_000
    # one model for all: the same tokens, Haiku's call at Opus's rates
    one = replay(mixed(), "recorded", {}, RunConfig(model=OPUS, cache=False)).calls
    assert list(one["model"]) == [OPUS] * 3
    assert one.loc[1, "cost_usd"] == pytest.approx(c.loc[1, "input_uncached"] * 5e-6 + c.loc[1, "output"] * 25e-6)


def test_recorded_window_and_ttl_are_every_strategys_defaults():
    on = {"cache_breakpoints": True}   # a breakpoint with no TTL of its own
    res = replay(mixed(), "append_only", on, RunConfig())
    assert res.window == 200_000
    c = res.calls
    assert c["cache_write_1h"].sum() > 0 and c["cache_write_5m"].sum() == 0   # the 1h the log wrote
    res5 = replay(mixed(), "append_only", on, RunConfig(cache_ttl="5m", window=1_000_000))
    assert res5.window == 1_000_000 and res5.calls["cache_write_1h"].sum() == 0


def test_first_call_starts_with_the_shared_prefix_warm():
    """The log's first call read 5,000 tokens from the cache (an earlier session's): the replay's
    first call reads the same head and writes the rest; without it the first call writes all."""
    rec = tr.RecordedSetting(models={OPUS: {"main": 3}}, window=200_000, cache_ttl="1h",
                             warm_prefix_tokens=5000, warm_prefix_evidence="test")
    warm = replay(mixed(rec, prefix=6000), "recorded", {}, RunConfig()).calls
    cold = replay(mixed(rec.model_copy(update={"warm_prefix_tokens": 0}), prefix=6000), "recorded", {},
                  RunConfig()).calls
    assert warm.loc[0, "cache_read"] == 5000 and cold.loc[0, "cache_read"] == 0
    assert warm.loc[0, "context_tokens"] == cold.loc[0, "context_tokens"]
    assert warm.loc[0, "cache_write_1h"] == cold.loc[0, "cache_write_1h"] - 5000
    assert list(warm["context_tokens"]) == list(cold["context_tokens"])


def test_overrides_are_warned_naming_what_the_log_recorded():
    t = mixed()
    assert override_warnings(RunConfig(), t) == []
    lines = override_warnings(RunConfig(model="claude-sonnet-4-6", window=1_000_000, cache_ttl="5m"), t)
    assert lines == [
        f"--model claude-sonnet-4-6 prices every call of mixed on it; the log recorded {OPUS} (2 calls), {HAIKU} (1 calls)",
        "--window 1,000,000 on mixed; the agent ran with 200,000 (test)",
        "--cache-ttl 5m on mixed; the log wrote 1h (test)"]
    assert override_warnings(RunConfig(window=200_000), t) == []   # the same as recorded: nothing to say


def hand_session(tmp_path):
    big = "line of code\n" * 900
    return write(tmp_path / "proj" / "sess.jsonl", [
        user(0, "fix it"),
        asst(1, "r1", {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "a.py"}},
             w1h=9000, w5m=0, read=4000),
        result(2, "t1", big),
        asst(3, "r2", {"type": "tool_use", "id": "t2", "name": "Read", "input": {"file_path": "b.py"}},
             w1h=3700, w5m=0, read=13003),
        result(4, "t2", big),
        asst(5, "r3", text("both read"), w1h=3650, w5m=0, read=16706, model="claude-haiku-4-5-20251001"),
        user(6, "now the tests"),
        asst(7, "r4", text("ok"), w1h=40, w5m=0, read=16706)])


def test_cli_run_recorded_with_no_flags_is_fidelitys_simulation(tmp_path, capsys):
    src = hand_session(tmp_path)
    out = tmp_path / "t.jsonl"
    assert cli(["import", "claude-code", str(src), "-o", str(out)]) == 0
    assert cli(["run", str(out), "--strategy", "recorded", "--json", str(tmp_path / "run.json"), "-q"]) == 0
    assert cli(["fidelity", str(out), "--json", str(tmp_path / "fid.json")]) == 0
    run = json.loads((tmp_path / "run.json").read_text())
    fid = json.loads((tmp_path / "fid.json").read_text())
    assert run["cost_usd"] == pytest.approx(fid["cost_usd"]["simulated"], abs=1e-4)
    assert run["window"] == 200_000 and run["model"] == OPUS
    capsys.readouterr()
    assert cli(["run", str(out), "--strategy", "recorded", "--model", "claude-sonnet-4-6", "-q"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ctxsim run: warning: --model claude-sonnet-4-6 prices every call")
    assert f"{OPUS} (3 calls)" in err[0] and "claude-haiku-4-5-20251001 (1 calls)" in err[0]


def test_fidelity_says_the_session_started_warm(tmp_path):
    """The hand-made session's first call read 4,000 tokens from the cache: the imported trace
    starts with that head warm, the replay's first call reads it, and fidelity says so."""
    from ctxsim.harness.fidelity.compare import run_fidelity
    from ctxsim.harness.importers import import_file

    t = import_file("claude-code", hand_session(tmp_path)).trace
    rec = t.header.recorded
    assert rec.warm_prefix_tokens == 4000 and "read 4,000 tokens from the cache" in rec.warm_prefix_evidence
    fid = run_fidelity(t)
    assert fid.report["warm_start"] == {"tokens": 4000, "evidence": rec.warm_prefix_evidence,
                                        "kept": None, "kept_evidence": rec.warm_prefix_kept_evidence}
    assert fid.calls.loc[0, "simulated_cache_read"] == fid.calls.loc[0, "recorded_cache_read"] == 4000


def test_the_logs_claude_code_version_picks_the_claude_code_release(tmp_path):
    """Issue 41: the importer records the log's version (recorded.agent_version) and the claude_code
    peer replays that release unless the run sets one. On a 60,000-token window 2.0 compacts at
    window − 45,000 = 15,000 tokens, 2.1 at window − min(max output, 20,000) − 13,000 = 27,000: six
    turns of 2,500 cl100k tokens each, at Opus 4.6's table scale 1.5 (the log's usage does not grow
    with its content, so no scale is fitted), reach ~22,500: past the first line, never the second."""
    from ctxsim.harness.importers import import_file

    recs, t = [], 0
    for i in range(6):
        recs += [user(t, "word " * 2_500, version="2.0.76"),
                 asst(t + 1, f"r{i}", text("ok"), w5m=100, version="2.0.76")]
        t += 2
    trace = import_file("claude-code", write(tmp_path / "s.jsonl", recs)).trace
    assert trace.header.recorded.agent_version == "2.0.76"
    cfg = RunConfig(window=60_000)
    res = replay(trace, "claude_code", {}, cfg)
    assert res.params["release"] == "2.0.76" and res.metrics["compactions"]["attempted"] >= 1
    newer = replay(trace, "claude_code", {"release": "2.1"}, cfg)
    assert newer.params["release"] == "2.1" and newer.metrics["compactions"]["attempted"] == 0


def test_a_log_without_caching_replays_without_caching(tmp_path):
    """Issue 41: a log with no cache read and no cache write in any call (here 6 calls of ~5,000
    input tokens, none under Opus 4.6's 4,096-token minimum) ran without prompt caching: every
    replay of it prices every input token uncached (a cached replay was 85% below such a bill).
    With one cache write in the log, caching is on."""
    from ctxsim.harness.importers import import_file

    def log(write_first: int):
        recs, t = [], 0
        for i in range(6):
            recs += [user(t, "more " * 200), asst(t + 1, f"r{i}", text("ok"), inp=5_000 + 300 * i,
                                                  w5m=write_first if i == 0 else 0, w1h=0)]
            t += 2
        return import_file("claude-code", write(tmp_path / f"s{write_first}.jsonl", recs)).trace

    off = log(0)
    assert off.header.recorded.prompt_caching is False and "any of 6 calls" in off.header.recorded.caching_evidence
    c = replay(off, "recorded", {}, RunConfig()).calls
    assert (c["cache_read"] + c["cache_write_5m"] + c["cache_write_1h"]).sum() == 0
    assert replay(off, "append_only", {"cache_breakpoints": True}, RunConfig()).calls["cache_read"].sum() == 0
    on = log(100)
    assert on.header.recorded.prompt_caching is True
    assert replay(on, "recorded", {}, RunConfig()).calls["cache_read"].sum() > 0


def test_a_sub_agent_on_a_route_without_caching_replays_uncached(tmp_path):
    """Issue 41: a Bedrock converse/ sub-agent whose calls never read or wrote the cache while the
    main calls did (a route that sends no cache points) is replayed uncached: it was replayed with
    cache writes its log does not show (+23% on one held-out session). Main: 2 Sonnet 4.5 calls
    writing the cache; sub-agent: 2 Haiku calls of 5,000 uncached input tokens each."""
    from ctxsim.harness.importers import import_file

    sonnet, haiku = "global.anthropic.claude-sonnet-4-5-20250929-v1:0", "converse/jp.anthropic.claude-haiku-4-5-20251001-v1:0"
    from tests.helpers_claude_code import rec

    f = write(tmp_path / "s1.jsonl", [
        user(0, "go " * 3000),
        asst(1, "r1", {"type": "tool_use", "id": "task1", "name": "Task", "input": {"prompt": "look"}}, model=sonnet,
             w5m=5_000),
        rec("user", 9, message={"role": "user", "content": [{"type": "tool_result", "tool_use_id": "task1",
                                                              "content": [{"type": "text", "text": "found"}]}]},
            toolUseResult={"agentId": "abc", "status": "completed"}),
        asst(10, "r2", text("ok"), model=sonnet, w5m=50, read=5_003)])
    write(tmp_path / "s1" / "subagents" / "agent-abc.jsonl", [
        user(2, "look " * 3000, isSidechain=True), asst(5, "s1", text("a"), model=haiku, inp=5_000, w5m=0, isSidechain=True),
        user(6, "more", isSidechain=True), asst(7, "s2", text("found"), model=haiku, inp=5_010, w5m=0, isSidechain=True)])
    t = import_file("claude-code", f).trace
    assert t.header.recorded.uncached_models == [haiku] and t.header.recorded.prompt_caching
    c = replay(t, "recorded", {}, RunConfig()).calls
    sub = c[c["model"] == haiku]
    assert len(sub) == 2 and (sub["cache_read"] + sub["cache_write_5m"] + sub["cache_write_1h"]).sum() == 0
    assert c[c["model"] == sonnet]["cache_write_5m"].sum() > 0


def test_sub_agents_of_one_kind_read_the_prompt_the_first_one_cached(tmp_path):
    """Issue 41: the second Task sub-agent's first call read 8,000 tokens of the prompt the first one
    wrote (Task sub-agents of one kind share their system prompt). Its span shares that head with
    the first span (subagent_shared_tokens), so the replay's second span reads it instead of writing
    its whole prompt cold, as the log billed."""
    from ctxsim.harness.importers import import_file

    from tests.helpers_claude_code import rec

    def task(ts, tid, agent):
        return rec("user", ts, message={"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid,
                                                                      "content": [{"type": "text", "text": "done"}]}]},
                   toolUseResult={"agentId": agent, "status": "completed"})

    f = write(tmp_path / "s1.jsonl", [
        user(0, "go"),
        asst(1, "r1", {"type": "tool_use", "id": "t1", "name": "Task", "input": {"prompt": "look"}}, w5m=20_000),
        task(9, "t1", "a1"),
        asst(10, "r2", {"type": "tool_use", "id": "t2", "name": "Task", "input": {"prompt": "look again"}},
             w5m=100, read=20_003),
        task(19, "t2", "a2"),
        asst(20, "r3", text("ok"), w5m=100, read=20_103)])
    for agent, t0, read, size in (("a1", 2, 0, 10_000), ("a2", 12, 8_000, 10_600)):   # their own prompts differ
        write(tmp_path / "s1" / "subagents" / f"agent-{agent}.jsonl", [
            user(t0, f"look at {agent}", isSidechain=True),
            asst(t0 + 1, f"{agent}c", text("done"), w5m=size - read, read=read, inp=3, isSidechain=True)])
    t = import_file("claude-code", f).trace
    rec_ = t.header.recorded
    assert rec_.subagent_shared_tokens == {"a1": 8_000, "a2": 8_000}
    c = replay(t, "recorded", {}, RunConfig()).calls
    sub = c[c["kind"] == "subagent"].reset_index(drop=True)
    assert sub.loc[0, "cache_read"] == 0 and sub.loc[1, "cache_read"] == 8_000


def test_a_sub_agent_whose_first_call_read_a_head_an_earlier_session_cached_finds_it_cached(tmp_path):
    """A sub-agent's first call read 8,000 tokens of its prompt from the cache though no earlier span
    of the log wrote it: an earlier session did, as the main context's first call reads its system
    prompt's head (warm_prefix_tokens). The span is named in subagent_warm_spans; the replay finds that
    head cached when the span starts and reads it, where it wrote the whole prompt cold (a real Claude
    Code 1.0.58 session outside the population was 11% over its bill for that). Its second call reads
    what the first wrote."""
    from ctxsim.harness.importers import import_file

    from tests.helpers_claude_code import rec

    f = write(tmp_path / "s1.jsonl", [
        user(0, "go"),
        asst(1, "r1", {"type": "tool_use", "id": "t1", "name": "Task", "input": {"prompt": "look"}}, w5m=20_000),
        rec("user", 9, message={"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                                              "content": [{"type": "text", "text": "done"}]}]},
            toolUseResult={"agentId": "a1", "status": "completed"}),
        asst(10, "r2", text("ok"), w5m=100, read=20_003)])
    write(tmp_path / "s1" / "subagents" / "agent-a1.jsonl", [
        user(2, "look at a1", isSidechain=True),
        asst(3, "a1c", text("reading"), w5m=2_000, read=8_000, inp=3, isSidechain=True),
        user(4, "more", isSidechain=True),
        asst(5, "a1d", text("done"), w5m=20, read=10_000, inp=3, isSidechain=True)])
    t = import_file("claude-code", f).trace
    rec_ = t.header.recorded
    assert rec_.subagent_shared_tokens == {"a1": 8_000} and rec_.subagent_warm_spans == ["a1"]
    c = replay(t, "recorded", {}, RunConfig()).calls
    sub = c[c["kind"] == "subagent"].reset_index(drop=True)
    assert sub.loc[0, "cache_read"] == 8_000 and sub.loc[1, "cache_read"] > 8_000
    from ctxsim.harness.model.trace import with_header

    cold = with_header(t, t.header.model_copy(update={"recorded": rec_.model_copy(update={"subagent_warm_spans": []})}))
    assert replay(cold, "recorded", {}, RunConfig()).calls.query("kind == 'subagent'")["cache_read"].iloc[0] == 0


def test_a_log_that_left_its_messages_uncached_replays_them_uncached(tmp_path):
    """Issue 41: a log whose calls send the conversation as uncached input while reading only a fixed
    floor (reported: anthropics/claude-code#90018; 6 main contexts of the development population, each
    held it to its end) was replayed reading the whole prefix from the cache, five of them 33-75% under their bill.
    Here: 25 calls; the first writes 5,000 tokens, each later call reads those 5,000 and sends
    3,000 + 1,000·i uncached (writing 30). The fit part is the first ceil(0.3·25) = 8 calls: calls
    1-7 all sent uncached, so the pattern began at call index 1. The replay then reads 5,000 at most
    on every main call after the first (the system prefix; nothing past it is a breakpoint), and its
    uncached input grows with the conversation. A log whose calls read what the previous one held
    (input 3) is left alone."""
    from ctxsim.harness.importers import import_file

    def log(name: str, floor: bool):
        recs, t = [user(0, "start " * 40)], 1
        for i in range(25):
            if floor:
                recs.append(asst(t, f"r{i}", text("ok " * 200), inp=3_000 + 1_000 * i if i else 300,
                                 w5m=5_000 if i == 0 else 30, read=0 if i == 0 else 5_000))
            else:
                recs.append(asst(t, f"r{i}", text("ok " * 200), inp=3, w5m=5_300 if i == 0 else 1_000,
                                 read=0 if i == 0 else 5_300 + 1_000 * (i - 1)))
            recs.append(user(t + 1, "more " * 150))
            t += 5
        return import_file("claude-code", write(tmp_path / f"{name}.jsonl", recs)).trace

    t = log("floor", True)
    rec = t.header.recorded
    assert rec.messages_uncached_from == 1
    assert "7 of the 7 main-context calls from call 2 to the end of the fit part (call 8)" in rec.messages_uncached_evidence
    assert rec.cache_miss_model is None   # the short reads are the floor, not misses
    c = replay(t, "recorded", {}, RunConfig()).calls
    main = c[c["kind"] == "main"]
    assert main["cache_read"].iloc[1:].max() <= main["context_tokens"].iloc[0]
    assert main["input_uncached"].iloc[-1] > main["input_uncached"].iloc[2] > 1_000
    assert log("cached", False).header.recorded.messages_uncached_from is None


def test_a_log_replays_its_cache_read_up_to_the_measured_grace_past_the_ttl():
    """A recorded log's clock stamps each answer as it ends: its 5-minute entries are still read 310 s
    later (LOG_CLOCK_GRACE_S, 12 s, measured on the development population), not past 312 s; a trace with
    no recorded setting keeps the plain 300 s."""
    def two_turns(gap: float, recorded: bool) -> tr.Trace:
        evs = [tr.UserEvent(t=0, text="fix the parser " * 3000),
               tr.AssistantEvent(t=1, content=[tr.TextContent(text="a" * 400)], model=OPUS),
               tr.UserEvent(t=1 + gap - 5, text="and the lexer"),
               tr.AssistantEvent(t=1 + gap, content=[tr.TextContent(text="b" * 400)], model=OPUS)]
        rec = tr.RecordedSetting(models={OPUS: {"main": 2}}, window=200_000, window_evidence="test",
                                 cache_ttl="5m", cache_ttl_evidence="test") if recorded else None
        return tr.validate_events(tr.Header(name="gap", model=OPUS, recorded=rec), evs)

    def second_read(gap: float, recorded: bool) -> int:
        return int(replay(two_turns(gap, recorded), "append_only", {"cache_breakpoints": True}, RunConfig()).calls["cache_read"].iloc[1])

    assert second_read(310, True) > 0
    assert second_read(313, True) == 0
    assert second_read(299, False) > 0 and second_read(301, False) == 0
