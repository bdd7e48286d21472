"""The distributions the generator draws from, and their fitted parameters.

Every size and gap is a log-normal declared by its median and 90th percentile (the two figures a
reader can check against the logs), optionally clipped to ``[lo, hi]``. The defaults in
:data:`FITTED` were printed by ``python -m ctxsim.harness.synth.fit`` on ``../shared/traces/real/``
(7 Claude Code transcripts, 1 Codex rollout, 2 SWE-agent trajectories; 675 tool calls, 512 call
gaps, 36 user gaps); ``traces/README.md`` reproduces the table.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

Z90 = 1.2815515655446004  # standard normal 90th percentile


class LogNormal(BaseModel):
    """A log-normal given by its median and 90th percentile, clipped to ``[lo, hi]``.

    Clipping only moves draws beyond the bounds, so as long as ``lo < median`` and ``hi > p90`` the
    declared median and p90 are those of the draws (what the generator tests check).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    median: float = Field(gt=0)
    p90: float = Field(gt=0)
    lo: float = Field(0.0, ge=0)
    hi: float | None = Field(None, gt=0, description="upper clip; None: unbounded")

    @model_validator(mode="after")
    def _order(self) -> LogNormal:
        if self.p90 < self.median:
            raise ValueError(f"p90 ({self.p90}) must be >= median ({self.median})")
        if self.hi is not None and self.hi <= self.lo:
            raise ValueError(f"hi ({self.hi}) must be > lo ({self.lo})")
        return self

    @property
    def mu(self) -> float:
        return math.log(self.median)

    @property
    def sigma(self) -> float:
        return (math.log(self.p90) - math.log(self.median)) / Z90

    def sample(self, rng: np.random.Generator, size: int | None = None) -> np.ndarray | float:
        """``size`` draws (an array), or one float when ``size`` is None."""
        if size is None:
            return float(self.sample(rng, 1)[0])
        x = rng.lognormal(self.mu, self.sigma, size) if self.sigma > 0 else np.full(size, self.median)
        return np.clip(x, self.lo, self.hi if self.hi is not None else np.inf)

    def quantile(self, q: float) -> float:
        """The unclipped quantile (inverse CDF via the normal quantile)."""
        from statistics import NormalDist

        x = max(math.exp(self.mu + self.sigma * NormalDist().inv_cdf(q)), self.lo)
        return float(x if self.hi is None else min(x, self.hi))


def categorical(weights: dict[str, float]) -> tuple[list[str], np.ndarray]:
    """Names and normalised probabilities (sorted by name, so the draw does not depend on dict order)."""
    if not weights:
        raise ValueError("empty categorical distribution")
    if any(w < 0 for w in weights.values()):
        raise ValueError(f"negative weight in {weights}")
    names = sorted(weights)
    p = np.array([weights[n] for n in names], dtype=float)
    if p.sum() <= 0:
        raise ValueError(f"weights sum to zero: {weights}")
    return names, p / p.sum()


# --- fitted on ../shared/traces/real/ by harness/synth/fit.py -------------------------------------
# tool kinds: share of all tool calls (n = 675). todo/task/other (3% together) are folded into
# bash/read by the generator's presets, which keep the seven kinds below.
FITTED_TOOL_MIX = {"bash": 0.4693, "edit": 0.2310, "read": 0.1857, "grep": 0.0424, "glob": 0.0278,
                   "web": 0.0175, "task": 0.0088}
# tool result size in characters, per kind: (n, median, p90) from the logs
FITTED_RESULT_CHARS = {
    "bash": (321, 266.0, 2957.0),
    "edit": (158, 134.0, 1992.8),
    "read": (127, 2000.0, 10260.2),
    "grep": (29, 113.0, 395.4),
    "glob": (19, 151.0, 1403.6),
    "web": (12, 1662.0, 3022.9),
    "task": (6, 6786.0, 11728.5),
}
# tool_use input JSON size in characters, per kind (Claude Code only)
FITTED_INPUT_CHARS = {
    "bash": (248, 124.0, 394.8),
    "edit": (148, 1123.0, 3884.8),
    "read": (109, 105.0, 138.0),
    "grep": (12, 117.0, 154.9),
    "glob": (18, 46.0, 66.0),
    "web": (12, 128.0, 232.6),
    "task": (6, 302.0, 1119.5),
}
FITTED_TEXT_CHARS = (302, 80.0, 958.9)        # assistant text per call
# tool_use blocks per model call (n = 1,142 calls)
FITTED_PARALLEL = {"0": 0.0578, "1": 0.7741, "2": 0.1051, "3": 0.0508, "4": 0.0070, "5": 0.0018,
                   "6": 0.0018, "8": 0.0018}
FITTED_CALLS_PER_TURN = (42, 3.0, 45.4)        # model calls per user turn
FITTED_CALL_GAP_S = (512, 8.1, 30.3)           # seconds between consecutive calls of a turn (max 189)
FITTED_USER_GAP_S = (36, 122.5, 290.0)         # end of a turn -> next user message (max 857)
FITTED_USER_GAP_OVER_300S = 0.1111             # 4 of 36 user gaps exceed the 5-minute cache TTL


def fitted(entry: tuple[int, float, float], lo: float = 0.0, hi: float | None = None) -> LogNormal:
    _, med, p90 = entry
    return LogNormal(median=med, p90=p90, lo=lo, hi=hi)
