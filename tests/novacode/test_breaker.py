"""The compaction circuit breaker (N-COMP-4)."""

from __future__ import annotations

import pytest
from ctxsim.strategies.novacode.breaker import BREAKER_FAILURES, CircuitBreaker


def test_n_comp_4_opens_after_three_consecutive_failures():
    b = CircuitBreaker()
    assert BREAKER_FAILURES == 3
    assert b.failure(1.0) is False and b.allows(1.0)
    assert b.failure(2.0) is False and b.allows(2.0)
    assert b.failure(3.0) is True  # the third opens it
    assert b.open and not b.allows(3.0) and b.trips == 1


def test_n_comp_4_success_resets_the_count():
    """fail, fail, success, fail, fail: never three in a row, never open."""
    b = CircuitBreaker()
    b.failure(1)
    b.failure(2)
    b.success()
    assert b.failures == 0
    assert b.failure(3) is False and b.failure(4) is False
    assert not b.open and b.allows(5)


def test_n_comp_4_reading_never_stays_open_for_the_session():
    b = CircuitBreaker(reset="never")
    for t in range(3):
        b.failure(t)
    assert not b.allows(10**9)
    # further (forced, hard-line) failures do not trip it again
    assert b.failure(10) is False and b.trips == 1


def test_n_comp_4_forced_success_closes_an_open_breaker():
    """The hard line bypasses the breaker; when that forced compaction succeeds, the count resets."""
    b = CircuitBreaker()
    for t in range(3):
        b.failure(t)
    b.success()
    assert not b.open and b.allows(4)


def test_n_comp_4_alternative_cooldown():
    """Open at t=30 with a 600 s cool-down: closed to attempts until t=630; the attempt at 630
    fails → open again from 630 (a second trip); at 1230 another attempt is allowed."""
    b = CircuitBreaker(reset="cooldown", cooldown_s=600)
    for t in (10, 20, 30):
        b.failure(t)
    assert not b.allows(629.9) and b.allows(630)
    assert b.failure(630) is True and b.trips == 2
    assert not b.allows(1229) and b.allows(1230)
    b.success()
    assert not b.open and b.failures == 0


def test_breaker_threshold_is_a_parameter_and_validated():
    b = CircuitBreaker(max_failures=1)
    assert b.failure(0) is True
    with pytest.raises(ValueError):
        CircuitBreaker(max_failures=0)
    with pytest.raises(ValueError):
        CircuitBreaker(reset="sometimes")  # type: ignore[arg-type]
