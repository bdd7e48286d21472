"""A run's files stay in its run directory (issue 44): while a replay runs (:func:`inside`, entered
by ``ctxsim.harness.replay.rundirs.session_dir``), every file a strategy writes is checked by
:func:`guard` first: it must be under the run directory, and no part of its path below the run
directory may be a symbolic link (one planted in the folder while the run is going would send spill
files, transcripts and memories wherever it points), nor the file itself a hard link to a file
elsewhere (a write through it would change that file).

The check reads each existing part of the path with ``lstat`` just before the write. A link planted
between the check and the write (microseconds) is not caught: the guard is against a folder changed
under a run, not against a process racing it on purpose, which the per-user, 0700 run root keeps
out (ctxsim.harness.replay.rundirs). Outside a run (a strategy driven by a test, a library user) it
checks nothing.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from pathlib import Path

from ctxsim.harness.files.atomic import WriteError

# the run directory as given and as resolved (a strategy may hold either form of a symlinked /tmp)
_ROOT: ContextVar[tuple[str, ...] | None] = ContextVar("ctxsim_run_root", default=None)


@contextmanager
def inside(root: str | Path) -> Iterator[None]:
    """Writes checked against ``root`` until the block ends."""
    given = os.path.abspath(root)
    token = _ROOT.set(tuple(dict.fromkeys([given, os.path.realpath(given)])))
    try:
        yield
    finally:
        _ROOT.reset(token)


@lru_cache(maxsize=4096)
def _steps(roots: tuple[str, ...], path: str) -> tuple[str, ...] | None:
    """The paths from the first part below the run directory down to ``path`` itself (what
    :func:`guard` looks at, worked out once per path: a transcript is appended to thousands of
    times), or None when ``path`` is outside the run directory."""
    p = os.path.abspath(path)
    base = next((r for r in roots if p == r or p.startswith(r + os.sep)), None)
    if base is None:
        return None
    out, cur = [], base
    for part in p[len(base) + 1:].split(os.sep) if p != base else ():
        cur = f"{cur}{os.sep}{part}"
        out.append(cur)
    return tuple(out)


def guard(path: str | Path) -> None:
    """Raise :class:`WriteError` if a run is on and writing ``path`` would leave its directory:
    ``path`` outside it, a symbolic link anywhere below it on the way, or an existing hard link."""
    roots = _ROOT.get()
    if roots is None:
        return
    steps = _steps(roots, os.fspath(path))
    if steps is None:
        raise WriteError(path, f"outside the run directory {roots[0]} (a run writes its files only there)")
    lstat, islnk = os.lstat, stat.S_ISLNK
    for cur in steps:
        try:
            st = lstat(cur)
        except (FileNotFoundError, NotADirectoryError):
            return   # the rest is created by the write, under a real folder of the run
        if islnk(st.st_mode):
            raise WriteError(path, f"{cur} is a symbolic link in the run directory (planted during the run?): "
                             "not followed")
    if steps and st.st_nlink > 1 and stat.S_ISREG(st.st_mode):
        raise WriteError(path, "a hard link in the run directory (to a file elsewhere?): not written through")
