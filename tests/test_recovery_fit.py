"""Real recovery as ground truth (harness/calibration/recovery_fit.py): the recorded agent's excess re-reads after
a compaction and the fitted recovery probability, worked out by hand; the bundled data file."""

import pytest
from ctxsim.harness.calibration import recovery_fit as rf
from ctxsim.harness.model import trace as tr
from ctxsim.harness.retention import needs as nd
from ctxsim.harness.retention import recovery

from tests.helpers_traces import Builder


def session() -> tr.Trace:
    """Calls 0-2 read /a.py, read /b.py, run ls; a compaction whose summary names neither file's
    content; call 3 reads /a.py again (needing alpha_one, probed), call 4 answers."""
    b = Builder()
    b.user("task")
    b.call("a", ["def alpha_one(): pass"], tool="Read", inputs=[{"file_path": "/a.py"}])
    b.event(tr.FactEvent(t=b.t, id="F1", category="file", text="alpha_one"))
    b.call("b", ["def beta_two(): pass"], tool="Read", inputs=[{"file_path": "/b.py"}])
    b.call("c", ["x"], tool="Bash", inputs=[{"command": "ls -la"}])
    b.event(tr.CompactEvent(t=b.t, trigger="auto", summary="<summary>we looked at two files</summary>"))
    b.event(tr.ProbeEvent(t=b.t, id="p", needs=["F1"]))
    b.call("again", ["def alpha_one(): pass"], tool="Read", inputs=[{"file_path": "/a.py"}])
    b.call("done")
    return b.build()


def words(text: str) -> int:
    return len(text.split())


def test_excess_rereads_and_lost_sources_by_hand():
    t = session()
    needs = nd.classify(t, words, window=1_000_000)
    (c,) = rf.observe(t, needs, "s")
    assert c.call == 3
    # in the window (calls 3, 4): one read, a repeat; outside it: two reads and a run, no repeat (background 0)
    assert c.uses == {"read": 1, "rerun": 0} and c.repeats == {"read": 1, "rerun": 0}
    assert c.background == {"read": 0.0, "rerun": 0.0} and c.excess == {"read": 1.0, "rerun": 0.0}
    # alpha_one: held by /a.py's read before the compaction, not in the summary: one read source lost
    assert c.lost == {"read": 1, "rerun": 0} and c.at_risk == 1 and c.in_summary == 0


def test_fit_and_leave_one_out_by_hand():
    c1 = rf.Compaction("a", "auto", 10, excess={"read": 2.0, "rerun": -1.0}, lost={"read": 4, "rerun": 1})
    c2 = rf.Compaction("b", "auto", 10, excess={"read": 1.0, "rerun": 0.0}, lost={"read": 1, "rerun": 0})
    # read: (2 + 1) / (4 + 1) = 0.6; rerun: -1 / 1 bounded to 0
    assert rf.fit([c1, c2]) == {"read": 0.6, "rerun": 0.0}
    loo = rf.leave_one_out([c1, c2])
    # c1 with p from c2 (read 1.0): 4 predicted vs 2; c2 with p from c1 (read 0.5): 0.5 vs 1
    r1, r2 = loo["per_compaction"]
    assert r1["read"] == {"predicted": 4.0, "observed": 2.0, "error": 2.0}
    assert r2["read"] == {"predicted": 0.5, "observed": 1.0, "error": -0.5}
    assert loo["pooled"]["read"]["predicted"] == 4.5 and loo["pooled"]["read"]["ratio"] == 1.5
    assert loo["mean_abs_error"]["read"] == 1.25


def test_the_bundled_fit_has_its_provenance_and_is_what_runs_use():
    d = recovery.default_probability()
    import json

    data = json.loads(recovery.DATA.read_text())
    assert data["source"]["command"].startswith("ctxsim calibrate-recovery") and len(data["source"]["logs"]) == 3
    assert d == {k: pytest.approx(v) for k, v in data["probability"].items()}
    assert recovery.RecoveryParams().probability == d
    pooled = data["leave_one_out"]["pooled"]["read"]
    assert 0.5 <= pooled["predicted"] / pooled["observed"] <= 2.0   # the check: within a factor of 2
