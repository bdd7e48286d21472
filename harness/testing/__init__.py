"""The property-test kit for context strategies (public API).

A strategy must keep a few invariants whatever the session looks like: every request pairing-valid,
no overflow once it claims to manage the window, byte-stable cached prefixes unless it declares a
rewrite, nothing lost without a summary or a path back, no re-spilling, pair-safe compaction
boundaries, a pairing-valid first request after a resume. This package checks them:

* :mod:`ctxsim.harness.testing.conversations` — hypothesis strategies and a step-by-step builder for
  conversations shaped like real agent sessions;
* :mod:`ctxsim.harness.testing.invariants` — the invariants as plain functions over what a strategy sent;
* :mod:`ctxsim.harness.testing.recording` — record what a strategy sends (whole replay or step by step);
* :mod:`ctxsim.harness.testing.machine` — a hypothesis state machine that drives any strategy and checks
  after every step; :func:`find_failure` returns the minimal failing session.

Settings profiles: ``default`` (what ``ctxsim check-strategy`` runs: under a minute per strategy,
derandomized), ``ci`` (fewer sessions of the same kind: ``make test`` runs it on every registered
strategy) and ``deep`` (``make test-deep``, ``--profile deep``), chosen by the ``HYPOTHESIS_PROFILE``
environment variable when it names one of them (:func:`selected_settings`); the kit's runs always
use its own :data:`KIT_SETTINGS` and :data:`LIMITS`, whatever profile a test suite loaded for its
other tests. See docs/writing-a-strategy.md.

May import: files, model, provider, llm, strategies, retention, replay, fidelity, importers, synth,
calibration, sweep, report.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis.errors import InvalidArgument

PROFILE_ENV = "HYPOTHESIS_PROFILE"
_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
            HealthCheck.large_base_example]

# default and ci: derandomized (same examples on every run and machine: a flaky test is a bug), no
# example database. default is sized to stay well under a minute of CPU per strategy on a 2-core
# machine; ci runs fewer sessions of the same kind, so that the registry-wide run stays within the
# suite's budget.
_FIXED = dict(derandomize=True, database=None, deadline=None, suppress_health_check=_SLOW_OK,
              report_multiple_bugs=False, print_blob=False)
KIT_SETTINGS = {
    "default": settings(max_examples=32, stateful_step_count=50, **_FIXED),
    "ci": settings(max_examples=4, stateful_step_count=50, **_FIXED),
    # deep: ten times the sessions, twice as long, results up to megabytes; its sessions are the random
    # sample (LIMITS), drawn from a printed seed. About an hour for the whole registry on two cores.
    "deep": settings(max_examples=100, stateful_step_count=100, **_FIXED),
}
# Registered for users who load them by name, unless a test suite registered its own first (this
# project's tests/conftest.py does, for its whole suite: the kit's runs use KIT_SETTINGS anyway).
for _name, _s in KIT_SETTINGS.items():
    try:
        settings.get_profile(_name)
    except InvalidArgument:
        settings.register_profile(_name, _s)

PROFILES = ("default", "ci", "deep")
# Per profile: the largest tool result the state machine generates (megabytes in deep; in ci the
# true token count of a kept result, a real BPE pass, would dominate the suite's time budget); the
# sessions hypothesis may replay while shrinking a failure (an example budget, so a minimal trace is
# the same on every run and machine; ``shrink_seconds`` is only a safety net against a session that
# hangs, far above what the budget takes); and the random sample ``ctxsim check-strategy`` runs
# after the seeded corpus (its seed printed, ``--seed`` replays it).  # assumed: sized to the CI budget
# ``cross_process``: once the sessions pass, the hand-written ones and the longest generated one are
# replayed in two fresh processes with two string-hash seeds and two local time zones
# (ctxsim.harness.testing.crossprocess; ten to twenty seconds: part of the default profile, since a
# set ordering what a strategy sends passes every session of one process).
LIMITS = {"default": {"max_result_size": 150_000, "shrink_examples": 150, "shrink_seconds": 1_800.0, "sample": 8,
                      "cross_process": True},
          "ci": {"max_result_size": 150_000, "shrink_examples": 40, "shrink_seconds": 1_800.0, "sample": 0,
                 "cross_process": False},
          "deep": {"max_result_size": 2_000_000, "shrink_examples": 1_000, "shrink_seconds": 3_600.0, "sample": 100,
                   "cross_process": True}}
# The corpus: every strategy, whatever its name, meets the sessions this seed draws (hypothesis would
# otherwise seed a derandomized search from the machine class's name).  # assumed: any fixed number
CORPUS_SEED = 29


def selected_profile(profile: str | None = None) -> str:
    if profile is not None and profile not in PROFILES:
        raise ValueError(f"unknown property-kit profile {profile!r}; valid: {', '.join(PROFILES)}")
    name = profile or os.environ.get(PROFILE_ENV, "default")
    return name if name in PROFILES else "default"


def selected_settings(profile: str | None = None) -> settings:
    """The settings of ``profile``, else of ``$HYPOTHESIS_PROFILE`` if it names one of ours, else default."""
    return KIT_SETTINGS[selected_profile(profile)]


from ctxsim.harness.testing.invariants import (  # noqa: E402
    INVARIANTS,
    Checker,
    InvariantViolation,
    Violation,
    assert_holds,
    check,
    promises,
)
from ctxsim.harness.testing.recording import Mark, Recording, Sent, Stepper, record  # noqa: E402

__all__ = ["CORPUS_SEED", "INVARIANTS", "PROFILES", "PROFILE_ENV", "LIMITS", "KIT_SETTINGS", "Checker", "InvariantViolation", "Mark", "Recording",
           "Sent", "Stepper", "Violation", "assert_holds", "check", "promises", "record", "selected_settings"]
