"""Every peer declares its agent's reaction to a rejected request (not the base class's default
sentence), and the agents that give up do: the turn ends, nothing is retried."""

from __future__ import annotations

import pytest
from ctxsim.harness.model.conversation import Message
from ctxsim.strategies.base import Strategy
from ctxsim.strategies.registry import get

from tests.strategies.peer_env import make, reject, step

PEERS = ["context_editing", "gemini_cli", "codex", "openhands", "observation_masking", "sliding_window",
         "claude_code", "anthropic_compaction", "aider", "opencode", "goose", "roo_code", "cline"]
GIVE_UP = ["context_editing", "gemini_cli", "codex", "observation_masking", "anthropic_compaction", "aider"]


@pytest.mark.parametrize("name", PEERS)
def test_each_peer_declares_its_agents_reaction(name):
    cls = get(name)
    assert cls.on_rejection != Strategy.on_rejection and cls.on_rejected is not Strategy.on_rejected


@pytest.mark.parametrize("name", GIVE_UP)
def test_the_agents_that_give_up_end_the_turn(name):
    s = make(name)
    s.on_user(Message.user("task"))
    step(s, 0, "x" * 1_000)
    assert reject(s, call=1) is False and reject(s, call=1, reasons=("pairing",)) is False
