"""Needs at risk (harness/retention/needs.py): the stratification on a tiny trace worked out by hand, the
Wilson and Newcombe intervals by hand, the headline's counts."""

import pytest
from ctxsim.harness.model import trace as tr
from ctxsim.harness.retention import needs as nd

from tests.helpers_traces import Builder


def words(text: str) -> int:
    return len(text.split())


def tiny() -> tr.Trace:
    """Counted in words, window 20, reserve 10: threshold 10.

    e0 user "please fix GOALX" (3: acc 3) · e1 fact G · e2 call "ok" + Bash "cmd 1" (3: acc 6) ·
    e3 result "data ALPHA one two" (4: acc 10, not over) · e4 fact A · e5 probe p1 [A] ·
    e6 call "ok" (1: acc 11 > 10: turnover after e6) · e7 user "more words here now" (4) ·
    e8 probe p2 [A, G] · e9 call "ok"."""
    b = Builder()
    b.user("please fix GOALX")
    b.event(tr.FactEvent(t=b.t, id="G", category="goal", text="GOALX"))
    b.call("ok", ["data ALPHA one two"])
    b.event(tr.FactEvent(t=b.t, id="A", category="file", text="ALPHA"))
    b.event(tr.ProbeEvent(t=b.t, id="p1", needs=["A"]))
    b.call("ok")
    b.user("more words here now")
    b.event(tr.ProbeEvent(t=b.t, id="p2", needs=["A", "G"]))
    b.call("ok")
    return b.build()


def test_a_need_across_a_turnover_point_is_at_risk_by_hand():
    needs = nd.classify(tiny(), words, window=20, params=nd.NeedsParams(reserve_tokens=10))
    assert needs.threshold == 10 and needs.turnovers == (6,)
    p1a = needs.get("p1", "A")
    assert (p1a.at_risk, p1a.distance_tokens, p1a.last_seen) == (False, 0, 3)
    p2a = needs.get("p2", "A")   # last seen at e3 (position 10), needed at position 15, a turnover between
    assert (p2a.at_risk, p2a.distance_tokens, p2a.source, p2a.from_user) == (True, 5, "tu_1", False)
    p2g = needs.get("p2", "G")   # last seen at e0 (position 3): 12 back; only the user can give it again
    assert (p2g.at_risk, p2g.distance_tokens, p2g.source, p2g.from_user) == (True, 12, None, True)


def test_the_prefix_counts_toward_the_threshold_and_a_wider_window_has_no_turnover():
    t = tiny()
    # prefix 1: acc reaches 11 at e3 already (turnover after e3): p1's A was seen at e3 itself, at risk
    early = nd.classify(t, words, window=20, prefix_tokens=1, params=nd.NeedsParams(reserve_tokens=10))
    assert early.turnovers[0] == 3 and early.get("p1", "A").at_risk
    wide = nd.classify(t, words, window=1_000, params=nd.NeedsParams(reserve_tokens=10))
    assert wide.turnovers == () and not any(n.at_risk for n in wide.by_key.values())


def test_a_recorded_compaction_is_a_turnover_point():
    b = Builder()
    b.user("please fix GOALX")
    b.event(tr.FactEvent(t=b.t, id="G", category="goal", text="GOALX"))
    b.call("ok")
    b.event(tr.CompactEvent(t=b.t, trigger="manual"))
    b.event(tr.ProbeEvent(t=b.t, id="p", needs=["G"]))
    b.call("ok")
    needs = nd.classify(b.build(), words, window=10_000, params=nd.NeedsParams(reserve_tokens=0))
    assert needs.turnovers == (3,) and needs.get("p", "G").at_risk


def test_wilson_by_hand():
    # 8 of 10: p 0.8, z² 3.8415; centre (0.8 + 0.19207) / 1.38415 = 0.71674;
    # half 1.96 / 1.38415 · sqrt(0.016 + 0.0096037) = 0.22658
    lo, hi = nd.wilson(8, 10)
    assert lo == pytest.approx(0.4902, abs=1e-4) and hi == pytest.approx(0.9433, abs=1e-4)
    assert nd.wilson(0, 0) == (0.0, 1.0)
    lo, hi = nd.wilson(0, 5)   # 0 of 5: [0, z²/(n + z²)] = [0, 3.8415 / 8.8415]
    assert lo == 0.0 and hi == pytest.approx(0.4345, abs=1e-4)


def test_newcombe_by_hand():
    # 8/10 vs 2/10: Wilson [0.4902, 0.9433] and [0.0567, 0.5098]; d 0.6;
    # low 0.6 − sqrt(0.3098² + 0.3098²) = 0.1619, high 0.6 + sqrt(0.1433² + 0.1433²) = 0.8027
    d, lo, hi = nd.newcombe(8, 10, 2, 10)
    assert d == pytest.approx(0.6) and lo == pytest.approx(0.1619, abs=1e-4) and hi == pytest.approx(0.8027, abs=1e-4)
    d, lo, hi = nd.newcombe(5, 10, 4, 10)
    assert lo < 0 < hi   # within noise


def test_headline_counts_only_needs_at_risk():
    needs = nd.classify(tiny(), words, window=20, params=nd.NeedsParams(reserve_tokens=10))
    rows = [{"probe": "p1", "fact": "A", "where": "lost"},          # not at risk: not counted
            {"probe": "p2", "fact": "A", "where": "recoverable"},
            {"probe": "p2", "fact": "G", "where": "summary"}]
    h = nd.headline(rows, needs)
    assert (h["n"], h["verbatim"], h["summary"], h["pointer"], h["lost"]) == (2, 0, 1, 1, 0)
    # kept: the summary and the pointer carried both (KEPT: a pointer's re-read is billed, not lost)
    assert h["kept"] == 1.0 and h["goal"] == {"n": 1, "kept": 1} and h["constraints"] == {"n": 0, "kept": 0}
    assert h["kept_ci"] == pytest.approx(list(nd.wilson(2, 2)))
    # pooled over 3 seeds: counts summed, the interval on each need once (2 of 2)
    p = nd.pooled([h, h, h], 3)
    assert p["n"] == 6 and p["summary"] == 3 and p["kept_ci"] == pytest.approx(list(nd.wilson(2, 2)))
    lost = nd.headline([{**r, "where": "lost"} if r["where"] == "recoverable" else r for r in rows], needs)
    assert lost["kept"] == 0.5 and lost["kept_ci"] == pytest.approx(list(nd.wilson(1, 2)))


def test_compare_shows_needs_at_risk_pooled_over_seeds(tmp_path, capsys):
    import json

    from ctxsim.harness.cli import main

    from tests.test_recovery import compacted

    path, out = tmp_path / "t.jsonl", tmp_path / "rows.json"
    t = compacted()
    tr.write(tr.with_header(t, t.header.model_copy(update={"recorded": tr.RecordedSetting(window=200_000)})), path)
    assert main(["compare", str(path), "-s", "append_only,tests.test_recovery:RecordedClosedLoop", "--seeds", "2",
                 "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Needs at risk" in text and "Cost of forgetting" in text
    assert "- `append_only`: kept 4/4" in text and "- `tests.test_recovery:RecordedClosedLoop`: kept 0/4" in text   # 2 needs × 2 seeds
    rows = {r["strategy"]: r for r in json.loads(out.read_text())}
    assert rows["append_only"]["needs_at_risk"]["n"] == 4 and rows["append_only"]["needs_at_risk"]["seeds"] == 2
    # each need once: 2 of 2 kept vs 0 of 2 (Wilson [0.342, 1] and [0, 0.658])
    assert rows["append_only"]["needs_at_risk"]["kept_ci"] == pytest.approx(list(nd.wilson(2, 2)))
    loop = next(k for k in rows if k != "append_only")   # the JSON names a class by its strategy name
    assert "cost_with_recovery_usd" in rows[loop] and rows[loop]["recovery"]["violated"] == 1


def test_newcombe_paired_by_hand():
    # 16 needs: a 12 both keep, b 3 only the first, c 0, d 1. p1 15/16, p2 12/16, d 0.1875.
    # Wilson 15/16 [0.7167, 0.9889], 12/16 [0.5050, 0.8982]; ad − bc = 12 > n/2: φ = (12 − 8) / sqrt(15·1·12·4) = 0.1491
    # low 0.1875 − sqrt(0.2208² − 2·0.1491·0.2208·0.1482 + 0.1482²) = 0.1875 − sqrt(0.04875 − 0.00976 + 0.02196)
    #   = 0.1875 − 0.2469 = −0.0594
    d, lo, hi = nd.newcombe_paired(12, 3, 0, 1)
    assert d == pytest.approx(0.1875)
    assert lo == pytest.approx(-0.0594, abs=1e-4)
    # all discordant pairs one way and many of them: beyond noise
    d, lo, hi = nd.newcombe_paired(10, 8, 0, 2)
    assert lo > 0
    # no discordant pair: a difference of 0, the interval around it
    d, lo, hi = nd.newcombe_paired(10, 0, 0, 6)
    assert d == 0 and lo < 0 < hi


def test_break_even_calls_per_violation_by_hand():
    # cut: $10.00 with 5 violations a run, reference $12.00 with 1; a call of cut costs $0.05:
    # $2.00 / (4 violations × $0.05) = 10 calls of wasted work per violation reverse the order
    assert nd.break_even((10.0, 5.0), (12.0, 1.0), 0.05) == pytest.approx(10.0)
    assert nd.break_even((10.0, 1.0), (12.0, 1.0), 0.05) is None    # violates no more: nothing to reverse
    lines = nd.break_even_lines({"novacode": (12.0, 1.0), "cut": (10.0, 5.0), "dear": (13.0, 9.0)},
                                {"cut": 0.05, "dear": 0.05, "novacode": 0.04}, {})
    assert len(lines) == 3 and "`cut` stays cheaper than `novacode`" in lines[2] and "10.0 or more calls" in lines[2]


def test_break_even_reference_without_needs_at_risk_is_not_an_error():
    """No novacode in the compare and a strategy with no need at risk (kept is None): the reference is
    the one that keeps the most, the others count as keeping none."""
    lines = nd.break_even_lines({"a": (10.0, 5.0), "b": (12.0, 1.0)}, {"a": 0.05, "b": 0.05},
                                {"a": {"kept": None}, "b": {"kept": 0.5}})
    assert "`a` stays cheaper than `b`" in lines[2] and "10.0 or more calls" in lines[2]


# --- one honest figure per need (issue 43, item 1) ---------------------------------------------------

from ctxsim.strategies.recorded import Recorded  # noqa: E402


class TranscriptPointer(Recorded):
    """The recorded context, but its compaction leaves only a path back: the pre-compaction text is
    written to a file in the run's directory and the summary names it (as NovaCode's transcript and
    Claude Code's "read the full transcript at" do). Closed loop on."""

    name = "transcript_pointer"
    closed_loop = True

    def on_recorded_compact(self, trigger, summary, now):
        from ctxsim.harness.model.conversation import History, Message

        path = self.env.session_dir / "transcript.txt"
        path.write_text("\n".join(m.text for m in self.history), encoding="utf-8")
        self.history = History([Message.user(f"<summary>Earlier work. Read the full transcript at: {path}</summary>",
                                             origin="summary")])
        self.counters.compactions_succeeded += 1


def pointed(probability: float):
    from ctxsim.harness.replay.engine import RunConfig, replay

    from tests.test_recovery import compacted

    return replay(compacted(), TranscriptPointer, None,
                  RunConfig(window=200_000, readback_probability=probability,
                            recovery={"probability": {"read": 1.0, "rerun": 1.0}}))


def test_a_pointer_followed_is_kept_and_its_read_back_billed():
    # the goal GOALX and ALPHA_42 are only in the transcript file the summary names: followed
    # (probability 1), both are carried across by the pointer, one read-back billed, nothing violated
    r = pointed(1.0)
    h = r.metrics["needs_at_risk"]
    assert (h["n"], h["verbatim"], h["summary"], h["pointer"], h["lost"]) == (2, 0, 0, 2, 0)
    assert h["kept"] == 1.0 and h["unfollowed"] == 0
    assert r.metrics["readbacks"] == 1 and (r.calls["kind"] == "readback").sum() == 1
    assert r.metrics["recovery"]["violated"] == 0 and r.metrics["recovery"]["calls"] == 0


def test_a_pointer_not_followed_is_lost_and_never_both_kept_and_violated():
    # not followed (probability 0): no read-back, so the pointer carried nothing. Both needs are lost
    # (the pointer noted as unfollowed); the goal, which only the user gave, is violated and restated;
    # the file line is recovered by a billed re-read. Before: counted kept (pointer 2) and violated 1.
    r = pointed(0.0)
    h = r.metrics["needs_at_risk"]
    assert (h["n"], h["verbatim"], h["summary"], h["pointer"], h["lost"]) == (2, 0, 0, 0, 2)
    assert h["kept"] == 0.0 and h["unfollowed"] == 2 and r.metrics["readbacks"] == 0
    assert r.metrics["recovery"]["violated"] == 1 and r.metrics["recovery"]["restated"] == 1
    assert r.metrics["recovery"]["calls"] == 1
    assert list(r.probes["where"]) == ["unfollowed", "unfollowed"]
    # the probe table's own rule agrees with the headline, need by need
    assert [nd.WHERE[w] for w in r.probes["where"]] == ["lost", "lost"]


def test_a_read_back_not_made_leaves_the_need_lost():
    """ProbeScorer.unpaid: a pointer whose read-back was not made (its file unreadable, the session
    failed on the way) carried nothing; the other pointers of the call keep theirs."""
    from ctxsim.harness.retention.probe_scoring import ProbeScorer
    from ctxsim.harness.retention.scoring import FactScore

    s = ProbeScorer({}, None)
    s._row("p0", 0, FactScore("X", "file", "recoverable", 0.5, "/old", "p0"))   # an earlier call's: untouched
    mark = len(s.fact_scores)
    s._row("p", 1, FactScore("A", "file", "recoverable", 0.5, "/a", "p"))
    s._row("p", 1, FactScore("B", "file", "recoverable", 0.5, "/b", "p"))
    s._row("p", 1, FactScore("C", "file", "window", 0.9, None, "p"))
    s.unpaid(mark, {"/b"})
    assert [r["where"] for r in s.rows] == ["recoverable", "recoverable", "unfollowed", "window"]
    assert s.fact_scores[2].score == 0.0 and s.rows[2]["score"] == 0.0
    s.unpaid(mark)
    assert [r["where"] for r in s.rows] == ["recoverable", "unfollowed", "unfollowed", "window"]


def test_the_report_gives_the_break_even_of_forgetting():
    """Issue 43, item 6: the report's needs section, like compare, says how many wasted calls per
    violation would change the cost order. cut: $10 a run, 5 violations, 100 calls ($0.10 a call);
    novacode: $12, 1 violation: $2 / (4 × $0.10) = 5.0 calls."""
    from types import SimpleNamespace

    import pandas as pd
    from ctxsim.harness.report import needs_sections as ns
    from ctxsim.harness.sweep.tuning import Retention, Setting

    def setting(name, cost, kept):
        return Setting(name, name, name, 200_000, "", {}, {}, True, 2, cost, 0.0, 1.0,
                       Retention(kept, kept, kept), keys=[f"{name}-0", f"{name}-1"])

    runs = pd.DataFrame({"key": ["cut-0", "cut-1", "novacode-0", "novacode-1"],
                         "recovery.violated": [5, 5, 1, 1], "calls": [100, 100, 100, 100],
                         "cost_usd": [10.0, 10.0, 12.0, 12.0]})
    got = ns._break_even(SimpleNamespace(runs=runs), [setting("cut", 10.0, 0.5), setting("novacode", 12.0, 0.9)])
    para, bullets = got
    assert "median 10 calls, p90 52" in para.text
    (line,) = bullets.items
    assert line.startswith("`cut` stays cheaper than `novacode`") and "wastes 5.0 or more calls" in line
