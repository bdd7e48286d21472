"""The property suite on every registered strategy: a strategy is covered the moment it is
registered (a module in strategies/ or an entry point of the ctxsim.strategies group).

Under ``make test`` each strategy runs the ci profile (the default profile's first sessions)
without shrinking: a failure here names the invariant and the session found; `ctxsim
check-strategy NAME` prints the minimal one. ``make test-deep`` runs the deep profile.

Findings reported to their owners and not fixed yet (tests/testing/known_findings.py) do not fail
a strategy's run, which goes on checking everything else; each runs on its own as an xfail naming
the owner, so a fix shows up as an XPASS to remove from the list.
"""

from __future__ import annotations

import pytest
from ctxsim.harness.testing import selected_profile, selected_settings
from ctxsim.harness.testing.invariants import promises
from ctxsim.harness.testing.machine import find_failure
from ctxsim.harness.testing.params import params_for
from ctxsim.strategies.registry import all_strategies
from hypothesis import Phase, settings

from tests.testing.known_findings import KNOWN_FINDINGS, known_for

NO_SHRINK = [Phase.explicit, Phase.reuse, Phase.generate]
STRATEGIES = sorted(all_strategies())


def _settings():
    return settings(selected_settings(), phases=NO_SHRINK)


@pytest.mark.parametrize("name", STRATEGIES)
def test_every_strategy_keeps_its_invariants(name):
    f = find_failure(all_strategies()[name], settings=_settings(), profile=selected_profile(), known=known_for(name))
    assert f is None, f"{name}: {f}\n(run `ctxsim check-strategy {name}` for the minimal session)"


def _known_params():
    for name, findings in sorted(KNOWN_FINDINGS.items()):
        if name not in all_strategies():
            continue
        for inv, rx, owner, line in findings:
            yield pytest.param(name, inv, rx, id=f"{name}-{inv}",
                               marks=pytest.mark.xfail(strict=False, reason=f"reported to {owner}: {line}"))


@pytest.mark.parametrize(("name", "invariant", "pattern"), list(_known_params()))
def test_known_finding_is_still_there(name, invariant, pattern):
    """Fails (xfail) while the strategy still breaks ``invariant`` as reported: searched with the
    ci profile under ``make test``, and with the default one too under ``make test-deep`` (the
    sessions of either may be the ones that reach it; each search stops at the first violation).
    An XPASS is a finding these sessions did not reach: fixed, or met only elsewhere (the deep
    profile, a mutant's sessions): look before removing it."""
    import re

    cls = all_strategies()[name]
    for profile in ("ci", "default") if selected_profile() == "deep" else ("ci",):
        f = find_failure(cls, settings=settings(selected_settings(profile), phases=NO_SHRINK), profile=profile,
                         promised=frozenset({invariant}) & promises(cls), twin=False)
        assert f is None or not any(re.search(pattern, v.detail) for v in f.violations), str(f)


def test_novacode_with_its_memory_layers_keeps_its_invariants():
    """The full seed system: instruction files (N-INST-3, resident) and auto memory (N-MEM-*,
    recalled injections) on top of spill, compaction and caching."""
    cls = all_strategies()["novacode"]
    params = {**params_for(cls), "memory": True, "instructions": True}
    f = find_failure(cls, params, settings=settings(_settings(), max_examples=2), profile=selected_profile(),
                     known=known_for("novacode"))
    assert f is None, f"novacode (memory, instructions): {f}"
