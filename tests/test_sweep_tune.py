"""``ctxsim tune`` (harness/sweep/tune.py, issue 42 item 3): the search space from a sweep file,
successive halving over sessions with the "clearly worse" rule worked out by hand, and a study that
resumes (a trial a killed tuner left running is proposed again)."""

from __future__ import annotations

import pytest
from ctxsim.harness.model import trace as tr
from ctxsim.harness.sweep import sessions as S
from ctxsim.harness.sweep import tune
from ctxsim.harness.sweep.grid import load_config
from ctxsim.harness.synth import generate, load_preset

from tests.fuzz.judge import run_cli

optuna = pytest.importorskip("optuna")


def test_rungs_grow_by_eta_up_to_every_session():
    assert tune.rungs(30) == [4, 12, 30]
    assert tune.rungs(36) == [4, 12, 36]
    assert tune.rungs(5) == [4, 5]
    assert tune.rungs(3) == [3]


def test_pareto_rank_sorts_fronts():
    # (cost, kept): (1, .9) and (2, .95) are the front; (2, .8) is beaten by (1, .9); (3, .7) by all
    assert tune.pareto_rank([(1, 0.9), (2, 0.95), (2, 0.8), (3, 0.7)]) == [0, 0, 1, 2]


def _trial(number, costs, kept=3, n=3):
    t = tune.Trial({"x": number}, number=number)
    t.cost = {f"s{i}": c for i, c in enumerate(costs)}
    t.needs = {f"s{i}": S.Needs(n=n, kept=kept) for i in range(len(costs))}
    return t


def test_a_trial_stops_only_when_outside_the_best_third_and_clearly_worse():
    on = [f"s{i}" for i in range(6)]
    good = [_trial(i, [1.0 + 0.01 * i + 0.001 * j for j in range(6)]) for i in range(3)]
    bad = _trial(9, [2.0 + 0.01 * j for j in range(6)])              # $1 more on every session, as many needs
    go, why = tune.keep_at_rung(bad, good, on)
    assert not go and why.startswith("outside the best 1/3 at 6 sessions and clearly worse than trial 0")
    # dearer, but it keeps more needs: not dominated, never stopped
    keeper = _trial(8, [2.0] * 6, kept=3, n=3)
    for g in good:
        g.needs = {s: S.Needs(n=3, kept=2) for s in on}
    assert tune.keep_at_rung(keeper, good, on) == (True, "")
    # dearer by noise only (cheaper on half the sessions): not clearly worse
    close = _trial(7, [1.0 + (0.05 if j % 2 else -0.05) for j in range(6)], kept=2)
    assert tune.keep_at_rung(close, good, on)[0]


def test_the_search_space_comes_from_the_grid_or_the_tune_table(tmp_path):
    (tmp_path / "g.toml").write_text('traces = ["x"]\n[[strategies]]\nname = "novacode"\n[strategies.grid]\n'
                                     'soft_margin = [13_000, 40_000, 80_000]\ncache_breakpoints = [true, false]\n')
    space = {s.name: s for s in tune.search_space(load_config(tmp_path / "g.toml"), "novacode")}
    assert (space["soft_margin"].low, space["soft_margin"].high, space["soft_margin"].step) == (13_000, 80_000, 1000)
    assert space["cache_breakpoints"].kind == "categorical" and space["cache_breakpoints"].choices == [True, False]
    (tmp_path / "h.toml").write_text('traces = ["x"]\n[[strategies]]\nname = "novacode"\n'
                                     '[tune]\nspace = {soft_margin = [3_000, 150_000]}\n')
    [s] = tune.search_space(load_config(tmp_path / "h.toml"), "novacode")
    assert (s.low, s.high, s.kind) == (3_000, 150_000, "int")
    (tmp_path / "i.toml").write_text('traces = ["x"]\n[[strategies]]\nname = "novacode"\n[tune]\nspace = {nope = [1, 2]}\n')
    with pytest.raises(Exception, match="tune.space.nope: not a parameter of novacode"):
        tune.search_space(load_config(tmp_path / "i.toml"), "novacode")


@pytest.fixture
def small(tmp_path):
    (tmp_path / "t").mkdir()
    for i in range(5):
        tr.write(generate(load_preset("short", ["calls=40"]), 30 + i), tmp_path / "t" / f"s{i}.jsonl")
    (tmp_path / "g.toml").write_text('name = "small"\ntraces = ["t"]\nwindows = [60_000]\nseeds = [0]\n'
                                     '[[strategies]]\nname = "novacode"\n[strategies.grid]\n'
                                     'soft_margin = [3_000, 8_000]\n')
    return tmp_path


def test_a_tune_runs_stores_its_study_and_resumes_a_trial_a_killed_tuner_left(small):
    out = small / "out"
    o = run_cli(["tune", str(small / "g.toml"), "--out", str(out), "--trials", "2", "--workers", "1"])
    assert o.status == 0, (o.stderr, o.exception)
    assert "tuning novacode at window 60,000 on 5 sessions (rungs 4, 5); 0 trial(s) already in the study, 2 to run" in o.stdout
    assert "trial 0 soft_margin=13000: $" in o.stdout   # the default, outside the range, is measured as it is
    assert (out / "study.sqlite").exists() and (out / "results.sqlite").exists()
    study = optuna.load_study(study_name="small-novacode-60000", storage=f"sqlite:///{out / 'study.sqlite'}")
    assert len(study.trials) == 2 and study.trials[0].user_attrs.get("default") is True
    # a tuner killed in the middle of a trial leaves it RUNNING in the study
    study.ask()
    o = run_cli(["tune", str(small / "g.toml"), "--out", str(out), "--trials", "4", "--workers", "1"])
    assert o.status == 0, (o.stderr, o.exception)
    assert "1 trial(s) left running by a killed tuner: marked failed and proposed again" in o.stdout
    assert "2 trial(s) already in the study, 2 to run" in o.stdout   # the failed one does not count
    states = [t.state.name for t in optuna.load_study(study_name="small-novacode-60000",
                                                      storage=f"sqlite:///{out / 'study.sqlite'}").trials]
    assert states.count("FAIL") == 1 and states.count("COMPLETE") + states.count("PRUNED") == 4
    rep = run_cli(["report", str(out), "--no-ledger"])   # the tuner's runs are a sweep's results
    assert rep.status == 0, rep.stderr


def test_a_tune_runs_its_sessions_on_dask_when_asked(small):
    """The same study on a Dask cluster gives the same trials' numbers as on local workers."""
    distributed = pytest.importorskip("distributed")
    cfg = load_config(small / "g.toml")
    local = tune.run_tune(cfg, small / "local", strategy="novacode", window=None, trials=2, base=small, workers=1,
                          log=lambda s: None)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cl, \
            distributed.Client(cl) as client:
        dk = tune.run_tune(cfg, small / "dask", strategy="novacode", window=None, trials=2, base=small,
                           executor="dask", client=client, log=lambda s: None)
    assert [t.params for t in local.trials] == [t.params for t in dk.trials]
    assert [t.cost for t in local.trials] == [t.cost for t in dk.trials]
