"""How sure a retention figure is: intervals over seeds × probes, when two strategies are within
noise of each other, and the assumptions a retention figure rests on.

A run's retention is a weighted mean over the facts its probes need. Two things move it that have
nothing to do with the strategy: the run's seed (the simulated summariser's survival draws, the
read-back draws, failure injection) and which probes the session happens to have (another session of
the same kind asks for other things). The interval covers both, by a two-level percentile
bootstrap:

* each resample draws the seeds with replacement and, independently, the probes with replacement;
  the statistic is the mean over the drawn seeds of the weighted retention over the drawn probes
  (a probe's weight is the sum of its needs' category weights, its score their weighted sum);
* with several traces, each trace is resampled on its own and the statistic is the mean over traces
  (as ``analysis.by_config`` averages runs);
* a difference between two strategies is bootstrapped *paired*: the same seeds and the same probes
  in both, so what they share cancels;
* two strategies are **within noise** when the 95% interval of their paired difference contains 0.

``N_BOOT`` resamples (2,000) and the 95% level are conventions (assumed), fixed with the
resampling seed ``BOOT_SEED`` so a report is reproducible.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

N_BOOT = 2_000   # resamples (assumed: the percentile's own Monte Carlo error is about 1% of the width)
LEVEL = 0.95     # interval level (convention)
BOOT_SEED = 0    # resampling seed: the same report twice gives the same interval
MAX_FLIPS_SHOWN = 12  # a report lists at most this many reordered pairs (then counts the rest)
METHOD = (f"percentile bootstrap over seeds × probes ({N_BOOT:,} resamples, {LEVEL:.0%}; seeds and probes "
          "resampled independently, traces separately; differences paired)")
METHOD_SESSIONS = (f"percentile bootstrap over sessions ({N_BOOT:,} resamples, {LEVEL:.0%}; sessions drawn with "
                   "replacement, each with its probes and seeds: probes are clustered in sessions; differences paired "
                   "by session)")


def method(blocks: Mapping[str, Sequence[Block]] | Sequence[Block]) -> str:
    """The interval's method for these blocks: over sessions when there are two or more."""
    many = (max((len(v) for v in blocks.values()), default=0) if isinstance(blocks, Mapping) else len(blocks)) >= 2
    return METHOD_SESSIONS if many else METHOD


@dataclass(frozen=True)
class Block:
    """One trace's probe scores: ``scores[s, j]`` the weighted score of probe ``j`` in seed ``s``,
    ``weights[j]`` its weight; ``seeds`` the seed of each row; ``trace`` the trace's content hash (what
    pairs two configurations' blocks: they need not hold the same sessions)."""

    scores: np.ndarray
    weights: np.ndarray
    seeds: tuple[int, ...]
    trace: str = ""


def probe_block(tables: Sequence[pd.DataFrame], seeds: Sequence[int], weights: Mapping[str, float],
                trace: str = "") -> Block:
    """A :class:`Block` from per-run probe tables (columns probe, fact, category, score: the engine's
    ``RunResult.probes``) of one trace, one table per seed. A probe missing from a run scores 0."""
    keys = sorted(set().union(*({(p, f) for p, f in zip(t["probe"], t["fact"], strict=True)} for t in tables))
                  if tables else set())
    index = {k: i for i, k in enumerate(keys)}
    probes = sorted({p for p, _ in keys})
    pidx = {p: i for i, p in enumerate(probes)}
    need_probe = np.array([pidx[p] for p, _ in keys], dtype=int)
    w_need = np.zeros(len(keys))
    s = np.zeros((len(tables), len(keys)))
    for r, t in enumerate(tables):
        for p, f, c, v in zip(t["probe"], t["fact"], t["category"], t["score"], strict=True):
            i = index[(p, f)]
            w_need[i] = weights.get(c, 1.0)
            s[r, i] = v
    scores = np.zeros((len(tables), len(probes)))
    w = np.zeros(len(probes))
    np.add.at(w, need_probe, w_need)
    for r in range(len(tables)):
        np.add.at(scores[r], need_probe, s[r] * w_need)
    return Block(scores, w, tuple(int(x) for x in seeds), trace)


def _stat(blocks: Sequence[Block], draws: Sequence[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Per resample: the mean over traces of (mean over drawn seeds of the weighted score over the
    drawn probes)."""
    per = []
    for b, (si, pi) in zip(blocks, draws, strict=True):
        parts = []
        step = max(1, 4_000_000 // max(1, si.shape[1] * pi.shape[1]))  # resamples per chunk: bounded memory
        for lo in range(0, len(si), step):
            s_, p_ = si[lo:lo + step], pi[lo:lo + step]
            num = b.scores[s_[:, :, None], p_[:, None, :]].sum(axis=2)   # (chunk, seeds)
            den = b.weights[p_].sum(axis=1)                              # (chunk,)
            parts.append((num / np.where(den > 0, den, 1.0)[:, None]).mean(axis=1))
        per.append(np.concatenate(parts))
    return np.mean(per, axis=0)


def _draws(blocks: Sequence[Block], n_boot: int, rng: np.random.Generator) -> list[tuple[np.ndarray, np.ndarray]]:
    out = []
    for b in blocks:
        n_s, n_p = b.scores.shape
        out.append((rng.integers(0, n_s, (n_boot, n_s)), rng.integers(0, n_p, (n_boot, max(n_p, 1)))))
    return out


def point(blocks: Sequence[Block]) -> float:
    """The estimate itself: mean over traces of the mean over seeds of the weighted score."""
    vals = []
    for b in blocks:
        den = b.weights.sum()
        vals.append(float((b.scores.sum(axis=1) / (den if den > 0 else 1.0)).mean()))
    return float(np.mean(vals)) if vals else float("nan")


def _per_session(blocks: Sequence[Block]) -> np.ndarray:
    return np.array([point([b]) for b in blocks])


def _session_boot(values: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    idx = np.random.default_rng(seed).integers(0, len(values), (n_boot, len(values)))
    return values[idx].mean(axis=1)


def interval(blocks: Sequence[Block], n_boot: int = N_BOOT, level: float = LEVEL,
             seed: int = BOOT_SEED) -> tuple[float, float, float]:
    """(estimate, low, high) of the retention score of one configuration: with two sessions (traces)
    or more, a bootstrap over sessions; with one, over its seeds × probes."""
    blocks = [b for b in blocks if b.scores.size]
    if not blocks:
        return float("nan"), float("nan"), float("nan")
    if len(blocks) >= 2:
        boot = _session_boot(_per_session(blocks), n_boot, seed)
        a = (1 - level) / 2
        return point(blocks), float(np.quantile(boot, a)), float(np.quantile(boot, 1 - a))
    rng = np.random.default_rng(seed)
    boot = _stat(blocks, _draws(blocks, n_boot, rng))
    a = (1 - level) / 2
    return point(blocks), float(np.quantile(boot, a)), float(np.quantile(boot, 1 - a))


def paired(a: Sequence[Block], b: Sequence[Block]) -> tuple[list[Block], list[Block]]:
    """The two configurations on what they share: the traces both ran (by ``Block.trace``: a configuration
    that failed on a session, or was run on other sessions, has other blocks; blocks with no trace are
    paired in order), and per trace the seeds both ran (same order) and the same probes (they replay the
    same trace, so their probes are the same)."""
    out_a, out_b = [], []
    if all(x.trace for x in a) and all(y.trace for y in b):
        other = {y.trace: y for y in b}
        pairs = [(x, other[x.trace]) for x in a if x.trace in other]
    else:
        pairs = list(zip(a, b, strict=True))
    for x, y in pairs:
        common = [s for s in x.seeds if s in y.seeds]
        ix = [x.seeds.index(s) for s in common]
        iy = [y.seeds.index(s) for s in common]
        if not common or x.scores.shape[1] != y.scores.shape[1] or not x.scores.shape[1]:
            continue
        out_a.append(replace(x, scores=x.scores[ix], seeds=tuple(common)))
        out_b.append(replace(y, scores=y.scores[iy], seeds=tuple(common)))
    return out_a, out_b


def difference(a: Sequence[Block], b: Sequence[Block], n_boot: int = N_BOOT, level: float = LEVEL,
               seed: int = BOOT_SEED) -> tuple[float, float, float]:
    """(a − b, low, high): paired bootstrap (the same seed and probe draws for both)."""
    pa, pb = paired(a, b)
    if not pa:
        return float("nan"), float("nan"), float("nan")
    if len(pa) >= 2:   # paired by session: the same sessions drawn for both
        boot = _session_boot(_per_session(pa) - _per_session(pb), n_boot, seed)
        q = (1 - level) / 2
        return point(pa) - point(pb), float(np.quantile(boot, q)), float(np.quantile(boot, 1 - q))
    draws = _draws(pa, n_boot, np.random.default_rng(seed))
    boot = _stat(pa, draws) - _stat(pb, draws)
    q = (1 - level) / 2
    return point(pa) - point(pb), float(np.quantile(boot, q)), float(np.quantile(boot, 1 - q))


def within_noise(diff: tuple[float, float, float]) -> bool:
    return bool(diff[1] <= 0.0 <= diff[2])


def seed_flips(blocks: Mapping[str, Sequence[Block]],
               pairs: Sequence[tuple[str, str]] | None = None) -> list[tuple[str, str, list[int]]]:
    """Pairs of configurations whose order on retention changes with the seed: (a, b, the seeds
    where a ranks below b) for each pair a above b on the estimate where some seed reverses it
    (among ``pairs`` when given, else every pair)."""
    est = {k: point(v) for k, v in blocks.items()}
    names = sorted(est, key=lambda k: -est[k])
    if pairs is None:
        todo = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]
    else:
        todo = [(a, b) if est[a] >= est[b] else (b, a) for a, b in pairs if a in est and b in est]
    out = []
    for a, b in todo:
        pa, pb = paired(blocks[a], blocks[b])
        if not pa:
            continue
        seeds = sorted(set(pa[0].seeds).intersection(*(set(x.seeds) for x in pa)))
        rev = []
        for s in seeds:
            sa = [replace(x, scores=x.scores[[x.seeds.index(s)]], seeds=(s,)) for x in pa]
            sb = [replace(y, scores=y.scores[[y.seeds.index(s)]], seeds=(s,)) for y in pb]
            if point(sa) < point(sb):
                rev.append(s)
        if rev:
            out.append((a, b, rev))
    return out


def noise_lines(blocks: Mapping[str, Sequence[Block]], failed: Collection[str] = (),
                pairs: Sequence[tuple[str, str]] | None = None) -> list[str]:
    """Markdown bullets: the ranking on retention with intervals, each neighbour pair within noise or
    not, and the pairs the seed alone reorders. Configurations named in ``failed`` come last (a
    failed session is never listed first, issue #15), ranked among themselves. ``pairs``: only
    these pairs are compared (a report's pairs that matter: neighbours on the cost–retention front
    and each strategy against the reference), in that order."""
    if len(blocks) < 1:
        return []
    ci = {k: interval(v) for k, v in blocks.items()}
    names = sorted(ci, key=lambda k: (k in failed, -ci[k][0]))
    seeds = sorted({s for v in blocks.values() for b in v for s in b.seeds})
    n_sessions = max((len(v) for v in blocks.values()), default=0)
    on = f"{n_sessions} sessions, " if n_sessions >= 2 else ""
    lines = [f"Retention by configuration ({on}{len(seeds)} seed{'s' if len(seeds) != 1 else ''}: "
             f"{', '.join(map(str, seeds))}; {method(blocks)}):", ""]
    for k in names:
        e, lo, hi = ci[k]
        lines.append(f"- `{k}`: {e:.3f} [{lo:.3f}, {hi:.3f}]")
    lines.append("")
    compared = list(zip(names, names[1:])) if pairs is None else [(a, b) for a, b in pairs if a in blocks and b in blocks]
    if pairs is not None:
        lines.append(f"The {len(compared)} pairs that matter (neighbours on the cost–retention front, each strategy "
                     f"against the reference); the other {len(names) * (len(names) - 1) // 2 - len(compared)} pairs "
                     "are not listed:")
        lines.append("")
    for a, b in compared:
        d = difference(blocks[a], blocks[b])
        verdict = "within noise of" if within_noise(d) else "above" if d[0] > 0 else "below"  # below: a failed one next
        lines.append(f"- `{a}` is {verdict} `{b}`: difference {d[0]:+.3f} [{d[1]:+.3f}, {d[2]:+.3f}]")
    flips = seed_flips(blocks, None if pairs is None else compared)
    lines.append("")
    if len(seeds) < 2 and n_sessions >= 2:
        lines.append(f"- One seed per session: the {n_sessions} sessions are the sample, and each session's own draw is "
                     "part of the interval over sessions.")
    elif len(seeds) < 2:
        lines.append("- One seed only: whether the seed reorders these configurations is not known (run ≥ 3 seeds).")
    elif flips:
        for a, b, rev in flips[:MAX_FLIPS_SHOWN]:
            lines.append(f"- the seed alone reorders `{a}` and `{b}`: seed{'s' if len(rev) > 1 else ''} "
                         f"{', '.join(map(str, rev))} rank{'' if len(rev) > 1 else 's'} `{b}` first")
        if len(flips) > MAX_FLIPS_SHOWN:
            lines.append(f"- … and {len(flips) - MAX_FLIPS_SHOWN} more pairs the seed reorders")
    else:
        lines.append(f"- No seed reorders any two configurations (each of the {len(seeds)} seeds gives the same ranking).")
    return lines


def assumption_rows(retention: Mapping[str, Any] | None = None,
                    summariser: Mapping[str, Any] | None = None) -> list[tuple[str, str, str]]:
    """(name, value, source) of every constant a retention figure rests on, with a run's overrides
    applied: the retention model's and the simulated summariser's."""
    from ctxsim.harness.llm.simulated import SimParams
    from ctxsim.harness.retention.scoring import RetentionParams

    rows = [*RetentionParams(**dict(retention or {})).assumptions(), *SimParams(**dict(summariser or {})).assumptions()]
    return [(n, _short(v), s) for n, v, s in rows]


def _short(v: Any) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k} {x:g}" if isinstance(x, (int, float)) else f"{k} {x}" for k, x in v.items())
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def assumptions_markdown(retention: Mapping[str, Any] | None = None,
                         summariser: Mapping[str, Any] | None = None) -> list[str]:
    rows = assumption_rows(retention, summariser)
    out = ["| constant | value | source |", "|---|---|---|"]
    out += [f"| `{n}` | {v.replace('|', '/')} | {s.replace('|', '/')} |" for n, v, s in rows]
    return out


def mean_metrics(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The metrics of several seeds of one configuration as one object: numbers averaged (an int
    stays an int when every seed agrees), booleans true only if true for every seed, anything else
    from the first seed."""
    first = runs[0]
    out: dict[str, Any] = {}
    for k, v in first.items():
        vals = [r.get(k) for r in runs]
        if isinstance(v, dict) and all(isinstance(x, dict) for x in vals):
            out[k] = mean_metrics(vals)
        elif isinstance(v, bool):
            out[k] = all(bool(x) for x in vals)
        elif isinstance(v, (int, float)) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in vals):
            out[k] = v if all(x == v for x in vals) else float(np.mean(vals))
        else:
            out[k] = v
    return out


def blocks_by_config(results: Sequence[Any], key=lambda r: r.strategy,
                     weights: Mapping[str, float] | None = None) -> dict[str, list[Block]]:
    """RunResults grouped by configuration (``key``), one :class:`Block` per trace (by content hash),
    seeds as rows."""
    from ctxsim.harness.retention.scoring import RetentionParams

    w = weights if weights is not None else RetentionParams().category_weights
    groups: dict[str, dict[str, list[Any]]] = {}
    for r in results:
        groups.setdefault(key(r), {}).setdefault(r.trace_hash, []).append(r)
    out: dict[str, list[Block]] = {}
    for name, by_trace in groups.items():
        blocks = []
        for runs in by_trace.values():
            runs = sorted(runs, key=lambda r: r.seed)
            if all(len(r.probes) == 0 for r in runs):
                continue
            blocks.append(probe_block([r.probes for r in runs], [r.seed for r in runs], w, str(runs[0].trace_hash)))
        if blocks:
            out[name] = blocks
    return out


def report_section(df: pd.DataFrame, probes: Mapping[str, pd.DataFrame],
                   failed: Mapping[int, Collection[str]] | None = None,
                   pairs: Mapping[int, Sequence[tuple[str, str]]] | None = None) -> list[str]:
    """The report's retention section (Markdown lines): per window, each configuration's retention
    with its interval, which neighbours are within noise, which pairs the seed alone reorders; then
    the assumptions every retention figure here rests on. ``df``: one row per run (a sweep's results
    or ``report.rows_from_results``); ``probes``: run key -> its per-probe scores; ``failed``: window
    -> the configurations that failed there (listed last)."""
    import json as _json

    from ctxsim.harness.retention.scoring import RetentionParams
    from ctxsim.harness.sweep import analysis

    lines = ["## Retention: intervals, noise and seeds", ""]
    if not len(df) or "key" not in df or not probes:
        lines += ["No per-probe scores for these runs: no interval can be given.", ""]
    else:
        default_w = RetentionParams().category_weights
        for window in sorted(df["window"].dropna().unique()):
            sub = df[(df["window"] == window) & df["key"].isin(probes)]
            if sub.empty:
                continue
            keys = [c for c in analysis.config_columns(sub) if c in sub and sub[c].notna().any()]
            blocks: dict[str, list[Block]] = {}
            for _, g in sub.groupby(keys, dropna=False, sort=False):
                name = _config_name(g.iloc[0], sub)
                w = default_w
                col = "param.retention.category_weights"
                if col in g and isinstance(g[col].iloc[0], str):
                    w = {**default_w, **_json.loads(g[col].iloc[0])}
                per_trace = []
                th = "trace_hash" if "trace_hash" in g else "trace"
                for trace, tg in g.groupby(th, sort=True):
                    tg = tg.sort_values("seed") if "seed" in tg else tg
                    seeds = [int(s) for s in tg["seed"]] if "seed" in tg else list(range(len(tg)))
                    b = probe_block([probes[k] for k in tg["key"]], seeds, w, str(trace))
                    if b.scores.size:
                        per_trace.append(b)
                if per_trace:
                    blocks[name] = per_trace
            if blocks:
                lines += [f"### Window {int(window):,}", "", *noise_lines(blocks, (failed or {}).get(int(window), ()),
                                                                        (pairs or {}).get(int(window))), ""]
            else:
                lines += [f"### Window {int(window):,}", "", "No probes in these traces: no retention to compare.", ""]
    lines += ["## Assumptions", "",
              "The constants every retention figure here rests on, with their sources (\"assumed\": a modelling "
              "choice; `--retention` / `--summariser` or a sweep's `[retention]` / `[summariser]` grid vary them):", ""]
    swept = {c.removeprefix("param."): sorted({str(v) for v in df[c].dropna()}) for c in df.columns
             if c.startswith(("param.retention.", "param.summariser."))}
    lines += assumptions_markdown()
    if swept:
        lines += ["", "Varied in these runs: " + "; ".join(f"`{k}` ∈ {{{', '.join(v)}}}" for k, v in swept.items())]
    return lines + [""]


def _config_name(row: pd.Series, sub: pd.DataFrame) -> str:
    """The label, and the parameters that vary among the runs of that label (the report's own name,
    ``config``, when the rows carry it: the same name in every table)."""
    if isinstance(row.get("config"), str):
        return row["config"]
    same = sub[sub["label"] == row["label"]]
    varying = [c for c in same.columns if c.startswith("param.") and same[c].astype(str).nunique() > 1]
    extra = ", ".join(f"{c.removeprefix('param.')}={row[c]}" for c in varying)
    return f"{row['label']} ({extra})" if extra else str(row["label"])
