"""How a sweep's runs become tasks (harness/sweep/plan.py): runs of one trace together, split only as
far as the workers' balance needs, longest first; and the client's bookkeeping of what workers wrote
(harness/sweep/grid.py ``settle`` / ``settle_failed``)."""

from __future__ import annotations

import os
import time

import pandas as pd
import pytest
from ctxsim.harness.sweep.grid import RunSpec, run_batch, settle, settle_failed
from ctxsim.harness.sweep.plan import plan
from hypothesis import given
from hypothesis import strategies as st


def _runs(spec: dict[str, int]) -> list[tuple[str, int]]:
    """(trace, i) for i in range(n) per trace, in the order given."""
    return [(t, i) for t, n in spec.items() for i in range(n)]


def _plan(spec, sizes, workers):
    return plan(_runs(spec), lambda r: r[0], lambda t: sizes[t], workers)


def test_six_equal_traces_of_three_runs_on_two_workers_are_six_tasks_of_a_trace():
    # a task of n runs of a trace of size s costs s * (n + 1): 6 x 100 x 4 = 2400 in all; the cap is
    # 2400 / (2 x 2) = 600, so 600/100 - 1 = 5 runs fit a task: each trace's 3 runs stay together
    tasks = _plan({f"t{i}": 3 for i in range(6)}, {f"t{i}": 100 for i in range(6)}, 2)
    assert [[r[0] for r in t] for t in tasks] == [[f"t{i}"] * 3 for i in range(6)]


def test_one_trace_of_sixteen_runs_on_two_workers_is_cut_in_six_longest_first():
    # 100 x 17 = 1700 in all, cap 425: 4.25 - 1 -> 3 runs a task, ceil(16 / 3) = 6 tasks of 3,3,3,3,2,2
    tasks = _plan({"t": 16}, {"t": 100}, 2)
    assert [len(t) for t in tasks] == [3, 3, 3, 3, 2, 2]
    assert [r for t in tasks for r in t] == _runs({"t": 16})   # every run once, in order


def test_three_runs_of_one_trace_on_two_workers_are_three_tasks():
    # 100 x 4 = 400, cap 100: no run fits beside a warm-up, so a run a task (at least one)
    assert [len(t) for t in _plan({"t": 3}, {"t": 100}, 2)] == [1, 1, 1]


def test_one_worker_gets_a_task_per_trace_the_biggest_first():
    tasks = _plan({"small": 5, "big": 2, "mid": 2}, {"small": 10, "big": 1000, "mid": 100}, 1)
    # costs: small 10 x 6 = 60, big 1000 x 3 = 3000, mid 100 x 3 = 300
    assert [t[0][0] for t in tasks] == ["big", "mid", "small"] and [len(t) for t in tasks] == [2, 2, 5]


def test_a_big_trace_is_split_and_its_parts_go_first():
    # big: 1000 x (4 + 1) = 5000, small: 10 x (4 + 1) = 50, total 5050, cap 5050 / 4 = 1262.5:
    # 1.2625 - 1 -> 1 run a task for big (4 tasks of 2000), small stays whole (126 - 1 >= 4)
    tasks = _plan({"small": 4, "big": 4}, {"small": 10, "big": 1000}, 2)
    assert [(t[0][0], len(t)) for t in tasks] == [("big", 1)] * 4 + [("small", 4)]


@given(st.dictionaries(st.sampled_from("abcdef"), st.integers(1, 20), min_size=1),
       st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 10_000)), st.integers(1, 8))
def test_every_run_once_tasks_of_one_trace_longest_first(spec, sizes, workers):
    size = {t: sizes.get(t, 1) for t in spec}
    tasks = _plan(spec, size, workers)
    assert sorted(r for t in tasks for r in t) == sorted(_runs(spec))
    assert all(len({r[0] for r in t}) == 1 and t for t in tasks)
    cost = [max(size[t[0][0]], 1) * (len(t) + 1) for t in tasks]
    assert cost == sorted(cost, reverse=True)
    if workers == 1:
        assert len(tasks) == len(spec)


def test_no_workers_is_an_error():
    with pytest.raises(ValueError, match="at least 1"):
        _plan({"t": 1}, {"t": 1}, 0)


# --- the client's bookkeeping ---------------------------------------------------------------------

def _spec(key: str, trace: str = "/nonexistent/trace.jsonl") -> RunSpec:
    return RunSpec(key, "append_only", "append_only", (), trace, "h", None, None, True, 0, False)


def test_settle_leaves_the_file_the_worker_wrote_and_writes_what_it_cannot_see(tmp_path):
    row = {"key": "k1", "label": "x", "error": "", "cost_usd": 1.5}
    path = tmp_path / "runs" / "k1.parquet"
    path.parent.mkdir()
    pd.DataFrame([{"key": "k1", "mark": "worker"}]).to_parquet(path)
    st_ = path.stat()
    settle(row, (st_.st_size, st_.st_mtime_ns), tmp_path)   # the very file: left alone
    assert pd.read_parquet(path)["mark"].tolist() == ["worker"]
    settle(row, (st_.st_size + 1, st_.st_mtime_ns), tmp_path)   # another file (the worker's own folder)
    assert "mark" not in pd.read_parquet(path) and pd.read_parquet(path)["cost_usd"].tolist() == [1.5]
    settle({**row, "key": "k2"}, None, tmp_path)   # the worker could not write: the client does
    assert pd.read_parquet(tmp_path / "runs" / "k2.parquet")["key"].tolist() == ["k2"]


def test_a_failed_task_keeps_the_runs_its_worker_finished_and_fails_the_rest(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    pd.DataFrame([{"key": "old", "error": "boom"}]).to_parquet(runs / "old.parquet")
    os.utime(runs / "old.parquet", ns=(0, 0))   # a failure from an earlier sweep (retried now)
    since = time.time_ns()
    pd.DataFrame([{"key": "done", "error": ""}]).to_parquet(runs / "done.parquet")
    rows = settle_failed([_spec("done"), _spec("old"), _spec("never")], "died", tmp_path, since - 10**9)
    assert [(r["key"], r["error"]) for r in rows] == [("done", ""), ("old", "died"), ("never", "died")]
    assert pd.read_parquet(runs / "done.parquet")["error"].tolist() == [""]
    assert pd.read_parquet(runs / "old.parquet")["error"].tolist() == ["died"]


def test_run_batch_writes_each_run_and_reports_the_file(tmp_path):
    """A run that raises (its trace is missing) is still a written row, with the file's stat."""
    (row, written), = run_batch([_spec("k")], str(tmp_path))
    assert row["error"].startswith("TraceError: /nonexistent/trace.jsonl: cannot read")
    p = tmp_path / "runs" / "k.parquet"
    assert written == (p.stat().st_size, p.stat().st_mtime_ns)
