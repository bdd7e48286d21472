"""How a sweep's runs become tasks for its workers (issue 30, item 4).

A worker's first run of a trace pays for the trace once (parsing, token counts, needs
classification: kept per worker process, ``sweep._TRACES`` and the memo on the trace); its next
runs of that trace do not. Handing out single runs, every worker ends up paying for every trace:
on 6 traces x 3 strategies, 2 workers did 12 warm-ups where 6 do. So the runs of one trace go
out together, as one task, split only as far as the balance of the workers needs, and the
longest tasks go first, so that no worker starts a long task when the others are nearly done.

Costs are estimates that order and split the work and nothing else: a run's rows never depend
on which task, worker or order ran it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")

# assumed (a parameter of plan): a worker's first run of a trace costs about one run more than the
# next; measured on this machine with 600-call long-200k sessions: 0.55 s of warm-up against
# 0.17 s (append_only), 0.43 s (claude_code), 0.89 s (novacode) a warm run
WARM_UP_RUNS = 1.0
# assumed (a parameter of plan): at least this many tasks per worker before the runs of a trace
# are kept together, so that the last task to finish is at most ~1/(2 x workers) of the sweep
TASKS_PER_WORKER = 2


def plan(runs: Sequence[T], trace_of: Callable[[T], str], size_of: Callable[[str], float], workers: int,
         warm_up_runs: float = WARM_UP_RUNS, tasks_per_worker: int = TASKS_PER_WORKER) -> list[list[T]]:
    """``runs`` as tasks (lists of runs of one trace), longest first.

    A run of trace ``t`` is estimated at ``size_of(t)`` (its file size: replay time grows with the
    session), a task of ``n`` runs at ``size_of(t) * (n + warm_up_runs)``. With one worker, a task
    per trace; with more, a trace's runs are cut into the fewest near-equal tasks each at most
    ``total / (tasks_per_worker * workers)``, down to a run a task. Ties keep the order of ``runs``."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, not {workers}")
    groups: dict[str, list[T]] = {}
    for r in runs:
        groups.setdefault(trace_of(r), []).append(r)
    unit = {t: max(float(size_of(t)), 1.0) for t in groups}
    total = sum(unit[t] * (len(rs) + warm_up_runs) for t, rs in groups.items())
    cap = math.inf if workers == 1 else total / (tasks_per_worker * workers)
    tasks: list[tuple[float, list[T]]] = []
    for t, rs in groups.items():
        per_task = max(1, math.floor(cap / unit[t] - warm_up_runs)) if cap < math.inf else len(rs)
        n = math.ceil(len(rs) / per_task)
        tasks.extend((unit[t] * (len(part) + warm_up_runs), part) for part in _split(rs, n))
    order = sorted(range(len(tasks)), key=lambda i: -tasks[i][0])   # stable: ties keep their order
    return [tasks[i][1] for i in order]


def _split(items: list[T], n: int) -> list[list[T]]:
    """``items`` in ``n`` contiguous parts whose lengths differ by at most one (longer first)."""
    q, r = divmod(len(items), n)
    out, at = [], 0
    for i in range(n):
        k = q + (1 if i < r else 0)
        out.append(items[at:at + k])
        at += k
    return out
