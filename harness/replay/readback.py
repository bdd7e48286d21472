"""What a read-back returns: the excerpt of a spilled file or transcript the model's Read tool
would give it around the line a fact is on (the engine charges the call; this reads the file)."""

from __future__ import annotations

from pathlib import Path

READ_TOOL = "Read"  # the file-reading tool a read-back uses unless the trace names one (header.meta.read_tool)
READBACK_LINES = 2000  # Claude Code's Read tool: 2,000 lines from an offset by default
READBACK_MAX_CHARS = 100_000  # and a cap on what one read returns


def excerpt(path: Path, line: int | None) -> tuple[str, dict[str, int]]:
    """What ``Read(file_path, offset, limit)`` returns around ``line`` (1-based)."""
    with path.open("r", encoding="utf-8", errors="replace") as fh:
        lines = fh.read().splitlines(keepends=True)
    if line is None or len(lines) <= READBACK_LINES:
        start = 1 if line is None else max(1, line - READBACK_LINES // 2)
    else:
        start = max(1, min(line - READBACK_LINES // 2, len(lines) - READBACK_LINES + 1))
    chunk = "".join(lines[start - 1:start - 1 + READBACK_LINES])
    if len(chunk) > READBACK_MAX_CHARS:
        if line is not None:  # keep the fact's line inside the cut
            at = sum(len(x) for x in lines[start - 1:line - 1])
            lo = max(0, min(at - READBACK_MAX_CHARS // 2, len(chunk) - READBACK_MAX_CHARS))
            chunk = chunk[lo:lo + READBACK_MAX_CHARS]
        else:
            chunk = chunk[:READBACK_MAX_CHARS]
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
