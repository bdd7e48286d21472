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


def test_the_committed_fit_names_60_real_compactions_and_is_what_runs_use():
    """Issue 43: harness/data/recovery.json is fitted on the development population: at least 60
    compactions, each session by repository, commit and an opaque digest (no log text, no path), the
    leave-one-session-out prediction of re-reads within a factor of 2, the lost check printed with it."""
    import json

    d = recovery.default_probability()
    data = json.loads(recovery.DATA.read_text())
    src = data["source"]
    assert src["command"].startswith("ctxsim calibrate-recovery") and src["compactions"] >= 60
    assert len(data["compactions"]) == src["compactions"] and src["sessions"] >= 10
    for log in src["logs"]:
        assert log["repo"] and log["commit"] and len(log["digest"]) == 16
    assert d == {k: pytest.approx(v) for k, v in data["probability"].items()}
    assert recovery.RecoveryParams().probability == d
    pooled = data["leave_one_out"]["pooled"]["read"]
    assert 0.5 <= pooled["predicted"] / pooled["observed"] <= 2.0   # the check: within a factor of 2
    lc = data["lost_check"]
    assert lc["pooled"]["facts"] > 0 and lc["pooled"]["auc"] is not None and lc["by_version"]


# --- issue 43, item 4: copies once, windows not counted twice, one session left out, bad logs skipped ---

def two_close() -> tr.Trace:
    """Two compactions 2 calls apart, then /a.py read again: with a 30-call window the re-read fell in
    both windows (counted twice); a window now ends at the next compaction."""
    b = Builder()
    b.user("task")
    b.call("a", ["def alpha_one(): pass"], tool="Read", inputs=[{"file_path": "/a.py"}])
    b.call("b", ["x"], tool="Bash", inputs=[{"command": "ls -la"}])
    b.event(tr.CompactEvent(t=b.t, trigger="auto", summary="<summary>first</summary>"))
    b.call("c", ["y"], tool="Bash", inputs=[{"command": "pwd"}])
    b.call("d")
    b.event(tr.CompactEvent(t=b.t, trigger="auto", summary="<summary>second</summary>"))
    b.call("again", ["def alpha_one(): pass"], tool="Read", inputs=[{"file_path": "/a.py"}])
    b.call("done")
    return b.build()


def test_the_window_of_a_compaction_ends_at_the_next_one():
    t = two_close()
    first, second = rf.observe(t, nd.classify(t, words, window=1_000_000), "s")
    assert (first.call, first.window, second.call, second.window) == (2, 2, 4, 30)
    assert first.repeats["read"] == 0 and second.repeats["read"] == 1   # the re-read counts once, for the later one
    assert first.uses == {"read": 0, "rerun": 1}


def test_leave_one_session_out_holds_a_session_s_compactions_out_together():
    # a's two compactions are predicted with p fitted on b alone (read 1.0), b's with a's (3 / 4)
    a1 = rf.Compaction("a", "auto", 1, "A", excess={"read": 1.0, "rerun": 0.0}, lost={"read": 2, "rerun": 0})
    a2 = rf.Compaction("a", "auto", 9, "A", excess={"read": 2.0, "rerun": 0.0}, lost={"read": 2, "rerun": 0})
    b1 = rf.Compaction("b", "auto", 5, "B", excess={"read": 1.0, "rerun": 0.0}, lost={"read": 1, "rerun": 0})
    loo = rf.leave_one_out([a1, a2, b1])
    assert [r["read"]["predicted"] for r in loo["per_compaction"]] == [2.0, 2.0, 0.75]
    assert loo["sessions"] == 2


def _write(t: tr.Trace, path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tr.write(t, path)


def test_calibrate_recovery_takes_traces_counts_copies_once_and_skips_a_bad_log(tmp_path, capsys):
    import json

    from ctxsim.harness.cli import main

    logs = tmp_path / "logs"
    _write(session(), logs / "p" / "one.jsonl")
    _write(session(), logs / "p" / "copy.jsonl")     # the same conversation under another session id
    _write(two_close(), logs / "q" / "two.jsonl")
    (logs / "q" / "bad.jsonl").write_text('{"type": "header", "format": "ctxsim-trace", "version": 1}\nnot json\n')
    out, models = tmp_path / "rec.json", tmp_path / "models.toml"
    models.write_text("")   # no extra model: the option is taken (it prices models a raw log names)
    assert main(["calibrate-recovery", str(logs), "-o", str(out), "--models", str(models),
                 "--no-lost-check", "-q"]) == 2   # the work done, the data written, the bad log named
    err = capsys.readouterr().err
    assert "bad.jsonl: skipped" in err and "1 log(s) skipped" in err
    d = json.loads(out.read_text())
    assert d["source"]["compactions"] == 3 and d["source"]["sessions"] == 2   # one.jsonl's copy counted once
    assert {c["window"] for c in d["compactions"]} == {2, 30}
