"""Every file ctxsim writes goes through here: all or nothing, with the mode a plain ``open()``
would give, and a full disk said as one line naming the path (exit 2), never a traceback.

* A file is written to a temporary name beside it and renamed into place when complete; on any
  failure the temporary file is removed and the destination is left as it was.
* The mode honours the umask (``0o666 & ~umask``), or keeps the mode of the file it replaces:
  a trace imported from a private log stays private under ``umask 077``. (``mkstemp`` makes
  0600 files; a fixed ``chmod 0o644`` made every output world-readable whatever the umask.)
* An :class:`OSError` while writing becomes :class:`WriteError` naming the path; ``ENOSPC``,
  ``EDQUOT`` and ``EROFS`` (disk full, quota, read-only file system) are recognised by errno or,
  for writers that lose it (pyarrow), by the C library's message.
* :func:`staged_folder` does the same for a folder of outputs (a report): built under a
  temporary sibling and renamed into place, so a failure leaves no partial folder.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

# the file system, not the input, failed (POSIX errno names; EDQUOT is absent on some platforms)
DISK_ERRNOS = frozenset(e for e in (errno.ENOSPC, getattr(errno, "EDQUOT", None), errno.EROFS) if e is not None)
DISK_MESSAGES = ("no space left on device", "disk quota exceeded", "read-only file system")   # strerror(3) texts


class WriteError(Exception):
    """An output could not be written (exit 2: the message names the path and why)."""

    def __init__(self, path: str | Path, reason: str, *, disk: bool = False) -> None:
        self.path, self.reason, self.disk = str(path), reason, disk
        super().__init__(f"{path}: cannot write: {reason}")


def is_disk_error(e: BaseException) -> bool:
    """A full disk, an exhausted quota or a read-only file system (not a bad name or a bug)."""
    if isinstance(e, OSError) and e.errno in DISK_ERRNOS:
        return True
    text = str(e).lower()
    return isinstance(e, OSError) and any(m in text for m in DISK_MESSAGES)


def reason(e: OSError) -> str:
    """The C library's words for ``e`` (pyarrow's OSError wraps them in its own sentence)."""
    text = str(e)
    for m in DISK_MESSAGES:
        if m in text.lower():
            return m[0].upper() + m[1:]
    return e.strerror or text


def write_error(path: str | Path, e: OSError) -> WriteError:
    return WriteError(path, reason(e), disk=is_disk_error(e))


def umask() -> int:
    """The process umask, read without changing it where the kernel says it (Linux ≥ 4.7:
    /proc/self/status ``Umask:``); else by the set-and-restore dance."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def file_mode(path: Path) -> int:
    """The mode ``open(path, "w")`` would leave: the existing file's, else 0o666 less the umask."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return 0o666 & ~umask()


def write(path: str | Path, writer: Callable[[Path], None]) -> Path:
    """``writer(tmp)`` writes the content to ``tmp`` (same folder, same suffix: writers that pick
    a format by it still can); ``tmp`` is then renamed to ``path``. Raises :class:`WriteError`."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{path.name[:100]}.", suffix=f".tmp{path.suffix[:20]}", dir=path.parent)
    except OSError as e:
        raise write_error(path, e) from None
    os.close(fd)
    tmp = Path(name)
    try:
        writer(tmp)
        os.chmod(tmp, file_mode(path))
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise write_error(path, e) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_text(path: str | Path, text: str, *, errors: str = "strict") -> Path:
    return write(path, lambda p: p.write_text(text, encoding="utf-8", errors=errors))


def write_bytes(path: str | Path, data: bytes) -> Path:
    return write(path, lambda p: p.write_bytes(data))


@contextlib.contextmanager
def naming(path: str | Path) -> Iterator[None]:
    """An OSError in the block carries ``path`` (a write to an open file loses it): an append-only
    log that cannot be written through :func:`write` still says which file the disk refused."""
    try:
        yield
    except OSError as e:
        if getattr(e, "filename", None):
            raise
        raise OSError(e.errno, reason(e), str(path)) from None


@contextlib.contextmanager
def staged_folder(out: str | Path) -> Iterator[Path]:
    """A folder of outputs written all or nothing. A new ``out`` is built under a temporary
    sibling and renamed into place when the block ends without error, else removed. An existing
    ``out`` is written in place (each file through :func:`write`): what was there stays."""
    out = Path(out)
    if out.exists():
        yield out
        return
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=f".{out.name[:100]}.", suffix=".tmp", dir=out.parent))
        os.chmod(stage, 0o777 & ~umask())   # mkdtemp makes 0700: give the folder the mode mkdir would
    except OSError as e:
        raise write_error(out, e) from None
    try:
        yield stage
        os.replace(stage, out)
    except OSError as e:
        shutil.rmtree(stage, ignore_errors=True)
        raise write_error(out, e) from None
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
