"""Intervals for a share of needs kept (k of n) and for the difference of two such shares.

* **Wilson score interval** for k/n (Wilson 1927; Newcombe 1998, "Two-sided confidence intervals
  for the single proportion", Stat Med 17:857, method 3): keeps inside [0, 1] and stays honest at
  k = 0 or k = n, where the normal ("Wald") interval collapses to a point.
* **Newcombe's hybrid score interval** for p1 − p2 (Newcombe 1998, "Interval estimation for the
  difference between independent proportions", Stat Med 17:873, method 10): built from the two
  Wilson intervals.

Both treat the needs as independent trials. Needs pooled over seeds and traces of one
configuration are not quite that (the same fact probed twice is correlated), so the interval is a
floor on the uncertainty, not a ceiling; the report says which method it used.
"""

from __future__ import annotations

import math
from statistics import NormalDist

LEVEL = 0.95                              # interval level (convention)
Z = NormalDist().inv_cdf(0.5 + LEVEL / 2)  # 1.95996…: the two-sided normal quantile at LEVEL


def wilson(k: float, n: float, z: float = Z) -> tuple[float, float, float]:
    """(k/n, low, high); NaNs when n is 0 (no need was at risk: nothing to estimate)."""
    if n <= 0:
        return math.nan, math.nan, math.nan
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    lo = 0.0 if k <= 0 else max(0.0, centre - half)   # exact at the ends (no 1e-17 from rounding)
    hi = 1.0 if k >= n else min(1.0, centre + half)
    return p, lo, hi


def newcombe(k1: float, n1: float, k2: float, n2: float, z: float = Z) -> tuple[float, float, float]:
    """(p1 − p2, low, high) by Newcombe's method 10."""
    p1, l1, u1 = wilson(k1, n1, z)
    p2, l2, u2 = wilson(k2, n2, z)
    if math.isnan(p1) or math.isnan(p2):
        return math.nan, math.nan, math.nan
    d = p1 - p2
    return d, d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
