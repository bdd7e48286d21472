"""``ctxsim tune``: a strategy's parameters searched with Optuna over a population of sessions
(issue 42, item 3). The grid sweep stays for reports; this finds the settings worth putting in one.

* **Two objectives**: the cost per session including recovery (``cost_with_recovery_usd``, the
  mean over sessions; minimised) and the needs at risk kept (pooled over sessions, each need once;
  maximised). Optuna's multi-objective TPE sampler proposes; the answer is the Pareto front.
* **Successive halving over sessions**: a trial is replayed on the first sessions of a fixed order
  (the same for every trial, so trials are compared on the same sessions, paired), then on more at
  each rung (``eta`` times more, up to every session). At a rung a trial stops (pruned) when it is
  outside the best ``1/eta`` of the trials that reached that rung (by Pareto rank on those sessions)
  *and* it is clearly worse: another trial there is cheaper beyond noise (the saving's 95% interval
  over those sessions above 0) while keeping at least as many needs. Optuna's own pruners take one
  objective; this rule is written here for two.
* **Stored and resumable**: the study lives in ``DIR/study.sqlite`` (Optuna's RDB storage; read it
  with ``optuna-dashboard sqlite:///DIR/study.sqlite``, the ``[dashboard]`` extra), every run in
  the sweep results store ``DIR/results.sqlite`` (harness/sweep/store.py), so a trial killed mid-way
  is marked failed and proposed again on resume, and its finished runs are not replayed again.
  One tuner (or sweep) per folder: the same lock as a sweep.
* **Where runs go**: this process, local workers or a Dask cluster (harness/sweep/executors.py): a
  rung's sessions are replayed in parallel.

The baseline is the strategy's default setting, evaluated first on every session; the answer is
the cheapest setting of the front that holds against it across sessions (harness/sweep/sessions.py).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from ctxsim.harness.sweep import executors, keys, sessions, store
from ctxsim.harness.sweep.grid import RunSpec, SweepConfig, SweepError
from ctxsim.strategies import registry

STUDY = "study.sqlite"
ETA = 3            # successive halving's reduction factor (Jamieson & Talwalkar 2016; Optuna's default 3)
MIN_SESSIONS = 4   # assumed: the first rung's sessions (fewer give no interval worth stopping on)
ORDER_SEED = 0     # the fixed order sessions are replayed in (the same for every trial)


@dataclass
class Space:
    """One parameter's search range: ``low``..``high`` (int or float), or ``choices``."""

    name: str
    low: float | None = None
    high: float | None = None
    kind: str = "int"                 # int | float | categorical
    choices: list[Any] = field(default_factory=list)
    step: float | None = None


def search_space(cfg: SweepConfig, strategy: str) -> list[Space]:
    """The space of ``strategy``: the sweep file's ``[tune.space]`` ranges when given, else each
    parameter its grid varies, from its smallest to its largest value (a list of non-numbers: those
    choices)."""
    tune = cfg.tune
    cls = registry.load_class(strategy)
    fields = cls.Config.model_fields
    given: dict[str, Any] = dict(tune.space) if tune is not None else {}
    if not given:
        for s in cfg.strategies:
            if s.name == strategy:
                for k, vals in s.grid.items():
                    given.setdefault(k, list(vals))
    if not given:
        raise SweepError(f"tune: nothing to search for {strategy}: give [tune.space] (parameter = [low, high]) or a "
                         "[strategies.grid] for it in the sweep file")
    out = []
    for k, v in given.items():
        if k not in fields:
            raise SweepError(f"tune.space.{k}: not a parameter of {strategy} (valid: {', '.join(fields)})")
        vals = list(v) if isinstance(v, (list, tuple)) else [v]
        numeric = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in vals)
        if numeric and len(vals) >= 2:
            ints = all(isinstance(x, int) for x in vals)
            lo, hi = min(vals), max(vals)
            if lo == hi:
                continue
            out.append(Space(k, lo, hi, "int" if ints else "float", step=_step(vals) if ints else None))
        elif len(vals) >= 2:
            out.append(Space(k, kind="categorical", choices=vals))
    if not out:
        raise SweepError(f"tune: every range given for {strategy} is a single value: nothing to search")
    return out


def _step(vals: list[int]) -> int:
    """The grid's own resolution: the largest step that divides every difference (at least 1)."""
    g = 0
    for x in vals:
        g = math.gcd(g, abs(int(x) - int(vals[0])))
    return max(1, min(g, 1000))


def suggest(trial, space: list[Space]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for s in space:
        if s.kind == "categorical":
            out[s.name] = trial.suggest_categorical(s.name, s.choices)
        elif s.kind == "int":
            step = int(s.step or 1)
            hi = int(s.low + ((int(s.high) - int(s.low)) // step) * step)
            out[s.name] = trial.suggest_int(s.name, int(s.low), hi, step=step)
        else:
            out[s.name] = trial.suggest_float(s.name, float(s.low), float(s.high))
    return out


def rungs(n: int, eta: int = ETA, first: int = MIN_SESSIONS) -> list[int]:
    """The sessions seen at each rung: ``first``, ``first·eta``, ... then every session."""
    out, r = [], max(1, min(first, n))
    while r < n:
        out.append(r)
        r *= eta
    return [*out, n]


# --- one trial's runs ---------------------------------------------------------------------------------

@dataclass
class Trial:
    """What a setting measured on the sessions replayed so far."""

    params: dict[str, Any]
    cost: dict[str, float] = field(default_factory=dict)            # session -> cost with recovery
    needs: dict[str, sessions.Needs] = field(default_factory=dict)  # session -> needs at risk
    completed: bool = True
    number: int = -1

    def objectives(self, on: list[str]) -> tuple[float, float]:
        c = float(np.mean([self.cost[s] for s in on])) if on else math.nan
        n = sum(self.needs[s].n for s in on if s in self.needs)
        k = sum(self.needs[s].kept for s in on if s in self.needs)
        return c, (k / n if n else math.nan)


def _trial_from_rows(params: dict[str, Any], rows: list[dict[str, Any]]) -> Trial:
    from ctxsim.harness.retention.needs import KEPT

    t = Trial(params)
    for r in rows:
        s = str(r.get("trace_hash"))
        cost = r.get("cost_with_recovery_usd", r.get("cost_usd"))
        if r.get("error") or cost is None:
            t.completed = False
            continue
        t.cost[s] = float(cost)
        t.completed &= bool(r.get("completed", True))
        n = int(r.get("needs_at_risk.n") or 0)
        kept = sum(float(r.get(f"needs_at_risk.{w}") or 0) for w in KEPT)
        t.needs[s] = sessions.Needs(n=n, kept=kept)
    return t


def clearly_worse(t: Trial, others: list[Trial], on: list[str]) -> Trial | None:
    """Another trial that is cheaper than ``t`` beyond noise on sessions ``on`` (paired by session)
    and keeps at least as many needs there; None when there is none."""
    for o in others:
        if o is t or not o.completed or not all(s in o.cost for s in on):
            continue
        c = sessions.compare({s: o.cost[s] for s in on}, {s: t.cost[s] for s in on}, o.needs, t.needs)
        if c.saving.has_ci and c.saving.lo > 0 and (math.isnan(c.retention.est) or c.retention.est >= 0):
            return o
    return None


def pareto_rank(points: list[tuple[float, float]]) -> list[int]:
    """Non-dominated sorting of (cost to minimise, kept to maximise): 0 for the front, 1 for the
    front of the rest, ..."""
    rank = [-1] * len(points)
    left = set(range(len(points)))
    r = 0
    while left:
        front = {i for i in left if not any(_dominates(points[j], points[i]) for j in left if j != i)}
        for i in front:
            rank[i] = r
        left -= front
        r += 1
    return rank


def _dominates(a: tuple[float, float], b: tuple[float, float]) -> bool:
    ka = -1.0 if math.isnan(a[1]) else a[1]
    kb = -1.0 if math.isnan(b[1]) else b[1]
    return a[0] <= b[0] and ka >= kb and (a[0] < b[0] or ka > kb)


def keep_at_rung(t: Trial, peers: list[Trial], on: list[str], eta: int = ETA) -> tuple[bool, str]:
    """Successive halving at a rung: (go on, why not)."""
    pool = [p for p in peers if p.completed and all(s in p.cost for s in on)]
    if t not in pool:
        pool.append(t)
    if len(pool) < 2:
        return True, ""
    ranks = pareto_rank([p.objectives(on) for p in pool])
    mine = ranks[pool.index(t)]
    better = sorted(ranks).index(mine)   # trials ranked strictly ahead of this one
    if better < max(1, math.ceil(len(pool) / eta)):
        return True, ""
    beat = clearly_worse(t, pool, on)
    if beat is None:
        return True, ""
    return False, (f"outside the best 1/{eta} at {len(on)} sessions and clearly worse than trial {beat.number} "
                   f"(cheaper beyond noise, keeping as many needs)")


# --- the study ----------------------------------------------------------------------------------------

@dataclass
class TuneResult:
    study: Any
    trials: list[Trial]
    default: Trial
    front: list[Trial]
    sessions: list[str]
    names: dict[str, str]
    pruned: int


def run_tune(cfg: SweepConfig, out_dir: str | Path, *, strategy: str, window: int | None, trials: int,
             base: Path = Path("."), workers: int | None = None, executor: str = "local", scheduler: str | None = None,
             client=None, log: Callable[[str], None] = print, seed: int = 0, eta: int = ETA) -> TuneResult:
    from ctxsim.harness.files.extras import require
    from ctxsim.harness.sweep import grid

    optuna = require("tune", "optuna")
    optuna.logging.set_verbosity(optuna.logging.WARNING)   # each trial is said here, in one line
    out = Path(os.path.abspath(out_dir))
    base = Path(os.path.abspath(base))
    if window is None:
        window = cfg.windows[0]
    if window not in cfg.windows:
        raise SweepError(f"--window {window}: not one of the sweep file's windows ({', '.join(map(str, cfg.windows))})")
    if trials < 1:
        raise SweepError(f"--trials {trials}: give at least 1")
    if out.exists() and not out.is_dir():
        raise SweepError(f"--out {out}: a file, not a folder")
    space = search_space(cfg, strategy)
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        lock = store.SweepLock(out).acquire()
    except store.StoreError as e:
        if created:
            import shutil

            shutil.rmtree(out, ignore_errors=True)
        raise SweepError(str(e)) from None
    own = False
    try:
        if lock.taken_over:
            log(f"note: {out} was left locked by an earlier run ({lock.taken_over}): taken over")
        if executor == "dask" and client is None:
            executors.quiet_dask()
            client, own = executors.dask_client(scheduler or ""), True
            executors.wait_for_workers(client, executors.DASK_NO_WORKERS_TIMEOUT_S)
        paths = grid.window_trace_paths(cfg, base, out / "traces", log, max(1, workers or os.cpu_count() or 1))[window]
        paths = [Path(os.path.abspath(p)) for p in paths]
        env = keys.environment()
        hashes = {str(p): executors.trace(str(p)).content_hash for p in paths}
        order = [str(p) for p in np.random.default_rng(ORDER_SEED).permutation([str(p) for p in paths])]
        names = {hashes[p]: Path(p).name.removesuffix(".jsonl") for p in order}
        with store.Store.open(out) as db:
            runner = _Runner(cfg, strategy, window, env, hashes, db, workers, executor, client)
            storage = optuna.storages.RDBStorage(f"sqlite:///{out / STUDY}", engine_kwargs={"connect_args": {"timeout": 30}})
            study = optuna.create_study(storage=storage, study_name=f"{cfg.name}-{strategy}-{window}",
                                        directions=["minimize", "maximize"], load_if_exists=True,
                                        sampler=optuna.samplers.TPESampler(seed=seed, multivariate=True))
            _recover(study, optuna, log)
            return _optimise(study, optuna, runner, space, order, trials, eta, log, names)
    except (store.StoreError, executors.ExecutorError) as e:
        raise SweepError(str(e)) from None
    finally:
        if own:
            executors.close_client(client)
        lock.release()


def _recover(study, optuna, log: Callable[[str], None]) -> None:
    """Trials left running by a killed tuner (this one holds the folder's lock: nothing else runs
    them): failed, and proposed again with the same parameters."""
    stale = [t for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.RUNNING]
    for t in stale:
        study._storage.set_trial_state_values(t._trial_id, optuna.trial.TrialState.FAIL)
        study.enqueue_trial(dict(t.params), user_attrs=dict(t.user_attrs), skip_if_exists=False)
    if stale:
        log(f"{len(stale)} trial(s) left running by a killed tuner: marked failed and proposed again (their "
            "finished runs are kept)")


class _Runner:
    """Replays one setting on sessions through the executors, each run written to the store (a
    run already there under this environment is read back, not replayed)."""

    def __init__(self, cfg: SweepConfig, strategy: str, window: int, env, hashes, db, workers, executor, client):
        self.cfg, self.strategy, self.window, self.env, self.hashes, self.db = cfg, strategy, window, env, hashes, db
        self.workers, self.executor, self.client = workers or os.cpu_count() or 1, executor, client
        self.cls = registry.load_class(strategy)
        self.entries: list[tuple[str, str, dict[str, Any]]] = [(lb, k, sp) for lb, k, sp in db.grid()]

    def specs(self, params: dict[str, Any], paths: list[str]) -> list[RunSpec]:
        resolved = registry.config_dict(registry.make_config(self.cls, params))
        model = self.cfg.models[0]
        out = []
        for p in paths:
            for seed in self.cfg.seeds:
                base = keys.setting_digest(self.strategy, resolved, self.hashes[p], model, self.window, True, seed, {},
                                           keys.strategy_code(self.cls))
                out.append(RunSpec(keys.run_key(base, self.env), self.strategy, self.strategy,
                                   tuple(sorted(resolved.items())), p, self.hashes[p], model, self.window, True, seed,
                                   False, (), base, tuple(sorted(self.env.items()))))
        return out

    def run(self, params: dict[str, Any], paths: list[str]) -> list[dict[str, Any]]:
        from ctxsim.harness.sweep.grid import _plan

        specs = self.specs(params, paths)
        have = self.db.resume([s.key for s in specs], {s.key: s.base for s in specs}, self.env)
        todo = [s for s in specs if s.key not in have.done | have.failed]
        if todo:
            if self.executor == "dask":
                it = executors.on_dask(_plan(todo, max(2, executors.dask_threads(self.client))), self.client)
            elif self.workers <= 1 or len(todo) == 1:
                it = executors.inline([[s] for s in todo])
            else:
                it = executors.pool(_plan(todo, self.workers), self.workers)
            for d in it:
                sp = next(s for s in todo if s.key == d.key)
                self.db.write_run(d.key, sp.base, self.env, d.row)
        new = [(s.label, s.key, s.as_dict()) for s in specs if (s.label, s.key) not in {(a, b) for a, b, _ in self.entries}]
        if new:   # the store's grid is every run the tuner asked for: `ctxsim report DIR` reads them
            self.entries += new
            self.db.set_grid(self.entries, self.cfg.model_dump(mode="json"), self.env)
        df = self.db.results()
        rows = df[df["key"].isin({s.key for s in specs})].to_dict("records") if len(df) else []
        return rows


def _optimise(study, optuna, runner: _Runner, space: list[Space], order: list[str], n_trials: int, eta: int,
              log: Callable[[str], None], names: dict[str, str]) -> TuneResult:
    steps = rungs(len(order), eta)
    hashes = runner.hashes
    all_sessions = [hashes[p] for p in order]
    default = registry.config_dict(registry.make_config(runner.cls, {}))
    default_params = {s.name: default[s.name] for s in space}
    done = [t for t in study.get_trials(deepcopy=False) if t.state.is_finished()]
    if not any(t.user_attrs.get("default") for t in study.get_trials(deepcopy=False)
               if t.state != optuna.trial.TrialState.FAIL):
        study.enqueue_trial(default_params, user_attrs={"default": True})
    seen: list[Trial] = [_rebuild(t, runner, order) for t in done if t.state == optuna.trial.TrialState.COMPLETE]
    done = [t for t in done if t.state != optuna.trial.TrialState.FAIL]   # a trial that failed is proposed again
    left = n_trials - len(done)
    log(f"tuning {runner.strategy} at window {runner.window:,} on {len(order)} sessions (rungs {', '.join(map(str, steps))}); "
        f"{len(done)} trial(s) already in the study, {max(0, left)} to run")
    import warnings

    for _ in range(max(0, left)):
        trial = study.ask()
        baseline = bool(trial.user_attrs.get("default"))
        with warnings.catch_warnings():   # the default may lie outside the searched range: it is the baseline
            warnings.simplefilter("ignore", UserWarning)
            params = suggest(trial, space)
        try:
            registry.make_config(runner.cls, params)
        except registry.StrategyError as e:   # a combination the strategy refuses (tail_min > tail_max)
            trial.set_user_attr("invalid", str(e))
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            continue
        t = Trial(params, number=trial.number)
        pruned = ""
        for r in steps:
            rows = runner.run(params, order[:r])
            got = _trial_from_rows(params, rows)
            t.cost, t.needs, t.completed = got.cost, got.needs, got.completed
            on = all_sessions[:r]
            c, k = t.objectives(on)
            trial.set_user_attr(f"rung_{r}", {"cost": c, "kept": None if math.isnan(k) else k})
            if not t.completed and not baseline:
                pruned = f"failed a session within the first {r}"
                break
            if r < len(order) and not baseline:   # the baseline runs on every session: all is measured against it
                go, why = keep_at_rung(t, seen, on, eta)
                if not go:
                    pruned = why
                    break
        if pruned:
            trial.set_user_attr("pruned", pruned)
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            log(f"trial {trial.number} {_fmt(params)}: pruned ({pruned})")
            continue
        c, k = t.objectives(all_sessions)
        trial.set_user_attr("sessions", len(all_sessions))
        study.tell(trial, [c, -1.0 if math.isnan(k) else k])
        seen.append(t)
        log(f"trial {trial.number} {_fmt(params)}: ${c:.2f} per session, needs kept "
            f"{'–' if math.isnan(k) else f'{k:.3f}'} on {len(all_sessions)} sessions")
    trials = study.get_trials(deepcopy=False)
    complete = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    by_num = {t.number: t for t in seen}
    front_nums = {t.number for t in study.best_trials} if complete else set()
    front = sorted((by_num[n] for n in front_nums if n in by_num), key=lambda t: t.objectives(all_sessions)[0])
    dflt = next((by_num[t.number] for t in complete if t.user_attrs.get("default") and t.number in by_num), None)
    if dflt is None:
        dflt = _trial_from_rows(default_params, runner.run(default_params, order))
    pruned = sum(1 for t in trials if t.state == optuna.trial.TrialState.PRUNED)
    return TuneResult(study, seen, dflt, front, all_sessions, names, pruned)


def _rebuild(t, runner: _Runner, order: list[str]) -> Trial:
    """A finished trial of an earlier invocation, read back from the store."""
    params = dict(t.params)
    got = _trial_from_rows(params, runner.run(params, order))
    got.number = t.number
    return got


def _fmt(params: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(params.items()))


def answer(res: TuneResult, strategy: str) -> list[str]:
    """The tuning answer in sentences (the terminal's): the front, its knee, and the cheapest front
    setting that holds against the default across sessions."""
    on = res.sessions
    lines = [f"{len(res.trials)} trial(s) on {len(on)} sessions, {res.pruned} pruned; the cost–retention front:"]
    for t in res.front:
        c, k = t.objectives(on)
        mark = " (the default)" if t.params == res.default.params else ""
        lines.append(f"  {_fmt(t.params)}{mark}: ${c:.2f} per session, needs kept {'–' if math.isnan(k) else f'{k:.3f}'}")
    ship = None
    for t in res.front:
        if t.params == res.default.params:
            continue
        c = sessions.compare(t.cost, res.default.cost, t.needs, res.default.needs)
        if sessions.holds(c) and (ship is None or t.objectives(on)[0] < ship[0].objectives(on)[0]):
            ship = (t, c)
    if ship is None:
        lines.append(f"keep {strategy}'s default: no setting of the front holds against it across sessions")
    else:
        t, c = ship
        lines.append(f"ship {strategy} {_fmt(t.params)}: saving {sessions.pct(c.saving)} against the default, needs kept "
                     f"{sessions.points(c.retention)}; {sessions.evidence(c, None, res.names)}")
    return lines
