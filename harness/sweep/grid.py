"""Parameter sweeps: a TOML grid of strategies × parameter values × windows × models × traces ×
seeds, run in this process, on local worker processes or a Dask cluster (harness/sweep/executors.py),
one row per run in the sweep's results store (harness/sweep/store.py).

Every run has a key: a digest of everything that moves its numbers, the setting the grid asks for and
the environment it runs under (harness/sweep/keys.py). Each finished run is written to the store at
once, in one transaction, so an interrupted sweep continues where it stopped and gives the same rows
as an uninterrupted one; a resume redoes what was done under another environment and says so.
``DIR/results.parquet`` exports the rows for pandas. A run that raises is recorded with its error,
not fatal. One sweep at a time per folder (``store.SweepLock``).
"""

from __future__ import annotations

import glob
import itertools
import json
import os
import shutil
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import pandas as pd
from ctxsim.harness.files import regular
from ctxsim.harness.model.trace import MAX_TOKENS
from ctxsim.harness.sweep import columns, executors, keys, store
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


class TuneConfig(BaseModel):
    """``[tune]``: what ``ctxsim tune`` searches (harness/sweep/tune.py)."""

    model_config = ConfigDict(extra="forbid")
    strategy: str | None = Field(None, description="the strategy to tune (default: the one the grid sweeps)")
    trials: int = Field(40, ge=1, le=100_000, description="trials in all (a resumed study counts those it holds)")
    space: dict[str, list[Any]] = Field(default_factory=dict, description="parameter -> [low, high] (numbers) or the "
                                        "choices; default: each swept parameter from its smallest to its largest value")


class SweepConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = "sweep"
    traces: list[str] = Field(min_length=1, description="trace paths, globs or folders (relative to the config file; "
                              "a folder: every .jsonl under it, e.g. an imported one), 'preset:NAME' for a synthetic "
                              "session generated on demand, or 'population:PRESET:N' for N synthetic sessions whose "
                              "shapes are drawn from real logs (harness/synth/population.py)")
    window_traces: dict[str, list[str]] = Field(default_factory=dict, description="window (tokens) -> the traces "
                                                "run at that window instead of `traces` (a 1M window needs sessions "
                                                "long enough to reach its thresholds: preset:long-1m)")
    preset_seeds: list[Seed] = Field(default_factory=lambda: [1], min_length=1, description="seeds of generated presets")
    preset_set: dict[str, Any] = Field(default_factory=dict, description="--set overrides for generated presets")
    population_seed: Seed = Field(1, description="seed of the first session of a population:PRESET:N (session i: "
                                  "this + i)")
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
    tune: TuneConfig | None = Field(None, description="what `ctxsim tune` searches with this file's sessions")
    retention_target: float = Field(0.7, ge=0, le=1, allow_inf_nan=False,
                                    description="recommendation: lowest cost with retention >= this")

    @field_validator("strategies")
    @classmethod
    def _one_strategy_per_label(cls, strategies: list[StrategyGrid]) -> list[StrategyGrid]:
        """A label names the settings of one strategy (a report compares its settings as one family):
        two strategies under one label are refused (the fresh hostile set of issue 44: the report ended
        in a TypeError and the sweep's answer mixed them)."""
        seen: dict[str, str] = {}
        for s in strategies:
            label = s.label or s.name
            if seen.setdefault(label, s.name) != s.name:
                raise ValueError(f"label {label!r} is given to {seen[label]} and to {s.name}: give each strategy a "
                                 "label of its own")
        return strategies

    @field_validator("preset_set")
    @classmethod
    def _finite_preset_set(cls, sets: dict[str, Any]) -> dict[str, Any]:
        """A NaN or an infinity is refused here, named as preset_set's: passed on as ``--set`` text
        it read as the string "NaN" and the shipped preset was blamed (issue 44 fresh, case 28)."""
        import math

        def walk(v: Any, where: str) -> None:
            if isinstance(v, float) and not math.isfinite(v):
                raise ValueError(f"{where}: Input should be a finite number, got {v}")
            for k, x in (v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, list) else ()):
                walk(x, f"{where}.{k}")

        for k, v in sets.items():
            walk(v, k)
        return sets

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
    base: str = ""   # the setting's digest without the environment (harness/sweep/keys.py)
    env: tuple[tuple[str, str], ...] = ()   # the environment its key was made under (a worker checks its own)

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
        data = tomllib.loads(regular.read_text(path))   # a file (not /dev/zero, not a fifo), read to a bound
    except OSError as e:
        raise SweepError(f"{path}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise SweepError(f"{path}: not UTF-8 text: {e.reason} at byte {e.start + 1}") from None
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
    """A ``preset:NAME`` or ``population:NAME:N`` trace and ``preset_set`` are checked before any run
    (not at generation)."""
    every = [*cfg.traces, *(t for ts in cfg.window_traces.values() for t in ts)]
    names = [("preset", t.split(":", 1)[1]) for t in every if t.startswith("preset:")]
    for t in every:
        try:
            pop = population_item(t)
        except SweepError as e:
            raise SweepError(f"{path}: {e}") from None
        if pop is not None:
            names.append(("population", pop[0]))
    if not names:
        return
    from ctxsim.harness.synth import PresetError, load_preset

    for kind, name in dict.fromkeys(names):
        try:
            load_preset(name)
        except PresetError as e:   # the preset itself
            raise SweepError(f"{path}: traces: {kind}:{name}: {e}") from None
        try:
            load_preset(name, _sets(cfg))
        except PresetError as e:   # what preset_set changed in it: this file's field, not the preset file's
            import re

            why = re.sub(r"^(--set |.*?\.toml: )", "", str(e))
            raise SweepError(f"{path}: preset_set: {why} (in {kind}:{name})") from None


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


def window_trace_paths(cfg: SweepConfig, base: Path, gen_dir: Path, log: Callable[[str], None] = print,
                       workers: int = 1) -> dict[int | None, list[Path]]:
    """window -> the paths of the traces run at that window (``window_traces``, else ``traces``); a
    population is drawn for the window it runs at."""
    return {w: _resolve(cfg.traces_at(w), cfg, base, gen_dir, log, w, workers) for w in cfg.windows}


def population_item(item: str) -> tuple[str, int] | None:
    """``population:PRESET:N`` -> (PRESET, N); None for any other item; SweepError when malformed."""
    if not item.startswith("population:"):
        return None
    parts = item.split(":")
    if len(parts) != 3 or not parts[1] or not parts[2].isdigit() or int(parts[2]) < 1:
        raise SweepError(f"traces: {item!r}: a population is population:PRESET:SESSIONS (e.g. population:long-200k:30)")
    return parts[1], int(parts[2])


def _sets(cfg: SweepConfig) -> list[str]:
    return [f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in cfg.preset_set.items()]


def _sets_tag(cfg: SweepConfig) -> str:
    """``-<digest>`` of ``preset_set`` for the names of generated traces ("" without one): a trace
    generated under other settings is never reused by name (the fresh hostile set of issue 44: calls=20
    changed to 10 kept the 20-call trace and its runs as done)."""
    if not cfg.preset_set:
        return ""
    import hashlib

    return "-" + hashlib.sha256(json.dumps(_sets(cfg), sort_keys=True).encode()).hexdigest()[:8]


def _resolve(items: list[str], cfg: SweepConfig, base: Path, gen_dir: Path, log: Callable[[str], None],
             window: int | None = None, workers: int = 1) -> list[Path]:
    out: list[Path] = []
    for item in items:
        pop = population_item(item)
        if pop is not None:
            out.extend(_population(pop[0], pop[1], cfg, gen_dir, log, window, workers))
            continue
        if item.startswith("preset:"):
            from ctxsim.harness.model import trace as tr
            from ctxsim.harness.synth import generate, load_preset

            name = item.split(":", 1)[1]
            for seed in cfg.preset_seeds:
                dest = gen_dir / f"{name}{_sets_tag(cfg)}-seed{seed}.jsonl"
                if not dest.exists():
                    log(f"generating preset {name} (seed {seed}) -> {dest}")
                    tr.write(generate(load_preset(name, _sets(cfg)), seed), dest)
                out.append(dest)
            continue
        path = item if os.path.isabs(item) else str(base / item)
        if os.path.isdir(path):   # a folder of traces (an imported one: <project>/<session>.jsonl)
            found = sorted(Path(path).rglob("*.jsonl"))
            if not found:
                raise SweepError(f"traces: {item!r}: a folder with no .jsonl trace in it")
            out.extend(found)
            continue
        matches = sorted(glob.glob(path, recursive=True))
        if not matches:
            raise SweepError(f"traces: {item!r} matches no file")
        out.extend(Path(m) for m in matches)
    return out


def _population(preset: str, n: int, cfg: SweepConfig, gen_dir: Path, log: Callable[[str], None],
                window: int | None, workers: int) -> list[Path]:
    """The ``n`` sessions of a synthetic population of ``preset`` drawn for ``window``
    (harness/synth/population.py), generated on ``workers`` processes where missing."""
    from ctxsim.harness.synth import population

    w = window or population.DEFAULT_WINDOW
    folder = gen_dir / f"population-{preset}-{w}{_sets_tag(cfg)}"
    sessions = population.draw(n, cfg.population_seed, w)
    missing = [s for s in sessions if not (folder / population.file_name(preset, s)).exists()]
    if missing:
        log(f"generating {len(missing)} of {n} sessions of population {preset} for a {w:,} window -> {folder}")
        population.write_sessions(preset, missing, folder, w, _sets(cfg), workers)
    return [folder / population.file_name(preset, s) for s in sessions]


def assumption_grid(cfg: SweepConfig) -> list[dict[str, Any]]:
    """Every combination of the swept modelling constants, keyed ``retention.X`` / ``summariser.X``."""
    axes = {f"retention.{k}": v for k, v in cfg.retention.items()} | {f"summariser.{k}": v for k, v in cfg.summariser.items()}
    keys = list(axes)
    return [dict(zip(keys, vals, strict=True)) for vals in itertools.product(*(axes[k] for k in keys))] or [{}]


def expand(cfg: SweepConfig, traces: list[Path], per_window: dict[int | None, list[Path]] | None = None,
           env: dict[str, str] | None = None) -> list[RunSpec]:
    """Every entry of the grid, in grid order; ``per_window``: the traces of each window (default:
    ``traces`` at all); ``env``: the environment of the run keys (default: this process's,
    harness/sweep/keys.py). One setting asked for under two labels is two entries with one key: it
    runs once and is kept under each label; asked for twice under one label, it is one entry."""
    per_window = per_window or {w: traces for w in cfg.windows}
    env = env if env is not None else keys.environment()
    hashes = {p: executors.trace(str(p)).content_hash for p in traces}
    specs: list[RunSpec] = []
    for s in cfg.strategies:
        cls = registry.load_class(s.name)   # a name or MODULE:CLASS, as `run` takes
        code = keys.strategy_code(cls)      # a user's strategy: its own source is part of the setting
        if cls.needs_recorded_trace:
            bare = [p for p in traces if executors.trace(str(p)).header.recorded is None]
            if bare:
                raise SweepError(f"strategies: {s.name} re-enacts a recorded agent, and {bare[0]} is not an imported "
                                 "log (no header.recorded)")
        for combo in _grid(s):
            resolved = registry.config_dict(registry.make_config(cls, {**s.set, **combo}))
            for window in cfg.windows:
                for p, model, cache, seed, assume in itertools.product(
                        per_window[window], cfg.models, cfg.cache, cfg.seeds, assumption_grid(cfg)):
                    base = keys.setting_digest(s.name, resolved, hashes[p], model, window, cache, seed, assume,
                                               code)
                    label = s.label or s.name
                    specs.append(RunSpec(keys.run_key(base, env), s.name, label, tuple(sorted(resolved.items())), str(p),
                                         hashes[p], model, window, cache, seed, cfg.save_calls,
                                         tuple(sorted(assume.items())), base, tuple(sorted(env.items()))))
    seen: set[tuple[str, str]] = set()
    unique = []
    for sp in specs:
        if (sp.key, sp.label) not in seen:
            seen.add((sp.key, sp.label))
            unique.append(sp)
    return unique


# --- running the grid -----------------------------------------------------------------------------

DASK_CONNECT_TIMEOUT_S = executors.DASK_CONNECT_TIMEOUT_S
DASK_NO_WORKERS_TIMEOUT_S = executors.DASK_NO_WORKERS_TIMEOUT_S


def run_sweep(cfg: SweepConfig, out_dir: str | Path, *, base: Path = Path("."), workers: int | None = None,
              executor: str = "local", scheduler: str | None = None, client=None, progress: bool = True,
              limit: int | None = None, log: Callable[[str], None] = print, retry_failed: bool = False,
              connect_timeout_s: float = DASK_CONNECT_TIMEOUT_S,
              no_workers_s: float = DASK_NO_WORKERS_TIMEOUT_S) -> pd.DataFrame:
    """Run every entry not already in ``out_dir``'s store (with ``retry_failed``, the runs that
    raised too); return all rows of the grid (old and new), sorted by key and label. Anything wrong
    before the first run (a trace, a preset, the executor, a scheduler that does not answer or has no
    worker, a folder another sweep is using) leaves no new ``out_dir`` behind.
    ``df.attrs["missing"]``: runs of this invocation that left no row.

    Every path is made absolute here, before any executor sees it: a Dask worker started in
    another folder reads the same traces as the client."""
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
    if executor == "dask":
        executors.quiet_dask()
    try:
        if executor == "dask" and client is None:   # before anything is written: an unreachable scheduler leaves nothing
            client, own_client = executors.dask_client(scheduler, connect_timeout_s), True
        if executor == "dask":
            executors.wait_for_workers(client, no_workers_s)
        return _locked(cfg, out, base, workers, executor, client, progress, limit, log, retry_failed, no_workers_s)
    except (store.StoreError, executors.ExecutorError) as e:
        raise SweepError(str(e)) from None
    finally:
        if own_client:
            executors.close_client(client)


def _locked(cfg: SweepConfig, out: Path, base: Path, workers: int | None, executor: str, client, progress: bool,
            limit: int | None, log: Callable[[str], None], retry_failed: bool, no_workers_s: float) -> pd.DataFrame:
    created = not out.exists()
    lock = None
    try:
        out.mkdir(parents=True, exist_ok=True)
        lock = store.SweepLock(out).acquire()
    except BaseException:
        if created:
            shutil.rmtree(out, ignore_errors=True)
        raise
    try:
        if lock.taken_over:
            log(f"note: {out} was left locked by an earlier sweep ({lock.taken_over}): taken over")
        return _run_sweep(cfg, out, base, workers, executor, client, progress, limit, log, retry_failed,
                          no_workers_s, created)
    finally:
        lock.release()


def _run_sweep(cfg: SweepConfig, out: Path, base: Path, workers: int | None, executor: str, client,
               progress: bool, limit: int | None, log: Callable[[str], None], retry_failed: bool,
               no_workers_s: float, created: bool) -> pd.DataFrame:
    try:
        per_window = {w: [Path(os.path.abspath(p)) for p in ps]
                      for w, ps in window_trace_paths(cfg, base, out / "traces", log, _gen_workers(workers, executor)).items()}
        traces = list(dict.fromkeys(p for ps in per_window.values() for p in ps))
        env = keys.environment()
        specs = expand(cfg, traces, per_window, env)
        _note_overrides(cfg, per_window, log)
        db = store.Store.open(out)
    except BaseException:
        if created:
            shutil.rmtree(out, ignore_errors=True)
        raise
    with db:
        db.set_grid([(sp.label, sp.key, sp.as_dict()) for sp in specs], cfg.model_dump(mode="json"), env)
        runs = list({sp.key: sp for sp in specs}.values())   # one run per key, whatever its labels
        state = db.resume([sp.key for sp in runs], {sp.key: sp.base for sp in runs}, env)
        skip = state.done if retry_failed else state.done | state.failed
        todo = [sp for sp in runs if sp.key not in skip]
        retried = sum(1 for sp in todo if sp.key in state.failed)
        for note in state.notes():
            log(note)
        n = len(todo) if limit is None else min(limit, len(todo))
        shared = len(specs) - len(runs)
        log(f"{_plural(len(runs), 'run')} in the grid"
            + (f" ({shared} more entr{'ies' if shared > 1 else 'y'} ask{'' if shared > 1 else 's'} for a setting "
               "already in it under another label: run once, kept under each)" if shared else "")
            + f", {len(runs) - len(todo)} already done, {n} to run"
            + (f" ({retried} failed before: retried)" if retried else ""))
        if limit is not None:
            todo = todo[:limit]
        if executor == "local":
            workers = workers or os.cpu_count() or 1
            batches = _plan(todo, workers)
            it = executors.inline(batches) if workers <= 1 else executors.pool(batches, workers)
        else:
            # at least two workers' worth of tasks: a task's runs come back when it ends, so one task
            # per trace on a one-thread cluster would hold every result until the sweep's end
            it = executors.on_dask(_plan(todo, max(2, executors.dask_threads(client))), client, no_workers_s)
        by_key = {sp.key: sp for sp in todo}
        written: set[str] = set()
        for d in executors.drain(it, len(todo), progress):
            sp = by_key.get(d.key)
            if sp is None:
                continue
            db.write_run(d.key, sp.base, env, d.row, d.probes, d.calls)
            written.add(d.key)
        df = db.results()
        if len(df):
            from ctxsim.harness.files import atomic

            # for pandas; a full disk is atomic.WriteError: bad input naming the path
            atomic.write(out / RESULTS, lambda p: columns.encode(df).to_parquet(p, index=False))
    have = set(df["key"]) if "key" in df else set()
    df.attrs["missing"] = [sp.key for sp in todo if sp.key not in have]
    return df


def _gen_workers(workers: int | None, executor: str) -> int:
    """Processes that generate a population's sessions (on this machine, whatever the executor)."""
    return max(1, workers or os.cpu_count() or 1) if executor == "local" else max(1, os.cpu_count() or 1)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def _plan(todo: list[RunSpec], workers: int) -> list[list[RunSpec]]:
    from ctxsim.harness.sweep.plan import plan

    return plan(todo, lambda sp: sp.trace, lambda path: os.path.getsize(path), workers)


def _note_overrides(cfg: SweepConfig, per_window: dict[int | None, list[Path]], log: Callable[[str], None]) -> None:
    """One line for each grid model or window that overrides what an imported trace recorded (at
    the windows the trace runs at)."""
    from ctxsim.harness.replay.engine import RunConfig
    from ctxsim.harness.replay.setting import override_warnings

    seen: set[str] = set()
    for window, paths in per_window.items():
        for p, model in itertools.product(paths, cfg.models):
            t = executors.trace(str(p))
            for line in override_warnings(RunConfig(model=model, window=window), t):
                if line not in seen:
                    seen.add(line)
                    log(f"warning: {line}")


# --- reading a sweep's results (a report reads these; nothing here writes) ------------------------

def load_results(out: str | Path, log: Callable[[str], None] | None = None,
                 health: store.Health | None = None) -> pd.DataFrame:
    """The rows of the grid the store under ``out`` holds (a row that cannot be read is left out,
    named in ``health.damaged`` and said through ``log``)."""
    out = Path(out)
    if not out.is_dir():
        raise SweepError(f"{out}: no such sweep folder")
    if not (out / store.FILE).is_file() and (out / "runs").is_dir():
        raise SweepError(f"{out}: results of an older ctxsim (runs/*.parquet, no {store.FILE}): run the sweep again "
                         "with this one")
    health = health if health is not None else store.Health()
    try:
        with store.Store.read(out) as db:
            df = db.results(health)
    except store.StoreError as e:
        raise SweepError(str(e)) from None
    if health.damaged and log is not None:
        log(f"warning: {_plural(len(health.damaged), 'run')} in {out / store.FILE} could not be read (damaged?): "
            "left out")
    if df.empty:
        raise SweepError(f"{out}: no sweep results in {out / store.FILE}")
    return df


def load_probes(out: str | Path, keys_: Iterable[str], health: store.Health | None = None) -> dict[str, pd.DataFrame]:
    """Per-probe scores of the runs that have them (a run that made probes and has none stored is
    named in ``health.no_probes``)."""
    try:
        with store.Store.read(out) as db:
            return db.probes(keys_, health)
    except store.StoreError as e:
        raise SweepError(str(e)) from None


def load_calls(out: str | Path, keys_: Iterable[str]) -> dict[str, pd.DataFrame]:
    try:
        with store.Store.read(out) as db:
            return db.calls(keys_)
    except store.StoreError as e:
        raise SweepError(str(e)) from None
