"""The consolidation lock on a real file (N-MEM-7: a lock that can be taken over when stale)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from ctxsim.strategies.novacode.lock import LockFile, LockInfo


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def foreign(path, acquired: float, pid: int | None = None, host: str | None = None) -> LockInfo:
    """A lock written by another agent (a live process of ours by default, so only age matters)."""
    info = LockInfo("theirs", pid if pid is not None else os.getppid(), host or socket.gethostname(), acquired, "other")
    path.write_text(info.dump())
    return info


def test_n_mem_7_lock_exclusive(tmp_path):
    clock = Clock(1000.0)
    a = LockFile(tmp_path / ".lock", clock)
    b = LockFile(tmp_path / ".lock", clock)
    assert a.acquire() and not b.acquire()
    assert a.release() and b.acquire()
    assert not (a.release())  # a no longer holds it
    assert (tmp_path / ".lock").exists()


def test_n_mem_7_stale_lock_taken_over(tmp_path):
    """N-MEM-7: a lock acquired 3,601 s ago with a 3,600 s stale limit is taken over."""
    path = tmp_path / ".lock"
    old = foreign(path, acquired=10_000.0 - 3_601.0)
    lk = LockFile(path, Clock(10_000.0), stale_after_s=3_600.0)
    assert lk.acquire()
    assert lk.took_over == old
    assert LockInfo.parse(path.read_text()).token == lk.token
    assert lk.release() and not path.exists()


def test_n_mem_7_fresh_lock_respected(tmp_path):
    """N-MEM-7: a lock 3,599 s old (under the 3,600 s limit) held by a live process is respected."""
    path = tmp_path / ".lock"
    foreign(path, acquired=10_000.0 - 3_599.0)
    lk = LockFile(path, Clock(10_000.0), stale_after_s=3_600.0)
    assert not lk.acquire()
    assert LockInfo.parse(path.read_text()).token == "theirs"
    assert not lk.release()  # never deletes someone else's lock
    assert path.exists()


def test_n_mem_7_dead_holder_on_this_host_is_stale(tmp_path):
    """A fresh lock whose holder process (on this host) has exited is stale at once."""
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(proc.stdout)
    path = tmp_path / ".lock"
    foreign(path, acquired=10_000.0, pid=dead)
    assert LockFile(path, Clock(10_000.0)).acquire()


def test_n_mem_7_holder_on_other_host_only_ages(tmp_path):
    """A pid on another host cannot be checked: only age makes it stale."""
    path = tmp_path / ".lock"
    foreign(path, acquired=10_000.0, pid=999_999_999, host="elsewhere")
    assert not LockFile(path, Clock(10_000.0)).acquire()


def test_taken_over_holder_cannot_delete_new_lock(tmp_path):
    """The old holder wakes up after being taken over: its release leaves the new holder's lock."""
    path = tmp_path / ".lock"
    clock = Clock(0.0)
    first = LockFile(path, clock, stale_after_s=60)
    assert first.acquire()
    clock.t = 61.0
    second = LockFile(path, clock, stale_after_s=60)
    assert second.acquire() and second.took_over.token == first.token
    assert not first.release()
    assert LockInfo.parse(path.read_text()).token == second.token


def test_unreadable_lock_ages_by_mtime(tmp_path):
    """A holder that died between create and write leaves an empty file: it ages from its mtime."""
    path = tmp_path / ".lock"
    path.write_text("")
    mtime = path.stat().st_mtime
    assert not LockFile(path, Clock(mtime + 10)).acquire()
    assert LockFile(path, Clock(mtime + 3_601)).acquire()


def test_context_manager_and_bad_config(tmp_path):
    with LockFile(tmp_path / "l", Clock(0.0)) as held:
        assert held and (tmp_path / "l").exists()
    assert not (tmp_path / "l").exists()
    with pytest.raises(ValueError, match="stale_after_s"):
        LockFile(tmp_path / "l", Clock(0.0), stale_after_s=0)


HOLDER = """
import sys, time
from pathlib import Path
from ctxsim.strategies.novacode.lock import LockFile
lk = LockFile(Path(sys.argv[1]), time.time)
print("held" if lk.acquire() else "refused", flush=True)
sys.stdin.readline()
lk.release()
"""


def test_n_mem_7_real_clock_across_processes(tmp_path):
    """The library on the real clock with a real second process: while another agent holds the lock
    it is refused; once that agent releases it, it is ours."""
    import time

    path = tmp_path / ".lock"
    root = str(Path(__file__).resolve().parents[2])
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, cwd=root, env={**os.environ, "PYTHONPATH": root})
    try:
        assert proc.stdout.readline().strip() == "held"
        mine = LockFile(path, time.time)
        assert not mine.acquire()
        proc.stdin.write("\n")
        proc.stdin.flush()
        assert proc.wait(timeout=30) == 0
        assert mine.acquire() and mine.release()
    finally:
        if proc.poll() is None:
            proc.kill()
