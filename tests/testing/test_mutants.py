"""Mutation tests: each deliberately broken strategy is caught by the kit, with a shrunk
counterexample; its correct twin passes (so a catch is not the kit failing everything).

Shrinking replays sessions, so it is bounded in time (SHRINK_S), and how far it gets depends on the
machine's load: what is asserted holds of any failure the search returns (the smallest it saw, so
never larger than the first one found), not of how far shrinking got.
"""

from __future__ import annotations

import re

import pytest

from harness.testing import selected_settings
from harness.testing.machine import find_failure
from tests.testing import mutants as m

SHRINK_S = 2.0


def caught(cls, **kw):
    f = find_failure(cls, shrink_seconds=SHRINK_S, **kw)
    assert f is not None, f"{cls.__name__} was not caught"
    assert len(f.trace.events) <= f.first_events
    print(f"{cls.__name__}: first failure {f.first_events} events, returned {len(f.trace.events)}")
    return f


def test_truncator_that_splits_pairs_is_caught_n_comp_7():
    f = caught(m.PairSplitter)
    assert {"pairing", "boundary_pairs"} <= f.invariants
    v = next(v for v in f.violations if v.invariant == "boundary_pairs")
    assert "kept but its tool_use dropped" in v.detail
    # the counterexample replays: the written trace has the run's settings and fails the same way
    assert f.trace.header.meta["check_strategy"]["window"] == 32_000
    assert f.trace.calls >= 2  # a cut needs a request after the history grew past `keep`


def test_silent_edit_of_an_old_message_is_caught():
    f = caught(m.SilentEditor)
    assert f.invariants == {"stable_prefix"}
    # the stamp of one call replaced by the next one's, before the previous request's breakpoint
    assert re.search(r"'\(call \d+\)' -> \(user text\) '\(call \d+\)'", f.violations[0].detail)
    assert f.violations[0].call >= 1 and f.trace.calls >= 2  # an edit shows from the second call on


def test_overflow_while_claiming_manages_window_is_caught():
    f = caught(m.Overflower)
    assert f.invariants == {"window"}
    tokens = int(f.violations[0].detail.split(" tokens")[0].replace(",", ""))
    assert tokens > 32_000


def test_respill_of_a_read_back_is_caught_n_spill_3():
    f = caught(m.Respiller)
    assert f.invariants == {"no_respill"}
    assert "reads back spilled file" in f.violations[0].detail
    # a spill (one call), then its read-back: at least two model calls
    assert f.trace.calls >= 2


@pytest.mark.parametrize("cls", [m.PairSafeTruncator, m.DeclaredEditor, m.Spiller],
                         ids=lambda c: c.__name__)
def test_correct_twins_pass(cls):
    assert find_failure(cls, settings=selected_settings()) is None


def test_a_strategy_that_raises_is_reported_as_a_crash():
    f = caught(m.Raiser)
    assert f.invariants == {"crash"}
    assert f.violations[0].detail == "KeyError: 'exit_code'"
    # the session holds the error result that made it raise (where it stands in the last group of
    # results depends on how far shrinking got)
    assert any(getattr(e, "is_error", False) for e in f.trace.events)
