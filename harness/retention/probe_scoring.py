"""Probe scoring during a replay: each probe scored on the request the strategy sends at its
call (harness/retention/scoring.py), the rows of the probe table, and the pointers the model would read
back. The engine hands it the accepted request and its layout; ground truth stays here."""

from __future__ import annotations

from typing import Any

from ctxsim.harness.model.conversation import Request
from ctxsim.harness.model.trace import FactEvent, ProbeEvent
from ctxsim.harness.retention.scoring import FactScore

PROBE_COLUMNS = ["probe", "call", "fact", "category", "where", "score", "pointer"]


class ProbeScorer:
    """Holds the run's fact scores and probe rows; ``retention`` None: the trace has no facts."""

    def __init__(self, facts: dict[str, FactEvent], retention: Any) -> None:
        self.facts = facts
        self.retention = retention
        self.fact_scores: list[Any] = []
        self.rows: list[dict[str, Any]] = []
        self.not_reached_count = 0

    def _row(self, probe: str, call: int, sc: Any, where: str | None = None) -> None:
        self.fact_scores.append(sc)
        self.rows.append({"probe": probe, "call": call, "fact": sc.fact_id, "category": sc.category,
                          "where": where or sc.where, "score": sc.score, "pointer": sc.pointer or ""})

    def score(self, probes: list[ProbeEvent], req: Request, lay: Any, call: int) -> list[tuple[str, int | None]]:
        """Score each probe on ``req`` (its layout ``lay``); return the pointers (file, line of
        the fact) the model would read back, each once, in order."""
        total = lay.total()
        base = lay.tokens(-1)

        def before(i: int) -> int:
            return base if i <= 0 else lay.tokens(i - 1)

        pointers: list[tuple[str, int | None]] = []
        for p in probes:
            for sc in self.retention.score(p, req, before, total):
                self._row(p.id, call, sc)
                if sc.where == "recoverable" and sc.score > 0 and sc.pointer and sc.pointer not in [q for q, _ in pointers]:
                    pointers.append((sc.pointer, getattr(sc, "pointer_line", None)))
        return pointers

    def unpaid(self, mark: int, paths: set[str] | None = None) -> None:
        """The read-backs of the pointers in ``paths`` (None: all) scored since fact score ``mark``
        were not made (the file could not be read, or the session failed on the way): those needs
        were not carried by the pointer, so they are ``unfollowed`` (lost), not ``recoverable``."""
        from dataclasses import replace

        for k in range(mark, len(self.fact_scores)):   # rows and scores are appended together (_row)
            sc = self.fact_scores[k]
            if sc.where == "recoverable" and (paths is None or sc.pointer in paths):
                self.fact_scores[k] = replace(sc, where="unfollowed", score=0.0)
                self.rows[k]["where"], self.rows[k]["score"] = "unfollowed", 0.0

    def not_reached(self, probes: list[ProbeEvent], call: int) -> None:
        """The session failed before ``probes``: each need scores 0 (the task was not finished)."""
        if self.retention is None:
            return
        for p in probes:
            self.not_reached_count += 1
            for fid in p.needs:
                fact = self.facts.get(fid)
                self._row(p.id, call, FactScore(fid, fact.category if fact is not None else "", "lost", 0.0, None, p.id),
                          "not_reached")
