"""Run directories: where a replay's strategy writes its real files (spills, transcripts,
memories), created before the loop and removed after it, and the files a trace seeds there.

The paths of spill files and transcripts appear in the conversation, so they are tokenised and
billed. A random temporary name would make a run's numbers depend on it; a fixed root and a
fixed-width counter (every 6-digit suffix is two cl100k tokens) keep the text's token count the
same for every run, in any process, on any POSIX machine. The root is per user (a machine's users
never share or clean up each other's runs), named with the uid in six digits:
/tmp/ctxsim000000/run-000003/... has the cl100k token count the shared /tmp/ctxsim-runs/run-000003/...
had, for every uid (checked in tests/core/test_run_dirs.py)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path


def _run_root() -> Path:
    uid = os.getuid() if hasattr(os, "getuid") else 0
    base = Path("/tmp") if os.name == "posix" else Path(tempfile.gettempdir())
    return base / f"ctxsim{uid % 1_000_000:06d}"


RUN_ROOT = _run_root()
SESSION_MARK = ".ctxsim-session"   # in a --session-dir: it holds a ctxsim run's files (cleared on reuse)


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


def clean_session_dir(d: Path) -> None:
    """A reused ``--session-dir`` starts clean (a run never appends to an earlier run's transcript);
    a folder that holds anything else is refused, never emptied."""
    if d.exists() and not d.is_dir():
        raise ValueError(f"--session-dir {d}: a file, not a folder")
    if d.is_dir() and any(d.iterdir()):
        if not (d / SESSION_MARK).exists():
            raise ValueError(f"--session-dir {d}: not empty and not a ctxsim session folder; give a new or empty one")
        for p in d.iterdir():
            if p.name != SESSION_MARK:
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    d.mkdir(parents=True, exist_ok=True)
    (d / SESSION_MARK).write_text("a ctxsim run's files: the next run in this folder clears it\n")


@contextmanager
def session_dir(given: Path | None) -> Iterator[Path]:
    """The run's directory: ``given`` (cleaned first), else a fresh one under RUN_ROOT removed on
    any exit (a killed process's goes at the next run: :func:`sweep_stale`)."""
    if given is not None:
        d = Path(given)
        clean_session_dir(d)
        yield d
        return
    d = fresh_run_dir()
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)
        d.with_suffix(".pid").unlink(missing_ok=True)


def seed_files(session_dir: Path, files: Mapping[str, str]) -> tuple[Path, Path]:
    """The simulated user's home and project, with the files the trace header asks for."""
    home, project = session_dir / "home", session_dir / "project"
    home.mkdir(parents=True, exist_ok=True)
    project.mkdir(parents=True, exist_ok=True)
    root = session_dir.resolve()
    for rel, content in files.items():
        target = (session_dir / rel).resolve()
        if root not in target.parents:
            raise ValueError(f"header.meta.files: {rel!r} escapes the run directory")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
    return home, project
