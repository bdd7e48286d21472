"""Run directories: where a replay's strategy writes its real files (spills, transcripts,
memories), created before the loop and removed after it, and the files a trace seeds there.

The paths of spill files and transcripts appear in the conversation, so they are tokenised and
billed. A random temporary name would make a run's numbers depend on it; a fixed root and a
fixed-width counter (every 6-digit suffix is two cl100k tokens) keep the text's token count the
same for every run, in any process, on any POSIX machine. The root is per user (a machine's users
never share or clean up each other's runs), named with the uid in six digits:
/tmp/ctxsim000000/run-000003/... has the cl100k token count the shared /tmp/ctxsim-runs/run-000003/...
had, for every uid (checked in tests/core/test_run_dirs.py).

A ``--session-dir`` is cleared before it is reused only when its marker (SESSION_MARK) is one ctxsim
wrote for that very folder: the marker holds a token made from the folder's real path and inode
(:func:`marker_text`), so an empty marker, one of an older ctxsim, or one copied from another folder
is refused and nothing is removed. While the run is going, every file a strategy writes is checked to
stay inside the directory (ctxsim.harness.files.confined: no symbolic link planted in it is followed)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from ctxsim.harness.files import confined


def _run_root() -> Path:
    uid = os.getuid() if hasattr(os, "getuid") else 0
    base = Path("/tmp") if os.name == "posix" else Path(tempfile.gettempdir())
    return base / f"ctxsim{uid % 1_000_000:06d}"


RUN_ROOT = _run_root()
SESSION_MARK = ".ctxsim-session"   # in a --session-dir: it holds a ctxsim run's files (cleared on reuse)
MARK_HEAD = "ctxsim session folder: a ctxsim run's files; the next run in this folder clears it"
MARK_MAX_BYTES = 4096              # a marker is two short lines; a larger file is not one


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def sweep_stale(root: Path) -> None:
    """Remove the run directories of processes that were killed (their ``.pid`` names a dead one)."""
    for pidfile in root.glob("run-*.pid"):
        try:
            pid = int(pidfile.read_text().strip() or 0)
        except (OSError, ValueError):
            continue
        if pid and not _alive(pid):
            shutil.rmtree(pidfile.with_suffix(""), ignore_errors=True)
            pidfile.unlink(missing_ok=True)


def fresh_run_dir() -> Path:
    RUN_ROOT.mkdir(mode=0o700, parents=True, exist_ok=True)
    if hasattr(os, "getuid") and RUN_ROOT.stat().st_uid != os.getuid():
        raise RuntimeError(f"{RUN_ROOT} belongs to another user: remove it (ctxsim keeps each user's runs apart)")
    sweep_stale(RUN_ROOT)
    for i in range(1_000_000):
        d = RUN_ROOT / f"run-{i:06d}"
        try:
            d.mkdir()
        except FileExistsError:
            continue
        d.with_suffix(".pid").write_text(str(os.getpid()))
        return d
    raise RuntimeError(f"{RUN_ROOT}: no free run directory")


def marker_text(d: Path) -> str:
    """What ctxsim writes in folder ``d``'s marker: a fixed line and a token of the folder's real
    path and inode (a marker copied into another folder, or left by a folder since replaced, does
    not match it)."""
    import hashlib

    real = os.path.realpath(d)
    token = hashlib.sha256(f"{real}\0{os.stat(real).st_ino}".encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return f"{MARK_HEAD}\ntoken {token}\n"


def check_session_dir(d: Path) -> bool:
    """Whether ``--session-dir`` ``d`` can be used: new, empty, or holding a marker ctxsim wrote for
    it (True: it is cleared first). Raises ValueError naming the folder otherwise."""
    d = Path(d)
    if d.is_symlink() and not d.exists():
        raise ValueError(f"--session-dir {d}: a symbolic link to nothing")
    if d.exists() and not d.is_dir():
        raise ValueError(f"--session-dir {d}: a file, not a folder")
    if not d.is_dir() or not any(d.iterdir()):
        return False
    mark = d / SESSION_MARK
    if not mark.is_symlink() and mark.is_file() and mark.stat().st_size <= MARK_MAX_BYTES:
        try:
            ok = mark.read_text(encoding="utf-8") == marker_text(d)
        except (OSError, UnicodeDecodeError):
            ok = False
        if ok:
            return True
        raise ValueError(f"--session-dir {d}: its {SESSION_MARK} marker was not written by ctxsim for this folder "
                         "(empty, of an older ctxsim, copied or moved here): nothing removed; give a new or empty folder, or "
                         "empty this one yourself")
    raise ValueError(f"--session-dir {d}: not empty and not a ctxsim session folder (no {SESSION_MARK} marker); "
                     "give a new or empty one (a folder an earlier run used is cleared and reused)")


def clean_session_dir(d: Path) -> None:
    """A reused ``--session-dir`` starts clean (a run never appends to an earlier run's transcript);
    a folder that holds anything else, or a marker ctxsim did not write for it, is refused, never
    emptied (:func:`check_session_dir`)."""
    d = Path(d)
    if check_session_dir(d):
        for p in d.iterdir():
            if p.name != SESSION_MARK:
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    d.mkdir(parents=True, exist_ok=True)
    mark = d / SESSION_MARK
    mark.unlink(missing_ok=True)   # a symlink is replaced, never written through
    mark.write_text(marker_text(d), encoding="utf-8")


class SessionDirInUse(ValueError):
    """A ``--session-dir`` another run holds now: bad input, one line (exit 2)."""


@contextmanager
def _held(d: Path) -> Iterator[None]:
    """An exclusive lock on folder ``d`` itself (flock on its descriptor: nothing is written in it),
    released on any exit; a folder another run holds is refused (ValueError naming it)."""
    try:
        import fcntl
    except ImportError:   # not POSIX: no lock
        yield
        return
    fd = os.open(d, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SessionDirInUse(f"--session-dir {d}: in use by another run now; wait for it to end, or give "
                             "another folder") from None
        yield
    finally:
        os.close(fd)   # closing the descriptor releases the lock


@contextmanager
def session_dir(given: Path | None) -> Iterator[Path]:
    """The run's directory: ``given`` (cleaned first), else a fresh one under RUN_ROOT removed on
    any exit (a killed process's goes at the next run: :func:`sweep_stale`)."""
    if given is not None:
        d = Path(given)
        check_session_dir(d)   # refused before anything is created or locked
        d.mkdir(parents=True, exist_ok=True)
        with _held(d):   # one run in a session folder at a time (two interleaved their files and costs)
            clean_session_dir(d)
            with confined.inside(d):
                yield d
        return
    d = fresh_run_dir()
    try:
        with confined.inside(d):
            yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)
        d.with_suffix(".pid").unlink(missing_ok=True)


def home_and_project(session_dir: Path) -> tuple[Path, Path]:
    """The simulated user's home and the project (the agent's working folder) inside a run directory."""
    return session_dir / "home", session_dir / "project"


def seed_files(session_dir: Path, files: Mapping[str, str]) -> tuple[Path, Path]:
    """The simulated user's home and project, with the files the trace header asks for."""
    home, project = home_and_project(session_dir)
    home.mkdir(parents=True, exist_ok=True)
    project.mkdir(parents=True, exist_ok=True)
    root = session_dir.resolve()
    for rel, content in files.items():
        confined.guard(session_dir / rel)   # no link planted in the run directory is followed
        target = (session_dir / rel).resolve()
        if root not in target.parents:
            raise ValueError(f"header.meta.files: {rel!r} escapes the run directory")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
    return home, project
