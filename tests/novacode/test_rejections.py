"""The hard line and a rejected request: NovaCode claims to manage the window (N-COMP-3).

Two halves. Proactively, the estimate an unanchored request is checked with must not run so low that
the hard line is crossed unseen (calibrate_unanchored, accounting.py; not in the seed). Reactively, a
prompt-too-long 400 re-anchors the estimate on the API's count and forces a compaction as the hard
line does, bypassing the breaker, then the request is sent again; when nothing can be compacted the
turn errors and the session ends (on_rejected)."""

from __future__ import annotations

import json
from pathlib import Path

from ctxsim.harness.model.conversation import Block, Message, Usage
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.harness.testing import conversations as conv
from ctxsim.harness.testing.params import CHECK_MODEL, CHECK_WINDOW, params_for
from ctxsim.strategies.base import CallInfo, Rejection
from ctxsim.strategies.novacode.strategy import NovaCode
from ctxsim.strategies.registry import make_config

from tests.fakes import IndexedServices, strategy_env
from tests.helpers_traces import Builder


def crash_and_resume(grow: int = 8, crashes: int = 40) -> object:
    """The session shape the property kit found: one launch grows the context with ``grow`` tool
    results of 6,000 characters of its log-like text (about 2.8 characters per true token: the
    seed's 3.5 runs about 20% low on it), then ``crashes`` launches in a row each die in their only
    call with the tool call unanswered and are resumed with a 1,000-character user message. Every
    resume clears the anchor (a new process), so every launch's one request is estimated from
    characters alone, while the context grows by about 440 tokens a launch."""
    b = conv.ConversationBuilder()
    b.start_session()
    b.user(200, 1)
    for j in range(grow):
        b.call(conv.Turn(calls=(conv.ToolCall("Bash", 6_000, seed=j),)))
    for k in range(crashes):
        b.call(conv.Turn(calls=(conv.ToolCall("Bash", 300, seed=k),)), crash=True)
        b.start_session(resume=True)
        b.user(1_000, k)
    b.call(conv.Turn())
    return b.trace()


def run_kit_window(trace, **params):
    """At the property kit's 32,000-token window with its scaled lines (soft 26,720, hard 28,320)."""
    p = {**params_for(NovaCode, CHECK_WINDOW), **params}
    return replay(trace, NovaCode, p, RunConfig(model=CHECK_MODEL, window=CHECK_WINDOW))


def test_n_comp_3_hard_line_holds_across_crash_and_resume_launches():
    """With the seed's estimator alone (calibrate_unanchored off) the resumed launches' estimates
    stay under the soft line while the true context passes the window: a request of more than
    32,000 tokens is sent and refused (the reactive compaction then saves the session). With the
    rate each launch reads back from the transcript (the last usage measured it), the estimate is
    within a few percent of the truth, the compaction comes before the window, and no request is
    ever refused."""
    t = crash_and_resume()
    seed = run_kit_window(t, calibrate_unanchored=False)
    refused = seed.calls[seed.calls["rejected"]]
    assert len(refused) == 1 and refused["overflow"].all()
    assert 32_000 < int(refused["context_tokens"].iloc[0]) < 32_400
    est = int(refused["estimated_tokens"].iloc[0])
    assert est < 26_720  # under the soft line: nothing fired
    assert seed.metrics["completed"] is True
    assert seed.metrics["strategy_counters"]["rejection_reactive_compactions"] == 1

    cal = run_kit_window(t)
    assert cal.metrics["completed"] is True and int(cal.calls["rejected"].sum()) == 0
    main = cal.calls[cal.calls["kind"] == "main"]
    assert int(main["context_tokens"].max()) < 28_320
    assert cal.metrics["compactions"]["succeeded"] >= 1
    # every launch after the first starts unanchored, yet its estimate is close to the truth (the
    # rate measured on the raw history is a few percent off after the compaction changed the text)
    first = main.groupby("session").head(1).iloc[1:]
    err = (first["estimated_tokens"] - first["context_tokens"]).abs() / first["context_tokens"]
    assert len(first) == 40 and float(err.median()) < 0.01 and float(err.max()) < 0.10


def test_n_comp_5_a_resumed_launch_reads_the_measured_rate_from_the_transcript(tmp_path: Path):
    """Launch s1's answer carries the size of its request in its transcript record (tokens as the
    API counted them, characters); launch s2, resumed in a new process, knows nothing else, and its
    first estimate uses that rate. A fresh (not resumed) launch starts unmeasured."""
    t = crash_and_resume(grow=2, crashes=1)
    r = replay(t, NovaCode, None, RunConfig(model=CHECK_MODEL, window=200_000, session_dir=tmp_path))
    main = r.calls[r.calls["kind"] == "main"]
    s1_last = main[main["session"] == "s1"].iloc[-1]
    records = [json.loads(x) for x in (tmp_path / "transcripts" / "s1" / "transcript.jsonl").read_text().splitlines()]
    ctx = [rec["context"] for rec in records if "context" in rec]
    assert len(ctx) == len(main[main["session"] == "s1"])
    assert ctx[-1]["tokens"] == int(s1_last["context_tokens"]) + int(s1_last["output"])
    s2_first = main[main["session"] == "s2"].iloc[0]
    assert abs(s2_first["estimated_tokens"] - s2_first["context_tokens"]) / s2_first["context_tokens"] < 0.05


# --- the reaction to a rejected request ---------------------------------------------------------------

def test_on_rejected_prompt_too_long_reanchors_forces_a_compaction_and_retries(tmp_path: Path):
    """Driven by hand at 200k: 20 turns of 14,000-character user messages, the breaker open (three
    failed summaries), an estimate under the hard line. The API refuses the request: 205,000 tokens.
    The count re-anchors the estimate (205,000 for this history) and a compaction is forced through
    the open breaker; the retry is what the engine sends next (True)."""
    svc = IndexedServices("<summary>the work so far</summary>", fail={0, 1, 2})
    s = NovaCode(make_config(NovaCode, {"memory": False}), strategy_env(tmp_path, svc, 200_000))
    for i in range(20):
        s.on_user(Message.user("u" * 14_000))
        s.build_request(CallInfo(i, float(i)))
        s.on_response(Message("assistant", (Block.text_block("ok"),)), Usage(input_uncached=100_000 + 3_500 * i))
    for i in range(3):  # three soft-zone failures open the breaker (N-COMP-4)
        s.on_user(Message.user("v"))
        s.build_request(CallInfo(20 + i, 20.0 + i))
        s.on_response(Message("assistant", (Block.text_block("ok"),)), Usage(input_uncached=170_000))
    assert s.counters.breaker_trips == 1 and s.counters.compactions_failed == 3
    s.on_user(Message.user("w"))
    req = s.build_request(CallInfo(23, 23.0))
    assert req.estimated_tokens < 177_000 and not req.rewrite
    rejection = Rejection(("overflow",), "prompt is too long: 205000 tokens > 200000 maximum", 205_000, 200_000, 1)
    assert s.on_rejected(rejection, CallInfo(23, 23.0)) is True
    assert s.ledger.anchor is None and s.counters.compactions_succeeded == 1
    assert svc.calls[-1][1].params["trigger"] == "hard"
    retry = s.build_request(CallInfo(23, 23.0))
    assert retry.rewrite and [m.meta.get("origin") for m in retry.messages[:3]] == ["environment", "summary", "restore"]
    assert s.counters.extra["rejection_reactive_compactions"] == 1


def test_on_rejected_gives_up_when_nothing_can_be_compacted():
    """A system prompt of 40,000 opaque tokens (a recorded prefix) on a 32,000 window: the very
    first request is refused, the prefix that could be summarised is under 2,000 tokens (N-COMP-8):
    no compaction, the session fails at call 0 (nothing NovaCode could have prevented)."""
    b = Builder(prefix_tokens=40_000)
    b.user("hello")
    b.call("hi")
    r = replay(b.build(), NovaCode, None, RunConfig(model=CHECK_MODEL, window=CHECK_WINDOW))
    m = r.metrics
    assert m["completed"] is False and m["failed_at_call"] == 0
    assert m["strategy_counters"]["rejection_gave_up"] == 1
    assert m["strategy_counters"]["compaction_gave_up_small_prefix"] >= 1


def test_on_rejected_gives_up_on_a_pairing_400(tmp_path: Path):
    """Nothing in the seed repairs an unpaired tool call mid-session (N-TRANS-5 is for resumes): a
    pairing 400 is a defect, not a state to recover from."""
    s = NovaCode(make_config(NovaCode, {"memory": False}), strategy_env(tmp_path, IndexedServices("x"), 200_000))
    rej = Rejection(("pairing",), "unexpected tool_use_id found in tool_result blocks: t", 100, 200_000, 1)
    assert s.on_rejected(rej, CallInfo(0, 0.0)) is False
    assert s.counters.extra["rejection_gave_up"] == 1 and s.counters.compactions_attempted == 0


def test_on_rejection_is_declared():
    assert "forced" in NovaCode.on_rejection and "N-COMP-3" in NovaCode.on_rejection
