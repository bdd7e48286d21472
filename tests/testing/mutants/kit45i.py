"""Issue #45, ninth round: the share a cut keeps. Five blind sets of eight (23, 24, 27, 28, 29), written apart,
changed sliding_window's choice between keeping half of what follows its first pair and a quarter (the whole total
compared where half of it is meant, or the two branches swapped) and nothing else the kit held: more history dropped
at every cut, the request still under the window. The strategy now declares the share a cut keeps and when it may
keep less (``cut_keeps_share``), held by ``kept_tail``; the mutant beside its correct twin, the registered base."""

from __future__ import annotations

from ctxsim.strategies.sliding_window import SlidingWindow


class SlidingWindowAlwaysQuarter(SlidingWindow):
    """keep "auto" cuts to a quarter whatever the total: half of it is never compared with the allowed size."""

    name = "sliding_window_always_quarter"

    def _cut_assistant(self, keep):
        return super()._cut_assistant("quarter")
