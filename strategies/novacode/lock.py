"""A lock file that can be taken over when stale (N-MEM-7: the consolidation lock).

Background consolidation must not run twice at once (two agents in the same project, two terminals),
but a lock left behind by a crashed agent must not block it forever. The lock is a real file created
with ``O_CREAT | O_EXCL`` (atomic on every local filesystem) holding who took it and when. It is
*stale* when it is older than ``stale_after_s`` by the injected clock, or when its holder was on this
host and its process no longer exists. A stale lock is taken over by atomically replacing the file
with our own record (write to a temporary file, ``os.replace``) and reading it back: when two
agents race to take over the same stale lock, the last writer wins and the other sees a record that
is not its own and backs off. Release removes the file only if it is still ours.

The clock is injected (``time.time`` for a real agent, the simulator's clock in a replay), so a
replay is deterministic and a test can age a lock without sleeping.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxsim.harness.files import confined

# N-MEM-7 says "a lock that can be taken over when stale" without a figure. Assumption (documented,
# a parameter): one hour, longer than any consolidation call, short enough that a crash costs at
# most one missed consolidation window.
DEFAULT_STALE_AFTER_S = 3600.0


@dataclass(frozen=True)
class LockInfo:
    """What a lock file says about its holder."""

    token: str
    pid: int
    host: str
    acquired: float
    owner: str = ""

    @staticmethod
    def parse(text: str) -> LockInfo | None:
        try:
            d = json.loads(text)
            return LockInfo(str(d["token"]), int(d["pid"]), str(d["host"]), float(d["acquired"]),
                            str(d.get("owner", "")))
        except (ValueError, KeyError, TypeError):
            return None

    def dump(self) -> str:
        return json.dumps({"token": self.token, "pid": self.pid, "host": self.host,
                           "acquired": self.acquired, "owner": self.owner})


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists on this host."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


class LockFile:
    """One lock file. ``acquire()`` returns whether we hold it now; ``release()`` gives it back."""

    def __init__(self, path: Path, clock: Callable[[], float], *,
                 stale_after_s: float = DEFAULT_STALE_AFTER_S, owner: str = "") -> None:
        if stale_after_s <= 0:
            raise ValueError(f"stale_after_s must be > 0, got {stale_after_s}")
        self.path = Path(path)
        self.clock = clock
        self.stale_after_s = stale_after_s
        self.owner = owner
        self.token: str | None = None
        self.took_over: LockInfo | None = None  # the stale holder we replaced, if any

    def _mine(self) -> LockInfo:
        return LockInfo(uuid.uuid4().hex, os.getpid(), socket.gethostname(), self.clock(), self.owner)

    def holder(self) -> LockInfo | None:
        """The current holder, or None when the file is absent. An unreadable file (a holder that
        died between create and write) counts as a holder acquired at the file's mtime."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        info = LockInfo.parse(text)
        if info is None:
            try:
                mtime = self.path.stat().st_mtime
            except FileNotFoundError:
                return None
            return LockInfo("", -1, "", min(mtime, self.clock()), "unreadable")
        return info

    def is_stale(self, info: LockInfo) -> bool:
        if self.clock() - info.acquired > self.stale_after_s:
            return True
        return info.host == socket.gethostname() and info.pid != os.getpid() and not pid_alive(info.pid)

    def acquire(self) -> bool:
        if self.token is not None:
            return True
        confined.guard(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        me = self._mine()
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return self._take_over(me)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(me.dump())
        self.token = me.token
        return True

    def _take_over(self, me: LockInfo) -> bool:
        info = self.holder()
        if info is None:  # released meanwhile: try the normal way once more
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                return False
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(me.dump())
            self.token = me.token
            return True
        if not self.is_stale(info):
            return False  # a fresh lock is respected
        tmp = self.path.with_name(f"{self.path.name}.{me.token}.tmp")
        confined.guard(tmp)
        tmp.write_text(me.dump(), encoding="utf-8")
        os.replace(tmp, self.path)
        now = self.holder()
        if now is None or now.token != me.token:
            return False  # another agent took it over after us: it wins
        self.token = me.token
        self.took_over = info
        return True

    def release(self) -> bool:
        """Remove the lock if it is still ours (a holder that was taken over must not delete the
        new holder's lock). Returns whether it removed it."""
        if self.token is None:
            return False
        mine, self.token = self.token, None
        info = self.holder()
        if info is None or info.token != mine:
            return False
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        return True

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()
