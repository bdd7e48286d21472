"""Parameter sweeps: a TOML grid of strategies × parameter values × windows × models × traces ×
seeds, run on local processes or a Dask cluster, one Parquet row per run.

Every run has a key: a digest of everything that determines its numbers (strategy, resolved
parameters, trace content hash, model, window, cache, seed). Each finished run is written at once
to ``DIR/runs/<key>.parquet`` (and its per-call rows to ``DIR/calls/<key>.parquet``), so an
interrupted sweep continues where it stopped and gives the same rows as an uninterrupted one;
``DIR/results.parquet`` gathers them. A run that raises is recorded with its error, not fatal.

Per-trace work that does not depend on the configuration (parsing, validation, token counts) is
done once per worker process: traces are cached by path in the worker, and the engine memoises the
blocks it builds from a trace on the trace object. So the runs of one trace go to a worker together,
longest tasks first (``sweep_plan.plan``); the worker writes each run's files itself and returns
only its row, and the client writes nothing it can already see (``settle``).
"""

from __future__ import annotations

import glob
import hashlib
import itertools
import json
import os
import time
import tomllib
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import pandas as pd
from ctxsim.harness.model.trace import MAX_TOKENS
from ctxsim.harness.sweep import columns
from ctxsim.strategies import registry
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

RESULTS = "results.parquet"
Seed = Annotated[int, Field(ge=0, le=2 ** 32 - 1, description="a run seed (numpy's 32-bit seed range)")]


class SweepError(ValueError):
    pass


class StrategyGrid(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    label: str | None = Field(None, description="name shown in reports (default: the strategy name)")
    set: dict[str, Any] = Field(default_factory=dict, description="fixed parameters")
    grid: dict[str, list[Any]] = Field(default_factory=dict, description="parameter -> values to sweep")

    @field_validator("grid")
    @classmethod
    def _no_empty_axis(cls, grid: dict[str, list[Any]]) -> dict[str, list[Any]]:
        empty = [k for k, v in grid.items() if not v]
        if empty:   # an empty axis makes the product empty: the strategy would silently not run
            raise ValueError(f"grid.{empty[0]} is an empty list: give at least one value (or leave it out)")
        return grid


class SweepConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = "sweep"
    traces: list[str] = Field(min_length=1, description="trace paths or globs (relative to the config file), or "
                              "'preset:NAME' for a synthetic session generated on demand")
    window_traces: dict[str, list[str]] = Field(default_factory=dict, description="window (tokens) -> the traces "
                                                "run at that window instead of `traces` (a 1M window needs sessions "
                                                "long enough to reach its thresholds: preset:long-1m)")
    preset_seeds: list[Seed] = Field(default_factory=lambda: [1], min_length=1, description="seeds of generated presets")
    preset_set: dict[str, Any] = Field(default_factory=dict, description="--set overrides for generated presets")
    strategies: list[StrategyGrid] = Field(min_length=1, description="the strategies to run (name = \"all\": every one)")
    windows: list[Annotated[int, Field(gt=0, le=MAX_TOKENS)] | None] = Field(
        default_factory=lambda: [None], min_length=1, description="context windows (tokens; null: the trace's)")
    models: list[Annotated[str, Field(min_length=1)] | None] = Field(
        default_factory=lambda: [None], min_length=1, description="models (null: the trace's); each must be priced")
    cache: list[bool] = Field(default_factory=lambda: [True], min_length=1, description="prompt caching on / off")
    seeds: list[Seed] = Field(default_factory=lambda: [0, 1, 2], min_length=1,
                             description="run seeds (each configuration runs once per seed; reports give retention "
                             "with an interval over seeds × probes: at least 3 for a meaningful one)")
    retention: dict[str, list[Any]] = Field(default_factory=dict, description="retention-model constant -> values "
                                            "to sweep (RetentionParams, harness/retention/scoring.py)")
    summariser: dict[str, list[Any]] = Field(default_factory=dict, description="simulated-summariser constant -> "
                                             "values to sweep (SimParams, harness/llm/simulated.py)")
    save_calls: bool = True
    retention_target: float = Field(0.7, ge=0, le=1, allow_inf_nan=False,
                                    description="recommendation: lowest cost with retention >= this")

    @field_validator("window_traces")
    @classmethod
    def _window_keys(cls, wt: dict[str, list[str]]) -> dict[str, list[str]]:
        for k, v in wt.items():
            if not k.isdigit() or int(k) <= 0:
                raise ValueError(f"window_traces: key {k!r} is not a window size in tokens (e.g. 1000000)")
            if not v:
                raise ValueError(f"window_traces.{k} is an empty list: give at least one trace")
        return wt

    def traces_at(self, window: int | None) -> list[str]:
        """The traces run at ``window``."""
        return self.window_traces.get(str(window), self.traces) if window is not None else self.traces

    @field_validator("retention", "summariser")
    @classmethod
    def _no_empty_values(cls, axes: dict[str, list[Any]]) -> dict[str, list[Any]]:
        empty = [k for k, v in axes.items() if not v]
        if empty:
            raise ValueError(f"{empty[0]} is an empty list: give at least one value")
        return axes


@dataclass(frozen=True)
class RunSpec:
    key: str
    strategy: str
    label: str
    params: tuple[tuple[str, Any], ...]
    trace: str
    trace_hash: str
    model: str | None
    window: int | None
    cache: bool
    seed: int
    save_calls: bool
    assume: tuple[tuple[str, Any], ...] = ()  # ("retention.X" | "summariser.X", value) of this run

    def as_dict(self) -> dict[str, Any]:
        return {"key": self.key, "strategy": self.strategy, "label": self.label, "params": dict(self.params),
                "trace": self.trace, "trace_hash": self.trace_hash, "model": self.model, "window": self.window,
                "cache": self.cache, "seed": self.seed, "assume": dict(self.assume)}

    def assumptions(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """(RetentionParams overrides, SimParams overrides) of this run."""
        ret = {k.split(".", 1)[1]: v for k, v in self.assume if k.startswith("retention.")}
        summ = {k.split(".", 1)[1]: v for k, v in self.assume if k.startswith("summariser.")}
        return ret, summ


def load_config(path: str | Path) -> SweepConfig:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise SweepError(f"{path}: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise SweepError(f"{path}: not TOML: {e}") from None
    try:
        cfg = SweepConfig.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        msg = err["msg"].removeprefix("Value error, ")
        raise SweepError(f"{path}: {'.'.join(map(str, err['loc']))}: {msg}") from None
    unknown = [k for k in cfg.window_traces if int(k) not in cfg.windows]
    if unknown:
        raise SweepError(f"{path}: window_traces.{unknown[0]}: not one of the windows ({', '.join(map(str, cfg.windows))})")
    cfg.strategies = _expand_all(cfg.strategies)
    _check_models(path, cfg)
    _check_presets(path, cfg)
    for combo in assumption_grid(cfg):  # and on a bad modelling constant
        _check_assumptions(path, combo)
    for s in cfg.strategies:  # fail on a bad name or parameter before any run starts
        cls = registry.load_class(s.name)   # a name or MODULE:CLASS, as `run` takes
        for combo in _grid(s):
            registry.make_config(cls, {**s.set, **combo})
    return cfg


def _check_models(path: Path, cfg: SweepConfig) -> None:
    from ctxsim.harness.provider.models import UnknownModelError, load_table

    table = load_table()
    for m in cfg.models:
        if m is not None:
            try:
                table.get(m)
            except UnknownModelError as e:
                raise SweepError(f"{path}: models: {e}") from None


def _check_presets(path: Path, cfg: SweepConfig) -> None:
    """A ``preset:NAME`` trace and ``preset_set`` are checked before any run (not at generation)."""
    every = [*cfg.traces, *(t for ts in cfg.window_traces.values() for t in ts)]
    names = list(dict.fromkeys(t.split(":", 1)[1] for t in every if t.startswith("preset:")))
    if not names:
        return
    from ctxsim.harness.synth import PresetError, load_preset

    sets = [f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in cfg.preset_set.items()]
    for name in names:
        try:
            load_preset(name, sets)
        except PresetError as e:
            raise SweepError(f"{path}: traces: preset:{name}: {e}") from None


def _check_assumptions(path: Path, combo: dict[str, Any]) -> None:
    import dataclasses

    from ctxsim.harness.llm.simulated import SimParams
    from ctxsim.harness.retention.scoring import RetentionParams

    ret = {k.split(".", 1)[1]: v for k, v in combo.items() if k.startswith("retention.")}
    summ = {k.split(".", 1)[1]: v for k, v in combo.items() if k.startswith("summariser.")}
    try:
        RetentionParams(**ret)
    except ValidationError as e:
        err = e.errors()[0]
        raise SweepError(f"{path}: retention.{'.'.join(map(str, err['loc']))}: {err['msg']}") from None
    valid = {f.name for f in dataclasses.fields(SimParams)}
    bad = sorted(set(summ) - valid)
    if bad:
        raise SweepError(f"{path}: summariser.{bad[0]}: unknown constant (valid: {', '.join(sorted(valid))})")
    try:
        SimParams(**summ)
    except (TypeError, ValueError) as e:
        raise SweepError(f"{path}: summariser: {e}") from None


def _expand_all(items: list[StrategyGrid]) -> list[StrategyGrid]:
    """``name = "all"`` stands for every registered strategy with its defaults (those named
    explicitly elsewhere in the grid keep their own entries; those that re-enact an imported log
    are left out)."""
    named = {s.name for s in items if s.name != "all"}
    out: list[StrategyGrid] = []
    for s in items:
        if s.name == "all":
            out.extend(StrategyGrid(name=n) for n, cls in registry.all_strategies().items()
                       if n not in named and not cls.needs_recorded_trace)
        else:
            out.append(s)
    return out


def _grid(s: StrategyGrid) -> list[dict[str, Any]]:
    keys = list(s.grid)
    return [dict(zip(keys, vals, strict=True)) for vals in itertools.product(*(s.grid[k] for k in keys))] or [{}]


def resolve_traces(cfg: SweepConfig, base: Path, gen_dir: Path, log: Callable[[str], None] = print) -> list[Path]:
    """Paths of every trace (those of ``window_traces`` too); presets are generated into ``gen_dir``
    (once: an existing file with the same name and seed is reused, since generation is deterministic)."""
    every = [*cfg.traces, *(t for ts in cfg.window_traces.values() for t in ts)]
    return list(dict.fromkeys(_resolve(list(dict.fromkeys(every)), cfg, base, gen_dir, log)))


def window_trace_paths(cfg: SweepConfig, base: Path, gen_dir: Path,
                       log: Callable[[str], None] = print) -> dict[int | None, list[Path]]:
    """window -> the paths of the traces run at that window (``window_traces``, else ``traces``)."""
    return {w: _resolve(cfg.traces_at(w), cfg, base, gen_dir, log) for w in cfg.windows}


def _resolve(items: list[str], cfg: SweepConfig, base: Path, gen_dir: Path, log: Callable[[str], None]) -> list[Path]:
    out: list[Path] = []
    for item in items:
        if item.startswith("preset:"):
            from ctxsim.harness.model import trace as tr
            from ctxsim.harness.synth import generate, load_preset

            name = item.split(":", 1)[1]
            sets = [f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in cfg.preset_set.items()]
            for seed in cfg.preset_seeds:
                dest = gen_dir / f"{name}-seed{seed}.jsonl"
                if not dest.exists():
                    log(f"generating preset {name} (seed {seed}) -> {dest}")
                    tr.write(generate(load_preset(name, sets), seed), dest)
                out.append(dest)
            continue
        pattern = item if os.path.isabs(item) else str(base / item)
        matches = sorted(glob.glob(pattern))
        if not matches:
            raise SweepError(f"traces: {item!r} matches no file")
        out.extend(Path(m) for m in matches)
    return out


def run_key(strategy: str, params: dict[str, Any], trace_hash: str, model: str | None, window: int | None,
            cache: bool, seed: int, assume: dict[str, Any] | None = None) -> str:
    parts: list[Any] = [strategy, params, trace_hash, model, window, cache, seed]
    if assume:  # only when set: the keys of sweeps without modelling overrides stay what they were
        parts.append(assume)
    blob = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def assumption_grid(cfg: SweepConfig) -> list[dict[str, Any]]:
    """Every combination of the swept modelling constants, keyed ``retention.X`` / ``summariser.X``."""
    axes = {f"retention.{k}": v for k, v in cfg.retention.items()} | {f"summariser.{k}": v for k, v in cfg.summariser.items()}
    keys = list(axes)
    return [dict(zip(keys, vals, strict=True)) for vals in itertools.product(*(axes[k] for k in keys))] or [{}]


def expand(cfg: SweepConfig, traces: list[Path], per_window: dict[int | None, list[Path]] | None = None) -> list[RunSpec]:
    """Every run of the grid; ``per_window``: the traces of each window (default: ``traces`` at all)."""
    per_window = per_window or {w: traces for w in cfg.windows}
    hashes = {p: _trace(str(p)).content_hash for p in traces}
    specs: list[RunSpec] = []
    for s in cfg.strategies:
        cls = registry.load_class(s.name)   # a name or MODULE:CLASS, as `run` takes
        if cls.needs_recorded_trace:
            bare = [p for p in traces if _trace(str(p)).header.recorded is None]
            if bare:
                raise SweepError(f"strategies: {s.name} re-enacts a recorded agent, and {bare[0]} is not an imported "
                                 "log (no header.recorded)")
        for combo in _grid(s):
            resolved = registry.config_dict(registry.make_config(cls, {**s.set, **combo}))
            for window in cfg.windows:
                for p, model, cache, seed, assume in itertools.product(
                        per_window[window], cfg.models, cfg.cache, cfg.seeds, assumption_grid(cfg)):
                    key = run_key(s.name, resolved, hashes[p], model, window, cache, seed, assume)
                    label = s.label or s.name
                    specs.append(RunSpec(key, s.name, label, tuple(sorted(resolved.items())), str(p), hashes[p], model,
                                         window, cache, seed, cfg.save_calls, tuple(sorted(assume.items()))))
    seen: set[str] = set()
    unique = []
    for sp in specs:
        if sp.key not in seen:
            seen.add(sp.key)
            unique.append(sp)
    return unique


# --- running one spec (in a worker) ------------------------------------------------------------------

_TRACES: dict[str, Any] = {}  # per worker process: parsed traces (and, on them, their counted blocks)


def _trace(path: str):
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


Written = tuple[int, int] | None   # (size, mtime in ns) of the run file a worker wrote; None: it could not


def run_batch(specs: list[RunSpec], out_dir: str) -> list[tuple[dict[str, Any], Written]]:
    """On a worker: the runs of one task (sweep_plan.plan: runs of one trace), each written to
    ``out_dir`` as it finishes; returns each run's row and what was written, for the client's
    bookkeeping (``settle``)."""
    return [_run_one(sp, out_dir) for sp in specs]


def _run_one(spec: RunSpec, out_dir: str) -> tuple[dict[str, Any], Written]:
    """Run one configuration and write its row to ``runs/``; the flat row and what was written."""
    from ctxsim.harness.replay.engine import RunConfig, replay

    t0 = time.perf_counter()
    row: dict[str, Any] = {"key": spec.key, "label": spec.label, "strategy": spec.strategy, "trace": spec.trace,
                           "trace_hash": spec.trace_hash, "model_setting": spec.model or "", "window_setting": spec.window or 0,
                           "cache": spec.cache, "seed": spec.seed, "error": ""}
    row.update({f"param.{k}": v for k, v in spec.params})
    row.update({f"param.{k}": v for k, v in spec.assume})  # swept modelling constants: param.retention.X ...
    ret, summ = spec.assumptions()
    try:
        res = replay(_trace(spec.trace), registry.load_class(spec.strategy), dict(spec.params),
                     RunConfig(model=spec.model, window=spec.window, cache=spec.cache, seed=spec.seed,
                               retention=ret, summariser=summ))
        # the run's identity is already in the row (and its parameters as param.*)
        m = {k: v for k, v in res.metrics.items() if k not in ("params", "strategy", "trace", "seed", "trace_hash")}
        flat = flatten(m)
        for k, v in flat.items():
            row[k if k not in row else f"metric.{k}"] = v
        if spec.save_calls:
            calls = res.calls.assign(key=spec.key)
            _atomic_parquet(calls, Path(out_dir) / "calls" / f"{spec.key}.parquet")
        if len(res.probes):  # per-probe scores: what a report's retention intervals resample
            _atomic_parquet(res.probes, Path(out_dir) / "probes" / f"{spec.key}.parquet")
    except Exception as e:  # a failed run is a recorded result, not the end of the sweep
        row["error"] = f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}"
    row["run_s"] = time.perf_counter() - t0
    path = Path(out_dir) / "runs" / f"{spec.key}.parquet"
    try:
        _atomic_parquet(columns.encode(pd.DataFrame([_scalarise(row)])), path)
        st = path.stat()
    except Exception as e:  # noqa: BLE001 - the client writes the row it gets back (store_row)
        if not row["error"]:
            row["error"] = f"{type(e).__name__}: {e} (on the worker)"
        return row, None
    return row, (st.st_size, st.st_mtime_ns)


def _scalarise(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (json.dumps(v, sort_keys=True, default=str) if isinstance(v, (list, dict)) else v) for k, v in row.items()}


def _atomic_parquet(df: pd.DataFrame, path: Path) -> None:
    from ctxsim.harness.files import atomic

    atomic.write(path, lambda p: df.to_parquet(p, index=False))


def failure_row(spec: RunSpec, error: str) -> dict[str, Any]:
    """The row of a run that produced none (its worker died, its task was lost): a failed run."""
    row: dict[str, Any] = {"key": spec.key, "label": spec.label, "strategy": spec.strategy, "trace": spec.trace,
                           "trace_hash": spec.trace_hash, "model_setting": spec.model or "",
                           "window_setting": spec.window or 0, "cache": spec.cache, "seed": spec.seed, "error": error}
    row.update({f"param.{k}": v for k, v in spec.params})
    row.update({f"param.{k}": v for k, v in spec.assume})
    row["run_s"] = 0.0
    return row


def store_row(row: dict[str, Any], out_dir: str | Path) -> dict[str, Any]:
    """On the client: the row a worker returned is written to ``runs/``."""
    _atomic_parquet(columns.encode(pd.DataFrame([_scalarise(row)])), Path(out_dir) / "runs" / f"{row['key']}.parquet")
    return row


def settle(row: dict[str, Any], written: Written, out_dir: str | Path) -> dict[str, Any]:
    """On the client: a run's row reaches the client's ``runs/``. When the client sees the very
    file the worker wrote (a shared folder: same size and modification time), nothing is done;
    else (the worker could not write, or its folder is not the client's) the client writes it."""
    if written is not None:
        try:
            st = (Path(out_dir) / "runs" / f"{row['key']}.parquet").stat()
            if (st.st_size, st.st_mtime_ns) == written:
                return row
        except OSError:
            pass
    return store_row(row, out_dir)


def settle_failed(batch: list[RunSpec], error: str, out_dir: str | Path, since_ns: int) -> list[dict[str, Any]]:
    """The runs of a task that raised (its worker died, it was lost): a run whose file the worker
    wrote before (modified since ``since_ns``, when the task went out) is kept as it is; every
    other run is a failure row."""
    rows = []
    for sp in batch:
        try:
            if (Path(out_dir) / "runs" / f"{sp.key}.parquet").stat().st_mtime_ns >= since_ns:
                rows.append({"key": sp.key, "label": sp.label, "error": ""})
                continue
        except OSError:
            pass
        rows.append(store_row(failure_row(sp, error), out_dir))
    return rows


# --- executors ------------------------------------------------------------------------------------

# assumed (parameters of run_sweep): a scheduler that has not answered in 10 s is not coming; a
# cluster with no worker for 60 s (none joined, or all left) will not finish the sweep
DASK_CONNECT_TIMEOUT_S = 10.0
DASK_NO_WORKERS_TIMEOUT_S = 60.0


def _die_with_parent(parent: int) -> None:
    """Pool worker initialiser: the kernel kills this worker when the sweep's main process dies,
    even by SIGKILL (Linux ``prctl(PR_SET_PDEATHSIG)``); elsewhere the worker checks its parent
    between runs (``_orphaned``)."""
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
    global _PARENT
    _PARENT = parent


_PARENT: int | None = None


def _pool_run(batch: list[RunSpec], out_dir: str) -> list[tuple[dict[str, Any], Written]]:
    done = []
    for sp in batch:
        if _PARENT is not None and os.getppid() != _PARENT:   # orphaned (no PDEATHSIG here): stop
            os._exit(1)
        done.append(_run_one(sp, out_dir))
    return done


# a run file modified up to this long before its task went out is still the task's (the file
# system's clock is coarser than time.time_ns(); assumed, far below any run's duration)
_CLOCK_SLACK_NS = 1_000_000_000


def _local(batches: list[list[RunSpec]], out_dir: str, workers: int) -> Iterable[dict[str, Any]]:
    if workers <= 1:
        for batch in batches:
            for sp in batch:
                yield settle(*_run_one(sp, out_dir), out_dir)
        return
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # fork where it exists: workers start with the parsed traces already in _TRACES (expand() loaded
    # them), so no worker parses a trace again; spawn elsewhere
    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_die_with_parent,
                               initargs=(os.getpid(),))
    finished = False
    try:
        since = time.time_ns() - _CLOCK_SLACK_NS
        futures = {pool.submit(_pool_run, batch, out_dir): batch for batch in batches}   # longest first
        for f in as_completed(futures):
            try:
                done = f.result()
            except Exception as e:  # noqa: BLE001 - a worker that died: its runs failed, the sweep goes on
                yield from settle_failed(futures[f], f"{type(e).__name__}: {e} (the worker process died)", out_dir,
                                         since)
                continue
            for row, written in done:
                yield settle(row, written, out_dir)
        finished = True
    finally:
        if finished:
            pool.shutdown(wait=True)
        else:   # interrupted (Ctrl-C, SIGTERM, an error): no queued run starts, the workers stop now
            procs = list((getattr(pool, "_processes", None) or {}).values())
            pool.shutdown(wait=False, cancel_futures=True)
            for p in procs:
                if p.is_alive():
                    p.kill()
            for p in procs:
                p.join(timeout=5)


def dask_client(scheduler: str, timeout_s: float = DASK_CONNECT_TIMEOUT_S):
    """A client of the scheduler at ``scheduler``, or :class:`SweepError` within ``timeout_s``."""
    from ctxsim.harness.files.extras import require

    Client = require("dask", "distributed").Client   # the [dask] extra

    try:
        return Client(scheduler, timeout=f"{timeout_s}s")
    except (OSError, TimeoutError, ValueError, TypeError) as e:
        raise SweepError(f"--scheduler {scheduler}: no Dask scheduler answered within {timeout_s:g} s "
                         f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else 'no reply'})") from None


def _dask(batches: list[list[RunSpec]], out_dir: str, client, no_workers_s: float = DASK_NO_WORKERS_TIMEOUT_S,
          poll_s: float = 1.0) -> Iterable[dict[str, Any]]:
    """Every task (a list of runs, longest first) on the cluster; the workers write each run's
    files and return its row, which the client writes only where it cannot see the worker's file
    (``settle``). A run whose task raised is a failure row; a cluster left with no worker for
    ``no_workers_s`` stops the sweep with :class:`SweepError` (its pending runs cancelled),
    instead of waiting forever."""
    from distributed import wait

    if not batches:
        return
    since = time.time_ns() - _CLOCK_SLACK_NS
    # one submit each, with a falling priority: the scheduler hands the longest tasks out first
    futures = [client.submit(run_batch, batch, out_dir, pure=False, priority=len(batches) - i)
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
            for f in done:
                batch = by_key[f.key]
                try:
                    rows = f.result()
                except Exception as e:  # noqa: BLE001 - the task itself failed (a worker died, unpicklable)
                    yield from settle_failed(batch, f"{type(e).__name__}: {e} (on the Dask cluster)", out_dir, since)
                    continue
                f.release()   # the rows are here: the cluster need not keep them
                for row, written in rows:
                    yield settle(row, written, out_dir)
            if done:
                idle_since = None
                continue
            if client.scheduler_info().get("workers"):
                idle_since = None
            elif idle_since is None:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since > no_workers_s:
                raise SweepError(f"the Dask cluster has had no worker for {no_workers_s:g} s with {len(pending)} "
                                 "runs pending: start workers (dask worker ADDRESS) and run the sweep again "
                                 "(finished runs are kept)")
    finally:
        if pending:
            client.cancel(list(pending))


def run_sweep(cfg: SweepConfig, out_dir: str | Path, *, base: Path = Path("."), workers: int | None = None,
              executor: str = "local", scheduler: str | None = None, client=None, progress: bool = True,
              limit: int | None = None, log: Callable[[str], None] = print, retry_failed: bool = False,
              connect_timeout_s: float = DASK_CONNECT_TIMEOUT_S,
              no_workers_s: float = DASK_NO_WORKERS_TIMEOUT_S) -> pd.DataFrame:
    """Run every spec not already in ``out_dir`` (with ``retry_failed``, the runs that raised
    too); return all rows (old and new), sorted by key. Anything wrong before the first run (a
    trace, a preset, the executor, a scheduler that does not answer or has no worker) leaves no
    new ``out_dir`` behind. ``df.attrs["missing"]``: runs of this invocation that left no row.

    Every path is made absolute here, before any executor sees it: a Dask worker started in
    another folder reads the same traces and writes the same run files as the client."""
    out = Path(os.path.abspath(out_dir))
    base = Path(os.path.abspath(base))
    if limit is not None and limit < 0:
        raise SweepError(f"--limit {limit}: give a number of runs >= 0")
    if executor not in ("local", "dask"):
        raise SweepError(f"unknown executor {executor!r}: local or dask")
    if executor == "dask" and client is None and not scheduler:
        raise SweepError("--executor dask needs --scheduler ADDRESS (e.g. tcp://127.0.0.1:8786)")
    if out.exists() and not out.is_dir():
        raise SweepError(f"--out {out}: a file, not a folder")
    own_client = False
    if executor == "dask" and client is None:   # before anything is written: an unreachable scheduler leaves nothing
        client, own_client = dask_client(scheduler, connect_timeout_s), True
    try:
        if executor == "dask":
            _wait_for_workers(client, no_workers_s)
        return _run_sweep(cfg, out, base, workers, executor, client, progress, limit, log, retry_failed,
                          no_workers_s)
    finally:
        if own_client:
            client.close()


def _wait_for_workers(client, timeout_s: float) -> None:
    try:
        client.wait_for_workers(1, timeout=timeout_s)
    except (TimeoutError, OSError) as e:
        raise SweepError(f"the Dask scheduler has no worker after {timeout_s:g} s: start one (dask worker "
                         f"ADDRESS) and run the sweep again ({type(e).__name__})") from None


def _run_sweep(cfg: SweepConfig, out: Path, base: Path, workers: int | None, executor: str, client,
               progress: bool, limit: int | None, log: Callable[[str], None], retry_failed: bool,
               no_workers_s: float) -> pd.DataFrame:
    from ctxsim.harness.files import atomic

    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
        traces = [Path(os.path.abspath(p)) for p in resolve_traces(cfg, base, out / "traces", log)]
        per_window = {w: [Path(os.path.abspath(p)) for p in ps]
                      for w, ps in window_trace_paths(cfg, base, out / "traces", log).items()}
        specs = expand(cfg, traces, per_window)
        _note_overrides(cfg, traces, log)
        atomic.write_text(out / "sweep.json", json.dumps({"config": cfg.model_dump(), "runs": [s.as_dict() for s in specs]},
                                                         indent=1, default=str))
    except BaseException:
        if created:
            import shutil

            shutil.rmtree(out, ignore_errors=True)
        raise
    done, failed, corrupt = run_states(out)
    for f in corrupt:
        log(f"warning: {f}: unreadable run file (damaged?): the run is done again")
    skip = done if retry_failed else done | failed
    todo = [s for s in specs if s.key not in skip]
    retried = sum(1 for s in todo if s.key in failed)
    log(f"{len(specs)} runs in the grid, {len(specs) - len(todo)} already done, "
        f"{len(todo) if limit is None else min(limit, len(todo))} to run"
        + (f" ({retried} failed before: retried)" if retried else ""))
    if limit is not None:
        todo = todo[:limit]
    if executor == "local":
        workers = workers or os.cpu_count() or 1
        it = _local(_plan(todo, workers), str(out), workers)
    else:
        it = _dask(_plan(todo, max(1, _dask_threads(client))), str(out), client, no_workers_s)
    read: dict[Path, pd.DataFrame] = {}
    _drain(_read_as_they_come(it, out, read), len(todo), progress)
    df = collect(out, [s.key for s in specs], log=log, read=read)
    have = set(df["key"]) if "key" in df else set()
    df.attrs["missing"] = [s.key for s in todo if s.key not in have]
    return df


def _plan(todo: list[RunSpec], workers: int) -> list[list[RunSpec]]:
    from ctxsim.harness.sweep.plan import plan

    return plan(todo, lambda sp: sp.trace, lambda path: os.path.getsize(path), workers)


def _dask_threads(client) -> int:
    """How many runs the cluster runs at once (its workers' threads, now)."""
    try:
        return sum(client.nthreads().values())
    except Exception:  # noqa: BLE001 - an estimate for the plan: one worker when the scheduler does not say
        return 1


def _note_overrides(cfg: SweepConfig, traces: list[Path], log: Callable[[str], None]) -> None:
    """One line for each grid model or window that overrides what an imported trace recorded."""
    from ctxsim.harness.replay.engine import RunConfig
    from ctxsim.harness.replay.setting import override_warnings

    seen: set[str] = set()
    for p in traces:
        t = _trace(str(p))
        for model, window in itertools.product(cfg.models, cfg.windows):
            for line in override_warnings(RunConfig(model=model, window=window), t):
                if line not in seen:
                    seen.add(line)
                    log(f"warning: {line}")


def _drain(it: Iterable[dict[str, Any]], total: int, progress: bool) -> None:
    if not progress or total == 0:
        for _ in it:
            pass
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
        for row in it:
            tag = "error" if row.get("error") else f"${row['cost_usd']:.2f}" if "cost_usd" in row else "done"
            bar.update(task, advance=1, last=f"{row['label']} {tag}")


def run_states(out: Path) -> tuple[set[str], set[str], list[Path]]:
    """(keys of finished runs, keys of runs that raised, run files that cannot be read)."""
    done: set[str] = set()
    failed: set[str] = set()
    corrupt: list[Path] = []
    for f in sorted((out / "runs").glob("*.parquet")) if (out / "runs").exists() else []:
        try:
            err = pd.read_parquet(f, columns=["error"])["error"].fillna("")
        except Exception:  # noqa: BLE001 - a damaged file of any kind is a run to do again
            corrupt.append(f)
            continue
        (failed if (err != "").any() else done).add(f.stem)
    return done, failed, corrupt


def _read_as_they_come(rows: Iterable[dict[str, Any]], out: Path, read: dict[Path, pd.DataFrame]) -> Iterable[dict[str, Any]]:
    """Each finished run's file is read into ``read`` as its row arrives, while the workers go on,
    so that ``collect`` at the end reads only the runs of earlier sweeps (it was ~25 ms a run,
    after the last run; a file that cannot be read here is left to ``collect``, which says so)."""
    for row in rows:
        f = out / "runs" / f"{row['key']}.parquet"
        try:
            read[f] = pd.read_parquet(f)
        except Exception:  # noqa: BLE001
            pass
        yield row


def collect(out: Path, keys: list[str] | None = None, log: Callable[[str], None] | None = None,
            read: dict[Path, pd.DataFrame] | None = None) -> pd.DataFrame:
    """Gather the run files into ``results.parquet`` (a damaged run file is skipped, and said);
    ``read``: run files already read (the same frames ``pd.read_parquet`` gives)."""
    read = read or {}
    files = sorted((out / "runs").glob("*.parquet"))
    if keys is not None:
        wanted = set(keys)
        files = [f for f in files if f.stem in wanted]
    frames, corrupt = [], []
    for f in files:
        try:
            frames.append(read[f] if f in read else pd.read_parquet(f))
        except Exception:  # noqa: BLE001 - one damaged run must not take the sweep's results with it
            corrupt.append(f)
    for f in corrupt:
        (log or print)(f"warning: {f}: unreadable run file (damaged?): left out")
    if not frames:
        return pd.DataFrame()
    df = columns.decode(pd.concat(frames, ignore_index=True)).sort_values("key").reset_index(drop=True)
    from ctxsim.harness.files import atomic  # a full disk is atomic.WriteError: bad input naming the path

    atomic.write(out / RESULTS, lambda p: columns.encode(df).to_parquet(p, index=False))
    df.attrs["corrupt"] = [str(f) for f in corrupt]
    return df


def grid_keys(out: Path) -> list[str] | None:
    """The run keys of the grid ``sweep.json`` records (None: no readable sweep.json)."""
    try:
        return [r["key"] for r in json.loads((Path(out) / "sweep.json").read_text(encoding="utf-8"))["runs"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def completeness(out: Path, df: pd.DataFrame) -> dict[str, int]:
    """How complete the results are against the grid in ``sweep.json``: runs in the grid,
    missing (never run, or their file unreadable), failed (raised)."""
    grid = grid_keys(out) or []
    have = set(df["key"]) if "key" in df else set()
    failed = int((df["error"].fillna("") != "").sum()) if "error" in df else 0
    return {"grid": len(grid), "missing": len(set(grid) - have), "failed": failed,
            "corrupt": len(df.attrs.get("corrupt", []))}


def load_results(out: str | Path, log: Callable[[str], None] | None = None) -> pd.DataFrame:
    """The sweep's rows, gathered again from ``runs/`` when it exists (``results.parquet`` may be
    stale: a sweep resumed or interrupted after it was written), else ``results.parquet``."""
    out = Path(out)
    if not out.is_dir():
        raise SweepError(f"{out}: no such sweep folder")
    if (out / "runs").is_dir() and any((out / "runs").glob("*.parquet")):
        keys = grid_keys(out)   # runs of an earlier grid in the same folder are not this sweep's
        if keys is not None:
            stale = sorted({f.stem for f in (out / "runs").glob("*.parquet")} - set(keys))
            if stale:
                (log or print)(f"note: {len(stale)} run file(s) in {out / 'runs'} are not in this sweep's grid "
                               f"(sweep.json; an earlier grid's): left out")
        df = collect(out, keys=keys, log=log)
    elif (out / RESULTS).exists():
        try:
            df = columns.decode(pd.read_parquet(out / RESULTS))
        except Exception as e:  # noqa: BLE001
            raise SweepError(f"{out / RESULTS}: unreadable ({type(e).__name__}); run the sweep again") from None
    else:
        df = pd.DataFrame()
    if df.empty:
        raise SweepError(f"{out}: no sweep results (expected {RESULTS} or runs/*.parquet)")
    return df


def load_probes(out: str | Path, keys: Iterable[str]) -> dict[str, pd.DataFrame]:
    """Per-probe scores of the runs that have them (``DIR/probes/<key>.parquet``)."""
    found = {}
    for k in keys:
        p = Path(out) / "probes" / f"{k}.parquet"
        if p.exists():
            found[k] = _read_or_warn(p)
    return {k: v for k, v in found.items() if v is not None}


def _read_or_warn(p: Path) -> pd.DataFrame | None:
    """A per-run file of a sweep; a damaged one is said (stderr) and left out, never a traceback."""
    try:
        return pd.read_parquet(p)
    except Exception:  # noqa: BLE001
        import sys

        print(f"warning: {p}: unreadable (damaged?): left out", file=sys.stderr)
        return None


def load_calls(out: str | Path, keys: Iterable[str]) -> dict[str, pd.DataFrame]:
    out = Path(out)
    found = {}
    for k in keys:
        p = out / "calls" / f"{k}.parquet"
        if p.exists():
            found[k] = _read_or_warn(p)
    return {k: v for k, v in found.items() if v is not None}
