"""What a strategy writes outside its run's directory, seen by a Python audit hook (PEP 578).

A strategy's files (spills, transcripts, memories) live in its run's directory
(``Environment.session_dir``): the engine makes a fresh one per run, a sweep runs many at once, and
the property kit reads them back. A file written anywhere else (the working directory, the user's
home, a fixed ``/tmp`` path, the run directory's parent) is shared by every run that writes it, is
left behind in the user's checkout, and is invisible to the checks that read the run's files. No
request need differ for that, so the request-level invariants never see it; the interpreter does.

While :func:`watching` is active, every file opened for writing, created, renamed, moved, copied,
truncated or removed by any code of this thread is checked against the run's directory; the ones
outside it are noted as :class:`~ctxsim.harness.testing.recording.Mark` entries (``outside_write``)
in the recording, where the checker reports them (the ``run_dir`` invariant) at the request they
came after. The files layer refuses its own writes outside the run (:mod:`ctxsim.harness.files.confined`:
a strategy that writes through it crashes there); this sees the others (``open``, :mod:`os`,
:mod:`shutil`, :mod:`pathlib`). Python's own bytecode cache (``__pycache__``) and :mod:`tempfile`'s probe of its
directory are not the strategy's doing.

The audit events and their arguments are CPython's (docs.python.org/3.11/library/audit_events.html).
A hook cannot be removed once added: it is added once per process and does nothing while no watch
is active.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

# event -> the positions of its path arguments that it writes (or removes)
_WRITES: dict[str, tuple[int, ...]] = {
    "os.mkdir": (0,), "os.rename": (0, 1), "os.remove": (0,), "os.rmdir": (0,), "os.symlink": (1,),
    "os.link": (1,), "os.truncate": (0,), "os.utime": (0,), "os.chmod": (0,),
    "shutil.copyfile": (1,), "shutil.copytree": (1,), "shutil.move": (0, 1), "shutil.rmtree": (0,),
    "shutil.make_archive": (0,),
}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC

_local = threading.local()
_installed = False


def _paths(event: str, args: tuple) -> list[str]:
    """The paths ``event`` writes, from its audit arguments (an open for reading writes none)."""
    if event == "open":
        path, mode, flags = (list(args) + [None, None, None])[:3]
        writes = (any(c in mode for c in "wax+") if isinstance(mode, str)
                  else isinstance(flags, int) and bool(flags & _WRITE_FLAGS))
        return [path] if writes else []
    return [args[i] for i in _WRITES.get(event, ()) if i < len(args)]


def _hook(event: str, args: tuple) -> None:
    watch = getattr(_local, "watch", None)
    if watch is None or (event != "open" and event not in _WRITES):
        return
    for p in _paths(event, args):
        if isinstance(p, bytes):
            p = os.fsdecode(p)
        if not isinstance(p, (str, os.PathLike)):
            continue  # a file descriptor: opened (and checked) before
        watch(event, os.fspath(p))


def _install() -> None:
    global _installed
    if not _installed:
        sys.addaudithook(_hook)
        _installed = True


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root + os.sep)


def _probing_tempdir() -> bool:
    """Whether the write is :mod:`tempfile` finding its directory (its first call writes and removes a
    file of random name in each candidate to see that it can): the standard library's, not a file
    the strategy keeps."""
    f = sys._getframe(2)
    while f is not None:
        if f.f_code.co_name == "_get_default_tempdir" and f.f_code.co_filename.endswith("tempfile.py"):
            return True
        f = f.f_back
    return False


@contextmanager
def watching(run_dir: Path, note: Callable[[str, str], None]) -> Iterator[None]:
    """Call ``note(event, path)`` for every write outside ``run_dir`` made in this thread while the
    block runs (nested watches: the innermost). The check itself (resolving a path) writes nothing."""
    _install()
    roots = tuple(dict.fromkeys((os.path.abspath(run_dir), os.path.realpath(run_dir))))
    outer = getattr(_local, "watch", None)

    def seen(event: str, path: str) -> None:
        _local.watch = None   # the checks and the note may use audited calls themselves
        try:
            # most writes are the run's own, named under the root as given: no need to resolve them
            if any(_inside(os.path.abspath(path), r) for r in roots):
                return
            full = os.path.realpath(path)
            if (not any(_inside(full, r) for r in roots) and "__pycache__" not in Path(full).parts
                    and not _probing_tempdir()):
                note(event, full)
        finally:
            _local.watch = seen

    _local.watch = seen
    try:
        yield
    finally:
        _local.watch = outer
