"""Retention intervals over seeds × probes, paired differences, the seed's reorderings, and the
multi-seed compare / sweep / report that use them (harness/sweep/uncertainty.py)."""

import json

import numpy as np
import pandas as pd
import pytest
from ctxsim.harness.sweep import uncertainty as un


def table(rows):
    return pd.DataFrame(rows, columns=["probe", "fact", "category", "score"])


def test_probe_block_weights_and_sums_by_hand():
    """Probe p1 needs a goal (weight 2) and a file fact (1), p2 a file fact; two seeds."""
    s0 = table([("p1", "g", "goal", 0.5), ("p1", "f", "file", 0.2), ("p2", "h", "file", 0.8)])
    s1 = table([("p1", "g", "goal", 0.0), ("p1", "f", "file", 0.2), ("p2", "h", "file", 0.6)])
    b = un.probe_block([s0, s1], [0, 1], {"goal": 2.0, "file": 1.0})
    assert b.weights.tolist() == [3.0, 1.0]
    assert b.scores.tolist() == [[2 * 0.5 + 0.2, 0.8], [0.2, 0.6]]
    # seed 0: (1.2 + 0.8) / 4 = 0.5; seed 1: (0.2 + 0.6) / 4 = 0.2; the estimate is their mean
    assert un.point([b]) == pytest.approx(0.35)


def test_an_interval_has_no_width_when_nothing_varies():
    t = table([(f"p{i}", f"f{i}", "file", 0.4) for i in range(20)])
    b = un.probe_block([t, t, t], [0, 1, 2], {})
    assert un.interval([b]) == pytest.approx((0.4, 0.4, 0.4))


def test_the_interval_covers_seed_and_probe_noise_and_is_reproducible():
    rng = np.random.default_rng(3)
    tabs = [table([(f"p{i}", f"f{i}", "file", float(rng.random())) for i in range(200)]) for _ in range(3)]
    b = un.probe_block(tabs, [0, 1, 2], {})
    est, lo, hi = un.interval([b])
    assert lo < est < hi and 0.4 < est < 0.6
    # 3 x 200 uniform scores: sd of the mean about sqrt(1/12 / 600) = 0.012 -> a 95% width near 0.05
    assert 0.02 < hi - lo < 0.12
    assert un.interval([b]) == (est, lo, hi)


def test_paired_difference_cancels_what_both_share():
    rng = np.random.default_rng(5)
    base = [table([(f"p{i}", f"f{i}", "file", float(rng.random())) for i in range(100)]) for _ in range(3)]
    lower = [t.assign(score=t["score"] - 0.05) for t in base]
    a = [un.probe_block(base, [0, 1, 2], {})]
    b = [un.probe_block(lower, [0, 1, 2], {})]
    d = un.difference(a, b)
    assert d == pytest.approx((0.05, 0.05, 0.05))  # exactly 0.05 lower on every probe: no noise at all
    assert not un.within_noise(d)
    assert un.within_noise(un.difference(a, a))
    # unpaired, the two intervals overlap heavily although the difference is certain
    ea, la, ha = un.interval(a)
    eb, lb, hb = un.interval(b)
    assert la < hb


def test_seed_flips_name_the_seeds_that_reverse_an_order():
    def blk(scores):
        return [un.probe_block([table([("p", "f", "file", s)]) for s in scores], [0, 1, 2], {})]

    flips = un.seed_flips({"a": blk([0.9, 0.2, 0.9]), "b": blk([0.5, 0.5, 0.5])})
    assert flips == [("a", "b", [1])]
    lines = un.noise_lines({"a": blk([0.9, 0.2, 0.9]), "b": blk([0.5, 0.5, 0.5])})
    assert any("seed 1 ranks `b` first" in ln for ln in lines)
    assert any("No seed reorders" in ln for ln in un.noise_lines({"a": blk([0.9] * 3), "b": blk([0.1] * 3)}))


def test_mean_metrics_over_seeds():
    runs = [{"calls": 10, "cost_usd": 1.0, "completed": True, "retention": {"score": 0.5, "probes": 4}, "model": "m"},
            {"calls": 10, "cost_usd": 3.0, "completed": False, "retention": {"score": 0.7, "probes": 4}, "model": "m"}]
    m = un.mean_metrics(runs)
    assert m == {"calls": 10, "cost_usd": 2.0, "completed": False, "retention": {"score": pytest.approx(0.6), "probes": 4},
                 "model": "m"}
    assert isinstance(m["calls"], int)


def test_assumptions_list_every_constant_with_a_source():
    rows = un.assumption_rows({"summary_fidelity": 0.5})
    names = {n for n, _, _ in rows}
    assert {"retention.summary_fidelity", "retention.category_weights", "summariser.survival_model",
            "summariser.chars_per_token", "summariser.fact_share"} <= names
    assert dict((n, v) for n, v, _ in rows)["retention.summary_fidelity"] == "0.5"
    assert all(src for _, _, src in rows)


# --- the commands ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def trace_file(tmp_path_factory):
    from ctxsim.harness.model import trace as tr
    from ctxsim.harness.synth import generate, load_preset

    path = tmp_path_factory.mktemp("unc") / "t.jsonl"
    tr.write(generate(load_preset("short"), 0), path)
    return path


def test_compare_runs_three_seeds_and_reports_an_interval(trace_file, tmp_path, capsys):
    from ctxsim.harness.cli import main

    out = tmp_path / "rows.json"
    assert main(["compare", str(trace_file), "-s", "novacode,cut_no_summary", "--window", "30000",
                 "--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert [r["strategy"] for r in rows] == ["novacode", "cut_no_summary"]
    for r in rows:
        assert r["seeds"] == [0, 1, 2] and len(r["per_seed"]) == 3
        lo, hi = r["retention"]["ci95"]
        assert lo <= r["retention"]["score"] <= hi
    shown = capsys.readouterr().out
    assert "3 seeds" in shown and ("within noise" in shown or " is above " in shown)
    assert main(["compare", str(trace_file), "-s", "novacode", "--seeds", "0"]) == 2


def test_sweep_varies_retention_constants_and_keeps_probe_scores(trace_file, tmp_path):
    from ctxsim.harness.report.build import write_report
    from ctxsim.harness.sweep.grid import SweepError, load_config, load_probes, run_sweep

    cfg_path = tmp_path / "s.toml"
    cfg_path.write_text(f'traces = ["{trace_file}"]\nwindows = [30000]\n[retention]\nsummary_fidelity = [0.9, 0.5]\n'
                        '[[strategies]]\nname = "novacode"\n[[strategies]]\nname = "append_only"\n')
    cfg = load_config(cfg_path)
    assert cfg.seeds == [0, 1, 2]  # the default
    df = run_sweep(cfg, tmp_path / "out", workers=1, progress=False, log=lambda _s: None)
    assert len(df) == 2 * 2 * 3 and set(df["param.retention.summary_fidelity"]) == {0.9, 0.5}
    probes = load_probes(tmp_path / "out", df["key"])
    assert len(probes) == len(df)
    rep = write_report(df, tmp_path / "rep", probes=probes, target=0.1)
    md = (rep / "report.md").read_text()
    assert "## Retention: intervals, noise and seeds" in md and "## Assumptions" in md
    assert "`retention.summary_fidelity` ∈ {0.5, 0.9}" in md
    assert "<h2>Assumptions</h2>" in (rep / "index.html").read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(f'traces = ["{trace_file}"]\n[retention]\nsummary_fidelity = [2.0]\n[[strategies]]\nname = "novacode"\n')
    with pytest.raises(SweepError, match="retention.summary_fidelity"):
        load_config(bad)
    bad.write_text(f'traces = ["{trace_file}"]\n[summariser]\nnope = [1]\n[[strategies]]\nname = "novacode"\n')
    with pytest.raises(SweepError, match="summariser.nope"):
        load_config(bad)
