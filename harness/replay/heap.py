"""The heap a replay finds is not the replay's to scan.

CPython's cyclic collector traverses every tracked object in the oldest generation at each full
collection. A sweep worker holds its traces (every event, every memoised block) for all its runs,
so a full collection in the middle of a replay walked all of them: on two long-200k sessions held
in one process, the one full collection of a 3,600-call replay of ``sliding_window`` took 0.245 s of
its 1.98 s, and whether a run met one decided whether doubling a session cost 1.9× or 2.7×
(tests/bench/test_growth.py). ``gc.freeze()`` (docs.python.org/3/library/
gc.html, 3.7+) moves the objects that exist when the replay starts out of the collector's reach;
what the replay allocates is collected as usual, and the heap is given back at the end.

Only when nothing else has frozen objects (``gc.get_freeze_count() == 0``): unfreezing would
otherwise hand back what a host froze on purpose (a pre-fork server, say)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def replay_heap() -> Iterator[None]:
    """Within: the objects that existed before are not scanned by the cyclic collector."""
    if not gc.isenabled() or gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
