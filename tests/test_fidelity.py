"""Fidelity: the fit, the miss classification and the hidden deltas on hand-made numbers; a
self-consistency check (a trace whose "recorded" usage is the simulator's own must come back with
its scale and zero error); and the figures of the real logs."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from ctxsim.harness.cli import main as cli
from ctxsim.harness.fidelity.compare import (
    classify_misses,
    fit_token_scale,
    hidden_deltas,
    run_fidelity,
    startup_split,
    system_prompt_reads,
)
from ctxsim.harness.fidelity.recorded import RecordedCall, recorded_calls
from ctxsim.harness.model import trace as tr
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.strategies.recorded import Recorded

REAL = Path(__file__).resolve().parents[1] / ".." / "shared" / "traces" / "real" / "claude-code"
needs_real = pytest.mark.skipif(not REAL.is_dir(), reason="real logs not present (../shared/traces/real)")
MODEL = "claude-opus-4-6"


def call(i, ctx, read=0, t=None, model=MODEL, after_compact=False, prev=-1, thinking_switch=False):
    u = tr.RecordedUsage(input=ctx - read, cache_read=read)
    return RecordedCall(i, float(t if t is not None else i), model, u, "main", after_compact, 0,
                        (i - 1 if prev == -1 else prev) if i > 0 else None, thinking_switch=thinking_switch)


def test_fit_token_scale_is_a_ratio_of_summed_growth():
    # recorded 10,000 → 13,000 → 20,000; cl100k 5,000 → 7,000 → 12,000: (3,000 + 7,000) / (2,000 + 5,000) = 1.428571
    calls = [call(0, 10_000), call(1, 13_000), call(2, 20_000)]
    base = {0: 5_000, 1: 7_000, 2: 12_000}
    assert fit_token_scale(calls, base, {0, 1, 2}) == pytest.approx(10_000 / 7_000)
    # a call outside the fit set does not count: only (0→1): 3,000 / 2,000
    assert fit_token_scale(calls, base, {0, 1}) == pytest.approx(1.5)
    # a compaction or a model switch breaks the pair
    calls2 = [call(0, 10_000), call(1, 13_000, after_compact=True), call(2, 20_000, model="claude-haiku-4-5")]
    assert fit_token_scale(calls2, base, {0, 1, 2}) is None


def test_too_little_growth_fits_no_scale():
    """One pair that took in 52 cl100k tokens and grew 441 (a reminder the log has no text for): 8.48 is no
    tokenizer's ratio (an outside three-call session, 13% over its bill on its one held-out call). Under
    MIN_FIT_GROWTH (200) cl100k tokens of growth no scale is fitted: the model table's stands."""
    from ctxsim.harness.fidelity.compare import MIN_FIT_GROWTH

    calls = [call(0, 15_535), call(1, 15_976)]
    assert fit_token_scale(calls, {0: 12_000, 1: 12_052}, {0, 1}) is None
    grown = {0: 12_000, 1: 12_000 + MIN_FIT_GROWTH}
    assert fit_token_scale(calls, grown, {0, 1}) == pytest.approx(441 / MIN_FIT_GROWTH)


def test_a_step_that_grew_by_content_with_no_text_is_left_out_of_the_scale():
    """Four steps of 1,000 cl100k tokens each grow 1,200 recorded tokens; a fifth grows 16,000 on 200
    tokens of text (content the log has no text for). The ratio of sums, (4·1,200 + 16,000) / 4,200 =
    4.952, puts the spike on every token; 16,000 > 3 × 4.952 × 200 + 2,000 = 4,971, so that step is
    left out and the scale fitted again: 4,800 / 4,000 = 1.2. A step within the bound stays: with the
    fifth step at 2,000 the first fit (6,800 / 4,200 = 1.619) keeps all five."""
    from ctxsim.harness.fidelity.compare import scale_fit

    ctx, raw = [10_000], [5_000]
    for grew, text in ((1_200, 1_000),) * 4 + ((16_000, 200),):
        ctx.append(ctx[-1] + grew)
        raw.append(raw[-1] + text)
    calls = [call(i, c) for i, c in enumerate(ctx)]
    base = dict(enumerate(raw))
    assert fit_token_scale(calls, base, set(range(6))) == pytest.approx(1.2)
    assert scale_fit(calls, base, set(range(6)))[1:] == (4, 0, 1)
    calls[5] = call(5, ctx[4] + 2_000)
    assert fit_token_scale(calls, base, set(range(6))) == pytest.approx(6_800 / 4_200)


def test_classify_misses_ttl_model_switch_replayed_and_unexplained():
    calls = [call(0, 10_000, t=0), call(1, 11_000, read=10_000, t=10),        # hit
             call(2, 12_000, read=0, t=400),                                   # 390 s > 5 m: ttl
             call(3, 12_500, read=0, t=405, model="claude-haiku-4-5"),         # another model's cache
             call(4, 13_000, read=12_400, t=410, model="claude-haiku-4-5"),    # 100 short: within tolerance
             call(5, 14_000, read=2_000, t=415, model="claude-haiku-4-5"),     # falls back to the system prefix
             call(6, 15_000, read=0, t=420, model="claude-haiku-4-5")]         # sim misses too (below)
    sim_ctx = [10_000, 11_000, 12_000, 12_500, 13_000, 14_000, 15_000]
    sim_read = [0, 10_000, 0, 0, 12_500, 13_000, 100]
    table = pd.DataFrame({"simulated_context": sim_ctx, "simulated_cache_read": sim_read})
    got = {m["call"]: m for m in classify_misses(calls, table, system_prefix=2_000)}
    assert set(got) == {2, 3, 5, 6}
    assert got[2]["cause"] == "ttl" and got[2]["fell_back_to"] == "nothing (full re-write)"
    assert got[3]["cause"] == "prefix_change" and "claude-haiku-4-5" in got[3]["changed"]
    assert got[5]["cause"] == "unexplained" and got[5]["fell_back_to"] == "the system prefix (2000)"
    assert got[6]["cause"] == "prefix_change" and "replay" in got[6]["changed"]


def test_startup_split_is_the_prefix_less_what_the_first_call_after_a_compaction_read():
    """Opaque prefix 25,000 (first call). After the compaction, call 2 reads 21,000 from the cache
    (more than the 0 warm head, less than call 1's 60,000 context): the breakpoint on the system
    block, so the system prompt is 21,000 and 25,000 − 21,000 = 4,000 tokens were startup content.
    A second compaction reading 21,500 is named in the evidence, not averaged in."""
    t = tr.validate_events(tr.Header(name="s", meta={"session_start_hooks": {"compact": ["bd prime"]}}),
                           [tr.UserEvent(t=0, text="go"), tr.AssistantEvent(t=1, content=[tr.TextContent(text="a")])])
    calls = [call(0, 30_000), call(1, 60_000, read=29_990), call(2, 40_000, read=21_000, after_compact=True),
             call(3, 80_000, read=39_990), call(4, 30_000, read=21_500, after_compact=True)]
    assert [c.index for c in system_prompt_reads(calls)] == [2, 4]
    n, ev = startup_split(t, calls, 25_000, {})
    assert n == 4_000
    assert "25,000" in ev and "21,000" in ev and "= 4,000" in ev and "other such calls read 21,500" in ev and "compact: bd prime" in ev
    # a read short of the head an earlier session cached tells nothing (one that stops at it does: the
    # system prompt was all cached before); a full miss neither
    assert [c.index for c in system_prompt_reads(calls, warm=21_500)] == [4]
    assert system_prompt_reads(calls, warm=21_501) == []
    miss = [call(0, 30_000), call(1, 60_000, read=29_990), call(2, 40_000, read=0, after_compact=True)]
    assert startup_split(t, miss, 25_000, {}) == (0, "")
    # a read at least the prefix: nothing to tell apart (0), said
    n, ev = startup_split(t, calls[:3], 21_000, {})
    assert n == 0 and "no startup content" in ev
    # a log that switched models: the prefix of the model of the call that read it
    assert startup_split(t, calls[:3], 25_000, {MODEL: 26_000, "claude-haiku-4-5": 24_000})[0] == 5_000


def test_a_log_that_begins_mid_conversation_splits_its_prefix_at_the_read_after_a_compaction():
    """A log whose first message answers one in another file: its first call read 110,000 of its
    112,000 from the cache (the earlier conversation, cached by that file's calls), so the warm head
    is 110,000. After the compaction call 2 reads 23,000: the system prompt, below that head. With
    no floor for such a log the prefix splits there: 112,000 − 23,000 = 89,000 tokens of the earlier
    conversation and startup content, which a compaction summarises. The same calls in a log that
    began at its first message keep the floor: a read short of the head an earlier session cached
    tells nothing."""
    events = [tr.UserEvent(t=0, text="go"), tr.AssistantEvent(t=1, content=[tr.TextContent(text="a")])]
    mid = tr.validate_events(tr.Header(name="s", meta={"begins_mid_conversation": "the log begins mid-conversation"}),
                             events)
    calls = [call(0, 112_000, read=110_000), call(1, 155_000, read=111_990),
             call(2, 29_000, read=23_000, after_compact=True)]
    n, ev = startup_split(mid, calls, 112_000, {}, warm=110_000)
    assert n == 89_000 and "= 89,000" in ev and "earlier conversation the file does not show" in ev
    whole = tr.validate_events(tr.Header(name="s"), events)
    assert startup_split(whole, calls, 112_000, {}, warm=110_000) == (0, "")


def test_startup_split_is_measured_too_where_a_thinking_switch_read_back_the_system_prompt():
    """No compaction: call 2 is a new user turn that switched thinking (the messages' entries are
    keyed on it, the system prompt's are not) and reads 15,600 of call 1's 32,000: the system
    prompt. Opaque prefix 28,000 − 15,600 = 12,400 tokens of startup content. A later switch that
    read the same is not named again; a switch that read its whole predecessor measures nothing."""
    t = tr.validate_events(tr.Header(name="s"), [tr.UserEvent(t=0, text="go"),
                                                 tr.AssistantEvent(t=1, content=[tr.TextContent(text="a")])])
    calls = [call(0, 30_000), call(1, 32_000, read=29_990), call(2, 40_000, read=15_600, thinking_switch=True),
             call(3, 45_000, read=39_990), call(4, 47_000, read=15_600, thinking_switch=True),
             call(5, 50_000, read=46_990, thinking_switch=True)]
    assert [c.index for c in system_prompt_reads(calls)] == [2, 4]
    n, ev = startup_split(t, calls, 28_000, {})
    assert n == 12_400
    assert "a new user turn that switched thinking" in ev and "= 12,400" in ev and "other such calls" not in ev
    # early in a session the lookback still reaches the first message's entry: the smallest switch read
    early = [call(0, 30_000), call(1, 32_000, read=29_990), call(2, 40_000, read=29_000, thinking_switch=True),
             *calls[3:5]]
    assert startup_split(t, early, 28_000, {})[0] == 12_400
    # a compaction's read is the system prompt whatever a switch read before it
    comp = [*early[:3], call(3, 45_000, read=39_990), call(4, 30_000, read=16_000, after_compact=True),
            call(5, 31_000, read=15_600, thinking_switch=True, prev=4)]
    n, ev = startup_split(t, comp, 28_000, {})
    assert n == 12_000 and "the first after a compaction" in ev and "other such calls read 15,600, 29,000" in ev


def test_hidden_deltas_beyond_tokenizer_noise():
    calls = [call(0, 10_000), call(1, 12_000), call(2, 11_500), call(3, 20_000), call(4, 5_000, after_compact=True)]
    # simulated growth: +2,100 (recorded +2,000: 100 < 200, noise), +100 (recorded −500: −600 hidden),
    # +8,000 (recorded +8,500: 500 < 10% of 8,000 = 800, noise), compaction −16,000 (recorded −15,000: +1,000)
    table = pd.DataFrame({"simulated_context": [10_000, 12_100, 12_200, 20_200, 4_200]})
    got = hidden_deltas(calls, table)
    assert [(h["call"], h["tokens"]) for h in got] == [(2, -600), (4, 1000)]
    assert got[1]["after_compaction"] is True


def _self_recorded_trace(scale=1.3, prefix=5000):
    """A trace whose recorded usage is what the simulator itself bills at ``scale``/``prefix``."""
    evs = [tr.UserEvent(t=0, text="please fix the parser " * 40)]
    n = 0
    for i in range(14):
        n += 1
        evs.append(tr.AssistantEvent(t=10.0 * i + 1, content=[tr.TextContent(text=f"step {i}"),
                                                              tr.ToolUseContent(id=f"t{n}", name="Read", input={"i": i})]))
        evs.append(tr.ToolResultEvent(t=10.0 * i + 2, tool_use_id=f"t{n}", content=f"line of code {i}\n" * (30 + 25 * i)))
    evs.append(tr.AssistantEvent(t=200, content=[tr.TextContent(text="done")]))
    h = tr.Header(name="self", model=MODEL, prefix_tokens=prefix)
    t = tr.validate_events(h, evs)
    res = replay(t, Recorded, {}, RunConfig(model=MODEL, token_scale=scale))
    rows = res.calls[res.calls["kind"] == "main"].reset_index(drop=True)
    out, k = [], 0
    for e in evs:
        if isinstance(e, tr.AssistantEvent):
            r = rows.loc[k]
            k += 1
            e = e.model_copy(update={"usage": tr.RecordedUsage(
                input=int(r["input_uncached"]), cache_write_5m=int(r["cache_write_5m"]),
                cache_read=int(r["cache_read"]), output=int(r["output"]))})
        out.append(e)
    return tr.validate_events(h.model_copy(update={"usage": "per_call"}), out), res


def test_self_consistency_recovers_the_scale_with_no_error():
    t, res = _self_recorded_trace(scale=1.3, prefix=5000)
    fid = run_fidelity(t)
    r = fid.report
    assert r["calls"] == 15 and r["fit_calls"] == 5          # ceil(0.3 × 15)
    assert r["token_scale"] == pytest.approx(1.3, abs=0.005)
    assert r["context_tokens"]["median_abs_pct_error"] < 0.1
    assert r["cache_read_share"]["simulated"] == pytest.approx(r["cache_read_share"]["recorded"], abs=0.005)
    assert r["cost_usd"]["abs_pct_error"] < 1.0
    assert r["cache_misses"] == {"ttl": 0, "prefix_change": 0, "fitted": 0, "unexplained": 0}
    assert r["cache_model"] == {"fitted": False}
    assert r["hidden_tokens"]["calls"] == 0


def test_recorded_calls_threads_and_new_chars():
    evs = [tr.UserEvent(t=0, text="abcd"), tr.AssistantEvent(t=1, content=[tr.TextContent(text="xy")]),
           tr.UserEvent(t=2, text="123456"), tr.AssistantEvent(t=3, content=[tr.TextContent(text="z")])]
    calls = recorded_calls(tr.validate_events(tr.Header(name="c"), evs))
    # call 1 sees 4 chars; call 2 sees the 2-char answer + the 6-char message
    assert [(c.new_chars, c.prev_in_thread) for c in calls] == [(4, None), (8, 0)]


def test_no_per_call_usage_is_a_clear_error():
    t = tr.validate_events(tr.Header(name="agg", usage="aggregate"),
                           [tr.UserEvent(t=0, text="x"), tr.AssistantEvent(t=1, content=[tr.TextContent(text="y")])])
    with pytest.raises(ValueError, match="no recorded per-call usage"):
        run_fidelity(t)


def test_cli_fidelity_json_has_the_design_keys(tmp_path, capsys):
    t, _ = _self_recorded_trace()
    path = tmp_path / "t.jsonl"
    tr.write(t, path)
    out, fig = tmp_path / "f.json", tmp_path / "f.png"
    assert cli(["fidelity", str(path), "--json", str(out), "--figure", str(fig)]) == 0
    rep = json.loads(out.read_text())
    for k in ("trace", "model", "calls", "fit_calls", "token_scale", "context_tokens", "cache_read_share", "cost_usd",
              "estimator", "compactions", "cache_misses", "hidden_tokens"):
        assert k in rep
    assert set(rep["cache_misses"]) == {"ttl", "prefix_change", "fitted", "unexplained"}
    assert set(rep["cache_misses_usd"]) == set(rep["cache_misses"])
    printed = capsys.readouterr().out
    assert "misses: unexplained" in printed and "cache-read share" in printed and "cost" in printed
    assert rep["estimator"]["chars_per_token"] == 3.5
    assert fig.stat().st_size > 10_000
    assert cli(["fidelity", str(path), "--fit-fraction", "1.5"]) == 2


# --- the real logs ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def real_reports():
    from ctxsim.harness.importers import import_file

    out = {}
    for name in ("258c7280-ae70-4798-800f-63464d01a85d", "ae4a77f8-aedd-4bc1-888f-c94edc91af04"):
        out[name[:4]] = run_fidelity(import_file("claude-code", REAL / "spotter" / f"{name}.jsonl").trace)
    return out


@needs_real
def test_real_spotter_context_and_cache_share(real_reports):
    """Held-out median |error| of per-call context, nothing pinned: within 1% and 1.5%. After each
    compaction the replay sends what Claude Code's docs say comes back: the startup content, the
    summary, the files. How much of the startup content (4,403 and 4,497 tokens: the first call's
    prefix less the system prompt read back after the compaction) came back is the log's measure
    (harness/fidelity/measured.py: 1,641 and 2,044; the skill listing is not re-injected, same docs page),
    so the residual on the first call after it is a few hundred tokens (measured +488 and +147;
    −2,768 and −2,458 when all of it was re-sent). The sizes are the log's, and the content after a
    tool use whose PostToolUse hook ran (hook_progress records) is put back from 50 tokens up:
    medians 0.43% and 0.81% (2.07% and 2.44% with the 200-token floor alone; 0.66% and 3.28% under
    the one fitted scale, which over-counted large text and so hid the hook output). Cache-read
    share within 2 points."""
    r258, rae = real_reports["258c"].report, real_reports["ae4a"].report
    assert r258["context_tokens"]["median_abs_pct_error"] <= 1.0 and r258["context_tokens"]["calls"] > 100
    assert rae["context_tokens"]["median_abs_pct_error"] <= 1.5
    for r in (r258, rae):
        (pin,) = r["context_tokens_pinned"]["pinned"]
        assert abs(pin["tokens"]) < 600
        assert r["context_tokens_pinned"]["median_abs_pct_error"] <= 1.0
    for r in (r258, rae):
        assert abs(r["cache_read_share"]["simulated"] - r["cache_read_share"]["recorded"]) <= 0.02
        assert r["warm_start"]["tokens"] == 17_842   # both first calls read an earlier session's prefix
        stab = r["token_scale_stability"]
        assert stab["first_30pct"] == pytest.approx(r["token_scale"], abs=1e-3) and len(stab["by_tenth"]) == 10


@needs_real
def test_real_spotter_compactions_land_on_the_recorded_call(real_reports):
    c258 = real_reports["258c"].report["compactions"]
    assert [(c["call"], c["recorded_pre_tokens"]) for c in c258] == [(102, 167_094)]
    assert c258[0]["abs_pct_error"] <= 2.0   # 0.49 measured
    cae = real_reports["ae4a"].report["compactions"]
    assert [(c["call"], c["trigger"], c["recorded_pre_tokens"]) for c in cae] == [(138, "manual", 142_431)]


@needs_real
def test_real_spotter_misses_are_not_foreseen_on_the_first_calls_and_fitted_in_sample_labelled(real_reports):
    """258c7280's two falls back to the system prefix are the first calls after the log's two
    <task-notification> user messages (found here in the raw file: the first assistant record after
    each such user record, and what it read). Other sessions read a full hit after such a message,
    so it is not a cause. The calls the token scale is fitted on (the first 47 of 155) hold one of
    the two, and one fall-back is no pattern, so no model fits there; the whole log's two do, so the
    model is fitted on all its calls, in sample, and says so (issue 41: "in sample only as a labelled
    fallback"): both misses are ``fitted``, and the error (0.05%) is the one of a model that saw the
    calls it is scored on, which the folder summary counts apart. Held out only, the session was
    10.9% under its bill, all of it the two misses' premium."""
    recs = [json.loads(x) for x in (REAL / "spotter" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl").read_text().splitlines()]
    reads = []
    for i, o in enumerate(recs):
        c = o.get("message", {}).get("content") if o["type"] == "user" else None
        if isinstance(c, str) and c.startswith("<task-notification>"):
            nxt = next(x for x in recs[i:] if x["type"] == "assistant")
            reads.append(nxt["message"]["usage"]["cache_read_input_tokens"])
    assert reads == [21_460, 21_460]   # the system prefix: what the first call after the compaction read
    r = real_reports["258c"]
    assert [(m["call"], m["cause"], m["trigger"], m["recorded_read"]) for m in r.misses] == [
        (31, "fitted", "<task-notification>", 21_460), (152, "fitted", "<task-notification>", 21_460)]
    assert r.report["cache_misses"] == {"ttl": 0, "prefix_change": 0, "fitted": 2, "unexplained": 0}
    cm = r.report["cache_model"]
    assert cm["fitted"] and cm["in_sample"] and (cm["strays"], cm["eligible"]) == (2, 152)
    assert "IN SAMPLE: the first 47 calls' fall-backs did not recur" in cm["source"]
    assert r.report["cost_usd"]["abs_pct_error"] < 1.0
    ae = real_reports["ae4a"]
    assert any(m["cause"] == "prefix_change" and "haiku" in m["changed"] for m in ae.misses)


@needs_real
def test_real_compaction_call_model_and_ttl_come_from_the_acompact_file(real_reports):
    """The compaction call of ae4a77f8 is read straight from its acompact file here: its model
    and which of the two write TTLs it used; fidelity must hand the same to the strategy."""
    from ctxsim.harness.fidelity.compare import compaction_calls
    from ctxsim.harness.importers import import_file

    f = REAL / "spotter" / "ae4a77f8-aedd-4bc1-888f-c94edc91af04" / "subagents" / "agent-acompact-946d2b.jsonl"
    msg = [json.loads(x)["message"] for x in f.read_text().splitlines() if '"assistant"' in x][0]
    split = msg["usage"]["cache_creation"]
    want_ttl = "1h" if split["ephemeral_1h_input_tokens"] >= split["ephemeral_5m_input_tokens"] else "5m"
    assert (msg["model"], want_ttl) == ("claude-opus-4-6", "5m")   # the session itself ran on Haiku then
    t = import_file("claude-code", REAL / "spotter" / "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl").trace
    assert compaction_calls(t) == ((msg["model"],), (want_ttl,))
    # billed on Opus at 5m (121,689 written), the compaction call is what brought the cost within 5%
    assert real_reports["ae4a"].report["cost_usd"]["abs_pct_error"] <= 5.0


def test_classify_a_fall_back_after_a_task_notification_or_an_mcp_reconnect():
    """A read that stopped at the system prefix (2,000) after a <task-notification>, or with no
    message at all, is unexplained (the message named, the reported intermittent fall-back cited);
    after an /mcp reconnect it is a prefix change the log shows."""
    from dataclasses import replace as dc_replace

    calls = [call(0, 10_000, t=0), call(1, 11_000, read=2_000, t=10), call(2, 12_000, read=2_000, t=20),
             call(3, 13_000, read=8_000, t=30)]
    calls[1] = dc_replace(calls[1], trigger="<task-notification>")
    calls[3] = dc_replace(calls[3], trigger="/mcp")
    table = pd.DataFrame({"simulated_context": [10_000, 11_000, 12_000, 13_000],
                          "simulated_cache_read": [0, 10_000, 11_000, 12_000]})
    got = {m["call"]: m for m in classify_misses(calls, table, system_prefix=2_000)}
    assert (got[1]["cause"], got[1]["trigger"]) == ("unexplained", "<task-notification>")
    assert "#87966" in got[1]["changed"]
    assert got[2]["cause"] == "unexplained" and got[2]["trigger"] is None
    assert got[3]["cause"] == "prefix_change" and "/mcp" in got[3]["changed"]


def test_a_miss_after_an_interruption_is_reported_beside_it_and_stays_in_the_miss_fit():
    """An interrupted turn is named beside the miss that follows (no cause by itself: a fifth of such
    turns with no resume miss in the development population), and the call stays one the miss model
    is fitted on."""
    from ctxsim.harness.fidelity.cache_misses import label_calls

    evs = [tr.UserEvent(t=0, text="go"), tr.AssistantEvent(t=1, content=[tr.TextContent(text="a")],
                                                          usage=tr.RecordedUsage(input=10_000)),
           tr.UserEvent(t=2, text="[Request interrupted by user]"), tr.UserEvent(t=3, text="continue"),
           tr.AssistantEvent(t=4, content=[tr.TextContent(text="b")], usage=tr.RecordedUsage(input=9_000, cache_read=2_000))]
    calls = recorded_calls(tr.validate_events(tr.Header(name="i", model=MODEL), evs))
    assert calls[1].trigger == "an interrupted turn"
    table = pd.DataFrame({"simulated_context": [10_000, 11_000], "simulated_cache_read": [0, 10_000]})
    (m,) = classify_misses(calls, table, system_prefix=2_000)
    assert (m["cause"], m["trigger"]) == ("unexplained", "an interrupted turn")
    assert label_calls(calls)[1] == 1   # eligible: fitted on like any call


def test_classify_a_miss_after_an_effort_level_set_and_keep_it_out_of_the_miss_fit():
    """A call right after "Set effort level to …" that read nothing is a prefix change the log shows
    (/effort named), and it is no stray of the fitted miss model: the one eligible call left reads
    in full, so the fit sees 1 eligible call and no stray."""
    from dataclasses import replace as dc_replace

    from ctxsim.harness.fidelity.cache_misses import label_calls

    calls = [call(0, 10_000, t=0), call(1, 11_000, read=0, t=10), call(2, 12_000, read=11_000, t=20)]
    calls[1] = dc_replace(calls[1], trigger="/effort")
    table = pd.DataFrame({"simulated_context": [10_000, 11_000, 12_000],
                          "simulated_cache_read": [0, 0, 11_000]})
    got = {m["call"]: m for m in classify_misses(calls, table, system_prefix=2_000)}
    assert got[1]["cause"] == "prefix_change" and "/effort" in got[1]["changed"]
    labels, eligible, fell, _ = label_calls(calls)
    assert eligible == 1 and not fell and not labels


def test_a_miss_after_a_resumed_launch_is_a_prefix_change_kept_out_of_the_miss_fit():
    """The first main call after a resumed launch (session_start with resume) reads only the system
    prefix (2,000 of 10,000): a prefix change the replay re-enacts, named so, and no stray of the
    fitted miss model, whatever came with it (an interruption). The call after is eligible again."""
    from ctxsim.harness.fidelity.cache_misses import label_calls

    evs = [tr.SessionStart(t=0, session="s"), tr.UserEvent(t=0, text="go"),
           tr.AssistantEvent(t=1, content=[tr.TextContent(text="a")], usage=tr.RecordedUsage(input=10_000)),
           tr.UserEvent(t=2, text="[Request interrupted by user]"), tr.SessionEnd(t=3, session="s"),
           tr.SessionStart(t=30, session="s", resume=True), tr.UserEvent(t=31, text="go on"),
           tr.AssistantEvent(t=32, content=[tr.TextContent(text="b")], usage=tr.RecordedUsage(input=9_000, cache_read=2_000)),
           tr.UserEvent(t=33, text="thanks"),
           tr.AssistantEvent(t=34, content=[tr.TextContent(text="c")], usage=tr.RecordedUsage(input=100, cache_read=11_000))]
    calls = recorded_calls(tr.validate_events(tr.Header(name="r", model=MODEL), evs))
    assert [c.trigger for c in calls] == [None, "/resume", None]
    table = pd.DataFrame({"simulated_context": [10_000, 11_000, 11_100], "simulated_cache_read": [0, 2_000, 11_000]})
    (m,) = classify_misses(calls, table, system_prefix=2_000)
    assert (m["call"], m["cause"], m["trigger"]) == (1, "prefix_change", "/resume")
    assert m["changed"].startswith("a resumed launch just before")
    labels, eligible, fell, _ = label_calls(calls)
    assert eligible == 1 and not fell and not labels


def test_a_miss_after_a_tool_searchs_first_load_on_opus_4_7_is_a_prefix_change_kept_out_of_the_miss_fit():
    """The first main call after the first tool a tool search loaded (meta.tools_loaded) reads
    nothing on Opus 4.7: a prefix change the replay re-enacts, named so, and no stray of the fitted
    miss model. A later load is no trigger; on Opus 4.6 the first load is none either, and the same
    short read is an eligible call, fitted on like any."""
    from ctxsim.harness.fidelity.cache_misses import label_calls
    from ctxsim.harness.fidelity.recorded import TOOL_LOAD

    def evs(model):
        def search(i, t, read, inp):
            return [tr.AssistantEvent(t=t, model=model, usage=tr.RecordedUsage(input=inp, cache_read=read),
                                      content=[tr.ToolUseContent(id=f"s{i}", name="ToolSearch", input={})]),
                    tr.ToolResultEvent(t=t + 1, tool_use_id=f"s{i}", content="[tool_reference content not in the log]",
                                       meta={tr.TOOLS_LOADED: [f"Tool{i}"]})]
        return [tr.UserEvent(t=0, text="go"), *search(0, 1, 0, 10_000), *search(1, 3, 0, 11_000),
                *search(2, 5, 11_000, 1_000),
                tr.AssistantEvent(t=7, model=model, content=[tr.TextContent(text="c")],
                                  usage=tr.RecordedUsage(input=100, cache_read=12_000))]

    table = pd.DataFrame({"simulated_context": [10_000, 11_000, 12_000, 12_100],
                          "simulated_cache_read": [0, 0, 11_000, 12_000]})
    calls = recorded_calls(tr.validate_events(tr.Header(name="l", model="claude-opus-4-7"), evs("claude-opus-4-7")))
    assert [c.trigger for c in calls] == [None, TOOL_LOAD, None, None]
    (m,) = classify_misses(calls, table, system_prefix=2_000)
    assert (m["call"], m["cause"], m["trigger"]) == (1, "prefix_change", TOOL_LOAD)
    assert m["changed"].startswith("the first tool a tool search loaded, on claude-opus-4-7")
    labels, eligible, fell, _ = label_calls(calls)
    assert eligible == 2 and not fell and not labels
    calls = recorded_calls(tr.validate_events(tr.Header(name="l", model="claude-opus-4-6"), evs("claude-opus-4-6")))
    assert [c.trigger for c in calls] == [None] * 4
    labels, eligible, fell, _ = label_calls(calls)
    assert eligible == 3 and fell and labels


def test_recovered_hidden_content_is_reported_by_source():
    """User messages the importer put back (meta.hidden) are counted apart, by source, in tokens at
    the given scale; the visible user messages are not."""
    from ctxsim.harness.fidelity.compare import recovered_hidden
    from ctxsim.harness.model.conversation import Message
    from ctxsim.harness.provider import Provider

    a, b = "<system-reminder>\ncompile error\n</system-reminder>", "<system-reminder>\nblocked\n</system-reminder>"
    evs = [tr.UserEvent(t=0, text="go"), tr.UserEvent(t=1, text=a, meta={"hidden": "acompact"}),
           tr.UserEvent(t=2, text=b, meta={"hidden": "acompact"}),
           tr.AssistantEvent(t=3, content=[tr.TextContent(text="ok")])]
    p = Provider(MODEL, token_scale=1.5)
    got = recovered_hidden(tr.validate_events(tr.Header(name="h"), evs), p)
    want = p.message_tokens(Message.user(a)) + p.message_tokens(Message.user(b))
    assert got == {"messages": 2, "tokens": want, "by_source": {"acompact": {"messages": 2, "tokens": want}}}
    assert want > 1.5 * 10   # both texts are over ten cl100k tokens, scaled by 1.5


@needs_real
def test_real_codemie_turn_starts_shrink_by_the_previous_turns_thinking():
    """codemie (Sonnet 4.5): the recorded context shrinks at new user turns. Read here from the raw
    file of 624a4a58: at the first call after a user text message, the recorded context is smaller
    than the previous call's although a message was added, and the previous turn had thinking.
    The replay drops that thinking (the API's rule for models before Opus 4.5): the per-call
    context error on the held-out calls falls to ≤ 5% (9.5% when the replay kept it) and no
    hidden shrink of a full turn's thinking is left at a turn start (−2,114 tokens over the
    session's six turn starts)."""
    recs = [json.loads(x) for x in (REAL / "codemie" / "session-624a4a58.jsonl").read_text().splitlines()]
    ctx = lambda u: u["input_tokens"] + u["cache_creation_input_tokens"] + u["cache_read_input_tokens"]  # noqa: E731
    seen, prev, thinking_since_turn, shrinks = set(), None, 0, 0
    new_turn = False
    for o in recs:
        if o["type"] == "user" and not o.get("isMeta"):
            c = o["message"]["content"]
            if isinstance(c, str) or any(b.get("type") == "text" for b in c):
                new_turn = True
        if o["type"] == "assistant" and o["message"]["id"] not in seen:
            seen.add(o["message"]["id"])
            now = ctx(o["message"]["usage"])
            if new_turn and prev is not None and thinking_since_turn and now < prev:
                shrinks += 1
            if new_turn:
                thinking_since_turn = 0
            new_turn, prev = False, now
        if o["type"] == "assistant":
            thinking_since_turn += sum(1 for b in o["message"]["content"] if b["type"] == "thinking")
    assert shrinks >= 5
    from ctxsim.harness.importers import import_file

    r = run_fidelity(import_file("claude-code", REAL / "codemie" / "session-196820da.jsonl").trace).report
    assert r["context_tokens"]["median_abs_pct_error"] <= 5.0
    assert r["hidden_tokens"]["by_preceding_tool"].get("(no tool)", 0) > -2500   # −2,114 measured


def test_classify_a_miss_at_a_new_turn_on_a_model_that_drops_thinking():
    """Sonnet 4.5 at a new user turn, the replay (which drops the previous turn's thinking) misses
    too: the changed block is named as that thinking; on Opus 4.6 the same miss keeps the generic
    wording (Opus 4.6 keeps its thinking)."""
    from dataclasses import replace as dc_replace

    sonnet = "claude-sonnet-4-5-20250929"
    calls = [call(0, 10_000, t=0, model=sonnet), call(1, 11_000, read=3_000, t=10, model=sonnet)]
    calls[1] = dc_replace(calls[1], new_turn=True)
    table = pd.DataFrame({"simulated_context": [10_000, 11_000], "simulated_cache_read": [0, 3_000]})
    (m,) = classify_misses(calls, table, system_prefix=2_000)
    assert m["cause"] == "prefix_change" and "thinking blocks, dropped at this new user turn" in m["changed"]
    opus = [dc_replace(c, model=MODEL) for c in calls]
    (m,) = classify_misses(opus, table, system_prefix=2_000)
    assert m["changed"] == "the replay of the visible content misses here too"
