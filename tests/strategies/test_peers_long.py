"""Every peer on the long-200k preset at a 200k window (the deep profile only: about a minute per
strategy; `make test-deep` or HYPOTHESIS_PROFILE=deep). No pairing violation anywhere; the peers
whose agents' rules hold the session complete it, with no rejected request unless their agent only
reacts to one; the others fail where their agent's own rule lets the window fill."""

from __future__ import annotations

import os

import pytest

from harness.engine import RunConfig, replay
from harness.synth.config import load_preset
from harness.synth.generator import generate

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.environ.get("HYPOTHESIS_PROFILE") != "deep", reason="deep profile only")]

# completes with no rejected request: the proactive rule holds
HOLDS = ["claude_code", "anthropic_compaction", "codex", "openhands", "roo_code", "sliding_window", "opencode"]
# completes, through the agent's reaction to a rejection (the rule it has inside a turn is that reaction)
RECOVERS = {
    "goose": "no threshold check inside a reply: the window fills mid-turn and goose compacts on the error",
    "cline": "one turn is longer than the window and the agentic cut never passes the latest prompt: the "
             "basic compaction of the overflow recovery does",
}
# fails by overflow: the agent's rule cannot bound this session
FAILS = {
    "aider": "one exchange holds ~230k tokens of tool calls and Aider keeps the current exchange whole",
    "gemini_cli": "the split only falls on a user message: a turn longer than the kept 30% inflates the snapshot, "
                  "then only truncation runs while tool inputs and text fill the window",
    "context_editing": "only tool results are cleared: tool inputs and text alone outgrow 200k",
    "observation_masking": "only observations are masked: actions and text alone outgrow 200k (SWE-agent exits)",
}


@pytest.fixture(scope="module")
def long_200k():
    return generate(load_preset("long-200k"), 1)  # ctxsim synth long-200k --seed 1


@pytest.mark.parametrize("name", HOLDS + list(RECOVERS) + list(FAILS))
def test_long_session_at_200k(name, long_200k):
    m = replay(long_200k, name, None, RunConfig(window=200_000)).metrics
    assert m["pairing_violations"] == 0
    if name in FAILS:
        assert m["completed"] is False and m["failure"] == ["overflow"], (name, FAILS[name])
    else:
        assert m["completed"], name
        assert (m["rejected_requests"] == 0) is (name in HOLDS), (name, m["rejected_requests"])
