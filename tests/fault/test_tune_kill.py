"""``kill -9`` of ``ctxsim tune`` mid-study (issue 42, item 3): the next run takes the folder's lock
over, marks the trial it left running failed, proposes its parameters again, and ends with as many
finished trials as asked; a second tuner on the folder meanwhile is refused."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ctxsim.harness.model import trace as tr
from ctxsim.harness.synth import generate, load_preset

from tests.fuzz.judge import run_cli

optuna = pytest.importorskip("optuna")
REPO = Path(__file__).resolve().parents[2]
TRIALS = 6


def _finished(study_db: Path) -> int:
    try:
        with sqlite3.connect(f"file:{study_db}?mode=ro", uri=True, timeout=1) as db:
            return db.execute("SELECT count(*) FROM trials WHERE state IN ('COMPLETE', 'PRUNED')").fetchone()[0]
    except sqlite3.Error:
        return 0


def test_a_tune_killed_mid_study_resumes_where_it_stopped(tmp_path):
    (tmp_path / "t").mkdir()
    for i in range(5):
        tr.write(generate(load_preset("short", ["calls=60"]), 40 + i), tmp_path / "t" / f"s{i}.jsonl")
    (tmp_path / "g.toml").write_text('name = "k"\ntraces = ["t"]\nwindows = [60_000]\nseeds = [0]\n'
                                     '[[strategies]]\nname = "novacode"\n[strategies.grid]\n'
                                     'soft_margin = [3_000, 20_000]\ntail_min_tokens = [5_000, 15_000]\n')
    out = tmp_path / "out"
    cmd = [sys.executable, "-c", "import sys; from ctxsim.harness.cli import main; sys.exit(main())", "tune",
           str(tmp_path / "g.toml"), "--out", str(out), "--trials", str(TRIALS), "--workers", "1"]
    p = subprocess.Popen(cmd, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        t0 = time.monotonic()
        while _finished(out / "study.sqlite") < 2 and time.monotonic() - t0 < 300:
            time.sleep(0.2)
        assert _finished(out / "study.sqlite") >= 2, "no trial finished"
        busy = run_cli(["tune", str(tmp_path / "g.toml"), "--out", str(out), "--trials", str(TRIALS)])
        assert busy.status == 2 and "is in use by another sweep" in busy.stderr
        p.send_signal(signal.SIGKILL)
        p.wait()
    finally:
        if p.poll() is None:
            p.kill()
    o = run_cli(["tune", str(tmp_path / "g.toml"), "--out", str(out), "--trials", str(TRIALS), "--workers", "1"])
    assert o.status == 0 and o.exception == "", (o.stderr, o.exception)
    assert "no longer running): taken over" in o.stdout
    study = optuna.load_study(study_name="k-novacode-60000", storage=f"sqlite:///{out / 'study.sqlite'}")
    states = [t.state.name for t in study.trials]
    assert states.count("COMPLETE") + states.count("PRUNED") == TRIALS   # a failed trial does not count
    if "left running by a killed tuner" in o.stdout:   # killed inside a trial: it is proposed again
        failed = [t for t in study.trials if t.state.name == "FAIL"]
        # proposed again with what it had drawn (all of it, or what it had drawn when killed)
        assert failed and any(failed[0].params.items() <= t.params.items() for t in study.trials
                              if t.state.name != "FAIL")
