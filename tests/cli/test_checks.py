"""Outputs are checked before any work and written all or nothing (issue #19)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ctxsim.harness.cli import BadInput, checks


def test_output_probe_refuses_what_os_access_lets_root_through():
    if not Path("/proc").is_dir():
        pytest.skip("no /proc")
    with pytest.raises(BadInput, match=r"--json /proc/m.json: cannot write in /proc"):
        checks.output("--json", "/proc/m.json")


def test_output_is_never_an_input_nor_under_a_file(tmp_path):
    src = tmp_path / "log.jsonl"
    src.write_text("{}\n")
    with pytest.raises(BadInput, match="that is an input of this command"):
        checks.output("-o", src, sources=[src])
    with pytest.raises(BadInput, match="is a file, so x.json cannot be created under it"):
        checks.output("--json", src / "x.json")
    assert checks.output("--json", tmp_path / "new" / "m.json") == tmp_path / "new" / "m.json"
    assert not (tmp_path / "new").exists()   # checking creates nothing


def test_atomic_write_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "out.csv"
    target.write_text("old\n")

    def half(p: Path) -> None:
        p.write_text("partial")
        raise RuntimeError("writer failed")

    with pytest.raises(RuntimeError):
        checks.atomic_write(target, half)
    assert target.read_text() == "old\n" and sorted(tmp_path.iterdir()) == [target]


def test_run_json_refused_before_the_replay_leaves_no_calls(tmp_path):
    from tests.fuzz.judge import run_cli

    t = tmp_path / "t.jsonl"
    assert run_cli(["synth", "short", "--set", "calls=6", "-o", str(t)]).status == 0
    o = run_cli(["run", str(t), "-s", "append_only", "-q", "--calls", str(tmp_path / "c.csv"),
                 "--json", str(t / "m.json")])
    assert o.status == 2 and "--json" in o.stderr and not (tmp_path / "c.csv").exists()
