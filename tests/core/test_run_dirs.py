"""Run directories (issue #19): per user, removed on any exit, a killed run's removed by the next
one, a reused --session-dir starts clean, and the per-user root costs the same tokens as the old
shared one (run numbers do not depend on who runs them)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from ctxsim.harness.provider.tokenizer import get_tokenizer
from ctxsim.harness.replay import engine, rundirs
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.harness.synth import generate, load_preset


@pytest.fixture(scope="module")
def short():
    return generate(load_preset("short"), 1)


@pytest.fixture
def own_root(tmp_path, monkeypatch):
    """A run root of this test's own: under the shared per-user root another process (a test worker,
    a user's sweep) takes the first free number as soon as a run's directory is removed, so "removed"
    could not be told from "removed and taken again" there (the flaky test of issue 44)."""
    root = tmp_path / "runs"
    monkeypatch.setattr(rundirs, "RUN_ROOT", root)
    return root


def test_root_is_per_user_and_tokenises_like_the_shared_one():
    uid = os.getuid()
    assert engine.RUN_ROOT.name == f"ctxsim{uid:06d}"
    tok = get_tokenizer()
    for u in (0, 1000, 65534, 999999):
        path = f"/tmp/ctxsim{u:06d}/run-000042/transcripts/s/transcript.jsonl"
        assert tok.count(path) == tok.count("/tmp/ctxsim-runs/run-000042/transcripts/s/transcript.jsonl")


def test_run_dir_removed_after_a_run_and_after_an_error(short, monkeypatch, own_root):
    used = []   # the directories these runs got
    fresh = rundirs.fresh_run_dir
    monkeypatch.setattr(rundirs, "fresh_run_dir", lambda: used.append(fresh()) or used[-1])
    replay(short, "novacode", None, RunConfig(window=60_000))

    def boom(self):
        raise RuntimeError("strategy bug")

    monkeypatch.setattr(engine._Run, "run", boom)
    with pytest.raises(RuntimeError):
        replay(short, "append_only", None, RunConfig())
    assert len(used) == 2 and all(d.parent == own_root for d in used)
    assert not any(d.exists() or d.with_suffix(".pid").exists() for d in used)


def test_a_killed_runs_dir_goes_at_the_next_run(short, own_root):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    d = rundirs.fresh_run_dir()
    (d / "spill.txt").write_text("left by a killed run")
    d.with_suffix(".pid").write_text(dead.stdout.strip())   # its process is gone
    replay(short, "append_only", None, RunConfig())
    assert not d.exists() and not d.with_suffix(".pid").exists()


def test_a_reused_session_dir_starts_clean(short, tmp_path):
    sd = tmp_path / "session"
    replay(short, "novacode", None, RunConfig(window=60_000, session_dir=sd))
    first = sorted(p.relative_to(sd) for p in sd.rglob("*") if p.is_file())
    (sd / "stale.txt").write_text("from an earlier run")
    replay(short, "novacode", None, RunConfig(window=60_000, session_dir=sd))
    again = sorted(p.relative_to(sd) for p in sd.rglob("*") if p.is_file())
    assert again == first and not (sd / "stale.txt").exists()


def test_a_session_dir_holding_other_files_is_refused_not_emptied(short, tmp_path):
    mine = tmp_path / "work"
    mine.mkdir()
    (mine / "notes.md").write_text("the user's own file")
    with pytest.raises(ValueError, match="not a ctxsim session folder"):
        replay(short, "append_only", None, RunConfig(session_dir=mine))
    assert (mine / "notes.md").read_text() == "the user's own file"
