"""The Complexity Trap's arms (SWE-agent's SummarizeEveryNTurns and LastNObservations, alone and
chained) on small sessions written here, with the expected histories worked out by hand, then the
property suite.

Read at: JetBrains-Research/the-complexity-trap (fork Recursive-Safeguarding, upstream bf15b5f),
sweagent/agent/history_processors.py."""

from __future__ import annotations

from ctxsim.harness.model.conversation import Block, Message, Usage
from ctxsim.harness.testing.machine import find_failure
from ctxsim.harness.validation.arms import SweAgentProcessors
from ctxsim.strategies.base import CallInfo
from ctxsim.strategies.registry import build

from tests.strategies.peer_env import FakeServices, make


def arm(params: dict, services=None):
    s = make("append_only", services=services)  # an env; the arm is built on it
    return build(SweAgentProcessors, params, s.env)


def turn(s, i: int, result: str, usage: Usage | None = None) -> None:
    s.build_request(CallInfo(i, float(i)))
    s.on_response(Message("assistant", (Block.tool_use(f"t{i}", "bash", {"command": f"c{i}"}),)), usage)
    s.on_tool_results(Message("user", (Block.tool_result(f"t{i}", result),)))


def shape(s) -> list[str]:
    """Each message as: task / checkpoint / a<i> (an action) / r<i> (its observation, 'masked' if masked)."""
    out = []
    for m in s.history:
        b = m.blocks[0]
        if m.meta.get("origin") == "summary":
            out.append("checkpoint")
        elif b.type == "tool_use":
            out.append("a" + b.id[1:])
        elif b.type == "tool_result":
            out.append("r" + b.id[1:] + (" masked" if b.meta.get("masked") else ""))
        else:
            out.append("task")
    return out


def test_a_checkpoint_replaces_the_oldest_n_turns_once_n_plus_m_are_unsummarised():
    """SummarizeEveryNTurns n=2, keep_last_m_turns=1: at 3 unprocessed turns the oldest 2 go into one
    checkpoint; the history is the problem statement, the checkpoint and the newest turn."""
    services = FakeServices("STATE 1", "STATE 2")
    s = arm({"summarize_n": 2, "keep_last_m": 1}, services)
    s.on_user(Message.user("fix the bug in parse()"))
    for i in range(3):
        turn(s, i, f"out {i}")
    assert shape(s) == ["task", "a0", "r0", "a1", "r1", "a2", "r2"]  # 2 turns seen at call 2: not yet
    req = s.build_request(CallInfo(3, 3.0))
    assert req.rewrite and shape(s) == ["task", "checkpoint", "a2", "r2"]
    assert s.history[1].text == "Checkpoint for the last 2 turns:\nSTATE 1"
    (sreq, spec), = services.calls
    # a separate query: no system prompt, no tools; the problem statement as context, the two turns as text
    assert not sreq.system.blocks and not sreq.tools.tools and spec.kind == "summary"
    prompt = sreq.messages[0].text
    assert "<PROBLEM_STATEMENT>\nfix the bug in parse()\n</PROBLEM_STATEMENT>" in prompt
    assert "out 0" in prompt and "out 1" in prompt and "out 2" not in prompt
    # the next checkpoint is conditioned on the previous one (static checkpointing: it replaces it)
    for i in range(3, 5):
        turn(s, i, f"out {i}")
    s.build_request(CallInfo(5, 5.0))
    assert shape(s) == ["task", "checkpoint", "a4", "r4"]
    assert "<PREVIOUS_CHECKPOINT>\nCheckpoint for the last 2 turns:\nSTATE 1\n</PREVIOUS_CHECKPOINT>" in \
        services.calls[1][0].messages[0].text
    assert s.counters.compactions_succeeded == 2


def test_masking_keeps_the_newest_n_observations_and_never_the_task():
    """LastNObservations n=2, polling 1: with the task as observation 0 and r0..r3 after it, count 5,
    last_removed = 5 − 2 = 3: observations [1, 3) = r0, r1 are masked."""
    s = arm({"mask_n": 2})
    s.on_user(Message.user("task"))
    for i in range(4):
        turn(s, i, f"line {i}\nline b")
    s.build_request(CallInfo(4, 4.0))
    assert shape(s) == ["task", "a0", "r0 masked", "a1", "r1 masked", "a2", "r2", "a3", "r3"]
    assert s.history[2].blocks[0].text == "Old environment output: (2 lines omitted)"
    assert s.history[0].text == "task"


def test_the_hybrid_checkpoints_first_then_masks_what_is_left():
    """n=2, m=2, mask 1: at 4 turns, a0-a1 go into the checkpoint; of r2, r3 the newest one stays."""
    s = arm({"summarize_n": 2, "keep_last_m": 2, "mask_n": 1}, FakeServices("STATE"))
    s.on_user(Message.user("task"))
    for i in range(4):
        turn(s, i, f"out {i}")
    s.build_request(CallInfo(4, 4.0))
    assert shape(s) == ["task", "checkpoint", "a2", "r2 masked", "a3", "r3"]


def test_a_failed_checkpoint_keeps_the_turns():
    from tests.strategies.peer_env import fail

    s = arm({"summarize_n": 1, "keep_last_m": 0}, FakeServices(fail()))
    s.on_user(Message.user("task"))
    turn(s, 0, "x")
    s.build_request(CallInfo(1, 1.0))
    assert shape(s) == ["task", "a0", "r0"] and s.counters.compactions_failed == 1


def test_the_property_suite_holds():
    assert find_failure(SweAgentProcessors, SweAgentProcessors.check_params) is None
