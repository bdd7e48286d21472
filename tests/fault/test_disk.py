"""A full disk (issue 31, case 5): every command that writes says so in one line naming the path
(exit 2), leaves no temporary file and no partial report folder; outputs honour the umask.

The full disk is a real one, a 300 KB tmpfs nearly filled, where this machine lets us mount one
(root on Linux); an injected writer that raises ENOSPC covers the rest everywhere."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import subprocess
import uuid
from pathlib import Path

import pytest
from ctxsim.harness.model import trace as tr
from ctxsim.harness.synth import generate, load_preset

from tests.fuzz.judge import run_cli

REAL = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces" / "real" / "claude-code" / "codemie" \
    / "session-196820da.jsonl"


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    d = tmp_path_factory.mktemp("disk")
    t = d / "t.jsonl"
    tr.write(generate(load_preset("short", ["calls=30"]), 0), t)
    g = d / "g.toml"
    g.write_text(f'traces = ["{t}"]\nseeds = [0]\n[[strategies]]\nname = "append_only"\n')
    assert run_cli(["sweep", str(g), "--out", str(d / "sw"), "--workers", "1", "--no-progress"]).status == 0
    return t, g, d / "sw"


@pytest.fixture
def full_disk(tmp_path):
    """A 300 KB tmpfs with 250 KB taken: room for a probe, not for an output."""
    mnt = tmp_path / f"full-{uuid.uuid4().hex[:6]}"
    mnt.mkdir()
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a tmpfs needs root")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=300k", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    try:
        (mnt / "filler").write_bytes(b"\0" * 250_000)
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


CASES = {
    "import": lambda t, g, sw, F: ["import", "claude-code", str(REAL), "-o", f"{F}/imp.jsonl", "--no-probes"],
    "synth": lambda t, g, sw, F: ["synth", "long-200k", "-o", f"{F}/s.jsonl"],
    "sweep": lambda t, g, sw, F: ["sweep", str(g), "--out", f"{F}/sw", "--workers", "1", "--no-progress"],
    "report": lambda t, g, sw, F: ["report", str(sw), "--out", f"{F}/rep"],
    "compare": lambda t, g, sw, F: ["compare", str(t), "--strategies", "append_only,novacode", "--report",
                                    f"{F}/cmp", "-q"],
    "transcript": lambda t, g, sw, F: ["run", str(t), "-s", "novacode", "--session-dir", f"{F}/sess", "-q"],
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_full_disk_is_one_line_naming_the_path(small, full_disk, case):
    if case == "import" and not REAL.exists():
        pytest.skip("the real logs (../shared/traces/real) are absent")
    o = run_cli(CASES[case](*small, full_disk))
    assert o.exception == "" and o.status == 2, (o.exception, o.stderr[-600:])
    assert len(o.error_lines) == 1 and "No space left on device" in o.stderr
    assert str(full_disk) in o.error_lines[0]              # the path the disk refused
    left = [p for p in full_disk.rglob("*") if p.name != "filler"]
    assert not [p for p in left if ".tmp" in p.name], left   # no temporary file
    if case in ("report", "compare"):
        assert not left, left                               # no partial report folder


def test_an_injected_enospc_is_exit_2_with_the_path_and_no_temp(small, tmp_path, monkeypatch):
    """Where no tmpfs can be mounted: the writer itself raises ENOSPC."""
    def full(self, *a, **k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Path, "write_text", full)
    o = run_cli(["synth", "short", "-o", str(tmp_path / "s.jsonl")])
    assert o.status == 2 and o.exception == "" and len(o.error_lines) == 1
    assert f"{tmp_path / 's.jsonl'}: cannot write: No space left on device" in o.stderr
    assert list(tmp_path.iterdir()) == []


def test_an_escaped_disk_error_is_one_line_not_a_traceback(tmp_path, monkeypatch):
    """A write outside the atomic path (a strategy's own file) that hits a full disk."""
    from ctxsim.harness.cli import synth as cli_synth

    def boom(args):
        raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT), str(tmp_path / "x"))

    monkeypatch.setattr(cli_synth, "run", boom)
    o = run_cli(["synth", "short", "-o", str(tmp_path / "s.jsonl")])
    assert o.status == 2 and o.exception == "" and f"{tmp_path / 'x'}: cannot write: Disk quota exceeded" in o.stderr


@pytest.mark.parametrize("mask,mode", [(0o077, 0o600), (0o022, 0o644), (0o002, 0o664)])
def test_outputs_honour_the_umask(tmp_path, mask, mode):
    from ctxsim.harness.files import atomic

    old = os.umask(mask)
    try:
        p = atomic.write_text(tmp_path / "out.txt", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(p.stat().st_mode) == mode


def test_a_rewritten_file_keeps_its_mode(tmp_path):
    from ctxsim.harness.files import atomic

    p = tmp_path / "private.jsonl"
    p.write_text("old")
    p.chmod(0o600)
    atomic.write_text(p, "new")
    assert stat.S_IMODE(p.stat().st_mode) == 0o600 and p.read_text() == "new"


def test_a_trace_of_a_private_log_stays_private(tmp_path):
    old = os.umask(0o077)
    try:
        o = run_cli(["synth", "short", "-o", str(tmp_path / "s.jsonl")])
    finally:
        os.umask(old)
    assert o.status == 0 and stat.S_IMODE((tmp_path / "s.jsonl").stat().st_mode) == 0o600
