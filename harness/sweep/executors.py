"""Where a sweep's runs are replayed: in this process, in local worker processes, or on a Dask
cluster. Every executor yields each finished run as a :class:`Done` (its flat row, per-probe scores
and per-call rows) to the coordinating process, which alone writes the store
(harness/sweep/store.py): no worker ever writes into ``--out``, so a worker that outlives its client
(a killed client, a scheduler gone) leaves nothing behind there.

Per-trace work that does not depend on the configuration (parsing, validation, token counts) is
done once per worker process: traces are cached by path in the worker, and the engine memoises the
blocks it builds from a trace on the trace object. So the runs of one trace go to a worker together,
longest tasks first (harness/sweep/plan.py). Local workers hand back each run as it finishes (a
queue), so a killed sweep loses at most the runs in progress.
"""

from __future__ import annotations

import json
import os
import time
import traceback
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pandas as pd
from ctxsim.strategies import registry


class ExecutorError(ValueError):
    """The executor itself cannot go on (a Dask scheduler gone, no worker): one line, exit 2."""


@dataclass
class Done:
    """A finished run, as the coordinator writes it."""

    key: str
    row: dict[str, Any]
    probes: pd.DataFrame | None = None
    calls: pd.DataFrame | None = None


_TRACES: dict[str, Any] = {}  # per worker process: parsed traces (and, on them, their counted blocks)


def trace(path: str):
    t = _TRACES.get(path)
    if t is None:
        from ctxsim.harness.model import trace as tr

        t = _TRACES[path] = tr.load(path)
    return t


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, name + "."))
        else:
            out[name] = v
    return out


def _identity(spec) -> dict[str, Any]:
    row: dict[str, Any] = {"key": spec.key, "label": spec.label, "strategy": spec.strategy, "trace": spec.trace,
                           "trace_hash": spec.trace_hash, "model_setting": spec.model or "",
                           "window_setting": spec.window or 0, "cache": spec.cache, "seed": spec.seed, "error": ""}
    row.update({f"param.{k}": v for k, v in spec.params})
    row.update({f"param.{k}": v for k, v in spec.assume})  # swept modelling constants: param.retention.X ...
    return row


def run_one(spec) -> Done:
    """Replay one configuration; a run that raises is a row with its error, not the end of the sweep."""
    from ctxsim.harness.replay.engine import RunConfig, replay

    t0, c0 = time.perf_counter(), time.process_time()
    row = _identity(spec)
    probes = calls = None
    ret, summ = spec.assumptions()
    differs = _other_environment(spec)
    if differs:   # a worker elsewhere (Dask) with other prices, tokenizer or code: its numbers would be
        # stored under the client's key (the fresh hostile set of issue 44), so it does not run
        row["error"] = (f"EnvironmentMismatch: this worker runs under {differs} than the sweep that asked for the run; "
                        "give the workers the sweep's CTXSIM_MODELS, --tokenizer and ctxsim")
        row["run_s"] = 0.0
        return Done(spec.key, row)
    try:
        res = replay(trace(spec.trace), registry.load_class(spec.strategy), dict(spec.params),
                     RunConfig(model=spec.model, window=spec.window, cache=spec.cache, seed=spec.seed,
                               retention=ret, summariser=summ))
        # the run's identity is already in the row (and its parameters as param.*)
        m = {k: v for k, v in res.metrics.items() if k not in ("params", "strategy", "trace", "seed", "trace_hash")}
        for k, v in flatten(m).items():
            row[k if k not in row else f"metric.{k}"] = _scalar(v)
        calls = res.calls.assign(key=spec.key) if spec.save_calls else None
        probes = res.probes if len(res.probes) else None   # what a report's retention intervals resample
    except BaseException as e:  # a failed run is a recorded result, not the end of the sweep; a
        # strategy's own BaseException (or sys.exit) too: only the user's Ctrl-C or signal ends it
        if isinstance(e, KeyboardInterrupt | GeneratorExit) or getattr(e, "from_signal", False):
            raise
        row["error"] = f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}"
    row["run_s"] = time.perf_counter() - t0
    row["run_cpu_s"] = time.process_time() - c0   # the worker process's CPU time (what a shared machine does not move)
    return Done(spec.key, row, probes, calls)


def _other_environment(spec) -> str:
    """How this process's environment differs from the one ``spec``'s key was made under ("": the
    same, or the spec carries none)."""
    env = dict(getattr(spec, "env", ()) or ())
    if not env:
        return ""
    from ctxsim.harness.sweep import keys

    here = keys.environment()
    return keys.difference(env, here) if here != env else ""


def _scalar(v: Any) -> Any:
    return json.dumps(v, sort_keys=True, default=str) if isinstance(v, (list, dict)) else v


def failure(spec, error: str) -> Done:
    """The row of a run that produced none (its worker died, its task was lost): a failed run."""
    row = _identity(spec)
    row["error"] = error
    row["run_s"] = 0.0
    return Done(spec.key, row)


def run_batch(specs: list) -> list[Done]:
    """On a Dask worker: the runs of one task (runs of one trace), returned to the client."""
    return [run_one(sp) for sp in specs]


# --- this process -------------------------------------------------------------------------------------

def inline(batches: list[list]) -> Iterator[Done]:
    for batch in batches:
        for sp in batch:
            yield run_one(sp)


# --- local worker processes ---------------------------------------------------------------------------

_PARENT: int | None = None
_OUT: Any = None   # per pool worker: the queue each finished run goes back on


def _init_worker(parent: int, out) -> None:
    """Pool worker initialiser: the kernel kills this worker when the sweep's main process dies,
    even by SIGKILL (Linux ``prctl(PR_SET_PDEATHSIG)``); elsewhere the worker checks its parent
    between runs."""
    import signal
    import sys

    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1   # linux/prctl.h
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:   # the parent died before the line above: no signal will come
        os._exit(1)
    global _PARENT, _OUT
    _PARENT, _OUT = parent, out


def _pool_run(batch: list) -> int:
    for sp in batch:
        if _PARENT is not None and os.getppid() != _PARENT:   # orphaned (no PDEATHSIG here): stop
            os._exit(1)
        _OUT.put(run_one(sp))
    return len(batch)


# assumed: how long after its last task ended a run may still be on its way (written through the pipe
# before the task ends, so this only bounds a wait that should not happen), and how often the
# coordinator looks at its queue and tasks when nothing came
ARRIVAL_S = 5.0
POLL_S = 0.2


def pool(batches: list[list], workers: int) -> Iterator[Done]:
    """The batches on ``workers`` processes; each run comes back as it finishes. The runs of a task
    whose worker died (killed, out of memory) and never came back are failure rows."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    # fork where it exists: workers start with the parsed traces already in _TRACES (expand() loaded
    # them), so no worker parses a trace again; spawn elsewhere
    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    q = ctx.SimpleQueue()   # put() writes through at once (no feeder thread): a run reported is a run received
    ex = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker, initargs=(os.getpid(), q))
    finished = False
    try:
        futures = {ex.submit(_pool_run, batch): batch for batch in batches}   # longest first
        waiting = {sp.key: sp for batch in batches for sp in batch}
        pending = set(futures)
        broken: list[tuple[list, str]] = []
        deadline: float | None = None
        while waiting:
            if not q.empty():
                d = q.get()
                if waiting.pop(d.key, None) is not None:
                    yield d
                continue
            time.sleep(POLL_S)
            for f in [f for f in pending if f.done()]:
                pending.discard(f)
                e = f.exception()
                if e is not None:   # a worker that died: its runs failed, the sweep goes on
                    broken.append((futures[f], f"{type(e).__name__}: {e} (the worker process died)"))
            if not pending:   # every task ended: what has not arrived by now will not
                deadline = deadline or time.monotonic() + ARRIVAL_S
                if time.monotonic() > deadline:
                    break
        why = {sp.key: msg for batch, msg in broken for sp in batch}
        for key, sp in list(waiting.items()):
            yield failure(sp, why.get(key, "the run's result never came back from its worker process"))
        finished = True
    finally:
        if finished:
            ex.shutdown(wait=True)
        else:   # interrupted (Ctrl-C, SIGTERM, an error): no queued run starts, the workers stop now
            procs = list((getattr(ex, "_processes", None) or {}).values())
            ex.shutdown(wait=False, cancel_futures=True)
            for p in procs:
                if p.is_alive():
                    p.kill()
            for p in procs:
                p.join(timeout=5)
        q.close()


# --- Dask ---------------------------------------------------------------------------------------------

# assumed (parameters of run_sweep): a scheduler that has not answered in 10 s is not coming; a
# cluster with no worker for 60 s (none joined, or all left) will not finish the sweep
DASK_CONNECT_TIMEOUT_S = 10.0
DASK_NO_WORKERS_TIMEOUT_S = 60.0


def quiet_dask() -> None:
    """distributed's client logs its own reconnect attempts with their tracebacks on stderr (a
    scheduler gone mid-sweep), also after the sweep has said so and while the process exits; the
    sweep says what happened in one line instead, so from here on the client's loggers keep to
    CRITICAL (this process is a sweep's: the workers' own logs are theirs)."""
    import logging

    from ctxsim.harness.files.extras import require

    require("dask", "distributed")   # its import configures these loggers: set them after it (the [dask] extra)

    for n in ("distributed", "distributed.client", "distributed.comm", "distributed.utils", "distributed.batched"):
        logging.getLogger(n).setLevel(logging.CRITICAL)


def dask_client(scheduler: str, timeout_s: float = DASK_CONNECT_TIMEOUT_S):
    """A client of the scheduler at ``scheduler``, or :class:`ExecutorError` within ``timeout_s``."""
    from ctxsim.harness.files.extras import require

    Client = require("dask", "distributed").Client   # the [dask] extra

    try:
        return Client(scheduler, timeout=f"{timeout_s}s")
    except (OSError, TimeoutError, ValueError, TypeError) as e:
        raise ExecutorError(f"--scheduler {scheduler}: no Dask scheduler answered within {timeout_s:g} s "
                            f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else 'no reply'})") from None


def wait_for_workers(client, timeout_s: float) -> None:
    try:
        client.wait_for_workers(1, timeout=timeout_s)
    except (TimeoutError, OSError) as e:
        raise ExecutorError(f"the Dask scheduler has no worker after {timeout_s:g} s: start one (dask worker "
                            f"ADDRESS) and run the sweep again ({type(e).__name__})") from None


def dask_threads(client) -> int:
    """How many runs the cluster runs at once (its workers' threads, now)."""
    try:
        return sum(client.nthreads().values())
    except Exception:  # noqa: BLE001 - an estimate for the plan: one worker when the scheduler does not say
        return 1


def _cancelled(e: BaseException) -> bool:
    """The future was cancelled or lost with its scheduler (distributed's FuturesCancelledError,
    CancelledError, a closed connection), not a failure of the run inside it."""
    import asyncio
    import concurrent.futures

    names = {"FuturesCancelledError", "FutureCancelledError", "CancelledError", "CommClosedError"}
    return isinstance(e, (asyncio.CancelledError, concurrent.futures.CancelledError)) or type(e).__name__ in names


def _gone(client, pending: int) -> ExecutorError:
    address = getattr(getattr(client, "scheduler", None), "address", None) or "its address"
    return ExecutorError(f"the Dask scheduler ({address}) went away mid-sweep with {pending} run(s) pending; finished "
                         "runs are kept: start the scheduler and its workers again and run the sweep again")


def on_dask(batches: list[list], client, no_workers_s: float = DASK_NO_WORKERS_TIMEOUT_S,
            poll_s: float = 1.0) -> Iterator[Done]:
    """Every task (a list of runs, longest first) on the cluster; the workers return each task's
    runs. A task that raised is failure rows; a cluster left with no worker for ``no_workers_s``, or
    a scheduler gone, stops the sweep with :class:`ExecutorError` (its pending runs cancelled)."""
    from distributed import wait

    if not batches:
        return
    # one submit each, with a falling priority: the scheduler hands the longest tasks out first
    futures = [client.submit(run_batch, batch, pure=False, priority=len(batches) - i)
               for i, batch in enumerate(batches)]
    by_key = {f.key: batch for f, batch in zip(futures, batches, strict=True)}
    pending = set(futures)
    idle_since: float | None = None
    try:
        while pending:
            try:
                done, pending = wait(pending, timeout=poll_s, return_when="FIRST_COMPLETED")
            except TimeoutError:   # nothing finished in poll_s: is anyone still working?
                done = set()
            except Exception as e:  # noqa: BLE001
                if _cancelled(e):
                    raise _gone(client, sum(len(by_key[f.key]) for f in pending)) from None
                raise
            for f in done:
                batch = by_key[f.key]
                try:
                    runs = f.result()
                except Exception as e:  # noqa: BLE001 - the task itself failed (a worker died, unpicklable)
                    if _cancelled(e) or f.status == "cancelled":
                        raise _gone(client, sum(len(by_key[g.key]) for g in pending | {f})) from None
                    for sp in batch:
                        yield failure(sp, f"{type(e).__name__}: {e} (on the Dask cluster)")
                    continue
                f.release()   # the rows are here: the cluster need not keep them
                yield from runs
            if done:
                idle_since = None
                continue
            if client.status in ("closing", "closed") or _scheduler_lost(client):
                raise _gone(client, sum(len(by_key[f.key]) for f in pending))
            if client.scheduler_info().get("workers"):
                idle_since = None
            elif idle_since is None:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since > no_workers_s:
                raise ExecutorError(f"the Dask cluster has had no worker for {no_workers_s:g} s with {len(pending)} "
                                    "tasks pending: start workers (dask worker ADDRESS) and run the sweep again "
                                    "(finished runs are kept)")
    finally:
        if pending:
            try:
                client.cancel(list(pending))
            except Exception:  # noqa: BLE001 - a scheduler that is gone cannot be told; nothing is left to stop
                pass


def _scheduler_lost(client) -> bool:
    """The client's connection to its scheduler is down (it is trying to reconnect)."""
    return getattr(client, "status", "running") not in ("running", "newly-created")


def drain(it: Iterable[Done], total: int, progress: bool) -> Iterator[Done]:
    """``it`` with a progress bar on the terminal."""
    if not progress or total == 0:
        yield from it
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    cols = [TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("ETA"),
            TimeRemainingColumn(), TextColumn("{task.fields[last]}")]
    with Progress(*cols, transient=False) as bar:
        task = bar.add_task("runs", total=total, last="")
        for d in it:
            row = d.row
            tag = "error" if row.get("error") else f"${row['cost_usd']:.2f}" if "cost_usd" in row else "done"
            bar.update(task, advance=1, last=f"{row['label']} {tag}")
            yield d


def close_client(client) -> None:
    """Close a Dask client this process opened, as far as it can (its scheduler may be gone)."""
    try:
        client.close(timeout=5)
    except Exception:  # noqa: BLE001 - a client whose scheduler is gone closes as far as it can
        pass
