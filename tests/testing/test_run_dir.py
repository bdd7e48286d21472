"""The ``run_dir`` invariant: a strategy writes files only in its run's directory, whatever API it
writes with (harness/testing/writes.py: an audit hook sees open, os and shutil)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from ctxsim.harness.replay.engine import RunConfig
from ctxsim.harness.testing import check, record
from ctxsim.harness.testing.writes import watching

from tests.testing.mutants.keep_recent import CutLogInTemp, KeepRecent


def test_writes_outside_the_run_directory_are_noted_and_reads_and_writes_inside_are_not(tmp_path):
    run, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    run.mkdir()
    elsewhere.mkdir()
    (elsewhere / "old.txt").write_text("old")
    seen: list[tuple[str, str]] = []
    with watching(run, lambda event, path: seen.append((event, Path(path).name))):
        (run / "spill.txt").write_text("inside")                  # inside: fine
        (run / "sub").mkdir()
        os.replace(run / "spill.txt", run / "sub" / "spill.txt")
        (elsewhere / "old.txt").read_text()                       # a read: fine
        (elsewhere / "new.txt").write_text("x")                   # open for writing
        with open(elsewhere / "log", "a") as f:                   # append
            f.write("x")
        fd = os.open(elsewhere / "raw", os.O_CREAT | os.O_WRONLY)  # os.open with write flags
        os.close(fd)
        os.rename(elsewhere / "raw", elsewhere / "moved")          # both ends outside
        os.remove(elsewhere / "moved")
        os.mkdir(elsewhere / "d")
        shutil.copyfile(run / "sub" / "spill.txt", elsewhere / "copy")  # the copy's target only
        shutil.rmtree(elsewhere / "d")                            # and the os.rmdir it makes
    assert seen == [("open", "new.txt"), ("open", "log"), ("open", "raw"), ("os.rename", "raw"),
                    ("os.rename", "moved"), ("os.remove", "moved"), ("os.mkdir", "d"),
                    ("shutil.copyfile", "copy"), ("open", "copy"), ("shutil.rmtree", "d"), ("os.rmdir", "d")]
    # no watch, nothing noted
    (elsewhere / "after.txt").write_text("x")
    assert len(seen) == 11


def test_tempfiles_own_probe_of_its_directory_is_not_the_strategys(tmp_path, monkeypatch):
    """tempfile's first gettempdir() writes and removes a file of random name to see it can write
    there: not a file the strategy keeps."""
    monkeypatch.setattr(tempfile, "tempdir", None)   # forget the directory found before: probe again
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    run = tmp_path / "run"
    run.mkdir()
    seen: list[str] = []
    with watching(run, lambda event, path: seen.append(path)):
        assert tempfile.gettempdir() == str(tmp_path)
        with tempfile.NamedTemporaryFile(dir=run):     # a temporary file in the run: fine
            pass
    assert seen == []


def test_a_strategy_writing_a_log_at_a_fixed_temporary_path_breaks_run_dir_and_its_base_passes(
        tmp_path):
    """keep_recent's twin writes nothing outside its run; the mutant appends each cut to
    $TMPDIR/ctxsim-mutant-cuts.log: one violation (once per file), after the request that cut."""
    from ctxsim.harness.testing.scenarios import build

    trace = build("clear_then_crash", 32_000, KeepRecent, {})
    found = []
    for cls in (KeepRecent, CutLogInTemp):
        rec = record(trace, cls, {}, RunConfig(window=32_000, seed=0), session_dir=tmp_path / cls.__name__)
        found.append([v for v in check(rec) if v.invariant == "run_dir"])
    assert found[0] == []
    assert len(found[1]) == 1
    v = found[1][0]
    assert v.call >= 0 and "ctxsim-mutant-cuts.log" in v.detail and "(open, after this request)" in v.detail
