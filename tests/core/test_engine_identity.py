"""The engine's numbers do not move (issue 30): the metrics, per-call and per-probe rows of every
registered strategy on a small set of sessions hash to what tests/data/engine_hashes.json holds.

A change that legitimately moves numbers regenerates that file with one command:
``python -m tests.tools.engine_hashes --write`` (or ``make engine-hashes``); the diff of the JSON
then shows which strategies and sessions moved."""

from __future__ import annotations

import json

import pytest

from tests.tools import engine_hashes as eh


@pytest.mark.parametrize("case", eh.SMALL, ids=[c.name for c in eh.SMALL])
def test_every_strategy_replays_to_the_recorded_hashes(case):
    if case.real is not None and not (eh.REAL / case.real).exists():
        pytest.skip("the real logs (../shared/traces/real) are absent")
    expected = {k: v for k, v in json.loads(eh.SMALL_FILE.read_text()).items() if k.startswith(case.name + "/")}
    got = dict(eh.run_case(case))
    assert expected, f"no hashes for {case.name}: run python -m tests.tools.engine_hashes --write"
    diffs = eh.compare(expected, got)
    assert not diffs, "numbers moved (regenerate with python -m tests.tools.engine_hashes --write if meant):\n" + "\n".join(diffs)


def test_run_directory_paths_are_normalised():
    assert eh._norm("/tmp/ctxsim001000/run-000042/spill/a.txt") == "/tmp/ctxsimUID/run-N/spill/a.txt"
    assert eh._norm({"a": [0.1, float("nan")]}) == {"a": ["0.1", "nan"]}
