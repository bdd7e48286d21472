"""Sweeps: identical numbers on 1 worker, 2 workers and a Dask cluster; resumable; reports."""

import struct
from pathlib import Path

import pandas as pd
import pytest
from ctxsim.harness.model import trace as tr
from ctxsim.harness.report.build import write_report
from ctxsim.harness.sweep.grid import SweepError, load_config, run_sweep

from tests.helpers_traces import Builder

GRID = """
name = "t"
traces = ["trace.jsonl"]
windows = [30_000, 1_000_000]
seeds = [0, 1]
[[strategies]]
name = "novacode"
[strategies.grid]
soft_margin = [3_000, 5_000, 8_000]
tail_min_tokens = [2_000, 4_000]
[[strategies]]
name = "append_only"
[strategies.grid]
cache_breakpoints = [true, false]
"""


@pytest.fixture(scope="module")
def grid_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("sweep")
    b = Builder().user("make the importer stream its input")
    for i in range(40):
        b.call(f"step {i}", [f"output {i}\n" + "def handler(event):\n    return event\n" * 60])
    tr.write(b.call("done").build(), d / "trace.jsonl")
    (d / "grid.toml").write_text(GRID)
    return d


def _rows(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=["run_s", "run_cpu_s"], errors="ignore").sort_values("key").reset_index(drop=True)


@pytest.fixture(scope="module")
def one_worker(grid_dir):
    return run_sweep(load_config(grid_dir / "grid.toml"), grid_dir / "w1", base=grid_dir, workers=1,
                     progress=False, log=lambda s: None)


def test_same_rows_on_one_two_workers_and_dask(grid_dir, one_worker):
    cfg = load_config(grid_dir / "grid.toml")
    one = one_worker
    assert len(one) == 2 * 2 * (6 + 2) == 32  # windows x seeds x (novacode grid + append_only grid)
    assert (one["error"] == "").all()
    two = run_sweep(cfg, grid_dir / "w2", base=grid_dir, workers=2, progress=False, log=lambda s: None)
    pd.testing.assert_frame_equal(_rows(one), _rows(two))
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        dk = run_sweep(cfg, grid_dir / "dask", base=grid_dir, executor="dask", client=client, progress=False,
                       log=lambda s: None)
    pd.testing.assert_frame_equal(_rows(one), _rows(dk))


def test_interrupted_sweep_resumes_to_the_same_rows(grid_dir, one_worker):
    cfg = load_config(grid_dir / "grid.toml")
    whole = one_worker
    part = run_sweep(cfg, grid_dir / "part", base=grid_dir, workers=1, progress=False, limit=10, log=lambda s: None)
    assert len(part) == 10  # stopped after 10 runs, as an interrupted sweep would
    logs = []
    resumed = run_sweep(cfg, grid_dir / "part", base=grid_dir, workers=1, progress=False, log=logs.append)
    assert "10 already done, 22 to run" in logs[-1]
    pd.testing.assert_frame_equal(_rows(whole), _rows(resumed))


def test_bad_grid_fails_before_running(tmp_path):
    (tmp_path / "g.toml").write_text('traces = ["x.jsonl"]\n[[strategies]]\nname = "novacode"\n[strategies.grid]\nsoft_margn = [1]\n')
    with pytest.raises(Exception, match="soft_margn"):
        load_config(tmp_path / "g.toml")
    (tmp_path / "h.toml").write_text('traces = ["nothing-*.jsonl"]\n[[strategies]]\nname = "append_only"\n')
    with pytest.raises(SweepError, match="matches no file"):
        run_sweep(load_config(tmp_path / "h.toml"), tmp_path / "o", base=tmp_path, progress=False, log=lambda s: None)


def _is_png(p: Path) -> bool:
    data = p.read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return False
    w, h = struct.unpack(">II", data[16:24])
    return w > 100 and h > 100


def test_report_from_a_small_sweep(grid_dir, one_worker):
    df = one_worker
    from ctxsim.harness.sweep.analysis import compaction_ledger
    from ctxsim.harness.sweep.grid import load_calls

    ledger = compaction_ledger(tr.load(grid_dir / "trace.jsonl"), 30_000, [3_000, 8_000])
    assert ledger["trigger_tokens"].tolist() == [30_000 - 20_000 - 3_000, 30_000 - 20_000 - 8_000]  # N-COMP-1, 2
    out = write_report(df, grid_dir / "report", calls=load_calls(grid_dir / "w1", df["key"]), ledger=ledger)
    figs = sorted((out / "figures").glob("*.png"))
    names = [f.name for f in figs]
    # this trace has no facts: no retention or Pareto figure; every other one is there
    for want in ("01-cost", "02-context-per-call", "03-cache-hit-rate", "04-latency", "07-windows", "08-compaction-ledger"):
        assert any(n.startswith(want) for n in names), want
    assert all(_is_png(f) for f in figs)
    md = (out / "report.md").read_text()
    html = (out / "index.html").read_text()
    for f in figs:
        assert f"figures/{f.name}" in md
    assert html.count("data:image/png;base64,") == len(figs)
    assert "## Summary" in md and "<h2>Summary</h2>" in html


def test_a_parameter_name_two_strategies_type_differently_still_writes(tmp_path):
    """``compaction`` is a bool in one strategy and "auto" in another: the store keeps each value's
    type (a JSON row per run), results.parquet still writes (harness/sweep/columns.py) and the report
    reads the bool back."""
    from ctxsim.harness.sweep import columns
    from ctxsim.harness.sweep.analysis import changed_params
    from ctxsim.harness.sweep.grid import load_results
    from ctxsim.harness.sweep.store import Store

    with Store.open(tmp_path) as db:
        db.set_grid([("x", f"k{i}", {}) for i in range(3)], {}, {})
        for i, v in enumerate([True, "auto", False]):
            db.write_run(f"k{i}", f"b{i}", {}, {"key": f"k{i}", "param.compaction": v, "error": ""})
    df = load_results(tmp_path)
    assert df["param.compaction"].tolist() == [True, "auto", False]
    columns.encode(df).to_parquet(tmp_path / "r.parquet")
    assert columns.decode(pd.read_parquet(tmp_path / "r.parquet"))["param.compaction"].tolist() == [True, "auto", False]
    assert changed_params({"strategy": "unregistered", "param.compaction": "true"}) == {"compaction": True}


def test_a_strategy_given_as_module_and_class_runs_as_its_registered_name_does(grid_dir, one_worker, tmp_path):
    """A sweep takes what `run` takes: MODULE:CLASS of the user's own, here the registered
    append_only's class, which must give the registered name's numbers."""
    (tmp_path / "trace.jsonl").write_bytes((grid_dir / "trace.jsonl").read_bytes())
    (tmp_path / "g.toml").write_text('name = "mc"\ntraces = ["trace.jsonl"]\nwindows = [30_000]\nseeds = [0]\n'
                                     '[[strategies]]\nname = "ctxsim.strategies.append_only:AppendOnly"\n')
    got = run_sweep(load_config(tmp_path / "g.toml"), tmp_path / "o", base=tmp_path, workers=1, progress=False,
                    log=lambda s: None)
    mine = got[got["error"] == ""].iloc[0]
    ref = one_worker[(one_worker["strategy"] == "append_only") & (one_worker["window_setting"] == 30_000)
                     & (one_worker["seed"] == 0) & (one_worker["param.cache_breakpoints"] == False)].iloc[0]  # noqa: E712 (the default)
    assert mine["cost_usd"] == ref["cost_usd"] and mine["strategy"] == "ctxsim.strategies.append_only:AppendOnly"
    with pytest.raises(Exception, match="nope"):
        (tmp_path / "b.toml").write_text('traces = ["trace.jsonl"]\n[[strategies]]\nname = "ctxsim.strategies.append_only:nope"\n')
        load_config(tmp_path / "b.toml")


def test_results_are_the_grid_s_own_after_a_changed_grid_in_the_same_folder(grid_dir, one_worker, tmp_path):
    """A grid changed and re-run into the same folder: the store still holds the old grid's runs;
    the results are this grid's only (and a run both grids ask for is not done again)."""
    import shutil

    from ctxsim.harness.sweep.grid import load_results

    out = tmp_path / "w"
    shutil.copytree(grid_dir / "w1", out)
    (tmp_path / "trace.jsonl").write_bytes((grid_dir / "trace.jsonl").read_bytes())
    (tmp_path / "g.toml").write_text(GRID.replace("windows = [30_000, 1_000_000]", "windows = [30_000]"))
    logs = []
    got = run_sweep(load_config(tmp_path / "g.toml"), out, base=tmp_path, workers=1, progress=False, log=logs.append)
    assert "16 runs in the grid, 16 already done, 0 to run" in logs[-1]
    assert len(got) == 16 and set(got["key"]) < set(one_worker["key"])
    assert len(load_results(out)) == 16
