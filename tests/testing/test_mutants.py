"""The mutant corpus (tests/testing/mutants): every mutant caught with the defect named, every
correct twin passing (so a catch is not the kit failing everything).

Under ``make test`` (profile ci) each mutant is searched with the ci profile, or the default one
where the ci sessions do not reach its bug (``DEFAULT_ONLY``), without shrinking; each twin runs one
generated session (the registry test runs the registered twins in full). Under ``make test-deep``
the twins run the whole default profile, the one ``ctxsim check-strategy`` uses: the claim is that
it passes them all. ``python -m tests.testing.mutants.measure`` prints the counts and times.

A few cases are also checked with shrinking, for what the report says (SHRINK_N sessions bound it:
an example budget, so the minimal session is the same on any machine).
"""

from __future__ import annotations

import os
import re

import pytest
from ctxsim.harness.testing import selected_settings
from ctxsim.harness.testing.machine import find_failure
from ctxsim.strategies.registry import all_strategies
from hypothesis import Phase, settings

from tests.testing import mutants as m
from tests.testing.known_findings import known_for

SHRINK_N = 10
NO_SHRINK = [Phase.explicit, Phase.reuse, Phase.generate]
DEEP = os.environ.get("HYPOTHESIS_PROFILE") == "deep"
# the ci profile's four sessions do not reach these bugs; the default profile's do
DEFAULT_ONLY = {"HardLineBehindBreaker", "RetriesUnchanged", "DropsToolOutput", "SpillCounterPerLaunch",
                "EstimateWithoutPrompt", "EstimateInCharacters", "BudgetRespill", "ClaudeCodeIdleForgottenAtResume",
                "GeminiBudgetOldestFirst", "OpenCodePrunesTheTurnBefore", "ClaudeCodeStartupAtTheFirstLaunchOnly",
                "NovaCodeSubAgentReadsTheParents",
                # the ci sessions stopped reaching it when Claude models began counting tool calls in
                # their function-call format (tokenizer.claude_call); the default profile's still do
                "MaskingCountIntoSubagent"}
REGISTERED = set(all_strategies().values()) | {m.KeepRecent}  # covered in full by test_registry / test_example_strategy


def search(cls, profile: str, shrink: bool = False, **kw):
    s = selected_settings(profile) if shrink else settings(selected_settings(profile), phases=NO_SHRINK)
    return find_failure(cls, settings=s, profile=profile, known=known_for(cls.name),
                        shrink_examples=SHRINK_N, **kw)


@pytest.mark.parametrize("case", m.CORPUS, ids=lambda c: c.id)
def test_mutant_is_caught_with_its_defect_named(case):
    profile = "default" if case.id in DEFAULT_ONLY or DEEP else "ci"
    # a strategy that depends on the hash seed passes every session of one process: the check
    # replays the longest in two processes once the search found nothing (a few seconds)
    f = search(case.mutant, profile, cross_process=True)
    assert f is not None, f"{case.id} ({case.defect}) escaped the {profile} profile"
    assert f.invariants & case.catches, f"{case.id} ({case.defect}) caught but not named: {f}"


@pytest.mark.parametrize("twin", [t for t in m.TWINS if t not in REGISTERED], ids=lambda t: t.__name__)
def test_correct_twin_passes(twin):
    s = selected_settings("default") if DEEP else settings(selected_settings("ci"), max_examples=1, phases=NO_SHRINK)
    # the two-process replay (ten to twenty seconds) for the twins of the mutants it catches, under make test
    xproc = DEEP or any(c.twin is twin and "deterministic" in c.catches for c in m.CORPUS)
    f = find_failure(twin, settings=s, profile="default", known=known_for(twin.name), cross_process=xproc)
    assert f is None, f"{twin.__name__} (a correct twin) failed: {f}"


def test_corpus_is_at_least_31_one_spot_bugs_on_real_strategies():
    assert len(m.CORPUS) >= 31
    for c in m.CORPUS:
        assert c.mutant is not c.twin and c.catches
        assert any(issubclass(c.mutant, b) for b in (*all_strategies().values(), m.KeepRecent)) or \
            c.mutant.__module__.endswith("basic"), f"{c.id} does not build on a real strategy"


# --- what the reports say, after shrinking -------------------------------------------------------------

def caught(cls, **kw):
    kw.setdefault("scenarios", False)  # the generated sessions: the reports below are about them
    f = find_failure(cls, shrink_examples=SHRINK_N, profile="ci", **kw)
    assert f is not None, f"{cls.__name__} was not caught"
    assert len(f.trace.events) <= f.first_events
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


def test_five_breakpoints_named_with_the_request():
    f = caught(m.n.FiveBreakpoints, known=known_for("novacode"))
    v = next(v for v in f.violations if v.invariant == "api")
    assert re.fullmatch(r"\[api\] request \d+ \(main; session s\d+.*\): 5 cache breakpoints \(the API allows 4\)", str(v))


def test_a_strategy_that_raises_is_reported_with_its_file_and_line():
    f = caught(m.Raiser)
    assert f.invariants == {"crash"}
    assert re.fullmatch(r"KeyError: 'exit_code' at tests/testing/mutants/basic\.py:\d+ in on_tool_results",
                        f.violations[0].detail)
    # the session holds the error result that made it raise
    assert any(getattr(e, "is_error", False) for e in f.trace.events)


def test_a_mutated_input_is_written_as_generated():
    """The failing trace holds the tool inputs as the session fed them, not as the strategy left them."""
    f = caught(m.k.PathNormaliser)
    assert f.invariants == {"inputs"}
    assert "was changed in place" in f.violations[0].detail
    paths = [c.input.get("file_path") for e in f.trace.events for c in getattr(e, "content", [])
             if getattr(c, "type", "") == "tool_use"]
    assert any(p and not p.startswith("/") for p in paths)
