"""The provider-side miss model (harness/provider/routing.py), its fit on a log
(harness/fidelity/cache_misses.py), its use in every replay, and the bill warning (harness/fidelity/billcheck.py)."""

from __future__ import annotations

import pandas as pd
import pytest
from ctxsim.harness.fidelity.billcheck import bill_warning, cache_model_line
from ctxsim.harness.fidelity.cache_misses import fit_miss_model, label_calls
from ctxsim.harness.fidelity.recorded import RecordedCall
from ctxsim.harness.model import trace as tr
from ctxsim.harness.model.conversation import Breakpoint, History, Message, Request, SystemPrompt, ToolSet
from ctxsim.harness.provider import Provider
from ctxsim.harness.provider.routing import CacheMissModel, Router
from ctxsim.harness.replay.engine import RunConfig, replay
from hypothesis import given
from hypothesis import strategies as st

MODEL = "claude-sonnet-4-5"


def model(share=0.25, none=0.5) -> CacheMissModel:
    return CacheMissModel(share=share, fallback_none=none, strays=4, returns=2, eligible=16)


# --- the router ---------------------------------------------------------------------------------

def test_router_strays_at_the_share_exactly_and_by_seed():
    """Systematic sampling: 40 requests at 25% are exactly 10 strays (one in every 4), half of
    them (5) reading nothing; the same seed gives the same places, another seed may move them."""
    a = [Router(model(), seed=7).next() for _ in range(1)]
    r1, r2 = Router(model(), seed=7), Router(model(), seed=7)
    s1 = [r1.next() for _ in range(40)]
    s2 = [r2.next() for _ in range(40)]
    assert s1 == s2 and a[0] == s1[0]
    assert sum(x is not None for x in s1) == 10
    assert sum(x == "none" for x in s1) == 5
    gaps = [i for i, x in enumerate(s1) if x is not None]
    assert all(b - a == 4 for a, b in zip(gaps, gaps[1:]))


@given(st.floats(0.0, 1.0), st.integers(0, 10_000), st.integers(1, 300))
def test_router_count_is_the_share_within_one(share, seed, n):
    r = Router(CacheMissModel(share=share, fallback_none=0.0, strays=0, returns=0, eligible=1), seed=seed)
    k = sum(r.next() is not None for _ in range(n))
    assert abs(k - share * n) <= 1


# --- the provider ---------------------------------------------------------------------------------

def _req(n_msgs: int, opaque: int = 5_000) -> Request:
    msgs = [Message.user(f"message {i} " + "word " * 400) for i in range(n_msgs)]
    return Request(SystemPrompt((), opaque), ToolSet(), History(msgs),
                   (Breakpoint("system"), Breakpoint(n_msgs - 1)), model=MODEL)


def test_a_stray_request_reads_nothing_or_the_system_prefix_and_the_next_one_reads_the_entry_before():
    """share 1: every request that continues the previous one lands elsewhere. Call 1 is cold (not
    routed: it continues nothing); call 2 would read call 1's context but goes to the other node,
    which holds the system prefix (5,000 opaque + framing): it reads that; call 3 goes astray
    too and reads what call 2 wrote there. With fallback_none 1, a stray reads nothing."""
    p = Provider(MODEL, miss_model=CacheMissModel(share=1.0, fallback_none=0.0, strays=1, returns=0, eligible=1))
    b1 = p.bill(_req(1), 0.0, 10)
    assert b1.miss_reason != "routed" and p.routed == 0
    b2 = p.bill(_req(2), 1.0, 10)
    assert b2.miss_reason == "routed" and b2.usage.cache_read == p.layout(_req(2)).tokens(-1)
    b3 = p.bill(_req(3), 2.0, 10)
    assert b3.miss_reason == "routed" and b3.usage.cache_read == p.layout(_req(2)).total()
    p0 = Provider(MODEL, miss_model=CacheMissModel(share=1.0, fallback_none=1.0, strays=1, returns=0, eligible=1))
    p0.bill(_req(1), 0.0, 10)
    assert p0.bill(_req(2), 1.0, 10).usage.cache_read == 0
    # share 0.5, the bill the mean over the 8 router phases (k + 0.5) / 8. Phases 0-3: call 2 home
    # (reads call 1's T1), call 3 astray (reads nothing), call 4 home again (reads call 2's T2: call
    # 3 wrote elsewhere). Phases 4-7: call 2 astray, call 3 back home reading call 1's entry (the
    # stray wrote elsewhere), call 4 astray. Means: 0, T1/2, T1/2, T2/2; strays 1 or 2, mean 1.5.
    ph = Provider(MODEL, seed=1, miss_model=CacheMissModel(share=0.5, fallback_none=1.0, strays=1, returns=0, eligible=1))
    reads = [ph.bill(_req(k), float(k), 10).usage.cache_read for k in (1, 2, 3, 4)]
    t1, t2 = ph.layout(_req(1)).total(), ph.layout(_req(2)).total()
    assert reads == [0, t1 // 2, t1 // 2, t2 // 2]
    assert ph.routed == 1.5 and ph.continuing == 3.0
    # the seed no longer moves the bill: where requests stray is integrated out
    other = Provider(MODEL, seed=99, miss_model=CacheMissModel(share=0.5, fallback_none=1.0, strays=1, returns=0, eligible=1))
    assert [other.bill(_req(k), float(k), 10).usage.cache_read for k in (1, 2, 3, 4)] == reads
    # a provider with no model reads call 1's context on call 2
    plain = Provider(MODEL)
    plain.bill(_req(1), 0.0, 10)
    assert plain.bill(_req(2), 1.0, 10).usage.cache_read == plain.layout(_req(1)).total()


# --- the fit --------------------------------------------------------------------------------------

def call(i, ctx, read, t=None, new_turn=False, after_thinking=False):
    u = tr.RecordedUsage(input=ctx - read, cache_write_5m=0, cache_read=read)
    return RecordedCall(i, float(i * 10 if t is None else t), MODEL, u, "main", False, 0, i - 1 if i else None,
                        new_turn=new_turn, after_thinking=after_thinking)


def test_fit_labels_strays_and_returns_and_needs_recurrence():
    """Contexts grow by 1,000 from 30,000. Call 3 reads nothing (stray), call 4 reads call 2's
    context (return), call 6 reads the 20,000-token system prefix (stray), call 7 reads call 6's
    (the long prefix again), call 9 reads 0 but comes 400 s later (TTL: not eligible).
    Eligible: calls 1-8 = 8; strays 2 (one to nothing, one to a prefix); 1 return."""
    ctx = [30_000 + 1_000 * i for i in range(10)]
    reads = [0, ctx[0], ctx[1], 0, ctx[2], ctx[4], 20_000, ctx[6], ctx[7], 0]
    times = [i * 10 for i in range(9)] + [480]
    calls = [call(i, ctx[i], reads[i], times[i]) for i in range(10)]
    labels, eligible, fell, recovered = label_calls(calls)
    assert labels == {3: "stray", 4: "return", 6: "stray"}
    assert (eligible, fell, recovered) == (8, {"none": 1, "system": 1}, 2)
    m, got = fit_miss_model(calls, system_prefix=20_000)
    assert got == labels and (m.strays, m.returns, m.eligible) == (2, 1, 8)
    assert m.fallback_none == 0.5 and 0.0 < m.share < 1.0
    # one fall-back is not a pattern: no model
    calls1 = [call(i, ctx[i], reads[i] if i != 6 else ctx[5]) for i in range(9)]
    assert fit_miss_model(calls1)[0] is None


def test_thinking_dropped_at_a_new_turn_is_the_clients_change_not_a_stray():
    """A model that strips the previous turn's thinking changes the prefix at a new turn only when
    that turn showed thinking: there a miss is the client's change; after a turn without thinking
    (nothing stripped) it is a stray like any other."""
    ctx = [30_000 + 1_000 * i for i in range(6)]
    calls = [call(0, ctx[0], 0), call(1, ctx[1], ctx[0]), call(2, ctx[2], 0, new_turn=True, after_thinking=True),
             call(3, ctx[3], ctx[2]), call(4, ctx[4], 0, new_turn=True), call(5, ctx[5], ctx[4])]
    strips = lambda m: m.startswith("claude-sonnet-4-5")  # noqa: E731
    assert label_calls(calls, strips)[0] == {4: "stray"}
    assert label_calls(calls)[0] == {2: "stray", 4: "stray"}


def test_the_share_is_the_first_crossing_not_the_far_side():
    """Reads fall as strays begin and rise again as they grow common: a read curve with its
    minimum at 0.2 crosses a target of 90 at 0.05 (going down) and at 0.4 (coming back). The fit
    takes 0.05; a curve already under the target at 0 gives 0; one that never reaches it gives
    the cap (0.5). Bisection over 0-1 took the far side on real sessions (0.78 for a raw 0.03)."""
    from ctxsim.harness.fidelity.cache_misses import MAX_SHARE, first_crossing

    def read(s):
        return 100 - 200 * s if s <= 0.2 else 60 + 75 * (s - 0.2)
    assert abs(first_crossing(read, 90.0, iterations=30) - 0.05) < 1e-6
    assert first_crossing(read, 101.0) == 0.0
    assert first_crossing(lambda s: 100.0, 90.0) == MAX_SHARE


def test_a_share_fitted_on_the_first_calls_is_shrunk_towards_no_strays():
    """A share of 0.04 fitted on 100 eligible calls counts against 100 calls of none: 0.02; on 300
    calls, 0.03; no shrinking at a prior of 0."""
    from ctxsim.harness.fidelity.cache_misses import shrunk

    m = CacheMissModel(share=0.04, fallback_none=0.0, strays=4, returns=2, eligible=100)
    assert shrunk(m).share == 0.02 and "shrunk towards no strays by 100 / (100 + 100) = 0.500" in shrunk(m).source
    assert shrunk(m.model_copy(update={"eligible": 300})).share == 0.03
    assert shrunk(m, 0).share == 0.04


# --- every replay -----------------------------------------------------------------------------------

def _trace(miss: CacheMissModel | None) -> tr.Trace:
    evs = [tr.UserEvent(t=0, text="please fix the parser " * 300)]
    for i in range(12):
        evs.append(tr.AssistantEvent(t=10.0 * i + 1, content=[tr.ToolUseContent(id=f"t{i}", name="Read", input={"i": i})],
                                     model=MODEL))
        evs.append(tr.ToolResultEvent(t=10.0 * i + 2, tool_use_id=f"t{i}", content=f"line of code {i}\n" * 200))
    evs.append(tr.AssistantEvent(t=200, content=[tr.TextContent(text="done")], model=MODEL))
    rec = tr.RecordedSetting(cache_ttl="5m", cache_miss_model=miss)
    return tr.validate_events(tr.Header(name="m", model=MODEL, prefix_tokens=8_000, recorded=rec), evs)


@pytest.mark.parametrize("strategy", ["novacode", "claude_code"])
def test_a_fitted_model_is_applied_to_a_counterfactual_strategy_deterministically(strategy):
    """At share 0.25, a quarter (± 1) of the requests that continue the previous one are routed
    astray; the same seed gives the same bill; with the model off (RunConfig.fitted_misses=False)
    the run reads more and costs less."""
    with_m = _trace(model(0.25, 1.0))
    a = replay(with_m, strategy, {}, RunConfig(seed=3))
    b = replay(with_m, strategy, {}, RunConfig(seed=3))
    off = replay(with_m, strategy, {}, RunConfig(seed=3, fitted_misses=False))
    cm = a.metrics["provenance"]["cache_model"]
    assert cm["fitted"] is True and cm["continuing_requests"] >= 8
    assert abs(cm["routed_requests"] - 0.25 * cm["continuing_requests"]) <= 1
    assert a.metrics["cost_usd"] == b.metrics["cost_usd"]
    assert a.calls["cache_read"].tolist() == b.calls["cache_read"].tolist()
    assert off.metrics["provenance"]["cache_model"] == {"fitted": False}
    assert a.calls["cache_read"].sum() < off.calls["cache_read"].sum()
    assert a.metrics["cost_usd"] > off.metrics["cost_usd"]
    assert "25.0% of requests routed" in cache_model_line(with_m, cm["routed_requests"])
    assert cache_model_line(_trace(None)) is None


# --- the bill warning ---------------------------------------------------------------------------------

def test_warning_when_the_recorded_replay_is_more_than_5pct_off_the_bill():
    """One call of 100,000 tokens read from the cache at $0.30/M and 1,000 output at $15/M: billed
    $0.03 + $0.015 = $0.045. A replay at $0.0470 is 4.4% off: no warning; at $0.06 it is 33.3%
    above, and it read nothing (share 0 vs 1): the cause says the replay reads the cache less."""
    ev = [tr.UserEvent(t=0, text="hi"),
          tr.AssistantEvent(t=1, content=[tr.TextContent(text="ok")], model=MODEL,
                            usage=tr.RecordedUsage(input=0, cache_read=100_000, output=1_000))]
    t = tr.validate_events(tr.Header(name="w", model=MODEL, usage="per_call", recorded=tr.RecordedSetting()), ev)
    calls = pd.DataFrame({"input_uncached": [100_000], "cache_write_5m": [0], "cache_write_1h": [0], "cache_read": [0]})
    assert bill_warning(t, calls, 0.0470) is None
    w = bill_warning(t, calls, 0.06)
    assert w.startswith("the recorded replay costs $0.0600, 33.3% above the bill $0.0450")
    assert "reads the cache less than the log did (share 0.00 vs 1.00)" in w and "relay" not in w
    # served through a relay (a Claude model's answers passed on without the API's request id): its usage
    # is the relay's account, which the warning says
    relayed = tr.with_header(t, t.header.model_copy(update={"source": {"format": "claude-code", "route": "relay"}}))
    assert ("; the log was served through a relay, whose usage is its own account, not Anthropic's bill"
            in bill_warning(relayed, calls, 0.06))


def _billed(t: tr.Trace, usage: tr.RecordedUsage) -> tr.Trace:
    evs = [e.model_copy(update={"usage": usage}) if isinstance(e, tr.AssistantEvent) else e for e in t.events]
    h = t.header.model_copy(update={"usage": "per_call", "source": {"format": "claude-code", "path": "x.jsonl"}})
    return tr.validate_events(h, evs)


def test_run_and_compare_say_the_model_was_fitted_and_warn_off_the_bill(tmp_path, capsys):
    """Every call billed as 40,000 tokens written: far above what the replay writes and reads, so
    `run -s recorded` and `compare` print one warning each naming the cause; both say the cache
    model was fitted; the report's assumptions say it too."""
    from ctxsim.harness.cli import main as cli

    t = _billed(_trace(model(0.25, 1.0)), tr.RecordedUsage(input=3, cache_write_5m=40_000, output=20))
    path = tmp_path / "t.jsonl"
    tr.write(t, path)
    assert cli(["run", str(path), "--strategy", "recorded", "-q"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert any(x.startswith("ctxsim run: cache model: fitted on the log's first calls") for x in err)
    (warn,) = [x for x in err if "warning: the recorded replay costs" in x]
    assert "below the bill" in warn and "reads the cache more than the log did" in warn
    assert cli(["compare", str(path), "--strategies", "novacode,claude_code", "--report", str(tmp_path / "rep")]) == 0
    err = capsys.readouterr().err
    assert err.count("warning: the recorded replay costs") == 1 and "cache model: fitted" in err
    report = next((tmp_path / "rep").glob("*.md")).read_text()
    assert "**Cache model** of `t.jsonl`: fitted on the log: 25.0% of requests routed" in report


# --- issue 41: thinking switched at a new user turn --------------------------------------------

def _turns(tmp_path, model: str):
    """Two user turns; the first call of turn 1 does not think, the first of turn 2 does (the log
    reads only the 12,000-token system prefix there, as 42 of 44 such turns in the development
    population on models sent a thinking budget)."""
    from ctxsim.harness.importers import import_file

    from tests.helpers_claude_code import asst, result, text, user, write

    think = {"type": "thinking", "thinking": "let me see", "signature": "s"}
    f = write(tmp_path / f"{model}.jsonl", [
        user(0, "fix it " * 400),
        asst(1, "r1", {"type": "tool_use", "id": "t1", "name": "Read", "input": {}}, model=model, w5m=14_000),
        result(2, "t1", "x = 1\n" * 300),
        asst(3, "r2", text("fixed"), model=model, w5m=1_000, read=14_003),
        user(10, "now the tests " * 50),
        asst(11, "r3", think, model=model, w5m=3_300, read=12_000),
        asst(11, "r3", text("ok"), model=model, w5m=3_300, read=12_000)])
    return import_file("claude-code", f).trace


def test_a_thinking_switch_at_a_new_turn_invalidates_the_messages_cache_on_a_budget_model(tmp_path):
    """Opus 4.5 is sent a thinking budget: the switch keys the messages' entries anew, so the
    replay's turn-2 call reads only what precedes the messages (the system prompt and tools): the
    12,000 tokens the log read there, which also measure the system prompt, so the first call's
    opaque prefix (13,476 at the fitted scale) splits into 12,000 of system prompt and 1,476 of
    startup content at the head of the messages — and the fidelity miss is explained; Opus 4.6
    (adaptive thinking) keeps reading its whole context."""
    from ctxsim.harness.fidelity.recorded import recorded_calls

    t = _turns(tmp_path, "claude-opus-4-5-20251101")
    users = [e for e in t.events if isinstance(e, tr.UserEvent)]
    assert [u.meta.get("thinking") for u in users] == [False, True]
    calls = recorded_calls(t)
    assert [c.thinking_switch for c in calls] == [False, False, True]
    c = replay(t, "recorded", {}, RunConfig()).calls
    from ctxsim.harness.provider.tokenizer import REQUEST_OVERHEAD

    assert t.header.prefix_tokens == 13_476 and t.header.recorded.startup_tokens == 1_476
    assert int(c.loc[2, "cache_read"]) == 12_000 + REQUEST_OVERHEAD   # the system position only
    off = replay(t, "recorded", {"thinking_switches": False}, RunConfig()).calls
    assert int(off.loc[2, "cache_read"]) >= int(off.loc[1, "context_tokens"]) - 16
    adaptive = _turns(tmp_path, "claude-opus-4-6")
    assert [c.thinking_switch for c in recorded_calls(adaptive)] == [False, False, False]
    a = replay(adaptive, "recorded", {}, RunConfig()).calls
    assert int(a.loc[2, "cache_read"]) >= int(a.loc[1, "context_tokens"]) - 16


# --- requests that left their messages uncached -------------------------------------------------

def _floor_calls(pattern: str) -> list[RecordedCall]:
    """One main-context call per letter: ``u`` sent 3,000 tokens uncached and read a 5,000-token floor,
    ``c`` read the previous context whole (input 3); the first call writes the 5,000."""
    out = [RecordedCall(0, 0.0, MODEL, tr.RecordedUsage(input=300, cache_write_5m=5_000), "main", False, 0, None)]
    for i, ch in enumerate(pattern, start=1):
        u = (tr.RecordedUsage(input=3_000 + 100 * i, cache_write_5m=30, cache_read=5_000) if ch == "u"
             else tr.RecordedUsage(input=3, cache_write_5m=500, cache_read=8_000 + 100 * i))
        out.append(RecordedCall(i, float(i), MODEL, u, "main", False, 0, i - 1))
    return out


def test_messages_uncached_from_needs_five_of_the_last_six_and_dates_the_run():
    """Issue 41: the fit part decides. ``cc|uuuuuu`` → from call index 3 (the first u; the two c
    before it end the run). ``uuucuuu`` (one cached call inside) → from index 1. Four of the last
    six (``ccuucuuu`` ends ``uucuuu``: 5 of 6) is enough, ``cuucuu`` (4 of 6) is not; fewer than six
    eligible calls decide nothing; calls after ``upto`` are held out."""
    from ctxsim.harness.fidelity.cache_misses import messages_uncached_from

    assert messages_uncached_from(_floor_calls("ccuuuuuu"), 9)[0] == 3
    assert messages_uncached_from(_floor_calls("uuucuuu"), 8)[0] == 1
    assert messages_uncached_from(_floor_calls("ccuucuuu"), 9)[0] == 3
    assert messages_uncached_from(_floor_calls("cuucuu"), 7) == (None, "")
    assert messages_uncached_from(_floor_calls("uuuuu"), 6) == (None, "")
    assert messages_uncached_from(_floor_calls("ccccccuuuuuu"), 7) == (None, "")


def test_misses_that_recur_only_after_the_first_part_are_fitted_in_sample_and_said_so(tmp_path):
    """Twenty calls a minute apart on a 5-minute cache; calls 10, 13 and 16 read nothing and the
    call after each reads the whole context again (a stray and its recovery, three times), all after
    the first 30% (calls 0-5), which reads whole throughout: no model fits there, so the whole log's
    is fitted, labelled in sample; fidelity over the folder scores the session apart from the held
    out ones."""
    from ctxsim.harness.cli import main
    from ctxsim.harness.importers import import_file

    from tests.helpers_claude_code import asst, text, user, write

    recs = []
    for k in range(20):
        ctx = 20_000 + 500 * k
        read = 0 if k in (10, 13, 16) else (0 if k == 0 else ctx - 503)
        recs += [user(60.0 * k, f"q{k}"), asst(60.0 * k + 2, f"req_01{k:022d}", text(f"a{k}"), w5m=ctx - 3 - read, read=read)]
    res = import_file("claude-code", write(tmp_path / "logs" / "s.jsonl", recs))
    m = res.trace.header.recorded.cache_miss_model
    assert m is not None and m.in_sample and m.strays == 3
    assert "IN SAMPLE: the first 6 calls' fall-backs did not recur, so it is fitted on all 20 calls" in m.source
    (tmp_path / "traces").mkdir()
    tr.write(res.trace, tmp_path / "traces" / "s.jsonl")
    report = tmp_path / "fid.json"
    assert main(["fidelity", str(tmp_path / "traces"), "--json", str(report)]) == 0
    import json

    d = json.loads(report.read_text())["distribution"]
    assert (d["anthropic_billed_in_sample"]["measured"], d["anthropic_billed_held_out"]["measured"]) == (1, 0)
    assert json.loads(report.read_text())["sessions"][0]["in_sample"] == ["cache_miss_model"]
    assert res.trace.header.recorded.in_sample == ["cache_miss_model"]
    assert cache_model_line(res.trace).startswith("cache model: fitted on all the log's calls, in sample (3 of ")
    from ctxsim.harness.fidelity.compare import run_fidelity, summary_table

    fid = run_fidelity(res.trace).report
    assert "cache model              fitted IN SAMPLE (all its calls): " in summary_table(fid)
    # the stakes (harness/fidelity/dice.py), at Opus 4.6's 5-minute write over its read, $6.25 - $0.50 per
    # million, on what each previous call left cached (its context less its 3 uncached tokens): first part,
    # calls 1-5 after contexts 20,000-22,000 (105,000 - 15 = 104,985 tokens, $0.603664), nothing lost; held
    # out, calls 6-19 after 22,500-29,000 (360,500 - 42 = 360,458, $2.072633), calls 10, 13 and 16 lost
    # 24,497 + 25,997 + 27,497 = 77,991 ($0.448448)
    assert fid["fall_back_stakes"]["first_part"] == {"eligible": 5, "fell_back": 0, "stake_usd": 0.603664, "lost_usd": 0.0}
    assert fid["fall_back_stakes"]["held_out"] == {"eligible": 14, "fell_back": 3, "stake_usd": 2.072633,
                                                   "lost_usd": 0.448448}
    assert "held out: 3 of 14, $0.4484" in summary_table(fid)


def test_the_stakes_of_the_first_part_and_the_held_out_rest_by_hand():
    """The calls of test_fit_labels_strays_and_returns_and_needs_recurrence, the first part ending at
    call 4, one dollar per million tokens a fall-back costs over a read. Eligible: calls 1-3 (first
    part), 4-8 (held out; call 9 came after the TTL). First part: stake 30,000 + 31,000 + 32,000 =
    93,000 tokens ($0.093); call 3 read nothing of 32,000 ($0.032). Held out: stake 33,000 + … +
    37,000 = 175,000 ($0.175); call 4 (a return) read 32,000 of 33,000 and call 6 (a stray) 20,000
    of 35,000: 1,000 + 15,000 ($0.016)."""
    from ctxsim.harness.fidelity.cache_misses import Stake, stakes

    ctx = [30_000 + 1_000 * i for i in range(10)]
    reads = [0, ctx[0], ctx[1], 0, ctx[2], ctx[4], 20_000, ctx[6], ctx[7], 0]
    times = [i * 10 for i in range(9)] + [480]
    calls = [call(i, ctx[i], reads[i], times[i]) for i in range(10)]
    first, held = stakes(calls, None, 4, lambda c: 1e-6, label_calls(calls)[0])
    assert first == Stake(eligible=3, fell_back=1, stake_usd=0.093, lost_usd=0.032)
    assert held == Stake(eligible=5, fell_back=2, stake_usd=0.175, lost_usd=0.016)
    assert first.rate == pytest.approx(0.032 / 0.093)


def test_a_call_reads_what_the_previous_left_cached_not_all_it_sent():
    """Claude Code's calls sometimes send input past their last breakpoint, uncached (185 main-context calls
    of the development population, a median 1,592 tokens): the next call reads exactly what that call read
    and wrote, never its whole context. That is no fall-back. Calls: 80,000 written; then 79,997 read +
    2,000 written + 1,592 uncached (context 83,589); then a read of 81,997 (= 79,997 + 2,000): whole. A
    read of 60,000 after it is a stray."""
    def c(i, read, write, inp):
        return RecordedCall(i, float(i * 10), MODEL, tr.RecordedUsage(input=inp, cache_write_5m=write, cache_read=read),
                            "main", False, 0, i - 1 if i else None)

    calls = [c(0, 0, 80_000, 3), c(1, 79_997, 2_000, 1_592), c(2, 81_997, 4_000, 3), c(3, 60_000, 30_000, 3)]
    assert calls[1].cached == 81_997 and calls[1].context == 83_589
    assert label_calls(calls)[0] == {3: "stray"}
    # a call that wrote nothing (an automatic cache) left all it sent
    assert RecordedCall(0, 0.0, MODEL, tr.RecordedUsage(input=500, cache_read=9_000), "main", False, 0, None).cached == 9_500
