"""Where a strategy crashed: the line of its own code that raised, for a one-line report."""

from __future__ import annotations

import sysconfig
import traceback
from pathlib import Path


def crash_site(e: BaseException) -> str:
    """``file:line in function`` of the innermost frame of the code that raised, outside the
    standard library and installed packages (so a KeyError raised by a dict names the line that
    indexed it); paths relative to the working directory when under it."""
    frames = traceback.extract_tb(e.__traceback__)
    skip = tuple(p for p in {sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")} if p)
    pick = next((f for f in reversed(frames) if not f.filename.startswith(skip)), frames[-1] if frames else None)
    if pick is None:
        return ""
    path = Path(pick.filename)
    try:
        path = path.resolve().relative_to(Path.cwd().resolve())
    except (ValueError, OSError):
        pass
    return f"{path}:{pick.lineno} in {pick.name}"
