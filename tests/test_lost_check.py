"""Lost, checked against the recorded agent (harness/calibration/lost_check.py, issue 43 item 5): what the
recorded agent re-acquired after a compaction, and precision, recall and AUC of what the peer marks
lost, worked out by hand."""

from ctxsim.harness.calibration import lost_check as lc
from ctxsim.harness.model import trace as tr

from tests.helpers_traces import Builder


def compacted() -> tr.Trace:
    """/a.py read (ALPHA_1), `ls -la` run (BETA_2), a compaction; then /a.py read again and a call
    that needs both: ALPHA_1 re-acquired (its source re-read before the use), BETA_2 not."""
    b = Builder()
    b.user("task")
    b.call("a", ["def ALPHA_1(): pass"], tool="Read", inputs=[{"file_path": "/a.py"}])
    b.event(tr.FactEvent(t=b.t, id="A", category="identifier", text="ALPHA_1"))
    b.call("b", ["BETA_2 x"], tool="Bash", inputs=[{"command": "ls -la"}])
    b.event(tr.FactEvent(t=b.t, id="B", category="identifier", text="BETA_2"))
    b.event(tr.CompactEvent(t=b.t, trigger="auto", summary="<summary>two looks</summary>"))
    b.call("again", ["def ALPHA_1(): pass"], tool="Read", inputs=[{"file_path": "/a.py"}])
    b.event(tr.ProbeEvent(t=b.t, id="p", needs=["A", "B"]))
    b.call("use both")
    return b.build()


def test_what_the_recorded_agent_re_acquired_by_hand():
    [(j, at, got)] = lc.recorded_side(compacted())
    assert (j, at) == (0, 2) and got == {"A": True, "B": False}


def _item(session, state, y, kind="identifier"):
    return lc.Item(session, "2.1", 0, kind, state, y)


def test_precision_recall_and_auc_by_hand():
    # 4 facts: lost+re-acquired, pointer+not, summary+re-acquired, verbatim+not
    items = [_item("s", "lost", True), _item("s", "pointer", False), _item("s", "summary", True),
             _item("s", "verbatim", False)]
    f = lc.figures(items)
    # marked lost: lost, pointer (2); re-acquired among them 1 -> precision 0.5; recall 1 of 2 = 0.5
    assert (f["precision"], f["recall"]) == (0.5, 0.5)
    # scores: re-acquired {3, 1}, not {2, 0}: pairs 3>2, 3>0, 1<2, 1>0 -> 3 of 4
    assert f["auc"] == 0.75
    assert lc.auc([1, 1], [True, False]) == 0.5 and lc.auc([1], [True]) is None


def test_leave_one_session_out_scores_a_session_with_the_others_rates():
    # session t's lost fact is scored with s's (lost, identifier) rate: (1 + 1) / (1 + 2) = 2/3 >= s's
    # base rate (1 + 1) / (2 + 2) = 1/2 -> flagged; its verbatim fact with (0 + 1) / (1 + 2) = 1/3 -> not
    items = [_item("s", "lost", True), _item("s", "verbatim", False),
             _item("t", "lost", True), _item("t", "verbatim", False)]
    got = lc.leave_one_session_out(items)
    assert got["precision"] == 1.0 and got["recall"] == 1.0 and got["auc"] == 1.0 and got["sessions"] == 2
