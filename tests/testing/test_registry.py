"""The property suite on every registered strategy: a strategy is covered the moment it is
registered (a module in strategies/ or an entry point of the ctxsim.strategies group).

Two machines per strategy, without shrinking (a failure here names the invariant and the session
found; `ctxsim check-strategy NAME` prints the minimal one): the full machine (`ctxsim
check-strategy`'s sessions), and short sessions that crash with calls unanswered and resume
(N-TRANS-5), so a strategy that breaks a resume is named as such.

KNOWN_FINDINGS lists failures reported to their owners in /work/helpers/findings-H.md and not fixed
yet: they run as strict xfails, so a fix shows up as an XPASS to remove from the list.
"""

from __future__ import annotations

import pytest
from hypothesis import Phase, settings

from harness.testing import selected_settings
from harness.testing.machine import find_failure, params_for
from strategies.registry import all_strategies

NO_SHRINK = [Phase.explicit, Phase.reuse, Phase.generate]

# (strategy, machine) -> the finding, as reported
KNOWN_FINDINGS: dict[tuple[str, str], str] = {}

STRATEGIES = sorted(all_strategies())


def _param(name: str, machine: str):
    reason = KNOWN_FINDINGS.get((name, machine))
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(name, id=name, marks=marks)


@pytest.mark.parametrize("name", [_param(n, "sessions") for n in STRATEGIES])
def test_every_strategy_keeps_its_invariants(name):
    f = find_failure(all_strategies()[name], settings=settings(selected_settings(), phases=NO_SHRINK))
    assert f is None, f"{name}: {f}\n(run `ctxsim check-strategy {name}` for the minimal session)"


@pytest.mark.parametrize("name", [_param(n, "resume") for n in STRATEGIES])
def test_every_strategy_resumes_a_crashed_session_n_trans_5(name):
    """N-TRANS-5: calls a crash left open are answered before the first resumed request."""
    s = settings(selected_settings(), phases=NO_SHRINK, max_examples=3, stateful_step_count=12)
    f = find_failure(all_strategies()[name], crashes=True, settings=s)
    assert f is None, f"{name}: {f}\n(run `ctxsim check-strategy {name}` for the minimal session)"


def test_novacode_with_its_memory_layers_keeps_its_invariants():
    """The full seed system: instruction files (N-INST-3, resident) and auto memory (N-MEM-*,
    recalled injections) on top of spill, compaction and caching."""
    cls = all_strategies()["novacode"]
    params = {**params_for(cls), "memory": True, "instructions": True}
    f = find_failure(cls, params, settings=settings(selected_settings(), phases=NO_SHRINK))
    assert f is None, f"novacode (memory, instructions): {f}"
