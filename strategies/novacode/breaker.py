"""The compaction circuit breaker (N-COMP-4).

After ``max_failures`` (3) consecutive failed compactions the breaker opens and soft-zone
auto-compaction stops retrying, so a broken summary path does not burn a call on every turn. A
success resets the count. The hard trigger bypasses the breaker (N-COMP-3): the strategy asks
:meth:`allows` only in the soft zone; failures of forced attempts still count.

The seed does not say when an open breaker closes. **Reading** (spec): it stays open for the rest
of the session (``reset="never"``). Alternative: a cool-down (``reset="cooldown"``): after
``cooldown_s`` seconds of simulated time one attempt is allowed again; a success closes it, a
failure re-opens it for another cool-down (and counts as another trip).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

BREAKER_FAILURES = 3  # N-COMP-4: "连续失败三次后打开"

ResetPolicy = Literal["never", "cooldown"]


@dataclass
class CircuitBreaker:
    max_failures: int = BREAKER_FAILURES
    reset: ResetPolicy = "never"
    cooldown_s: float = 600.0
    failures: int = 0  # consecutive
    opened_at: float | None = None
    trips: int = 0

    def __post_init__(self) -> None:
        if self.max_failures < 1:
            raise ValueError(f"max_failures must be >= 1, got {self.max_failures}")
        if self.reset not in ("never", "cooldown"):
            raise ValueError(f"reset must be 'never' or 'cooldown', got {self.reset!r}")
        if self.cooldown_s < 0:
            raise ValueError(f"cooldown_s must be >= 0, got {self.cooldown_s}")

    @property
    def open(self) -> bool:
        return self.opened_at is not None

    def allows(self, now: float) -> bool:
        """May a soft-zone compaction be attempted now?"""
        if self.opened_at is None:
            return True
        return self.reset == "cooldown" and now - self.opened_at >= self.cooldown_s

    def success(self) -> None:
        self.failures = 0
        self.opened_at = None

    def failure(self, now: float) -> bool:
        """Count a failed compaction; True when this failure opened (tripped) the breaker."""
        self.failures += 1
        if self.opened_at is not None:
            if self.reset == "cooldown" and now - self.opened_at >= self.cooldown_s:
                self.opened_at = now  # the probe after the cool-down failed: open again
                self.trips += 1
                return True
            return False
        if self.failures >= self.max_failures:
            self.opened_at = now
            self.trips += 1
            return True
        return False
