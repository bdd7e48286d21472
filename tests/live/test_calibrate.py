"""Summariser calibration (harness/calibration/summariser.py) and `ctxsim calibrate` against the loopback."""

from __future__ import annotations

import json

import pytest
from ctxsim.harness.calibration.summariser import SummaryCall, calibration, kept, outcomes
from ctxsim.harness.cli import main
from ctxsim.harness.model.trace import FactEvent
from loopback import keeping_responder


def fact(fid, category, text):
    return FactEvent(t=0, id=fid, category=category, text=text)


FACTS = {
    "g": fact("g", "goal", "Goal: port the billing job to Postgres 16 (ticket BIL-4417)."),
    "f": fact("f", "file", "MAX_BATCH_ROWS = 5000"),
    "e": fact("e", "error", "KeyError: 'tenant_id' in load_batch() with code E2211"),
}


def test_verbatim_paraphrase_and_loss():
    assert kept("MAX_BATCH_ROWS = 5000", "config: max_batch_rows = 5000 (batch size)") == (True, True)
    # a paraphrase that keeps every number and identifier survives, not verbatim
    assert kept(FACTS["e"].text, "load_batch() raised KeyError on 'tenant_id' (E2211)") == (False, True)
    assert kept(FACTS["e"].text, "load_batch() failed on a missing key") == (False, False)


def test_outcomes_generations_and_calibration_by_hand():
    """Run r: summary 0 reads all three facts and keeps the goal (verbatim) and the file value
    (paraphrased); summary 1 reads summary 0's text (goal, file) and keeps only the goal.
    goal: present 2, survived 2 (generations 1 then 2); file: present 2, survived 1;
    error: present 1, survived 0. Overall 5 present, 3 survived: rate 0.6.
    Squeeze: 40000 / 2000 = 20 (bin 10-30) for call 0; 9000 / 100 = 90 (bin 30+) for call 1."""
    src0 = "\n".join(f.text for f in FACTS.values())
    sum0 = FACTS["g"].text + "\nBatch size stays MAX_BATCH_ROWS = 5000."
    sum1 = FACTS["g"].text
    calls = [SummaryCall("r", 0, src0, sum0, 40_000, 2_000), SummaryCall("r", 1, sum0, sum1, 9_000, 100)]
    outs = outcomes(calls, FACTS)
    assert [(o.fact, o.compaction, o.generation, o.survived) for o in outs] == [
        ("g", 0, 1, True), ("f", 0, 1, True), ("e", 0, 1, False), ("g", 1, 2, True), ("f", 1, 2, False)]
    cal = calibration(calls, {"r": FACTS}, model="m", strategy="novacode", traces=[{"name": "t", "content_hash": "h"}])
    assert cal["format"] == "ctxsim-summary-calibration" and cal["version"] == 1 and cal["compactions"] == 2
    assert set(cal["survival"]) == {"goal", "constraint", "decision", "error", "file", "preference", "feedback"}
    assert cal["survival"]["goal"] == {"present": 2, "survived": 2, "verbatim": 2, "rate": 1.0}
    assert cal["survival"]["file"] == {"present": 2, "survived": 1, "verbatim": 1, "rate": 0.5}
    assert cal["survival"]["error"]["rate"] == 0.0 and cal["survival"]["constraint"]["rate"] is None
    assert cal["overall"] == {"present": 5, "survived": 3, "verbatim": 3, "rate": 0.6}
    assert [(b["lo"], b["hi"], b["present"]) for b in cal["by_squeeze"]] == [(0.0, 10.0, 0), (10.0, 30.0, 3),
                                                                              (30.0, None, 2)]
    assert [(g["generation"], g["present"], g["survived"]) for g in cal["by_generation"]] == [(1, 3, 2), (2, 2, 1)]
    assert cal["summary_input_tokens"] == {"median": 24_500.0, "p90": 40_000.0}


@pytest.mark.usefixtures("live_env")
def test_ctxsim_calibrate_live_then_replay(live_env, tmp_path, capsys):
    """The loopback 'summariser' keeps the goal, constraint and decision lines and drops the rest, so the
    measured survival is 1.0 for those categories and 0.0 for the others, by construction. The
    same command in replay mode, with the server gone, writes the same numbers."""
    pytest.importorskip("ctxsim.strategies.novacode.strategy", reason="NovaCode strategy (task D) not in the tree yet")
    from ctxsim.harness.model import trace as tr
    from ctxsim.harness.synth import generate, load_preset

    short = generate(load_preset("short", ["calls=60"]), 0)   # 60 calls of real content: it compacts at 60k
    src = tmp_path / "short.jsonl"
    tr.write(short, src)
    keep = {f.text[:30] for f in short.facts().values() if f.category in ("goal", "constraint", "decision")}
    live_env.responder = keeping_responder(tuple(sorted(keep)))
    store, out = tmp_path / "store.jsonl", tmp_path / "cal.json"
    assert main(["calibrate", str(src), "--window", "60000", "--llm", "live", "--llm-store", str(store),
                 "-o", str(out)]) == 0
    cal = json.loads(out.read_text())
    # the summary requests (NovaCode's other side calls, memory extraction and selection, reach the
    # server too)
    n = sum("create a detailed summary" in json.dumps(b["messages"][-1]) for b in live_env.bodies("messages"))
    assert cal["compactions"] == n >= 1 and cal["model"] == "claude-sonnet-4-6" and cal["strategy"] == "novacode"
    rates = {k: v["rate"] for k, v in cal["survival"].items() if v["present"]}
    assert rates["goal"] == 1.0
    assert all(rates[k] == 1.0 for k in ("goal", "constraint", "decision") if k in rates)
    surv = cal["survival"]
    # by construction nothing else is kept verbatim: the loopback keeps only the lines above
    assert all(surv[k]["verbatim"] == 0 for k in ("error", "file", "feedback", "preference") if surv[k]["present"])
    assert all(rates[k] == 0.0 for k in ("error", "preference") if k in rates)
    # A paraphrase that keeps every identifier and number survives (calibration.kept), and real content
    # shares identifiers: the kept root-cause decisions quote the changed line of code, so a file fact
    # of that line survives, the other file lines are lost; the one feedback, "read `Group.group` in
    # `src/click/core.py` before you edit it", has exactly those two identifiers, both in the kept
    # decision "Root cause: ... in `Group.group` (src/click/core.py:1934) ...", so it survives each
    # summary it is in as a paraphrase (6 of 6 here, never verbatim). In the word-salad traces facts
    # were unique codes and shared nothing: there both rates were 0.
    assert 0.0 < rates["file"] < 1.0
    assert rates["feedback"] == 1.0
    assert "goal" in capsys.readouterr().out
    # tokenizer scale: count_tokens on each summary request (the loopback counts ceil(chars / 4))
    counted = [a[2]["input_tokens"] for a in live_env.answers if a[0] == "count_tokens"]
    ts = cal["token_scale"]
    assert ts["requests"] == n == len(counted) and ts["api_tokens"] == sum(counted)
    assert ts["scale"] == round(ts["api_tokens"] / ts["local_tokens"], 4) and 0.5 < ts["scale"] < 2
    live_env.close()

    again = tmp_path / "again.json"
    assert main(["calibrate", str(src), "--window", "60000", "--llm", "replay", "--llm-store", str(store),
                 "-o", str(again), "-q"]) == 0
    a, b = json.loads(again.read_text()), cal
    a.pop("created"), b.pop("created")
    assert a == b


def test_ctxsim_calibrate_bad_input(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert main(["calibrate", "short", "--llm", "live", "-o", str(tmp_path / "c.json")]) == 2
    assert "ANTHROPIC_API_KEY" in capsys.readouterr().err
    assert main(["calibrate", "short", "--llm", "replay", "-o", str(tmp_path / "c.json")]) == 2
    assert "--llm-store" in capsys.readouterr().err
    assert main(["calibrate", "no-such-preset", "--llm", "simulated", "-o", str(tmp_path / "c.json")]) == 2


def test_the_simulated_summariser_loads_what_calibrate_writes(tmp_path):
    """Round trip with harness/llm/simulated.py (task B): the rates written are the rates loaded."""
    import ctxsim.harness.llm.simulated as simllm

    if not hasattr(simllm, "load_calibration"):
        pytest.skip("ctxsim.harness.llm.simulated.load_calibration not in the tree yet")
    src = "\n".join(f.text for f in FACTS.values())
    calls = [SummaryCall("r", 0, src, FACTS["g"].text, 10_000, 500)]
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(calibration(calls, {"r": FACTS}, model="m", strategy="novacode", traces=[])))
    # goal kept (1/1), file and error lost (0/1 each); other categories not measured (null: skipped)
    assert simllm.load_calibration(path) == {"goal": 1.0, "file": 0.0, "error": 0.0}


def test_max_compactions_bounds_the_spend(tmp_path):
    """60 calls of `short` at 60k compact twice under NovaCode; --max-compactions 1 stops after the
    first summary (the simulated summariser here: no API, no token scale)."""
    pytest.importorskip("ctxsim.strategies.novacode.strategy", reason="NovaCode strategy (task D) not in the tree yet")
    from ctxsim.harness.model import trace as tr
    from ctxsim.harness.synth import generate, load_preset

    src = tmp_path / "short.jsonl"
    tr.write(generate(load_preset("short", ["calls=60"]), 0), src)
    out = tmp_path / "c.json"
    assert main(["calibrate", str(src), "--window", "60000", "--llm", "simulated", "--max-compactions", "1",
                 "-o", str(out), "-q"]) == 0
    cal = json.loads(out.read_text())
    assert cal["compactions"] == 1 and cal["model"] == "simulated" and "token_scale" not in cal
    assert [g["generation"] for g in cal["by_generation"]] == [1]
