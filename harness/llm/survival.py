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
(:func:`ctxsim.harness.calibration.summariser.fit_survival`); nothing here is a free guess except the mapping of
planted categories, which real logs cannot show (they have no planted facts): ``file`` (a line of
a file read) → ``identifier``; ``constraint``, ``preference``, ``feedback`` (sentences the user
typed) → ``goal`` (the user's request line); ``decision`` and ``error`` → no kind offset (the mean
over kinds): assumed, listed in :data:`PLANTED_KIND`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1] / "data" / "summary_survival.json"
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


def features_of(messages: Sequence[tuple[str, bool, int, frozenset[str] | set[str]]], fact_id: str, kind: str):
    """Features of one fact over messages given as (role, typed, tokens, fact ids
    present): what the simulated summariser computes at run time and the fit computes on real logs."""
    total = sum(m[2] for m in messages) or 1
    mentions = uses = 0
    user = False
    after = None
    seen_tokens = 0
    for role, typed, tokens, present in messages:
        seen_tokens += tokens
        if fact_id in present:
            mentions += 1
            uses += role == "assistant"
            user = user or (role == "user" and typed)
            after = total - seen_tokens
    return Features(kind, mentions, uses, user, (after if after is not None else total) / total)


def features_all(messages: Sequence[tuple[str, bool, int, frozenset[str] | set[str]]],
                 kinds: dict[str, str]) -> dict:
    """:func:`features_of` of every fact of ``kinds`` (fact id -> category) at once, in one pass
    over the messages instead of one per fact (a summary of a long session holds hundreds)."""
    total = sum(m[2] for m in messages) or 1
    acc: dict[str, list] = {}   # fact -> [mentions, uses, user, seen tokens at the last mention]
    seen_tokens = 0
    for role, typed, tokens, present in messages:
        seen_tokens += tokens
        for fid in present:
            a = acc.get(fid)
            if a is None:
                a = acc[fid] = [0, 0, False, 0]
            a[0] += 1
            a[1] += role == "assistant"
            a[2] = a[2] or (role == "user" and typed)
            a[3] = seen_tokens
    out = {}
    for fid, kind in kinds.items():
        a = acc.get(fid)
        out[fid] = (Features(kind, a[0], a[1], a[2], (total - a[3]) / total) if a is not None
                    else Features(kind, 0, 0, False, total / total))
    return out
