"""The cost of forgetting, closed loop (harness/retention/recovery.py): a lost need at risk is re-acquired by
an extra tool call and model call, billed like any call; a fact only the user gave is violated; a
recorded re-acquisition the strategy did not need is credited; runs are deterministic."""

import pandas as pd
import pytest
from ctxsim.harness.model import trace as tr
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.strategies.recorded import Recorded

from tests.helpers_traces import Builder


class RecordedClosedLoop(Recorded):
    """The recorded agent's context (its own compaction) with the closed loop on: the strategy these
    tests drive the loop through. ``recorded`` itself is open loop (its recoveries are the log's)."""

    name = "recorded_closed_loop"
    closed_loop = True


CONTENT = "def alpha_beta():\n    return ALPHA_42\n" + "# padding line\n" * 40


def compacted(reread: bool = False, reread_content: str = CONTENT) -> tr.Trace:
    """A file read, a recorded compaction whose summary keeps neither the file's fact nor the goal,
    then a call that needs both (and, with ``reread``, re-reads the file itself)."""
    b = Builder()
    b.user("fix GOALX in the parser")
    b.event(tr.FactEvent(t=b.t, id="G", category="goal", text="GOALX"))
    b.call("reading", [CONTENT], tool="Read", inputs=[{"file_path": "/p/a.py"}])
    b.event(tr.FactEvent(t=b.t, id="A", category="file", text="ALPHA_42"))
    b.call("ok")
    b.event(tr.CompactEvent(t=b.t, trigger="manual", summary="<summary>we read a file</summary>"))
    b.user("continue")
    b.event(tr.ProbeEvent(t=b.t, id="p", needs=["A", "G"]))
    if reread:
        b.call("again", [reread_content], tool="Read", inputs=[{"file_path": "/p/a.py"}])
    b.call("use it")
    return b.build()


def run(trace, **recovery):
    return replay(trace, RecordedClosedLoop, None, RunConfig(window=200_000, recovery={"probability": {"read": 1.0, "rerun": 1.0},
                                                                                 **recovery}))


def test_a_lost_need_at_risk_is_recovered_by_a_billed_call():
    r = run(compacted(), restate=False)   # the goal's restatement: test_a_violated_goal_is_restated...
    m = r.metrics
    assert m["needs_at_risk"]["n"] == 2 and m["needs_at_risk"]["lost"] == 2
    assert m["needs_at_risk"]["goal"] == {"n": 1, "kept": 0}
    rec = r.calls[r.calls["kind"] == "recovery"]
    assert len(rec) == 1 and m["recovery"]["calls"] == 1 and m["recovery"]["violated"] == 1  # the goal
    row = rec.iloc[0]
    before = r.calls.iloc[rec.index[0] - 1]   # the call that emitted the Read (billed as that main call)
    assert before["kind"] == "main" and before["cost_usd"] > 0 and before["output"] > 0
    # the re-read result entered the context: the recovery request holds it on top of the one before
    assert row["context_tokens"] - before["context_tokens"] >= m["recovery"]["tokens"] > 0
    assert row["cost_usd"] > 0 and row["duration_s"] > 0
    assert m["recovery"]["cost_usd"] == pytest.approx(row["cost_usd"])
    off = run(compacted(), enabled=False)
    assert off.metrics["recovery"]["calls"] == 0 and off.metrics["recovery"]["enabled"] is False
    assert not (off.calls["kind"] == "recovery").any()
    # closed loop: one more billed call than the open loop (the one that emits the Read; the call
    # that needed the fact is then sent again, the row of kind recovery)
    assert len(r.calls) == len(off.calls) + 1 and m["cost_usd"] > off.metrics["cost_usd"]
    assert m["cost_with_recovery_usd"] == pytest.approx(m["cost_usd"] - m["recovery"]["credit_usd"])


def test_a_probability_of_zero_recovers_nothing_and_the_recorded_reread_is_the_recovery():
    m = run(compacted(), probability={"read": 0.0, "rerun": 0.0}).metrics
    assert m["recovery"]["calls"] == 0 and m["recovery"]["declined"] == 1
    # the log's own next call re-reads the file: the probe before it is lost, but no recovery is added
    m = run(compacted(reread=True)).metrics
    assert m["recovery"]["calls"] == 0 and m["recovery"]["by_recorded"] == 1


def test_a_recorded_reread_of_content_still_held_is_credited():
    # append_only keeps everything (the recorded compaction is the log's, not its own): the re-read of
    # /p/a.py fetches what its window still holds verbatim, so that call is credited
    r = replay(compacted(reread=True), "append_only", None, RunConfig(window=200_000))
    m = r.metrics
    assert m["needs_at_risk"]["verbatim"] == 2 and m["recovery"]["calls"] == 0
    assert m["recovery"]["recorded_unneeded"] == 1
    reread_call = r.calls[(r.calls["kind"] == "main")].iloc[2]   # calls: reading, ok, again, use it
    assert m["recovery"]["credit_usd"] == pytest.approx(reread_call["cost_usd"])
    assert m["cost_with_recovery_usd"] == pytest.approx(m["cost_usd"] - reread_call["cost_usd"])


def test_a_reread_that_returns_new_text_is_needed():
    # the file changed since its first read (another process, an edit): the re-read is not credited
    changed = CONTENT.replace("# padding line", "# changed line")
    m = replay(compacted(reread=True, reread_content=changed), "append_only", None, RunConfig(window=200_000)).metrics
    assert m["recovery"]["recorded_unneeded"] == 0 and m["recovery"]["credit_usd"] == 0


def test_recovery_is_deterministic():
    t = compacted()
    cfg = RunConfig(window=200_000, seed=7)
    a, b = replay(t, RecordedClosedLoop, None, cfg), replay(t, RecordedClosedLoop, None, cfg)
    pd.testing.assert_frame_equal(a.calls, b.calls)
    assert a.metrics["recovery"] == b.metrics["recovery"]


def test_scope_all_also_recovers_what_was_lost_between_turnovers():
    import numpy as np
    from ctxsim.harness.model.conversation import Message
    from ctxsim.harness.retention import needs as nd
    from ctxsim.harness.retention import recovery as rc
    from ctxsim.harness.retention.scoring import FactScore

    from tests.test_needs import tiny, words

    t = tiny()
    needs = nd.classify(t, words, window=20, params=nd.NeedsParams(reserve_tokens=10))
    lost = [FactScore("A", "file", "lost", 0.0, None, "p1")]   # p1's A: not at risk (no turnover before it)
    answer = Message.user("ok")

    def make(scope):
        return rc.Recovery(t, needs, rc.RecoveryParams(probability={"read": 1.0, "rerun": 1.0}, scope=scope),
                           np.random.default_rng(0), words)

    assert make("at_risk").at_call(lost, answer) == []
    rec = make("all")
    (src,) = rec.at_call(lost, answer)
    assert src.tool_use_id == "tu_1" and src.kind == "rerun" and rec.tokens == 4   # "data ALPHA one two"


def test_the_recovery_option_of_run(tmp_path, capsys):
    import json

    from ctxsim.harness.cli import main

    path = tmp_path / "t.jsonl"
    t = compacted()
    tr.write(tr.with_header(t, t.header.model_copy(update={"recorded": tr.RecordedSetting(window=200_000)})), path)
    assert main(["run", str(path), "-s", "tests.test_recovery:RecordedClosedLoop", "--recovery", "probability={read=1.0,rerun=1.0}", "--json", "-"]) == 0
    on = json.loads(capsys.readouterr().out)
    assert on["recovery"]["calls"] == 1 and on["cost_with_recovery_usd"] <= on["cost_usd"]
    assert main(["run", str(path), "-s", "tests.test_recovery:RecordedClosedLoop", "--recovery", "enabled=false", "--json", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["recovery"]["calls"] == 0
    assert main(["run", str(path), "-s", "tests.test_recovery:RecordedClosedLoop", "--recovery", "nope=1"]) == 2


def goal_twice() -> tr.Trace:
    """:func:`compacted`, then a second user turn whose call needs the goal again."""
    b = Builder()
    b.user("fix GOALX in the parser")
    b.event(tr.FactEvent(t=b.t, id="G", category="goal", text="GOALX"))
    b.call("reading", [CONTENT], tool="Read", inputs=[{"file_path": "/p/a.py"}])
    b.call("ok")
    b.event(tr.CompactEvent(t=b.t, trigger="manual", summary="<summary>we read a file</summary>"))
    b.user("continue")
    b.event(tr.ProbeEvent(t=b.t, id="p1", needs=["G"]))
    b.call("use it")
    b.user("and then")
    b.event(tr.ProbeEvent(t=b.t, id="p2", needs=["G"]))
    b.call("done")
    return b.build()


def test_a_violated_goal_is_restated_by_the_user_and_costs_a_call():
    # the recorded compaction's summary lacks GOALX: at p1 it is violated. Closed loop: the call made
    # without it is billed (wasted), the user restates "GOALX", the call is sent again (kind restate);
    # at p2 the goal is in the context again (verbatim), so only p1's need is violated.
    on, off = run(goal_twice()), run(goal_twice(), restate=False)
    assert off.metrics["recovery"]["violated"] == 2 and off.metrics["needs_at_risk"]["goal"] == {"n": 2, "kept": 0}
    assert not (off.calls["kind"] == "restate").any()
    m = on.metrics
    assert m["recovery"]["violated"] == 1 and m["recovery"]["restated"] == 1
    # the headline is the strategy's own retention: p2's goal is held only because the user restated
    # it, so it counts lost (restored 1), and p1's and p2's outcomes stay those of the open loop
    assert m["needs_at_risk"]["goal"] == {"n": 2, "kept": 0} and m["needs_at_risk"]["restored"] == 1
    assert m["needs_at_risk"]["lost"] == 2 and list(on.probes["restored"]) == [False, True]
    assert on.probes["where"].tolist()[1] == "window"   # held verbatim (the restatement), scored restored
    again = on.calls[on.calls["kind"] == "restate"]
    assert len(again) == 1 and len(on.calls) == len(off.calls) + 1
    row = again.iloc[0]
    wasted = on.calls.iloc[again.index[0] - 1]   # the call made without the goal, billed as that main call
    assert wasted["kind"] == "main" and wasted["cost_usd"] > 0
    # the wasted answer ("use it") and the restatement ("GOALX") entered the context, and stay for p2's call
    extra = row["context_tokens"] - wasted["context_tokens"]
    assert extra > 0 and on.calls.iloc[-1]["context_tokens"] == off.calls.iloc[-1]["context_tokens"] + extra
    assert m["recovery"]["restate_cost_usd"] == pytest.approx(row["cost_usd"]) and row["cost_usd"] > 0
    # forgetting the goal is dearer, never cheaper: the open loop's cost + the restated call + the
    # larger context of the call after it (the wasted call is the open loop's call at p1)
    assert wasted["cost_usd"] == pytest.approx(off.calls.iloc[again.index[0] - 1]["cost_usd"])
    assert m["cost_usd"] - off.metrics["cost_usd"] == pytest.approx(
        row["cost_usd"] + on.calls.iloc[-1]["cost_usd"] - off.calls.iloc[-1]["cost_usd"])
    assert m["cost_with_recovery_usd"] > off.metrics["cost_with_recovery_usd"]


def test_a_violation_the_user_does_not_notice_costs_nothing_and_stays_violated():
    m = run(goal_twice(), restate_probability=0.0).metrics
    assert m["recovery"]["violated"] == 2 and m["recovery"]["restated"] == 0 and m["recovery"]["restate_cost_usd"] == 0


def test_recorded_is_open_loop_its_recoveries_are_the_logs():
    """``recorded`` re-enacts the log: a user restating the goal or a re-read after its compaction
    would be in the log already, so the loop adds no call and no restatement (else the replay of a
    real session is billed for its forgetting twice and drifts from the bill)."""
    t = compacted()
    closed = replay(t, RecordedClosedLoop, None, RunConfig(window=200_000))
    assert closed.metrics["recovery"]["violated"] == 1 and closed.metrics["recovery"]["restated"] == 1
    r = replay(t, "recorded", None, RunConfig(window=200_000))
    assert set(r.calls["kind"]) == {"main", "summary"} or set(r.calls["kind"]) <= {"main", "summary", "subagent"}
    assert r.metrics["recovery"]["calls"] == 0 and r.metrics["recovery"]["violated"] == 0
    assert r.metrics["recovery"]["enabled"] is False
    assert r.metrics["cost_with_recovery_usd"] == r.metrics["cost_usd"]
    assert len(r.calls) == len(closed.calls) - 1   # no restate row (the call made without the goal is the main one)


def test_work_wasted_until_a_violation_is_noticed_is_billed_per_call():
    """Issue 43, item 6: ``wasted_calls`` more calls on the request that lacks the goal, each billed
    (kind restate, in restate_cost_usd); the same request sent again reads the cache the first wrote,
    so each extra call costs the same."""
    base, more = run(goal_twice()), run(goal_twice(), wasted_calls=3)
    rows = more.calls[more.calls["kind"] == "restate"]
    assert len(rows) == 4 and len(more.calls) == len(base.calls) + 3
    extra = rows.iloc[:3]["cost_usd"]
    assert (extra > 0).all() and extra.nunique() == 1
    assert more.metrics["recovery"]["restate_cost_usd"] == pytest.approx(rows["cost_usd"].sum())
    assert more.metrics["cost_usd"] == pytest.approx(base.metrics["cost_usd"] + extra.sum())
    assert more.metrics["recovery"]["violated"] == base.metrics["recovery"]["violated"] == 1
