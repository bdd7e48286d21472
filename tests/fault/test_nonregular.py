"""A device, a fifo or an endless file where ctxsim reads a file (issue 44 fresh, case 25): a
trace, ``--models``, a sweep file, ``--llm-store``. Before: ``/dev/zero`` was read until memory ran
out (``internal error: MemoryError``, exit 1; without a limit, the machine's memory) and a fifo
blocked until killed. Now each is refused before a byte is read, one line naming the file, exit 2;
and what a read holds at once is capped (a file read whole, a line of a JSON-lines file)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from ctxsim.harness.files import regular
from ctxsim.harness.model import trace as tr

from tests.fuzz.judge import run_cli
from tests.helpers_traces import Builder

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/dev/zero and fifos")


def _trace(tmp_path: Path) -> Path:
    p = tmp_path / "t.jsonl"
    tr.write(Builder().user("fix the parser").call("reading", results=["def parse(): pass"]).call("done").build(), p)
    return p


def _sweep(tmp_path: Path, trace: Path) -> Path:
    s = tmp_path / "s.toml"
    s.write_text(f'traces = ["{trace}"]\nwindows = [200000]\nseeds = [0]\n\n[[strategies]]\nname = "append_only"\n')
    return s


def _limited(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``ctxsim ARGV`` in a child limited to 1.5 GB of address space and 60 s: an unbounded read
    fails there (MemoryError) instead of taking the machine's memory."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1_500_000_000, 1_500_000_000))

    return subprocess.run([sys.executable, "-m", "ctxsim.harness.cli", *argv], cwd=cwd, capture_output=True,
                          text=True, timeout=60, preexec_fn=limit)


def _one_line(p: subprocess.CompletedProcess | object, *words: str) -> str:
    err = p.stderr
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in err and "MemoryError" not in err, err[-800:]
    assert all(w in lines[0] for w in words), lines[0]
    return lines[0]


@pytest.mark.parametrize("case", ["validate", "run", "models", "sweep", "llm-store", "import", "preset"])
def test_dev_zero_is_refused_as_not_a_regular_file(tmp_path, case):
    t = _trace(tmp_path)
    argv = {"validate": ["validate", "/dev/zero"],
            "run": ["run", "/dev/zero", "-s", "append_only", "-q"],
            "models": ["run", str(t), "-s", "append_only", "-q", "--models", "/dev/zero"],
            "sweep": ["sweep", "/dev/zero", "--out", str(tmp_path / "o"), "--workers", "1", "--no-progress"],
            "llm-store": ["run", str(t), "-s", "append_only", "-q", "--llm", "replay", "--llm-store", "/dev/zero"],
            "import": ["import", "swe-agent", "/dev/zero", "-o", str(tmp_path / "o")],
            "preset": ["synth", "/dev/zero", "-o", str(tmp_path / "o")]}[case]
    p = _limited(argv, tmp_path)
    assert p.returncode == 2, (p.returncode, p.stderr[-800:])
    _one_line(p, "/dev/zero", "not a regular file", "character device")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("case", ["validate", "models", "sweep", "llm-store", "import"])
def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path, case):
    """Before: the command blocked on open until killed."""
    t = _trace(tmp_path)
    ff = tmp_path / "ff"
    os.mkfifo(ff)
    argv = {"validate": ["validate", str(ff)],
            "models": ["run", str(t), "-s", "append_only", "-q", "--models", str(ff)],
            "sweep": ["sweep", str(ff), "--out", str(tmp_path / "o"), "--workers", "1", "--no-progress"],
            "llm-store": ["run", str(t), "-s", "append_only", "-q", "--llm", "replay", "--llm-store", str(ff)],
            "import": ["import", "claude-code", str(ff), "-o", str(tmp_path / "o")]}[case]
    o = run_cli(argv, limit_s=20)
    assert o.exception == "" and o.status == 2, (o.exception, o.stderr)
    _one_line(o, str(ff), "not a regular file", "fifo")


def test_a_line_longer_than_the_cap_is_refused_at_its_line(tmp_path, monkeypatch):
    """A regular file ends, but one line of it is what a read holds: past the cap it is refused
    with file:line (the cap made small here: 64 MiB by default)."""
    t = _trace(tmp_path)
    lines = t.read_text().splitlines()
    monkeypatch.setattr(regular, "MAX_LINE_BYTES", max(len(x) for x in lines) + 10)
    assert run_cli(["validate", str(t)]).status == 0
    lines[2] = lines[2][:-1] + ', "pad": "' + "x" * 200 + '"}'
    big = tmp_path / "big.jsonl"
    big.write_text("\n".join(lines) + "\n")
    o = run_cli(["validate", str(big)])
    assert o.status == 2, o.stderr
    _one_line(o, f"{big}:3", "longer than")


def test_a_file_read_whole_is_capped(tmp_path, monkeypatch):
    monkeypatch.setattr(regular, "MAX_WHOLE_BYTES", 1000)
    s = _sweep(tmp_path, _trace(tmp_path))
    s.write_text(s.read_text() + "#" * 2000 + "\n")
    o = run_cli(["sweep", str(s), "--out", str(tmp_path / "o"), "--workers", "1", "--no-progress"])
    assert o.exception == "" and o.status == 2, (o.exception, o.stderr)
    _one_line(o, str(s), "larger than 1,000 bytes")
    assert not (tmp_path / "o").exists()


def test_a_link_to_a_regular_file_is_a_regular_file(tmp_path):
    t = _trace(tmp_path)
    link = tmp_path / "link.jsonl"
    link.symlink_to(t)
    assert run_cli(["validate", str(link)]).status == 0
    with regular.open_regular(link) as fh:
        assert fh.read() == t.read_bytes()
