"""Reading a file a user names: a regular file only, and never without a bound (issue 44 fresh,
case 25).

A device, a fifo or a socket given where ctxsim reads a file is refused before a byte is read:
``/dev/zero`` never ends (a read took every byte of memory it could: MemoryError, exit 1) and a
fifo blocks until something writes into it (the command hung). The file is opened with
``O_NONBLOCK`` (opening a fifo then returns at once; on a regular file the flag changes nothing)
and what was opened is checked with ``fstat``, not the name (nothing can be swapped in between).
A regular file is finite, and what is held of it at once is capped too: a file read whole at
``MAX_WHOLE_BYTES`` (a price table, a sweep file, a preset), a log that is one JSON document at
``MAX_DOCUMENT_BYTES``, a line of a JSON-lines file at ``MAX_LINE_BYTES``; beyond any of them the
read stops with one line naming the file (and the line).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

# assumed: the largest of the 209 development sessions' logs and traces is 6.2 MB whole (a line
# less); 10x that is room for a longer session, and far below what a 2-core, few-GB machine holds
MAX_LINE_BYTES = 64 * 2 ** 20
# assumed: models.toml is 40 kB and a sweep file a few kB; a file read whole above this is not one
MAX_WHOLE_BYTES = 16 * 2 ** 20
# assumed: a log that is one JSON document (a SWE-agent .traj, an OpenHands event list) is held
# whole to be parsed; 4 lines' worth
MAX_DOCUMENT_BYTES = 4 * MAX_LINE_BYTES

_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a fifo"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"))


class InputFileError(OSError):
    """A file that is not read: not a regular file, or longer than a read may hold. ``strerror``
    says why in words (the callers print ``cannot read: <strerror>`` after the path)."""

    def __init__(self, path: str | Path, why: str, line: int | None = None) -> None:
        super().__init__(errno.EINVAL, why, str(path))
        self.line = line   # the line of a JSON-lines file it stopped at (None: the file)


def kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "a special file")


def not_regular(path: str | Path, mode: int) -> InputFileError:
    return InputFileError(path, f"{kind(mode)}, not a regular file")


def open_regular(path: str | Path) -> BinaryIO:
    """``path`` opened for reading in binary, if it is a regular file (a link to one is one);
    anything else is an :class:`InputFileError`, any other failure the :class:`OSError` of ``open``."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise not_regular(path, mode)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: str | Path, limit: int | None = None) -> bytes:
    """A regular file's bytes, at most ``limit`` of them (default ``MAX_WHOLE_BYTES``; more: an
    :class:`InputFileError`)."""
    limit = MAX_WHOLE_BYTES if limit is None else limit
    with open_regular(path) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise InputFileError(path, f"larger than {_size(limit)}: not a file ctxsim reads whole (is it the right file?)")
    return data


def read_text(path: str | Path, limit: int | None = None) -> str:
    """:func:`read_bytes` decoded as UTF-8 (a :class:`UnicodeDecodeError` as ``Path.read_text``)."""
    return read_bytes(path, limit).decode("utf-8")


def lines(fh: BinaryIO, path: str | Path, limit: int | None = None) -> Iterator[bytes]:
    """The lines of an open file, each with its newline (the last may lack one); a line longer than
    ``limit`` bytes (default ``MAX_LINE_BYTES``) is an :class:`InputFileError` naming the file, its
    ``line`` the line's number."""
    limit = MAX_LINE_BYTES if limit is None else limit
    no = 0
    while True:
        b = fh.readline(limit + 1)
        if not b:
            return
        no += 1
        if len(b) > limit:
            raise InputFileError(path, f"a line longer than {_size(limit)}: not a line ctxsim reads "
                                 "(is it the right file?)", no)
        yield b


def _size(n: int) -> str:
    return f"{n // 2 ** 20} MiB" if n >= 2 ** 20 else f"{n:,} bytes"
