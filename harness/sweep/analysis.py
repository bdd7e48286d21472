"""Reading a sweep: one row per configuration (never a mean over a grid), ranked so that runs that
failed are never compared by cost with runs that completed; the Pareto front of cost against
retention; the recommendation (the cheapest configuration that completed every session and keeps
retention at a target), or why there is none; per-parameter sensitivity; the compaction ledger
of N-WIN-3.

A run *completed* when every main call of its trace was answered (``completed`` in its metrics).
Results written before ctxsim recorded it have no such column; there a run completed when no
request was rejected (the old engine went on past a rejection as if it had been answered).
"""

from __future__ import annotations

import json
import warnings
from functools import cache
from typing import Any

import numpy as np
import pandas as pd

RETENTION = "retention.score"
COST = "cost_usd"


def ok_runs(df: pd.DataFrame) -> pd.DataFrame:
    """Runs that produced numbers (a run that raised has an ``error`` and none)."""
    return df[df["error"].fillna("") == ""] if "error" in df else df


def with_outcome(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with a boolean ``completed`` and a ``failed_at_call`` column, whatever its age."""
    df = df.copy()
    if "completed" in df:
        df["completed"] = df["completed"].fillna(False).astype(bool)
    else:
        rejected = sum(df[c].fillna(0) for c in ("overflows", "pairing_violations") if c in df)
        df["completed"] = (rejected == 0) if not isinstance(rejected, int) else True
    if "failed_at_call" not in df:
        df["failed_at_call"] = np.nan
    return df


# --- configurations ---------------------------------------------------------------------------------

def _norm(v: Any) -> Any:
    """A parameter value as comparable data: JSON text of lists/dicts decoded, integral floats
    (a column shared with strategies that lack the parameter is float) as int."""
    if isinstance(v, str) and v in ("true", "false"):  # a column shared with a string parameter (sweep.collect)
        return v == "true"
    if isinstance(v, str) and v[:1] in "[{":
        try:
            v = json.loads(v)
        except ValueError:
            return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, np.generic):
        return _norm(v.item())
    if isinstance(v, (list, dict)):
        return json.dumps(v, sort_keys=True)
    return v


def _missing(v: Any) -> bool:
    return v is None or v == "–" or (isinstance(v, float) and np.isnan(v))


@cache
def strategy_defaults(strategy: str) -> dict[str, Any] | None:
    """The registered strategy's default parameters (None when it is not registered here)."""
    from ctxsim.strategies import registry

    try:
        cls = registry.load_class(strategy)
    except registry.StrategyError:
        return None
    return {k: _norm(v) for k, v in registry.config_dict(registry.make_config(cls, {})).items()}


def changed_params(row: dict[str, Any] | pd.Series) -> dict[str, Any]:
    """The parameters of a configuration that differ from its strategy's defaults (all of them when
    the strategy is not registered here, so nothing is hidden)."""
    row = dict(row)
    defaults = strategy_defaults(str(row.get("strategy", row.get("label", "")))) or {}
    out = {}
    for k, v in row.items():
        if not k.startswith("param.") or _missing(v):
            continue
        name, value = k.removeprefix("param."), _norm(v)
        if name not in defaults or defaults[name] != value:
            out[name] = value
    return out


def config_params(rec: dict[str, Any]) -> dict[str, Any]:
    """Every strategy parameter of a configuration row, as it was set."""
    return {k.removeprefix("param."): _norm(v) for k, v in rec.items() if k.startswith("param.") and not _missing(v)}


def config_name(row: dict[str, Any] | pd.Series) -> str:
    """``label`` alone for a strategy at its defaults, else ``label (k=v, ...)`` with the changed
    parameters only."""
    changed = changed_params(row)
    label = str(dict(row).get("label"))
    return f"{label} ({', '.join(f'{k}={v}' for k, v in sorted(changed.items()))})" if changed else label


def config_columns(df: pd.DataFrame) -> list[str]:
    """The columns that identify a configuration (strategy label, its parameters, provider)."""
    cols = ["label"] + sorted(c for c in df.columns if c.startswith("param."))
    # the model asked for, not the one each run used: with each trace on its own model (models = [none])
    # sessions on two models are one setting (they were two settings of one session each, compared
    # with one another: make sweep's real logs)
    model = "model_setting" if "model_setting" in df.columns else "model"
    return cols + [c for c in (model, "window", "cache") if c in df.columns]


# per session, averaged over a configuration's runs: counts too (a sum over seeds describes no session)
_MEAN = ["overflows", "pairing_violations", "rejected_requests", "retries", "cache_hit_rate", "latency_s.p50",
         "latency_s.p95", "latency_s.compaction_blocking", "compactions.succeeded", "turns", "turns_failed",
         RETENTION, "retention.goal", "calls", "tokens.input_uncached", "tokens.cache_write", "tokens.cache_read",
         "tokens.output"]


def by_config(df: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration: metrics averaged over its runs (traces and seeds), with
    ``completed`` true only if every run completed, ``runs_failed``, the earliest ``failed_at_call``
    and the configuration's display name ``config``."""
    df = with_outcome(ok_runs(df))
    keys = [c for c in config_columns(df) if df[c].notna().any()]
    agg: dict[str, Any] = {COST: "mean", "completed": "all", "failed_at_call": "min"}
    agg.update({c: "mean" for c in _MEAN if c in df})
    if "peak_context_tokens" in df:
        agg["peak_context_tokens"] = "max"
    if "strategy" in df:
        agg["strategy"] = "first"
    with warnings.catch_warnings():  # pandas adds the many key and aggregate columns one at a time
        warnings.simplefilter("ignore", pd.errors.PerformanceWarning)
        keyed = df.assign(**{k: df[k].astype(object).where(df[k].notna(), "–") for k in keys},
                          runs_failed=~df["completed"])
        grouped = keyed.groupby(keys, dropna=False)
        g = grouped.agg({**agg, "runs_failed": "sum"}).reset_index().copy()
    g["runs"] = grouped.size().to_numpy()
    g["runs_failed"] = g["runs_failed"].astype(int)
    g["config"] = [config_name(r) for _, r in g.iterrows()]
    return g


def ranked(cfgs: pd.DataFrame, cost: str = COST) -> pd.DataFrame:
    """Configurations in report order: those that completed every run by cost (then retention),
    then those that failed, by how far they got (latest failure first) — never by cost, since a
    failed run's cost is only its spend until it failed."""
    d = with_outcome(cfgs)
    d["_r"] = -d[RETENTION].fillna(-1) if RETENTION in d else 0.0
    d["_f"] = -d["failed_at_call"].fillna(-1)
    done = d[d["completed"]].sort_values([cost, "_r"], kind="stable")
    failed = d[~d["completed"]].sort_values("_f", kind="stable")
    out = pd.concat([done, failed]).drop(columns=["_r", "_f"])
    return out.astype({"completed": bool})


def pareto_front(cfgs: pd.DataFrame, cost: str = COST, quality: str = RETENTION) -> pd.DataFrame:
    """Configurations no other beats on both lower cost and higher retention (among those given:
    pass only completed ones)."""
    d = cfgs.dropna(subset=[cost, quality]).sort_values([cost, quality], ascending=[True, False])
    front, best = [], -np.inf
    for idx, row in d.iterrows():
        if row[quality] > best:
            front.append(idx)
            best = row[quality]
    return d.loc[front]


def _eligible(cfgs: pd.DataFrame) -> pd.DataFrame:
    d = with_outcome(cfgs)
    return d[d["completed"]]


def recommend(cfgs: pd.DataFrame, target: float) -> dict[str, Any] | None:
    """The cheapest configuration that completed every session with mean retention >= target."""
    if RETENTION not in cfgs:
        return None
    ok = _eligible(cfgs)
    ok = ok[ok[RETENTION] >= target]
    if ok.empty:
        return None
    best = ok.sort_values([COST, RETENTION], ascending=[True, False]).iloc[0]
    return {k: (v.item() if hasattr(v, "item") else v) for k, v in best.items()}


def no_recommendation_reason(cfgs: pd.DataFrame, target: float) -> str:
    """Why :func:`recommend` found nothing, in one sentence a reader can act on."""
    d = with_outcome(cfgs)
    if RETENTION not in d or d[RETENTION].isna().all():
        return ("these traces have no retention probes, so no configuration can be shown to keep the task "
                "(import with probes, `ctxsim probes TRACE`, or use a synthetic preset)")
    ok = _eligible(d)
    if ok.empty:
        return f"none of the {len(d)} configurations completed every session (each failed on a rejected request)"
    best = ok.sort_values(RETENTION, ascending=False).iloc[0]
    return (f"none of the {len(ok)} configurations that completed every session keeps retention ≥ {target:g}; "
            f"the best is {best['config'] if 'config' in best else best['label']} at {best[RETENTION]:.3f} "
            f"(lower the target with --target, or look at the Pareto figure)")


def sensitivity(df: pd.DataFrame) -> pd.DataFrame:
    """For each strategy and swept parameter: mean cost and retention per value over the runs that
    completed, and the spread (max − min of the means) — which knobs move the numbers. Failed runs
    are counted per value (``failed``), not averaged in."""
    df = with_outcome(ok_runs(df))
    rows = []
    for label, g in df.groupby("label"):
        for col in [c for c in g.columns if c.startswith("param.")]:
            vals = g[col].dropna()
            if vals.nunique() < 2:
                continue
            for v, gv in g.groupby(col):
                done = gv[gv["completed"]]
                rows.append({"label": label, "parameter": col.removeprefix("param."), "value": _norm(v),
                             "cost_usd": float(done[COST].mean()) if len(done) else np.nan,
                             "retention": float(done[RETENTION].mean()) if RETENTION in done and len(done) else np.nan,
                             "failed": int((~gv["completed"]).sum())})
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    spread = out.groupby(["label", "parameter"]).agg(cost_spread=("cost_usd", lambda s: s.max() - s.min()))
    return out.merge(spread.reset_index(), on=["label", "parameter"])


def compaction_ledger(trace, window: int, margins: list[int], model: str | None = None) -> pd.DataFrame:
    """N-WIN-3: replay NovaCode with the soft trigger at several points; per trigger point, the cost
    of the summary calls against the cost of carrying the text in the main calls, and whether the
    session completed (a failed run's costs stop where it failed)."""
    from ctxsim.harness.replay.engine import RunConfig, replay

    rows = []
    for margin in margins:
        kw = {"model": model} if model else {}
        res = replay(trace, "novacode", {"soft_margin": margin}, RunConfig(window=window, **kw))
        c = res.calls
        trigger = window - 20_000 - margin  # N-COMP-1, N-COMP-2
        rows.append({"trigger_tokens": trigger, "soft_margin": margin,
                     "summary_cost_usd": float(c.loc[c["kind"] == "summary", "cost_usd"].sum()),
                     "main_cost_usd": float(c.loc[c["kind"] != "summary", "cost_usd"].sum()),
                     "compactions": res.metrics["compactions"]["succeeded"],
                     "overflows": res.metrics["overflows"], "completed": res.metrics["completed"],
                     "failed_at_call": res.metrics["failed_at_call"]})
    df = pd.DataFrame(rows)
    df["total_cost_usd"] = df["summary_cost_usd"] + df["main_cost_usd"]
    return df
