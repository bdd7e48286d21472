"""How a sweep's runs become tasks (harness/sweep/plan.py): runs of one trace together, split only as
far as the workers' balance needs, longest first; and what the executors hand back to the
coordinator (harness/sweep/executors.py): every run once, as it finishes, a failure row for the runs a
dead worker never returned."""

from __future__ import annotations

import os

import pytest
from ctxsim.harness.sweep import executors
from ctxsim.harness.sweep.grid import RunSpec
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


# --- what comes back to the coordinator ------------------------------------------------------------

def _spec(key: str, trace: str = "/nonexistent/trace.jsonl") -> RunSpec:
    return RunSpec(key, "append_only", "append_only", (), trace, "h", None, None, True, 0, False)


def test_a_run_that_raises_comes_back_as_a_row_with_its_error():
    """Its trace is missing: the row says so; nothing is written anywhere (the coordinator writes)."""
    (d,) = executors.run_batch([_spec("k")])
    assert d.key == "k" and d.row["error"].startswith("TraceError: /nonexistent/trace.jsonl: cannot read")
    assert d.probes is None and d.calls is None


def _dies_on(key: str):
    real = executors.run_one

    def run(sp):
        if sp.key == key:
            os._exit(9)
        return real(sp)
    return run


def test_the_pool_returns_each_run_once_and_fails_only_what_a_dead_worker_never_returned(monkeypatch):
    monkeypatch.setattr(executors, "run_one", _dies_on("b2"))   # forked workers inherit the patch
    batches = [[_spec("a1"), _spec("a2")], [_spec("b1"), _spec("b2"), _spec("b3")]]
    got = {d.key: d.row["error"] for d in executors.pool(batches, 2)}
    assert sorted(got) == ["a1", "a2", "b1", "b2", "b3"]
    assert "worker process died" in got["b2"] and "worker process died" in got["b3"]
    assert got["b1"].startswith("TraceError")   # finished before its worker died: its own row
