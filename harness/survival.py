"""Which facts a summary keeps, by content: a logistic model fitted on real compactions.

For a fact present in the messages a summariser reads::

    p = σ(intercept + kind[k] + uses·log(1 + u) + mentions·log(1 + m) + from_user·[user] + age·a)

* ``k`` — the fact's kind (its category; planted categories map onto the measured kinds, below);
* ``m`` — mentions: how many of the summarised messages hold the fact's text;
* ``u`` — uses: how many of those the assistant wrote (what the agent itself kept saying);
* ``user`` — 1 if a message the user typed holds it;
* ``a`` — age: the share of the summarised tokens after the last message that holds it (0: in the
  newest message, 1: only at the very start).

The coefficients, their source (which compactions, which command) and the fit's leave-one-out
error live in ``harness/data/summary_survival.json``, written by ``ctxsim calibrate-summariser``
(:func:`ctxsim.harness.calibration.fit_survival`); nothing here is a free guess except the mapping of
planted categories, which real logs cannot show (they have no planted facts): ``file`` (a line of
a file read) → ``identifier``; ``constraint``, ``preference``, ``feedback`` (sentences the user
typed) → ``goal`` (the user's request line); ``decision`` and ``error`` → no kind offset (the mean
over kinds): assumed, listed in :data:`PLANTED_KIND`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data" / "summary_survival.json"
FORMAT = "ctxsim-summary-survival"
VERSION = 1
FEATURES = ("uses", "mentions", "from_user", "age")
# planted categories onto measured kinds (assumed; see the module docstring); None: no kind offset
PLANTED_KIND: dict[str, str | None] = {"file": "identifier", "constraint": "goal", "preference": "goal",
                                       "feedback": "goal", "decision": None, "error": "error"}


@dataclass(frozen=True)
class Features:
    """What the summariser sees of one fact in the messages it summarises."""

    kind: str
    mentions: int
    uses: int
    from_user: bool
    age: float

    def vector(self) -> dict[str, float]:
        return {"uses": math.log1p(self.uses), "mentions": math.log1p(self.mentions),
                "from_user": 1.0 if self.from_user else 0.0, "age": min(1.0, max(0.0, self.age))}


@dataclass(frozen=True)
class SurvivalModel:
    """Coefficients of the logistic model (log-odds)."""

    intercept: float
    kinds: Mapping[str, float]
    coef: Mapping[str, float]

    def logit(self, f: Features) -> float:
        kind = f.kind if f.kind in self.kinds else PLANTED_KIND.get(f.kind)
        x = f.vector()
        return (self.intercept + (self.kinds.get(kind, 0.0) if kind else 0.0)
                + sum(self.coef.get(k, 0.0) * v for k, v in x.items()))

    def p(self, f: Features) -> float:
        z = self.logit(f)
        return 1.0 / (1.0 + math.exp(-z)) if z > -700 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"intercept": self.intercept, "kinds": dict(sorted(self.kinds.items())),
                "coef": {k: self.coef[k] for k in FEATURES if k in self.coef}}

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> SurvivalModel:
        return SurvivalModel(float(d["intercept"]), {str(k): float(v) for k, v in d["kinds"].items()},
                             {str(k): float(v) for k, v in d["coef"].items()})


def load(path: str | Path | None = None) -> dict[str, Any]:
    """The survival data file (the committed one by default)."""
    p = Path(path) if path else DATA
    try:
        d = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"{p}: cannot read the summary survival file: {e}") from None
    if d.get("format") != FORMAT or d.get("version") != VERSION:
        raise ValueError(f"{p}: not a {FORMAT} v{VERSION} file")
    return d


@cache
def default_model() -> SurvivalModel:
    return SurvivalModel.from_dict(load()["model"])


@cache
def default_length() -> dict[str, float]:
    """The fitted summary length: characters per input token (and the range seen)."""
    return dict(load()["length"])
