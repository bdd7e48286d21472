"""Seeded choices for the generator: :class:`Draw`, a buffered view of a ``numpy.random.Generator``.

Drawing integers one by one from numpy costs microseconds each; the buffer keeps a 1M-token session
in a few seconds, and everything stays a pure function of the seed. (The text of a synthetic
session is real content, :mod:`ctxsim.harness.synth.workspace`, and a few authored sentences,
:mod:`ctxsim.harness.synth.dialogue`; nothing is made of random words.)
"""

from __future__ import annotations

import numpy as np


class Draw:
    """Buffered uniform integers from a seeded generator (deterministic, fast)."""

    __slots__ = ("rng", "_buf", "_i")

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self._buf = rng.integers(0, 2**31, 65536).tolist()
        self._i = 0

    def int(self, n: int) -> int:
        """Uniform in [0, n)."""
        if self._i >= len(self._buf):
            self._buf = self.rng.integers(0, 2**31, 65536).tolist()
            self._i = 0
        v = self._buf[self._i]
        self._i += 1
        return v % n if n > 0 else 0

    def pick(self, seq):
        return seq[self.int(len(seq))]

    def chance(self, p: float) -> bool:
        return self.int(1_000_000) < p * 1_000_000

    def uniform(self) -> float:
        """Uniform in [0, 1)."""
        return self.int(1 << 30) / float(1 << 30)
