"""A population is the unit (issue 42): sessions drawn from what real logs show, each with its own
seed (harness/synth/population.py); ``synth --sessions``, a sweep's ``population:PRESET:N`` and
``--with``, and ``compare`` over a folder answer about the population."""

from __future__ import annotations

import json
import math

import pytest
from ctxsim.harness.model import trace as tr
from ctxsim.harness.synth import population as pop
from ctxsim.harness.synth.distributions import LogNormal

from tests.fuzz.judge import run_cli


def test_a_session_s_shape_is_its_own_whatever_the_population_size():
    five, three = pop.draw(5, 7, 200_000), pop.draw(3, 7, 200_000)
    assert [s.seed for s in five] == [7, 8, 9, 10, 11]
    assert three == five[:3]


def test_at_1m_every_session_turns_the_window_over_twice_or_three_times():
    d = pop.draw(40, 1, 1_000_000)
    assert {s.turnovers for s in d} <= {2, 3} and all(s.calls <= pop.MAX_CALLS for s in d)
    assert {s.turnovers for s in pop.draw(200, 1, 200_000)} == {1, 2, 3, 6}   # every real count, at 200k


def test_the_calls_a_session_needs_for_its_turnovers():
    """Growth fixed at 2,000 tokens a call and two turnovers at 200k: the first at 167,000 − 2,300 =
    164,700 tokens, each later cycle 167,000 − 41,322 = 125,678, and a share u in [0.1, 0.9] of the
    next: 164,700 + (1 + u) · 125,678 tokens, 151.5–201.7 → 152–202 calls."""
    shape = pop.Shape(growth=LogNormal(median=2000, p90=2000), calls_per_turn=LogNormal(median=4, p90=4),
                      turnovers={2: 1}, tool_mix=dict(pop.FITTED.tool_mix), concentration=13.2, post_turnover=41_322,
                      sessions=1, source="test")
    d = pop.draw(50, 1, 200_000, shape)
    assert all(s.turnovers == 2 and s.growth == 2000 for s in d)
    assert 152 <= min(s.calls for s in d) and max(s.calls for s in d) <= 202
    assert max(s.calls for s in d) - min(s.calls for s in d) > 20   # u does spread them


def test_the_content_scale_inverts_the_measured_growth():
    for scale, growth in pop.GROWTH_BY_SCALE.items():
        assert pop.scale_for(growth) == pytest.approx(scale)
    assert pop.scale_for(1_071.0) == pytest.approx(1.5)   # halfway between 771 (1.0) and 1,371 (2.0)
    xs = [pop.scale_for(g) for g in range(300, 6_000, 50)]
    assert all(b > a for a, b in zip(xs, xs[1:]))


def test_the_overrides_scale_every_content_size_together():
    from ctxsim.harness.synth import load_preset

    base = load_preset("long-200k")
    s = pop.Session(0, 1, 120, 1, 2000.0, 3.0, {"bash": 0.5, "read": 0.5}, scale=2.0)
    sets = dict(x.split("=", 1) for x in s.overrides(base))
    assert sets["calls"] == "120" and sets["tool_mix.read"] == "0.50000"
    assert float(sets["result_chars.read.median"]) == pytest.approx(2 * base.result_chars["read"].median, abs=0.1)
    assert float(sets["text_chars.p90"]) == pytest.approx(2 * base.text_chars.p90, abs=0.1)
    assert float(sets["calls_per_turn.p90"]) / float(sets["calls_per_turn.median"]) == pytest.approx(
        base.calls_per_turn.p90 / base.calls_per_turn.median, rel=1e-3)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    d = tmp_path_factory.mktemp("pop")
    o = run_cli(["synth", "short", "--sessions", "3", "--seed", "5", "-o", str(d / "sessions"), "--workers", "1"])
    assert o.status == 0, o.stderr
    return d / "sessions", o.stdout


def test_synth_sessions_writes_a_population_each_with_its_seed(folder):
    d, out = folder
    files = sorted(d.glob("*.jsonl"))
    assert [f.name for f in files] == ["short-s5.jsonl", "short-s6.jsonl", "short-s7.jsonl"]
    for f, s in zip(files, pop.draw(3, 5, 200_000), strict=True):
        t = tr.load(f)
        assert t.header.meta["seed"] == s.seed and t.header.meta["population"]["turnovers"] == s.turnovers
        assert t.calls == s.calls
    assert "3 sessions of short for a 200,000 window (seeds 5-7)" in out


def test_compare_over_a_folder_answers_about_the_population(folder, tmp_path):
    d, _ = folder
    o = run_cli(["compare", str(d), "--strategies", "novacode,cut_no_summary", "--window", "200000", "--workers", "1",
                 "--json", str(tmp_path / "rows.json"), "--target", "0"])
    assert o.status == 0, o.stderr
    assert "2 strategies on 3 traces" in o.stdout and "95% intervals over sessions" in o.stdout
    assert "Window 200,000, short (3 sessions," in o.stdout
    assert "n = 3 sessions" in o.stdout and "detection limit" in o.stdout
    rows = json.loads((tmp_path / "rows.json").read_text())
    assert len(rows) == 6   # one row per session and strategy


def test_a_sweep_runs_a_population_and_a_folder_given_with_with(folder, tmp_path):
    d, _ = folder
    cfg = tmp_path / "g.toml"
    cfg.write_text('traces = ["population:short:2"]\nwindows = [200000]\nseeds = [0]\n'
                   '[[strategies]]\nname = "cut_no_summary"\n')
    o = run_cli(["sweep", str(cfg), "--out", str(tmp_path / "sw"), "--workers", "1", "--no-progress",
                 "--with", f"200000={d}"])
    assert o.status == 0, o.stderr
    assert "5 runs in the grid" in o.stdout   # 2 drawn sessions + the 3 of the folder
    made = sorted(p.name for p in (tmp_path / "sw" / "traces" / "population-short-200000").glob("*.jsonl"))
    assert made == ["short-s1.jsonl", "short-s2.jsonl"]
    bad = run_cli(["sweep", str(cfg), "--out", str(tmp_path / "sw2"), "--with", "300000=x"])
    assert bad.status == 2 and "not one of the grid's windows" in bad.stderr
    bad = run_cli(["sweep", str(cfg), "--out", str(tmp_path / "sw2"), "--with", "200000=population:short:x"])
    assert bad.status == 2 and "population:PRESET:SESSIONS" in bad.stderr and bad.exception == ""


def test_a_malformed_population_is_refused_before_any_run(tmp_path):
    cfg = tmp_path / "g.toml"
    cfg.write_text('traces = ["population:nosuch:3"]\n[[strategies]]\nname = "append_only"\n')
    o = run_cli(["sweep", str(cfg), "--out", str(tmp_path / "sw")])
    assert o.status == 2 and "population:nosuch" in o.stderr and not (tmp_path / "sw").exists()
    assert math.isfinite(pop.FITTED.growth.median)
