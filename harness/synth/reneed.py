"""Re-need distances: how far back a need reaches, fitted on real logs (issue 43). The generator draws
long-range needs from :class:`Reneed` (harness/synth/generator.py); harness/calibration/reneed_fit.py fits
it on the development population and writes harness/data/reneed.json."""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

import numpy as np

RENEED_DATA = Path(__file__).resolve().parents[1] / "data" / "reneed.json"
RENEED_FORMAT = "ctxsim-reneed"


@dataclass(frozen=True)
class Reneed:
    """The re-need distance D of a need: tokens of content since its fact was last seen, at a use
    ``pos`` tokens into the session, as a mixture truncated at ``pos`` (a need cannot reach back
    before the session started):

    * ``adjacent`` (weight ``w[0]``): log-normal, median ``adjacent[0]``, σ ``adjacent[1]``: seen in
      the event right before (a result the call acts on);
    * ``recent`` (``w[1]``): log-normal, median ``recent[0]``, σ ``recent[1]``;
    * ``reach`` (``w[2]``): uniform over the session so far, [0, pos]: a need that reaches back to
      anywhere in it.

    Fitted by maximum likelihood on the needs derived from the development population
    (harness/calibration/reneed_fit.py; goals apart: a goal is last seen where the session opened).
    Nothing here knows a window: at any window the needs whose D passes a turnover point are at risk,
    in proportion."""

    w: tuple[float, float, float]
    adjacent: tuple[float, float]
    recent: tuple[float, float]

    def _ln(self, k: int) -> tuple[float, float]:
        med, sigma = (self.adjacent, self.recent)[k]
        return math.log(med), sigma

    def _cdf(self, k: int, x: float) -> float:
        if x <= 0:
            return 0.0
        if k == 2:
            return 1.0
        mu, s = self._ln(k)
        return _NORMAL.cdf((math.log(x) - mu) / s)

    def sf(self, d: float, pos: float) -> float:
        """P(D ≥ d) at a use ``pos`` tokens into the session."""
        if d <= 0:
            return 1.0
        if d >= pos:
            return 0.0
        tot = 0.0
        for k in (0, 1):
            f = self._cdf(k, pos)
            if f > 0:
                tot += self.w[k] * (f - self._cdf(k, d)) / f
        return tot + self.w[2] * (1.0 - d / pos)

    def sample_beyond(self, rng: np.random.Generator, lo: float, pos: float) -> float:
        """A draw of D given D ≥ ``lo`` at ``pos`` (inverse CDF, two uniforms from ``rng``)."""
        if lo >= pos:
            return pos
        mass = []
        for k in (0, 1):
            f = self._cdf(k, pos)
            mass.append(self.w[k] * (f - self._cdf(k, lo)) / f if f > 0 else 0.0)
        mass.append(self.w[2] * (1.0 - lo / pos))
        u, v = float(rng.random()) * sum(mass), float(rng.random())
        k = 0 if u < mass[0] else 1 if u < mass[0] + mass[1] else 2
        if k == 2:
            return lo + v * (pos - lo)
        a, b = self._cdf(k, lo), self._cdf(k, pos)
        q = min(max(a + v * (b - a), 1e-12), 1 - 1e-12)
        mu, s = self._ln(k)
        return min(pos, max(lo, math.exp(mu + s * _NORMAL.inv_cdf(q))))


_NORMAL = statistics.NormalDist()


def load_reneed(path: Path | None = None) -> Reneed:
    """The fitted re-need distances (harness/data/reneed.json)."""
    d = json.loads((path or RENEED_DATA).read_text(encoding="utf-8"))
    if d.get("format") != RENEED_FORMAT:
        raise ValueError(f"{path or RENEED_DATA}: not a {RENEED_FORMAT} file")
    m = d["model"]
    return Reneed(tuple(m["w"]), tuple(m["adjacent"]), tuple(m["recent"]))
