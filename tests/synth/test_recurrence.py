"""The distance measure shared by real and synthetic traces (harness/synth/recurrence.py), on a
hand-built trace with token counts worked out by hand (one token per word)."""

from pathlib import Path

import pytest
from ctxsim.harness.model import trace as tr
from ctxsim.harness.synth import recurrence as R

REAL = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces" / "real"
words = lambda s: len(s.split())  # noqa: E731  (a hand-checkable tokenizer)


def a(t, text, *uses):
    content = [tr.TextContent(text=text)]
    content += [tr.ToolUseContent(id=i, name="Read", input={"file_path": p}) for i, p in uses]
    return tr.AssistantEvent(t=t, content=content)


def trace():
    h = tr.Header(name="hand")
    ev = [
        tr.UserEvent(t=0, text="fix src/app/main.py please now"),                     # 4 tokens, seen by call 0
        a(1, "reading it", ("u1", "src/app/main.py")),                               # call 0
        tr.ToolResultEvent(t=2, tool_use_id="u1", content="def load_config(): pass"),  # seen by call 1
        a(3, "ok", ("u2", "src/other.py")),                                          # call 1
        tr.ToolResultEvent(t=4, tool_use_id="u2", content="x y z"),
        tr.FactEvent(t=4, id="f1", category="file", text="x y z"),
        tr.ProbeEvent(t=5, id="p1", needs=["f1"]),
        a(5, "now load_config and src/app/main.py"),                                  # call 2
    ]
    return tr.Trace(h, ev)


def test_stream_positions_calls_and_distances_by_hand():
    t = trace()
    s = R.stream(t, count=words)
    # tool_use inputs count as their JSON: 'reading it\n{"file_path": "src/app/main.py"}' is 4 words
    assert s.kinds == ["user", "assistant", "result", "assistant", "result", "assistant"]
    assert s.start == [0, 4, 8, 11, 14, 17] and s.end == [4, 8, 11, 14, 17, 21]
    assert s.calls == [0, 0, 1, 1, 2, 2]
    uses = R.item_uses(s)
    # call 2 uses load_config (first in the result of call 0) and src/app/main.py (first in the user message);
    # "src/app/main.py" inside call 0's own input is a use too, of an item the user gave
    assert [(i, it) for i, it, _ in uses] == [(1, "src/app/main.py"), (3, "src/other.py"), (5, "load_config"),
                                               (5, "src/app/main.py")]
    d = {(x.item, x.first_tokens): x for x in R.distances(s, uses, first_from=("user", "result"))}
    # src/other.py first occurs in call 1 itself (an assistant event): not taken from outside, skipped
    assert set(d) == {("src/app/main.py", 0), ("load_config", 6), ("src/app/main.py", 13)}
    m = d[("src/app/main.py", 13)]           # entered with the user message (ends at 4), call 2 starts at 17
    assert (m.first_tokens, m.last_tokens) == (13, 9)    # last seen in call 0's input (ends at 8)
    assert (m.first_calls, m.last_calls) == (3, 2)       # seen by calls 0, 1, 2 / by calls 1, 2
    lc = d[("load_config", 6)]                # call 0's result ends at 11
    assert (lc.first_tokens, lc.last_tokens, lc.first_calls, lc.last_calls) == (6, 6, 2, 2)


def test_probe_uses_are_the_needed_facts_at_the_next_call():
    t = trace()
    s = R.stream(t, count=words)
    assert R.probe_uses(t, s) == [(5, "x y z", "file")]
    (d,) = R.distances(s, R.probe_uses(t, s))
    assert (d.first_tokens, d.last_tokens, d.first_calls, d.last_calls) == (0, 0, 1, 1)


def test_isolated_spans_are_not_the_main_context():
    h = tr.Header(name="span")
    ev = [tr.UserEvent(t=0, text="go"), tr.SubtaskStart(t=0, id="s", description="d", isolated=True),
          tr.UserEvent(t=0, text="inside words here"), a(0, "sub"), tr.SubtaskEnd(t=0, id="s", conclusion="c"),
          a(1, "main")]
    s = R.stream(tr.Trace(h, ev), count=words)
    assert s.texts == ["go", "main"] and s.calls == [0, 0]


def test_item_pattern_on_snippets():
    found = lambda text: [m.group(0) for m in R.ITEM.finditer(text) if len(m.group(0)) >= R.MIN_ITEM_CHARS]  # noqa: E731
    assert found("see src/click/core.py and get_default, ticket CLICK-2412, commit 1a2b3c4d") == [
        "src/click/core.py", "get_default", "CLICK-2412", "1a2b3c4d"]
    assert found("parseArgs in the Parser class, plain words") == ["parseArgs"]


def test_summary_quantiles_by_hand():
    ds = [R.Distance("i", "c", f, f // 10, 1, 1) for f in (1_000, 2_000, 3_000, 50_000, 120_000)]
    sm = R.summary(ds)
    assert sm["first_tokens"]["median"] == 3_000 and sm["first_tokens"]["over_40k"] == pytest.approx(0.4)
    assert sm["last_tokens"]["over_40k"] == 0.0 and sm["n"] == 5


@pytest.mark.skipif(not REAL.is_dir(), reason="real logs not present")
def test_the_recorded_reference_is_what_the_real_logs_give():
    pooled = [d for ds in R.real_distances(REAL).values() for d in ds]
    sm = R.summary(pooled)
    ref = R.REAL_REFERENCE
    assert sm["n"] == ref["n"]
    for k in ("first_tokens", "last_tokens", "first_calls", "last_calls"):
        assert sm[k]["median"] == ref[k]["median"] and sm[k]["p90"] == ref[k]["p90"]


# --- turnovers and needs at risk (issue 26) ---------------------------------------------------------

def _risk_trace():
    """One token per word, no system prompt or tools (prefix 0)."""
    h = tr.Header(name="risk")
    ev = [
        tr.UserEvent(t=0, text="keep src/app/main.py stable"),              # 0-3
        a(1, "reading now", ("u1", "src/app/main.py")),                     # 3-7 (text 2 + input JSON 2)
        tr.ToolResultEvent(t=2, tool_use_id="u1", content="def load_config(): pass"),   # 7-10
        a(3, "ok", ("u2", "src/other.py")),                                 # 10-13
        tr.ToolResultEvent(t=4, tool_use_id="u2", content="x y z"),         # 13-16
        a(5, "use load_config and src/other.py"),                           # 16-20: the use
    ]
    return tr.Trace(h, ev)


def test_turnovers_where_the_accumulated_context_passes_the_threshold():
    t = _risk_trace()
    s = R.stream(t, count=words)
    assert s.end == [3, 7, 10, 13, 16, 20]
    # threshold 9: 10 > 9 at the first result's end; the count restarts: 3, 6, then 10 > 9 at 20
    assert R.turnovers(t, s, 9, count=words, reserve=0) == [10, 20]
    # window 10 − reserve 5: 7 > 5; 3, 6 > 5 at 13; 3, 7 > 5 at 20
    assert R.turnovers(t, s, 10, count=words, reserve=5) == [7, 13, 20]
    assert R.turnovers(t, s, 100, count=words, reserve=0) == []


def test_a_use_is_at_risk_when_a_turnover_lies_after_its_last_sighting():
    t = _risk_trace()
    s = R.stream(t, count=words)
    ds = {d.item: d for d in R.distances(s, [(5, "load_config", "item"), (5, "src/other.py", "item")])}
    pts = R.turnovers(t, s, 9, count=words, reserve=0)    # [10, 20]
    # load_config last seen in the first result, which ends at 10, the turnover: at risk
    assert (ds["load_config"].use_start, ds["load_config"].last_tokens) == (16, 6) and R.at_risk(ds["load_config"], pts)
    # src/other.py last seen in call 1's input (ends at 13), after the turnover: not at risk
    assert ds["src/other.py"].last_tokens == 3 and not R.at_risk(ds["src/other.py"], pts)


def test_a_recorded_compaction_is_a_turnover_and_restarts_the_count():
    t = _risk_trace()
    ev = list(t.events)
    ev.insert(5, tr.CompactEvent(t=4, trigger="auto", pre_tokens=16, summary="two words"))  # before the last call
    t2 = tr.Trace(t.header, ev)
    s = R.stream(t2, count=words)
    # window 20: 16 < 20 by count; the compaction at 16; then 2 (summary) + 4 = 6
    assert R.turnovers(t2, s, 20, count=words, reserve=0) == [16]
    # window 14: the count passes 14 at 16, where the compaction is too: one point
    assert R.turnovers(t2, s, 14, count=words, reserve=0) == [16]


def test_risk_rows_by_hand():
    def d(last, use=100):
        return R.Distance("x", "file", last, last, 1, 1, use)
    rows = R.risk_rows([(d(500), False, []), (d(1_500), True, []), (d(5_000), False, []), (d(60_000), True, [])])
    by = {(r["lo"], r["hi"]): r for r in rows}
    assert (by[(0, 2_000)]["n"], by[(0, 2_000)]["at_risk"], by[(0, 2_000)]["risk_share"]) == (2, 1, 0.5)
    assert by[(2_000, 10_000)]["share"] == 0.25 and by[(2_000, 10_000)]["at_risk"] == 0
    assert (by[(50_000, 100_000)]["n"], by[(50_000, 100_000)]["risk_share"]) == (1, 1.0)
    assert by[(100_000, None)]["n"] == 0
    assert (rows[-1]["n"], rows[-1]["at_risk"], rows[-1]["risk_share"]) == (4, 2, 0.5)


def test_across_row_counts_uses_after_a_turnover_that_reach_back_across_it():
    pts = [100]
    before = R.Distance("a", "file", 150, 20, 1, 1, 200)    # entered at 50, before the turnover at 100
    fresh = R.Distance("b", "file", 50, 20, 1, 1, 200)      # entered at 150, after it
    early = R.Distance("c", "file", 10, 5, 1, 1, 80)        # a use before any turnover: not counted
    r = R.across_row([(before, False, pts), (fresh, False, pts), (early, False, pts)])
    assert (r["after"], r["across"], r["across_share"], r["at_risk"]) == (2, 1, 0.5, 0)
