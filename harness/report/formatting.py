"""Numbers as a reader sees them, one rule per kind, shared by the terminal tables and the reports:
counts with thousands separators and no ``.0``, dollars to the cent, shares to three places,
seconds to a tenth; a missing value is an en dash. A run that failed says so, with the call."""

from __future__ import annotations

import math
from typing import Any

MISSING = "–"


def _missing(v: Any) -> bool:
    if v is None:
        return True
    try:
        return math.isnan(float(v))
    except (TypeError, ValueError):
        return False


def money(v: Any) -> str:
    if _missing(v):
        return MISSING
    v = float(v)
    return f"${v:,.2f}" if abs(v) >= 0.1 or v == 0 else f"${v:,.4f}"


def count(v: Any) -> str:
    return MISSING if _missing(v) else f"{round(float(v)):,}"


def share(v: Any, digits: int = 3) -> str:
    return MISSING if _missing(v) else f"{float(v):.{digits}f}"


def seconds(v: Any) -> str:
    return MISSING if _missing(v) else f"{float(v):,.1f}"


def percent(v: Any) -> str:
    return MISSING if _missing(v) else f"{float(v):.0%}"


def value(v: Any) -> str:
    """A parameter value: integers with separators, floats as short as they are exact."""
    if _missing(v):
        return MISSING
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int) or (isinstance(v, float) and float(v).is_integer()):
        return f"{int(v):,}" if abs(int(v)) >= 10_000 else str(int(v))
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def failed_at(row: Any) -> str:
    """``failed at call 142`` (and the turns lost, when known) for a run or configuration that did
    not complete; ``""`` for one that did."""
    get = row.get if hasattr(row, "get") else (lambda k, d=None: getattr(row, k, d))
    done = get("completed", True)
    if done is None or (not _missing(done) and bool(done)):
        return ""
    at = get("failed_at_call")
    runs, bad = get("runs"), get("runs_failed")
    if not _missing(runs) and not _missing(bad) and 0 < float(bad) < float(runs):
        first = f", first at call {count(at)}" if not _missing(at) else ""
        return f"failed in {count(bad)} of {count(runs)} runs{first}"
    text = f"failed at call {count(at)}" if not _missing(at) else "failed"
    lost, turns = get("turns_failed"), get("turns")
    if not _missing(lost) and not _missing(turns) and float(turns) > 0:
        text += f" ({count(lost)} of {count(turns)} turns lost)"
    return text
