"""What the cache's dice leave reachable over a folder of sessions (``ctxsim fidelity FOLDER``).

Some reads fall back with no cause in the log (harness/fidelity/cache_misses.py: a request served where
the session's entries are absent). A replay can bill them only at a rate it chose before the calls it is
scored on: it knows the first part of the log (the calls every setting is fitted on) and other sessions,
not which held-out calls fell back. Each session carries, from its fidelity report
(``fall_back_stakes``), its held-out eligible calls' **stake** (what they would cost over a read if each
fell back to nothing) and what the log's fall-backs among them **lost**, both in dollars, and its first
part's rate (lost / stake there).

A replay exact in everything but the fall-backs bills ``rate × stake`` for them where the log lost
``lost``. It is within a band of the bill when ``|rate × stake − lost| ≤ band × bill``. Over a folder,
:func:`reachable` gives each session the rate a family of predictors (:data:`FAMILIES`) chooses on the
*other* sessions (leave-one-out: the one that puts most of them within the band; the session never
picks its own) and counts the sessions that rate puts within it:

* ``one_rate``: one rate for every session;
* ``by_first_part``: one rate for each group of what the first part showed (:data:`FIRST_PART_BINS`);
* ``scaled``: ``a + λ × the first part's rate``, one ``(a, λ)`` for every session (what a miss model
  fitted on the first part and shrunk does).

``in_hindsight`` is the best a family reaches with its rates chosen on all the sessions, each one
included: more than any replay can know.

This is a bound on the error the dice alone leave, not a model: every other part of the replay is taken
as exact. Where most sessions lose nothing and a few lose much (fall-backs come in bursts), no rate puts
both within the band, and the share a replay can reach stays below a target however right the rest is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from ctxsim.harness.fidelity.cache_misses import Stake

# assumed: the rates a replay could bill, 0-10% of the stake in steps of 0.05% (in the development
# population, issue 41, 169 sessions billed by Anthropic: first-part rates median 0.001, p90 0.03, max 0.13)
RATE_GRID = np.linspace(0.0, 0.1, 201)
# assumed: the first part's rate, grouped into none (under 0.01%), under 0.5%, 0.5-2% and over 2%
FIRST_PART_BINS = (1e-4, 0.005, 0.02)
# assumed: the "scaled" predictors, a + λ × the first part's rate (what a miss model fitted on the first part and
# shrunk does): a in 0-2% by 0.05%, λ in 0-1.5 by 0.05
SCALED_BASE = np.linspace(0.0, 0.02, 41)
SCALED_FACTOR = np.linspace(0.0, 1.5, 31)
FAMILIES = ("one_rate", "by_first_part", "scaled")


@dataclass(frozen=True)
class Dice:
    """One session's stakes: its bill, its first part's fall-back rate and its held-out calls' stake and loss."""

    bill_usd: float
    first_rate: float
    stake_usd: float
    lost_usd: float

    @classmethod
    def of(cls, bill_usd: float, stakes: dict[str, Any]) -> Dice:
        """From a fidelity report's ``fall_back_stakes`` (harness/fidelity/compare.py)."""
        held = stakes["held_out"]
        return cls(bill_usd, Stake(**stakes["first_part"]).rate, held["stake_usd"], held["lost_usd"])

    @property
    def lost_pct(self) -> float:
        """What the held-out fall-backs cost, % of the bill."""
        return self.lost_usd / self.bill_usd * 100 if self.bill_usd else 0.0


def first_part_group(d: Dice) -> int:
    """The :data:`FIRST_PART_BINS` group of a session's first-part rate (0: none)."""
    return int(np.searchsorted(FIRST_PART_BINS, d.first_rate, side="right"))


def _within(rates: np.ndarray, sessions: Sequence[Dice], band_pct: float) -> np.ndarray:
    """``rates`` (candidate × session) → whether each puts each session within ``band_pct`` % of its bill."""
    stake = np.array([d.stake_usd for d in sessions])
    lost = np.array([d.lost_usd for d in sessions])
    bill = np.array([d.bill_usd for d in sessions])
    return np.abs(rates * stake[None, :] - lost[None, :]) <= band_pct / 100 * bill[None, :]


def _chosen(ok: np.ndarray, keys: list[Any]) -> tuple[float, float]:
    """``(leave-one-out, in hindsight)`` shares for candidates × sessions ``ok``: each session takes
    the candidate that puts most other sessions of its group (``keys``) within the band, or of all
    the others when it is alone in its group; ties go to the first candidate."""
    members: dict[Any, list[int]] = {}
    for i, k in enumerate(keys):
        members.setdefault(k, []).append(i)
    total = ok.sum(axis=1)
    by_group = {k: ok[:, ix].sum(axis=1) for k, ix in members.items()}
    loo = 0
    for i, k in enumerate(keys):
        peers = (by_group[k] if len(members[k]) > 1 else total) - ok[:, i]
        loo += bool(ok[int(np.argmax(peers)), i])
    hindsight = sum(int(v.max()) for v in by_group.values())
    return loo / len(keys), hindsight / len(keys)


def reachable(sessions: Sequence[Dice], band_pct: float, family: str = "one_rate") -> tuple[float, float]:
    """``(leave-one-out, in hindsight)``: the share of ``sessions`` within ``band_pct`` % of the bill
    at the rate a ``family`` of predictors (:data:`FAMILIES`) chooses on the other sessions (on all of
    them, the session included)."""
    if family not in FAMILIES:
        raise ValueError(f"family {family!r}: one of {', '.join(FAMILIES)}")
    if not sessions:
        return 0.0, 0.0
    n = len(sessions)
    if family == "scaled":
        first = np.array([d.first_rate for d in sessions])
        a, lam = np.meshgrid(SCALED_BASE, SCALED_FACTOR, indexing="ij")
        rates = a.reshape(-1, 1) + lam.reshape(-1, 1) * first[None, :]
        return _chosen(_within(rates, sessions, band_pct), [0] * n)
    ok = _within(RATE_GRID[:, None], sessions, band_pct)   # one rate for every session: broadcast
    return _chosen(ok, [first_part_group(d) for d in sessions] if family == "by_first_part" else [0] * n)


def summary(sessions: Sequence[Dice], bands: Sequence[float]) -> dict[str, Any]:
    """What the dice leave reachable in each band (module docstring), and how many sessions' held-out
    fall-backs alone cost more than it."""
    out: dict[str, Any] = {"sessions": len(sessions)}
    for b in bands:
        got = {f: reachable(sessions, b, f) for f in FAMILIES}
        out[f"within_{b:g}pct"] = {**{f: round(v[0], 4) for f, v in got.items()},
                                   "best": round(max(v[0] for v in got.values()), 4),
                                   "in_hindsight": round(max(v[1] for v in got.values()), 4),
                                   "held_out_losses_over": sum(d.lost_pct > b for d in sessions)}
    return out


__all__ = ["FAMILIES", "FIRST_PART_BINS", "RATE_GRID", "SCALED_BASE", "SCALED_FACTOR", "Dice", "first_part_group", "reachable", "summary"]
