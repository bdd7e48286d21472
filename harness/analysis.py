"""Reading a sweep: the Pareto front of cost against retention, the recommendation (the cheapest
configuration that keeps retention at a target with no overflow), per-parameter sensitivity, and
the compaction ledger of N-WIN-3."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

RETENTION = "retention.score"
COST = "cost_usd"


def ok_runs(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["error"].fillna("") == ""] if "error" in df else df


def config_columns(df: pd.DataFrame) -> list[str]:
    """The columns that identify a configuration (strategy label, its parameters, provider)."""
    cols = ["label"] + sorted(c for c in df.columns if c.startswith("param."))
    return cols + [c for c in ("model", "window", "cache") if c in df.columns]


def by_config(df: pd.DataFrame) -> pd.DataFrame:
    """Mean metrics per configuration over traces and seeds."""
    df = ok_runs(df)
    keys = [c for c in config_columns(df) if df[c].notna().any()]
    agg = {COST: "mean", "overflows": "sum", "pairing_violations": "sum", "cache_hit_rate": "mean"}
    if RETENTION in df:
        agg[RETENTION] = "mean"
    if "retention.goal" in df:
        agg["retention.goal"] = "mean"
    keyed = df.assign(**{k: df[k].astype(object).where(df[k].notna(), "–") for k in keys})
    grouped = keyed.groupby(keys, dropna=False)
    g = grouped.agg(agg).reset_index()
    g["runs"] = grouped.size().to_numpy()
    return g


def pareto_front(cfgs: pd.DataFrame, cost: str = COST, quality: str = RETENTION) -> pd.DataFrame:
    """Configurations no other beats on both lower cost and higher retention."""
    d = cfgs.dropna(subset=[cost, quality]).sort_values([cost, quality], ascending=[True, False])
    front, best = [], -np.inf
    for idx, row in d.iterrows():
        if row[quality] > best:
            front.append(idx)
            best = row[quality]
    return d.loc[front]


def recommend(cfgs: pd.DataFrame, target: float) -> dict[str, Any] | None:
    """The cheapest configuration with mean retention >= target and no overflow in any run."""
    if RETENTION not in cfgs:
        return None
    ok = cfgs[(cfgs[RETENTION] >= target) & (cfgs["overflows"] == 0) & (cfgs["pairing_violations"] == 0)]
    if ok.empty:
        return None
    best = ok.sort_values([COST, RETENTION], ascending=[True, False]).iloc[0]
    return {k: (v.item() if hasattr(v, "item") else v) for k, v in best.items()}


def config_params(rec: dict[str, Any]) -> dict[str, Any]:
    """The strategy parameters of a configuration row, as they were set (integers stay integers:
    a parameter column shared with other strategies is float in the table)."""
    out = {}
    for k, v in rec.items():
        if not k.startswith("param.") or v in ("–", None) or (isinstance(v, float) and np.isnan(v)):
            continue
        out[k.removeprefix("param.")] = int(v) if isinstance(v, float) and v.is_integer() else v
    return out


def sensitivity(df: pd.DataFrame) -> pd.DataFrame:
    """For each strategy and swept parameter: mean cost and retention per value, and the spread
    (max − min of the means) — which knobs move the numbers."""
    df = ok_runs(df)
    rows = []
    for label, g in df.groupby("label"):
        for col in [c for c in g.columns if c.startswith("param.")]:
            vals = g[col].dropna()
            if vals.nunique() < 2:
                continue
            m = g.groupby(col).agg(cost=(COST, "mean"), retention=(RETENTION, "mean") if RETENTION in g else (COST, "size"))
            for v, r in m.iterrows():
                rows.append({"label": label, "parameter": col.removeprefix("param."), "value": v,
                             "cost_usd": r["cost"], "retention": r["retention"] if RETENTION in g else None})
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    spread = out.groupby(["label", "parameter"]).agg(cost_spread=("cost_usd", lambda s: s.max() - s.min()))
    return out.merge(spread.reset_index(), on=["label", "parameter"])


def compaction_ledger(trace, window: int, margins: list[int], model: str | None = None) -> pd.DataFrame:
    """N-WIN-3: replay NovaCode with the soft trigger at several points; per trigger point, the cost
    of the summary calls against the cost of carrying the text in the main calls."""
    from harness.engine import RunConfig, replay

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
                     "overflows": res.metrics["overflows"]})
    df = pd.DataFrame(rows)
    df["total_cost_usd"] = df["summary_cost_usd"] + df["main_cost_usd"]
    return df
