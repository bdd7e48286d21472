"""Retention model: calibration on "Lost in the Middle", where a fact is, and aggregation."""

import json
import math

import numpy as np
import pytest
from ctxsim.harness.model.conversation import Block, History, Message, Request, SystemPrompt, ToolSet
from ctxsim.harness.model.trace import FactEvent, ProbeEvent
from ctxsim.harness.retention.scoring import (
    LITM_ACCURACY,
    LITM_DOCS,
    LITM_ORACLE,
    LITM_POSITIONS,
    FactScore,
    RetentionModel,
    RetentionParams,
    aggregate,
    attention,
    curve,
    rot,
)
from hypothesis import given, settings
from hypothesis import strategies as st

GOAL = FactEvent(t=0, id="g", category="goal", text="Goal: ship the uploader (ticket ORB-100001).")
FILE = FactEvent(t=0, id="f", category="file", text="UPLOAD_RETRY_MS = 100074")
ERR = FactEvent(t=0, id="e", category="error", text="KeyError: chunk 3fa9c2 rejected with code E100111")
FACTS = {f.id: f for f in (GOAL, FILE, ERR)}


def test_attention_curve_reproduces_lost_in_the_middle_within_2_points():
    """Calibration (issue 4): GPT-3.5-Turbo, 20 documents, positions 1/5/10/15/20 -> 75.8/57.2/53.8/
    55.4/63.2, normalised by the oracle 88.3 -> 85.84/64.78/60.93/62.74/71.57 points."""
    p = (np.arange(1, LITM_DOCS + 1) - 1) / (LITM_DOCS - 1)
    at20 = curve(p) * 100
    for k, acc in zip(LITM_POSITIONS, LITM_ACCURACY, strict=True):
        assert abs(at20[k - 1] - acc / LITM_ORACLE * 100) < 2.0, k
    # U shape: the middle is the low point, the start the high point
    assert at20.argmax() == 0 and 5 <= at20.argmin() <= 14


def test_context_rot_constants_from_the_papers_two_settings():
    # 30 docs vs 20 docs (x1.5 length): mean at first/middle/last = (73.4+50.9+63.7)/3 = 62.667
    # vs (75.8+53.8+63.2)/3 = 64.267 -> ratio 0.9751, i.e. -2.49% ; /log2(1.5)=0.58496 -> 0.0426 ~ 0.043
    per_doubling = (1 - ((73.4 + 50.9 + 63.7) / 3) / ((75.8 + 53.8 + 63.2) / 3)) / math.log2(1.5)
    assert per_doubling == pytest.approx(RetentionParams().rot_per_doubling, abs=0.001)
    assert rot(3_000) == 1.0 and rot(100) == 1.0
    assert rot(6_000) == pytest.approx(1 - 0.043)             # one doubling
    assert rot(128_000) == pytest.approx(1 - 0.043 * math.log2(128_000 / 3_000))  # 0.7672
    assert rot(10**12) == RetentionParams().rot_floor


@settings(max_examples=25, deadline=None)
@given(st.floats(0, 1), st.integers(1, 2_000_000), st.integers(1, 2_000_000))
def test_attention_is_bounded_and_falls_with_context_length(p, a, b):
    lo, hi = sorted((a, b))
    assert 0 <= attention(p, hi) <= attention(p, lo) <= 1


def _req(*msgs: Message) -> Request:
    return Request(SystemPrompt.of("sys"), ToolSet(), History(msgs))


def _before_even(n_msgs: int, per: int, base: int = 0):
    """Each message holds ``per`` tokens after ``base`` tokens of system/tools."""
    return lambda i: base + per * i


def test_window_fact_scored_by_position_and_length():
    # 4 messages of 1,000 tokens, no prefix; the goal opens message 0 -> p = 0 -> curve(0) x rot(4000)
    msgs = [Message.user(GOAL.text + " do it"), Message.user("x" * 50), Message.user("y" * 50), Message.user("z")]
    model = RetentionModel(FACTS, RetentionParams(), np.random.default_rng(0))
    [s] = model.score(ProbeEvent(t=0, id="p1", needs=["g"]), _req(*msgs), _before_even(4, 1000), 4000)
    want = curve(0.0) * (1 - 0.043 * math.log2(4000 / 3000))  # 0.85745 x 0.98215 = 0.84215
    assert s.where == "window" and s.score == pytest.approx(want, abs=1e-5) and s.pointer is None
    assert s.probe == "p1" and s.category == "goal"
    # the same fact in the last message: p = 3000/4000 = 0.75
    msgs2 = [Message.user("a"), Message.user("b"), Message.user("c"), Message.user(GOAL.text)]
    [s2] = model.score(ProbeEvent(t=0, id="p2", needs=["g"]), _req(*msgs2), _before_even(4, 1000), 4000)
    assert s2.score == pytest.approx(attention(0.75, 4000), abs=1e-5)


def test_fact_in_a_summary_gets_fidelity_times_attention():
    summ = Message("user", (Block.text_block("<summary>\n- " + GOAL.text + "\n</summary>"),), {"origin": "summary"})
    model = RetentionModel(FACTS, RetentionParams(summary_fidelity=0.8), np.random.default_rng(0))
    before = _before_even(2, 500, base=1000)  # system 1,000 tokens, then 2 x 500: total 2,000
    [s] = model.score(ProbeEvent(t=0, id="p", needs=["g"]), _req(summ, Message.user("go on")), before, 2000)
    # offset of the fact in the message: 12 chars of 12+len(text)+11 -> p = (1000 + 500*12/len)/2000
    text = summ.text
    p = (1000 + 500 * text.index(GOAL.text) / len(text)) / 2000
    assert s.where == "summary" and s.score == pytest.approx(0.8 * curve(p), abs=1e-5)
    # text a summariser produced is recognised even without the meta origin
    plain = Message.user("<summary>\n" + GOAL.text)
    [s3] = model.score(ProbeEvent(t=0, id="q", needs=["g"]), _req(plain), lambda i: 0, 100)
    assert s3.where == "summary"


def test_verbatim_beats_summary_when_both_hold_the_fact():
    summ = Message("user", (Block.text_block(GOAL.text),), {"origin": "summary"})
    model = RetentionModel(FACTS, RetentionParams(summary_fidelity=0.5), np.random.default_rng(0))
    [s] = model.score(ProbeEvent(t=0, id="p", needs=["g"]), _req(summ, Message.user(GOAL.text)), _before_even(2, 10), 20)
    assert s.where == "window"


def test_recoverable_through_a_spill_path_charges_a_readback(tmp_path):
    """N-SPILL-5: a spilled result keeps a path back; the read-back is returned as the pointer."""
    spill = tmp_path / "tool-results" / "toolu_1.txt"
    spill.parent.mkdir()
    spill.write_text("line 1\nline 2\n" + FILE.text + "  # budget\n")
    ph = Message("user", (Block.tool_result("toolu_1", f"<persisted-output>\nfirst lines...\nFull output: {spill}\n"
                                                      "</persisted-output>"),))
    sure = RetentionModel(FACTS, RetentionParams(recover_probability=1.0), np.random.default_rng(0), session_dir=tmp_path)
    [s] = sure.score(ProbeEvent(t=0, id="p", needs=["f"]), _req(ph), lambda i: 0, 50_000)
    assert s.where == "recoverable" and s.pointer == str(spill) and s.pointer_line == 3
    assert s.score == pytest.approx(attention(1.0, 50_000))  # read fresh, at the end of the context
    never = RetentionModel(FACTS, RetentionParams(recover_probability=0.0), np.random.default_rng(0), session_dir=tmp_path)
    [s0] = never.score(ProbeEvent(t=0, id="p", needs=["f"]), _req(ph), lambda i: 0, 50_000)
    # not followed: no read-back (the engine reads back only "recoverable"), the need is lost (needs.WHERE)
    assert s0.where == "unfollowed" and s0.score == 0.0 and s0.pointer == str(spill)


def test_recovery_probability_is_a_seeded_draw(tmp_path):
    f = tmp_path / "x.txt"
    f.write_text(FILE.text)
    m = Message.user(f"see {f}")
    hits = []
    for seed in range(200):
        model = RetentionModel(FACTS, RetentionParams(recover_probability=0.7), np.random.default_rng(seed), tmp_path)
        hits.append(model.score(ProbeEvent(t=0, id="p", needs=["f"]), _req(m), lambda i: 0, 10)[0].score > 0)
    assert 0.6 < np.mean(hits) < 0.8  # 200 Bernoulli(0.7) draws


def test_pointer_outside_the_session_dir_does_not_count(tmp_path):
    inside, outside = tmp_path / "run", tmp_path / "elsewhere"
    inside.mkdir()
    outside.mkdir()
    f = outside / "notes.txt"
    f.write_text(FILE.text)
    model = RetentionModel(FACTS, RetentionParams(recover_probability=1.0), np.random.default_rng(0), session_dir=inside)
    [s] = model.score(ProbeEvent(t=0, id="p", needs=["f"]), _req(Message.user(f"read {f}")), lambda i: 0, 10)
    assert s.where == "lost" and s.score == 0.0


def test_smallest_file_wins_and_transcript_json_escaping_is_understood(tmp_path):
    big = tmp_path / "transcript.jsonl"
    big.write_text(json.dumps({"content": "padding " * 100 + ERR.text}) + "\n")
    small = tmp_path / "spill.txt"
    small.write_text(ERR.text)
    model = RetentionModel(FACTS, RetentionParams(recover_probability=1.0), np.random.default_rng(0), tmp_path)
    req = _req(Message.user(f"transcript: {big}"), Message.user(f"spill: {small}."))
    [s] = model.score(ProbeEvent(t=0, id="p", needs=["e"]), req, lambda i: 0, 10)
    assert s.pointer == str(small)
    model2 = RetentionModel(FACTS, RetentionParams(recover_probability=1.0), np.random.default_rng(0), tmp_path)
    [s2] = model2.score(ProbeEvent(t=0, id="p", needs=["e"]), _req(Message.user(f"transcript: {big}")), lambda i: 0, 10)
    assert s2.pointer == str(big) and s2.pointer_line == 1


def test_lost_and_unknown_fact():
    model = RetentionModel(FACTS, RetentionParams(), np.random.default_rng(0))
    [s] = model.score(ProbeEvent(t=0, id="p", needs=["e"]), _req(Message.user("nothing here")), lambda i: 0, 10)
    assert (s.where, s.score, s.pointer) == ("lost", 0.0, None)
    with pytest.raises(KeyError, match="zz"):
        model.score(ProbeEvent(t=0, id="p", needs=["zz"]), _req(Message.user("x")), lambda i: 0, 10)


def test_aggregate_weighted_mean_goal_categories_probes():
    scores = [FactScore("g", "goal", "window", 0.8, probe="p1"), FactScore("f", "file", "lost", 0.0, probe="p1"),
              FactScore("g", "goal", "summary", 0.6, probe="p2"), FactScore("c", "constraint", "window", 0.5, probe="p2")]
    out = aggregate(scores)
    # weights goal 2, file 1, constraint 1.5: (2*0.8 + 0 + 2*0.6 + 1.5*0.5) / (2+1+2+1.5) = 3.55/6.5 = 0.546154
    assert out["score"] == pytest.approx(3.55 / 6.5)
    assert out["goal"] == pytest.approx(0.7)
    assert out["by_category"] == {"goal": pytest.approx(0.7), "constraint": 0.5, "file": 0.0}
    assert out["probes"] == 2 and out["facts_scored"] == 4
    assert out["where"] == {"window": 2, "summary": 1, "lost": 1}
    assert aggregate([])["score"] is None


def test_params_reject_unknown_fields():
    with pytest.raises(ValueError):
        RetentionParams(recover_prob=0.5)


def test_pointer_under_a_symlinked_session_dir_counts_in_either_form(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    (real / "spill.txt").write_text(FILE.text)
    for written in (link / "spill.txt", real / "spill.txt"):
        model = RetentionModel(FACTS, RetentionParams(recover_probability=1.0), np.random.default_rng(0), session_dir=link)
        [s] = model.score(ProbeEvent(t=0, id="p", needs=["f"]), _req(Message.user(f"see {written}")), lambda i: 0, 10)
        assert s.where == "recoverable" and s.pointer == str(written)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 12), at=st.integers(0, 11), per=st.integers(10, 40_000), base=st.integers(0, 30_000),
       pad=st.integers(0, 400), fidelity=st.floats(0, 1), rot=st.floats(0, 0.2))
def test_a_summarised_fact_never_outscores_the_same_fact_verbatim_at_the_same_position(n, at, per, base, pad,
                                                                                         fidelity, rot):
    """Issue 16: the same request twice, the fact's message once a summary and once a plain message
    (same text, same place): the summary's score is at most the verbatim one's, whatever the size,
    the position and the constants."""
    at = at % n
    text = "x" * pad + GOAL.text + " and more"
    params = RetentionParams(summary_fidelity=fidelity, rot_per_doubling=rot)
    scores = {}
    for origin in ("summary", None):
        msgs = [Message.user(f"filler {i}") for i in range(n)]
        msgs[at] = Message("user", (Block.text_block(text),), {"origin": origin} if origin else {})
        total = base + per * n
        [s] = RetentionModel(FACTS, params, np.random.default_rng(0)).score(
            ProbeEvent(t=0, id="p", needs=["g"]), _req(*msgs), _before_even(n, per, base), total)
        scores[origin] = s
    assert scores["summary"].where == "summary" and scores[None].where == "window"
    assert scores["summary"].score <= scores[None].score + 1e-12


def test_run_scores_with_the_runs_category_weights():
    """The weights a run is given make its score (they were ignored: metrics aggregated with the
    defaults). Worked from the run's own per-fact scores."""
    from ctxsim.harness.replay.engine import RunConfig, replay

    from tests.helpers_traces import Builder

    b = Builder()
    b.user("Goal: ship the uploader (ticket ORB-100001).")
    b.event(FactEvent(t=b.t, id="g", category="goal", text="ship the uploader"))
    b.call("Reading.", ["UPLOAD_RETRY_MS = 100074"])
    b.event(FactEvent(t=b.t, id="f", category="file", text="UPLOAD_RETRY_MS = 100074"))
    b.event(ProbeEvent(t=b.t, id="p1", needs=["g", "f"]))
    b.call("done")
    trace = b.build()
    w = {"goal": 9.0, "file": 1.0}
    res = replay(trace, "append_only", {}, RunConfig(retention={"category_weights": w}))
    by = dict(zip(res.probes["fact"], res.probes["score"], strict=True))
    want = (9 * by["g"] + 1 * by["f"]) / 10
    assert res.metrics["retention"]["score"] == pytest.approx(want, abs=1e-9)
    default = replay(trace, "append_only", {}, RunConfig()).metrics["retention"]["score"]
    assert default == pytest.approx((2 * by["g"] + by["f"]) / 3, abs=1e-9) and default != pytest.approx(want)


def test_every_retention_constant_names_its_source():
    names = set(RetentionParams.model_fields)
    listed = {a[0].removeprefix("retention.") for a in RetentionParams().assumptions()}
    assert listed == names
    for _, _, source in RetentionParams().assumptions():
        assert source


@given(st.floats(0.0, 1.0))
def test_the_scalar_curve_is_the_numpy_scalar_curve(p):
    """``curve`` of one position takes math.exp (no 0-d array a block); the value is the double
    numpy's scalar evaluation gives, so no score moves."""
    import numpy as np
    from ctxsim.harness.retention.scoring import RetentionParams, curve

    q = RetentionParams()
    c = np.clip(np.float64(p), 0.0, 1.0)
    want = float(q.curve_m + q.curve_a * np.exp(-c / q.curve_tau1) + q.curve_b * np.exp(-(1.0 - c) / q.curve_tau2))
    assert curve(p) == want
    assert curve(-0.5) == curve(0.0) and curve(1.5) == curve(1.0)   # clipped as before
