"""Statistics at the session level (issue 42): a user's question is about their traffic, many
sessions, so every figure here is over sessions.

* A configuration's number on a session is the mean over that session's runs (its seeds): cost per
  session, needs at risk kept. A session's needs are counted once, whatever the seeds (the same
  needs, replayed again).
* Two configurations are compared **paired by session**: each session's difference, on the
  sessions both ran.
* An interval is a **percentile bootstrap over sessions** (sessions drawn with replacement, each with
  all its needs: needs are clustered in sessions): a saving as a ratio of sums, Σ(default − setting)
  / Σ default; a retention difference as Σ(kept by a − kept by b) / Σ needs at risk.
* The **detection limit** of a retention difference is the smallest loss the data could have shown:
  (z₀.₉₇₅ + z₀.₈₀) × the bootstrap standard error (a loss that large is seen 80% of the time), and
  never below 3 / n needs (no loss among n needs rules out a loss rate above 3/n at 95%: the rule
  of three), so a comparison with no discordant session still says how much it could have missed.
* **Heterogeneity**: on how many of the N sessions the difference holds, and where it reverses,
  what those sessions have in common (:func:`common_trait`: the session trait that best separates
  them from the rest).

With one session there is no interval over sessions (None); callers say so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np
from ctxsim.harness.sweep.uncertainty import BOOT_SEED, LEVEL, N_BOOT  # one bootstrap for every report

POWER = 0.80       # the detection limit: a loss seen this often (convention)
Z_DETECT = NormalDist().inv_cdf(1 - (1 - LEVEL) / 2) + NormalDist().inv_cdf(POWER)   # 1.96 + 0.84
RULE_OF_THREE = 3.0   # -ln(0.05): no event among n rules out a rate above 3/n at 95%
TRAIT_AUC = 0.75      # a trait "in common" separates the reversing sessions this well at least (assumed)


@dataclass(frozen=True)
class Interval:
    est: float
    lo: float = math.nan
    hi: float = math.nan

    @property
    def has_ci(self) -> bool:
        return not (math.isnan(self.lo) or math.isnan(self.hi))


@dataclass
class Needs:
    """A configuration's needs at risk on one session (over its seeds: kept is their mean)."""

    n: int = 0
    kept: float = 0.0
    goal_n: int = 0
    goal_kept: float = 0.0
    constraints_n: int = 0
    constraints_kept: float = 0.0


@dataclass
class Comparison:
    """``a`` against ``b`` on the sessions both ran (b the reference: the default, or the tuned setting)."""

    sessions: list[str]
    needs: int                         # needs at risk over those sessions (each once)
    cost_a: float                      # mean per session
    cost_b: float
    saving: Interval                   # (b − a) / b: the share of b's cost a saves
    saving_usd: Interval               # mean per session of b − a
    retention: Interval                # pooled (kept a − kept b) / needs
    detection: float                   # the smallest retention loss these sessions could have shown
    cheaper_on: int                    # sessions where a costs less
    not_worse_on: int                  # sessions (with needs at risk) where a keeps at least as many
    with_needs: int                    # sessions with needs at risk
    reversed_cost: list[str] = field(default_factory=list)       # sessions where a costs more
    reversed_retention: list[str] = field(default_factory=list)  # sessions where a keeps fewer
    cheaper: list[str] = field(default_factory=list)             # sessions where a costs less

    @property
    def n(self) -> int:
        return len(self.sessions)


def _boot_idx(n: int, n_boot: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, n, (n_boot, n))


def _quantiles(x: np.ndarray) -> tuple[float, float]:
    x = x[np.isfinite(x)]
    if not len(x):
        return math.nan, math.nan
    a = (1 - LEVEL) / 2
    return float(np.quantile(x, a)), float(np.quantile(x, 1 - a))


def ratio_interval(num: Sequence[float], den: Sequence[float], n_boot: int = N_BOOT, seed: int = BOOT_SEED) -> Interval:
    """Σ num / Σ den with a percentile bootstrap over the sessions (the pairs num[i], den[i])."""
    num_a, den_a = np.asarray(num, float), np.asarray(den, float)
    if not len(num_a) or den_a.sum() == 0:
        return Interval(math.nan)
    est = float(num_a.sum() / den_a.sum())
    if len(num_a) < 2:
        return Interval(est)
    idx = _boot_idx(len(num_a), n_boot, seed)
    d = den_a[idx].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = np.where(d > 0, num_a[idx].sum(axis=1) / np.where(d > 0, d, 1.0), np.nan)
    lo, hi = _quantiles(boot)
    return Interval(est, lo, hi)


def mean_interval(x: Sequence[float], n_boot: int = N_BOOT, seed: int = BOOT_SEED) -> Interval:
    a = np.asarray(x, float)
    if not len(a):
        return Interval(math.nan)
    if len(a) < 2:
        return Interval(float(a.mean()))
    lo, hi = _quantiles(a[_boot_idx(len(a), n_boot, seed)].mean(axis=1))
    return Interval(float(a.mean()), lo, hi)


def kept_interval(needs: Mapping[str, Needs], n_boot: int = N_BOOT, seed: int = BOOT_SEED) -> Interval:
    """Needs at risk kept, pooled over sessions (Σ kept / Σ n), with the bootstrap over sessions."""
    rows = [v for v in needs.values() if v.n > 0]
    return ratio_interval([v.kept for v in rows], [v.n for v in rows], n_boot, seed)


def detection_limit(se: float, needs: int) -> float:
    """The smallest retention loss the data could have shown (module docstring)."""
    floor = RULE_OF_THREE / needs if needs > 0 else math.nan
    if math.isnan(se):
        return floor
    return max(Z_DETECT * se, floor)


def compare(cost_a: Mapping[str, float], cost_b: Mapping[str, float], needs_a: Mapping[str, Needs],
            needs_b: Mapping[str, Needs], n_boot: int = N_BOOT, seed: int = BOOT_SEED) -> Comparison:
    """``a`` against ``b``, paired by session (the sessions both have a cost for)."""
    sessions = sorted(set(cost_a) & set(cost_b))
    ca = np.array([cost_a[s] for s in sessions], float)
    cb = np.array([cost_b[s] for s in sessions], float)
    saving = ratio_interval(cb - ca, cb, n_boot, seed)
    saving_usd = mean_interval(cb - ca, n_boot, seed)
    both = [s for s in sessions if s in needs_a and s in needs_b and needs_b[s].n > 0]
    n = np.array([needs_b[s].n for s in both], float)
    d = np.array([needs_a[s].kept - needs_b[s].kept for s in both], float)
    retention = ratio_interval(d, n, n_boot, seed)
    total = int(n.sum())
    se = math.nan
    if len(both) >= 2 and total > 0:
        idx = _boot_idx(len(both), n_boot, seed)
        den = n[idx].sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            boot = np.where(den > 0, d[idx].sum(axis=1) / np.where(den > 0, den, 1.0), np.nan)
        boot = boot[np.isfinite(boot)]
        se = float(boot.std(ddof=1)) if len(boot) > 1 else math.nan
    tol = 1e-9
    return Comparison(
        sessions=sessions, needs=total, cost_a=float(ca.mean()) if len(ca) else math.nan,
        cost_b=float(cb.mean()) if len(cb) else math.nan, saving=saving, saving_usd=saving_usd, retention=retention,
        detection=detection_limit(se, total), cheaper_on=int((ca < cb - tol).sum()),
        not_worse_on=int(sum(1 for x in d if x >= -tol)), with_needs=len(both),
        reversed_cost=[s for s, x, y in zip(sessions, ca, cb, strict=True) if x > y + tol],
        reversed_retention=[s for s, x in zip(both, d, strict=True) if x < -tol],
        cheaper=[s for s, x, y in zip(sessions, ca, cb, strict=True) if x < y - tol])


def holds(c: Comparison) -> bool:
    """The setting ``a`` holds against ``b`` across these sessions: it saves (the saving's interval
    over sessions above 0, and cheaper on more than half the sessions) and its retention is not worse
    beyond noise (the difference's interval reaches 0 or above)."""
    if not c.saving.has_ci or c.saving.lo <= 0 or 2 * c.cheaper_on <= c.n:
        return False
    return not_worse(c.retention)


def direction(i: Interval) -> int:
    """+1 (above 0 beyond noise), −1 (below), 0 (within noise) for a difference with its interval; an
    interval that only touches 0 is on the side of its estimate (the resamples all fell on that side
    or on 0 itself)."""
    if i.lo > 0 or (i.lo == 0 and i.est > 0):
        return 1
    if i.hi < 0 or (i.hi == 0 and i.est < 0):
        return -1
    return 0


def not_worse(i: Interval) -> bool:
    """A retention difference is not worse beyond noise: its estimate is 0 or above, or its interval
    reaches above 0 (an interval that only touches 0 from below is a loss)."""
    return math.isnan(i.est) or i.est >= 0 or (i.has_ci and i.hi > 0)


def common_trait(reversing: Sequence[str], everyone: Sequence[str], traits: Mapping[str, Mapping[str, Any]]) -> str:
    """What the ``reversing`` sessions have in common against the others: the numeric trait whose
    values best separate the two groups (Mann-Whitney AUC at least :data:`TRAIT_AUC` either way), or
    a kind they all share that the others mostly do not; "" when nothing does."""
    rev = [s for s in reversing if s in traits]
    rest = [s for s in everyone if s in traits and s not in set(reversing)]
    if not rev or not rest:
        return ""
    best: tuple[float, str] | None = None
    names = sorted({k for s in rev + rest for k in traits[s]})
    for k in names:
        a = [traits[s].get(k) for s in rev]
        b = [traits[s].get(k) for s in rest]
        if all(isinstance(x, str) for x in a + b if x is not None):
            shared = {x for x in a}
            if len(shared) == 1 and None not in shared:
                (v,) = shared
                share = sum(1 for x in b if x == v) / len(b)
                if share < 0.5:
                    cand = (1.0 - share, f"all {len(a)} are {k} {v} (against {share:.0%} of the others)")
                    best = cand if best is None or cand[0] > best[0] else best
            continue
        xa = np.array([x for x in a if isinstance(x, (int, float)) and not isinstance(x, bool)], float)
        xb = np.array([x for x in b if isinstance(x, (int, float)) and not isinstance(x, bool)], float)
        if not len(xa) or not len(xb):
            continue
        auc = float(((xa[:, None] > xb[None, :]).sum() + 0.5 * (xa[:, None] == xb[None, :]).sum()) / (len(xa) * len(xb)))
        strength = abs(auc - 0.5) * 2
        if max(auc, 1 - auc) < TRAIT_AUC:
            continue
        word = "more" if auc > 0.5 else "fewer"
        text = f"{word} {k} (median {_num(np.median(xa))} against {_num(np.median(xb))})"
        if best is None or strength > best[0]:
            best = (strength, text)
    return best[1] if best else ""


def _num(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


# --- sentences (the terminal and the report print the same ones) ------------------------------------

def pct(i: Interval) -> str:
    if math.isnan(i.est):
        return "–"
    return f"{i.est:.1%}" + (f" [{i.lo:.1%}, {i.hi:.1%}]" if i.has_ci else " (one session: no interval over sessions)")


def more_or_less(saving: Interval) -> str:
    """A saving (share of the reference's cost) read as what ``a`` costs against the reference:
    "10.9% [5.3%, 14.1%] less" or "13.3% [4.6%, 21.4%] more"."""
    if math.isnan(saving.est):
        return "–"
    if saving.est >= 0:
        return f"{pct(saving)} less"
    return f"{pct(Interval(-saving.est, -saving.hi, -saving.lo))} more"


def points(i: Interval) -> str:
    """A retention difference in points of needs kept (0.05 -> +5.0 pts)."""
    if math.isnan(i.est):
        return "–"
    return f"{i.est * 100:+.1f} pts" + (f" [{i.lo * 100:+.1f}, {i.hi * 100:+.1f}]" if i.has_ci else "")


def loss(i: Interval) -> str:
    """A retention difference below 0 as a loss in points: −0.25 [−0.38, 0] -> "25.0 pts [0.0, 38.3]"."""
    def f(x: float) -> str:
        return f"{abs(x) * 100:.1f}" if x <= 0 else f"{-x * 100:.1f}"
    return f"{f(i.est)} pts" + (f" [{f(i.hi)}, {f(i.lo)}]" if i.has_ci else "")


def evidence(c: Comparison, traits: Mapping[str, Mapping[str, Any]] | None = None,
             names: Mapping[str, str] | None = None) -> str:
    """n, the detection limit and the heterogeneity of a comparison, in one clause."""
    det = "–" if math.isnan(c.detection) else f"{c.detection * 100:.1f} pts"
    out = (f"n = {c.n} session{'s' if c.n != 1 else ''}, {c.needs} need{'s' if c.needs != 1 else ''} at risk; "
           f"detection limit {det}; cheaper on {c.cheaper_on} of {c.n}")
    if c.with_needs:
        out += f", retention not worse on {c.not_worse_on} of {c.with_needs}"
    rev = reversals(c)
    if rev and traits is not None:
        trait = common_trait(rev, c.sessions, traits)
        named = ", ".join((names or {}).get(s, s[:8]) for s in rev[:3]) + (" …" if len(rev) > 3 else "")
        what = "the saving" if c.saving.est >= 0 else "the extra cost"
        out += f"; {what} reverses on {len(rev)} ({named})" + (f": {trait}" if trait else
                                                                ": no session trait sets them apart")
    return out


def reversals(c: Comparison) -> list[str]:
    """The sessions that go against the comparison's overall direction on cost: where ``a`` costs
    more when it saves overall, where it costs less when it costs more overall."""
    if math.isnan(c.saving.est):
        return []
    return list(c.reversed_cost) if c.saving.est >= 0 else list(c.cheaper)
