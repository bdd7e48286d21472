"""The kit's scenario of a conversation resumed into a new session file (Claude Code 1.0.x): the earlier
session's calls copied in, history with no usage, then the launch's own calls. A strategy that takes the
usage of every answer for granted meets it before any user's 1.0.x log does."""

from __future__ import annotations

from ctxsim.harness.model import trace as tr
from ctxsim.harness.testing.invariants import promises
from ctxsim.harness.testing.params import CHECK_MODEL, params_for
from ctxsim.harness.testing.scenarios import BASE_WINDOW, build, check_scenario
from ctxsim.strategies.claude_code import ClaudeCode


def test_the_scenario_starts_from_copied_calls_then_resumes():
    t = build("copied_history", BASE_WINDOW)
    copied = [e.copied for e in t.events if isinstance(e, tr.AssistantEvent)]
    assert copied == [True] * 7 + [False] * 5 and t.calls == 5
    starts = [e for e in t.events if isinstance(e, tr.SessionStart)]
    assert [s.resume for s in starts] == [False, True]


class UsageEverywhere(ClaudeCode):
    """Reads the usage of every answer, as if each had come from a request of its own."""

    name = "usage_everywhere"

    def on_response(self, message, usage):
        self.last_total = usage.input_total + usage.output
        super().on_response(message, usage)


def test_a_strategy_that_takes_usage_for_granted_is_found_there():
    _, found = check_scenario("copied_history", UsageEverywhere, params_for(ClaudeCode), BASE_WINDOW,
                              promises(ClaudeCode), CHECK_MODEL)
    assert [v.invariant for v in found] == ["crash"]
    assert "AttributeError: 'NoneType' object has no attribute 'input_total'" in found[0].detail
