"""What a read-back returns: the excerpt of a spilled file or transcript the model's Read tool
would give it around the line a fact is on (the engine charges the call; this reads the file)."""

from __future__ import annotations

import os
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from itertools import accumulate
from pathlib import Path

READ_TOOL = "Read"  # the file-reading tool a read-back uses unless the trace names one (header.meta.read_tool)
READBACK_LINES = 2000  # Claude Code's Read tool: 2,000 lines from an offset by default
READBACK_MAX_CHARS = 100_000  # and a cap on what one read returns
FILES_KEPT = 4  # files whose lines are kept between read-backs (a bound on memory: each is held twice, as bytes and lines)


class _Lines:
    """A file's lines as ``open(encoding="utf-8", errors="replace").read().splitlines(keepends=True)``
    gives them (universal newlines), kept between read-backs. A session's transcript grows by appends
    and is read back again and again: decoding and splitting all of it each time made a session twice
    as long cost four times as much. Each read still takes the file's bytes (so a file rewritten in
    place is never served stale), but only the bytes past the last line break read before are decoded
    and split when the older bytes are unchanged. That is exact: a line break is one byte, never inside
    a UTF-8 sequence, and a line that ends in it (``\r\n`` included) ends whatever follows."""

    def __init__(self) -> None:
        # path -> (stamp, the bytes up to the last line break, their lines, the lines after it)
        self._held: OrderedDict[str, tuple[tuple[int, int, int, int], bytes, list[str], list[str]]] = OrderedDict()

    def of(self, path: Path) -> list[str]:
        key = str(path)
        st = os.stat(path)
        stamp = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        hit = self._held.get(key)
        if hit is None or hit[0] != stamp:
            data = path.read_bytes()
            cut = data.rfind(b"\n") + 1   # the complete lines: decoded and split once, whatever follows
            if hit is not None and len(hit[1]) <= cut and data.startswith(hit[1]):
                lines = hit[2]   # extended in place: only the new lines are built
                lines.extend(_split(data[len(hit[1]):cut]))
            else:
                lines = _split(data[:cut])
            hit = (stamp, data[:cut], lines, _split(data[cut:]))
            self._held[key] = hit
            while len(self._held) > FILES_KEPT:
                self._held.popitem(last=False)
        self._held.move_to_end(key)
        return hit[2] + hit[3] if hit[3] else hit[2]


def _split(data: bytes) -> list[str]:
    """``data``'s lines as a text-mode read gives them: decoded, ``\r\n`` and ``\r`` read as ``\n``."""
    return data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n").splitlines(keepends=True)


_LINES = _Lines()


def excerpt(path: Path, line: int | None) -> tuple[str, dict[str, int]]:
    """What ``Read(file_path, offset, limit)`` returns around ``line`` (1-based)."""
    lines = _LINES.of(path)
    if line is None or len(lines) <= READBACK_LINES:
        start = 1 if line is None else max(1, line - READBACK_LINES // 2)
    else:
        start = max(1, min(line - READBACK_LINES // 2, len(lines) - READBACK_LINES + 1))
    sel = lines[start - 1:start - 1 + READBACK_LINES]
    ends = list(accumulate(map(len, sel)))   # where each line ends in the joined window
    total = ends[-1] if ends else 0
    if total <= READBACK_MAX_CHARS:
        return "".join(sel), {"offset": start, "limit": READBACK_LINES}
    lo = 0
    if line is not None:  # keep the fact's line inside the cut
        before = min(max(line - start, 0), len(sel))
        at = ends[before - 1] if before else 0
        lo = max(0, min(at - READBACK_MAX_CHARS // 2, total - READBACK_MAX_CHARS))
    # only the lines the cut overlaps are joined (a transcript's 2,000 lines can hold megabytes)
    first = bisect_right(ends, lo)
    last = bisect_left(ends, lo + READBACK_MAX_CHARS, first)
    base = ends[first - 1] if first else 0
    chunk = "".join(sel[first:last + 1])[lo - base:lo - base + READBACK_MAX_CHARS]
    return chunk, {"offset": start, "limit": READBACK_LINES}


def steps(pointers: list[tuple[str, int | None]], read_tool: str) -> list[tuple[str, dict, str, bool]]:
    """The Read calls that read ``pointers`` (file, line of the fact) back: (tool, input, result,
    is_error) each; a file that cannot be read is left out (the model would not find it either)."""
    out = []
    for path, line in pointers:
        try:
            text, inp = excerpt(Path(path), line)
        except OSError:
            continue
        out.append((read_tool, {"file_path": path, **inp}, text, False))
    return out
