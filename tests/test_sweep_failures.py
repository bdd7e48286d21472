"""Sweeps that fail say so (issue #19): a sweep whose runs raised exits 1 with the count, failed
runs are kept until --retry-failed asks for them again, and `report` survives a damaged run file
and flags results that do not cover the grid."""

from __future__ import annotations

import pytest
from ctxsim.harness.model import trace as tr
from ctxsim.harness.replay import engine
from ctxsim.harness.synth import generate, load_preset

from tests.fuzz.judge import run_cli


@pytest.fixture
def grid(tmp_path):
    t = tmp_path / "t.jsonl"
    tr.write(generate(load_preset("short", ["calls=8"]), 2), t)
    cfg = tmp_path / "g.toml"
    cfg.write_text(f'traces = ["{t}"]\nseeds = [0, 1]\n[[strategies]]\nname = "append_only"\n')
    return cfg, tmp_path / "sw"


def sweep(cfg, out, *extra):
    return run_cli(["sweep", str(cfg), "--out", str(out), "--workers", "1", "--no-progress", *extra])


def test_failed_runs_exit_1_with_the_count_and_are_retried_on_request(grid, monkeypatch):
    cfg, out = grid
    real = engine.replay

    def broken(*a, **k):
        raise RuntimeError("strategy bug")

    monkeypatch.setattr(engine, "replay", broken)
    o = sweep(cfg, out)
    assert o.status == 1 and "2 of 2 runs failed (first: RuntimeError: strategy bug)" in o.stderr
    monkeypatch.setattr(engine, "replay", real)
    again = sweep(cfg, out)     # resumed: the failed runs are results, kept as they are
    assert again.status == 1 and "0 to run" in again.stdout
    fixed = sweep(cfg, out, "--retry-failed")
    assert fixed.status == 0 and "2 failed before: retried" in fixed.stdout and "(0 failed;" in fixed.stdout


def test_report_survives_a_damaged_row_and_flags_partial_results(grid):
    cfg, out = grid
    assert sweep(cfg, out).status == 0
    import sqlite3

    with sqlite3.connect(out / "results.sqlite") as db:
        db.execute("UPDATE runs SET row = 'not json' WHERE key = (SELECT min(key) FROM runs)")
    o = run_cli(["report", str(out), "--no-ledger"])
    assert o.status == 0 and o.exception == "", o.stderr
    assert "Damaged results: 1 run could not be read from the store" in o.stderr
    assert "Partial results: 1 of 2 runs of the grid missing, 0 failed" in o.stderr


def test_a_sweep_refused_before_its_first_run_leaves_no_folder(grid, tmp_path):
    cfg, out = grid
    bad = tmp_path / "bad.toml"
    bad.write_text(cfg.read_text().replace('seeds = [0, 1]', 'seeds = [0]\nwindows = [0]'))
    o = sweep(bad, out)
    assert o.status == 2 and "windows" in o.stderr and not out.exists()
    o = sweep(cfg, out, "--limit", "-1")
    assert o.status == 2 and "--limit" in o.stderr and not out.exists()
