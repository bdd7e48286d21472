"""Fact texts: one checkable sentence per fact, unique in the whole trace.

A fact is planted where an agent would meet it: the goal, constraints, preferences and feedback in
user messages; decisions in the assistant's own text; errors in failing test logs; file details as
a line of a file the agent reads. Each text carries a serial-derived code (a ticket number, a
constant's value) so no two facts and no generated filler can share it, and holds no quote,
backslash or newline, so it stays verbatim in JSON transcripts and spill files too.
"""

from __future__ import annotations

from harness.synth.content import DIRS, EXC, NOUNS, VERBS, Draw

PROJECTS = ("LED", "ORB", "KAP", "NIM", "TESS", "VEGA", "RUNE", "HALO")
STRUCTS = ("an LRU map", "a ring buffer", "a sorted list", "a bloom filter", "a SQLite table", "a trie")
GOAL_OUTCOMES = ("nightly exports stop failing", "p95 latency drops below the SLO", "the flaky CI job goes green",
                 "tenants can be migrated without downtime", "the memory leak under load disappears",
                 "partial uploads can be resumed")
UNITS = ("MS", "BYTES", "LIMIT", "RETRIES", "TTL_S", "SLOTS", "BATCH")


class FactMaker:
    """Makes unique fact texts; ``serial`` numbers them in the order they are planted."""

    def __init__(self, d: Draw) -> None:
        self.d = d
        self.serial = 0
        self.seen: set[str] = set()

    def _code(self) -> int:
        self.serial += 1
        # strictly increasing and six digits wide (up to 24,000 facts): unique, and never a prefix of another
        return 100_000 + self.serial * 37 + self.d.int(37)

    def _unique(self, make) -> str:
        for _ in range(100):
            text = make(self._code())
            if text not in self.seen:
                self.seen.add(text)
                return text
        raise RuntimeError("could not make a unique fact text")  # pragma: no cover - serial codes are unique

    def goal(self) -> str:
        d = self.d
        return self._unique(lambda n: f"Goal: make `{d.pick(VERBS)}_{d.pick(NOUNS)}()` in {d.pick(DIRS)}/"
                            f"{d.pick(NOUNS)}_{d.pick(NOUNS)}.py robust so that {d.pick(GOAL_OUTCOMES)} "
                            f"(ticket {d.pick(PROJECTS)}-{n}).")

    def constraint(self) -> str:
        d = self.d
        return self._unique(lambda n: f"Constraint: `{d.pick(VERBS)}_{d.pick(NOUNS)}()` must keep its signature "
                            f"and stay under {n} ms at p95.")

    def decision(self) -> str:
        d = self.d
        return self._unique(lambda n: f"Decision: keep {d.pick(NOUNS)} {d.pick(NOUNS)}s in {d.pick(STRUCTS)} "
                            f"keyed by {d.pick(NOUNS)}_id, capped at {n} entries.")

    def error(self) -> str:
        d = self.d
        return self._unique(lambda n: f"{d.pick(EXC)}: {d.pick(NOUNS)} {d.hexs(6)} rejected by "
                            f"{d.pick(VERBS)}_{d.pick(NOUNS)}() with code E{n}")

    def file(self) -> str:
        d = self.d
        return self._unique(lambda n: f"{d.pick(NOUNS).upper()}_{d.pick(NOUNS).upper()}_{d.pick(UNITS)} = {n}")

    def preference(self) -> str:
        d = self.d
        return self._unique(lambda n: f"Preference: name new {d.pick(NOUNS)} helpers with the prefix "
                            f"`{d.pick(NOUNS)}{n}_` and keep each under {20 + d.int(60)} lines.")

    def feedback(self) -> str:
        d = self.d
        return self._unique(lambda n: f"Feedback: you changed `{d.pick(VERBS)}_{d.pick(NOUNS)}()` without running "
                            f"tests/test_{d.pick(NOUNS)}.py; always run it before a commit (note {n}).")

    def make(self, category: str) -> str:
        return getattr(self, category)()
