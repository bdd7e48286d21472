"""SWE-agent and OpenHands imports: observations are tool results paired with their actions, the goal is the issue
(issue 26, item 5). Numbers from a direct reading of the files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ctxsim.harness.importers import import_file
from ctxsim.harness.importers.task import task_parts
from ctxsim.harness.model import trace as tr
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.harness.retention.probes import apply

REAL = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces" / "real" / "swe-agent"
needs_real = pytest.mark.skipif(not REAL.is_dir(), reason="real logs not present (../shared/traces/real)")

TASK = ("We're currently solving the following issue within our repository. Here's the issue text:\nISSUE:\n"
        "Division by zero in calc.py\nRunning calc.divide(1, 0) crashes.\n\n\nINSTRUCTIONS:\nNow, you're going to "
        "solve this issue on your own.")


def _text_action_traj(tmp_path: Path) -> Path:
    """A 3-step trajectory in SWE-agent 0.x's text-action format: the third action (submit) has no
    observation in the history, only in its trajectory step."""
    history = [
        {"role": "system", "content": "SETTING: You are an autonomous programmer."},
        {"role": "user", "is_demo": True, "content": "Here is a demonstration of how to correctly accomplish this task.\n"
                                                      "--- DEMONSTRATION ---\nISSUE:\nTimeDelta precision\n"},
        {"role": "user", "content": TASK},
        {"role": "assistant", "thought": "Let me look.\n", "action": "ls\n", "content": "Let me look.\n```\nls\n```"},
        {"role": "user", "content": "calc.py\n(Open file: n/a)\nbash-$"},
        {"role": "assistant", "thought": "Open it.\n", "action": "open calc.py\n", "content": "Open it.\n```\nopen calc.py\n```"},
        {"role": "user", "content": "[File: /repo/calc.py (2 lines total)]\n1:def divide(a, b):\n2:    return a / b"},
        {"role": "assistant", "thought": "Submit.\n", "action": "submit\n", "content": "Submit.\n```\nsubmit\n```"},
    ]
    steps = [{"action": "ls\n", "observation": "calc.py"}, {"action": "open calc.py\n", "observation": "[File]"},
             {"action": "submit\n", "observation": "diff --git a/calc.py b/calc.py"}]
    f = tmp_path / "three.traj"
    f.write_text(json.dumps({"history": history, "trajectory": steps, "info": {"model_stats": {"api_calls": 3}}}))
    return f


def test_three_text_actions_become_three_tool_use_tool_result_pairs(tmp_path):
    res = import_file("swe-agent", _text_action_traj(tmp_path))
    ev = res.trace.events
    uses = [c for e in ev if isinstance(e, tr.AssistantEvent) for c in e.tool_uses()]
    results = [e for e in ev if isinstance(e, tr.ToolResultEvent)]
    assert [(u.name, u.input) for u in uses] == [("bash", {"command": "ls"}), ("bash", {"command": "open calc.py"}),
                                                 ("bash", {"command": "submit"})]
    assert [r.tool_use_id for r in results] == [u.id for u in uses]   # 3 pairs, in order
    assert [r.content for r in results] == ["calc.py\n(Open file: n/a)\nbash-$",
                                            "[File: /repo/calc.py (2 lines total)]\n1:def divide(a, b):\n2:    return a / b",
                                            "diff --git a/calc.py b/calc.py"]   # the third from the trajectory
    assert res.summary["observations_paired"] == 3 and res.summary["tool_uses"] == 3
    assert res.summary["repairs"] == {"observations taken from the trajectory (not in the history)": 1}
    # the assistant text is the thought, without the action repeated
    first = next(e for e in ev if isinstance(e, tr.AssistantEvent))
    assert [c.text for c in first.content if isinstance(c, tr.TextContent)] == ["Let me look.\n"]
    # no observation is left as user text: the user events are the demonstration and the task's 3 parts
    users = [e for e in ev if isinstance(e, tr.UserEvent)]
    assert [u.meta.get("origin") for u in users] == ["demonstration", "task_template", None, "task_template"]
    assert "".join(u.text for u in users[1:]) == TASK


def test_goal_is_the_issue_not_the_demonstration(tmp_path):
    res = import_file("swe-agent", _text_action_traj(tmp_path))
    derived, _ = apply(res.trace)
    goals = [e.text for e in derived.events if isinstance(e, tr.FactEvent) and e.category == "goal"]
    assert goals == ["Division by zero in calc.py"]


def test_task_parts_split_around_the_issue_and_lose_nothing():
    parts = task_parts("head\n<pr_description>\nFix the bug\n</pr_description>\ntail")
    assert parts == [("head\n<pr_description>\n", {"origin": "task_template"}), ("Fix the bug", {"issue": True}),
                     ("\n</pr_description>\ntail", {"origin": "task_template"})]
    assert task_parts("just a request") == [("just a request", {})]


@needs_real
@pytest.mark.parametrize("name,goal", [
    ("pydicom__pydicom-1458.traj", "Pixel Representation attribute should be optional for pixel data handler"),
    ("6e44b9__sweagenttestrepo-1c2844.traj", "SyntaxError: invalid syntax")])
def test_real_goal_is_the_issue_first_line(name, goal):
    res = import_file("swe-agent", REAL / name)
    derived, _ = apply(res.trace)
    goals = [e.text for e in derived.events if isinstance(e, tr.FactEvent) and e.category == "goal"]
    assert goals == [goal]


@needs_real
def test_observation_masking_changes_the_request_on_pydicom():
    """pydicom__pydicom-1458: 12 actions, 12 observations (the last from the trajectory). Before the
    12th call 11 observations are in the history, plus the instance template: SWE-agent's count 12,
    last_removed = 12 − 5 = 7, observations [1, 7) masked: 6 tool results."""
    trace = import_file("swe-agent", REAL / "pydicom__pydicom-1458.traj").trace
    seen: dict[str, list] = {}

    def grab(name):
        def observer(req, info):
            if req.kind == "main":
                seen.setdefault(name, []).append(req)
        return observer

    for name in ("append_only", "observation_masking"):
        replay(trace, name, None, RunConfig(observer=grab(name)))
    full, masked = seen["append_only"][-1], seen["observation_masking"][-1]
    def results(req):
        return [b.text for m in req.messages for b in m.blocks if b.type == "tool_result"]
    assert len(results(full)) == len(results(masked)) == 11
    assert sum(t.startswith("Old environment output: (") for t in results(masked)) == 6
    assert not any(t.startswith("Old environment output") for t in results(full))
    assert results(masked)[6:] == results(full)[6:]   # the newest 5 verbatim


# --- openhands ------------------------------------------------------------------------------------

OH_TASK = ("<uploaded_files>\n/workspace/calc\n</uploaded_files>\nConsider the following issue description:\n\n"
           "<issue_description>\nDivision by zero in calc.py\nIt crashes.\n</issue_description>\n\nFix it.")


def _oh_stream(tmp_path: Path) -> Path:
    """An OpenHands V0 stream written before function calling: 3 actions without tool_call_metadata,
    each answered by an observation whose ``cause`` is the action's id."""
    ts = "2025-01-01T00:00:%02d"
    ev = [{"id": 0, "timestamp": ts % 0, "source": "user", "action": "message", "args": {"content": OH_TASK}}]
    for k, (action, args, obs) in enumerate([("run", {"command": "ls", "thought": "Look."}, "calc.py"),
                                             ("read", {"path": "/workspace/calc/calc.py", "thought": ""}, "def divide"),
                                             ("edit", {"path": "/workspace/calc/calc.py", "content": "x"}, "edited")]):
        aid = 1 + 2 * k
        ev.append({"id": aid, "timestamp": ts % aid, "source": "agent", "action": action, "args": args})
        ev.append({"id": aid + 1, "timestamp": ts % (aid + 1), "source": "agent", "observation": action,
                   "cause": aid, "content": obs})
    ev.append({"id": 7, "timestamp": ts % 7, "source": "agent", "action": "message", "args": {"content": "Done."}})
    f = tmp_path / "stream.json"
    f.write_text(json.dumps(ev))
    return f


def test_openhands_actions_without_metadata_are_paired_with_their_observations(tmp_path):
    res = import_file("openhands", _oh_stream(tmp_path))
    ev = res.trace.events
    uses = [c for e in ev if isinstance(e, tr.AssistantEvent) for c in e.tool_uses()]
    results = [e for e in ev if isinstance(e, tr.ToolResultEvent)]
    assert [(u.id, u.name, u.input) for u in uses] == [
        ("openhands-1", "run", {"command": "ls"}), ("openhands-3", "read", {"path": "/workspace/calc/calc.py"}),
        ("openhands-5", "edit", {"path": "/workspace/calc/calc.py", "content": "x"})]
    assert [(r.tool_use_id, r.content) for r in results] == [("openhands-1", "calc.py"), ("openhands-3", "def divide"),
                                                             ("openhands-5", "edited")]
    assert res.summary["calls"] == 4 and res.summary["tool_uses"] == 3   # 3 actions + the final message
    assert res.summary["ignored"] == {}
    derived, _ = apply(res.trace)
    assert [e.text for e in derived.events if isinstance(e, tr.FactEvent) and e.category == "goal"] == [
        "Division by zero in calc.py"]


@needs_real
def test_openhands_real_observations_are_tool_results_of_their_actions():
    """basic_gui_mode.json: 4 actions with metadata (events 7, 9, 11, 13), each answered by the
    observation after it (8, 10, 12, 14)."""
    path = REAL.parent / "openhands" / "basic_gui_mode.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    res = import_file("openhands", path)
    uses = [c.id for e in res.trace.events if isinstance(e, tr.AssistantEvent) for c in e.tool_uses()]
    results = [e for e in res.trace.events if isinstance(e, tr.ToolResultEvent)]
    assert len(uses) == len(results) == 4 and [r.tool_use_id for r in results] == uses
    # the observation's content, or its message where the content is empty (event 8: mkdir)
    assert [r.content for r in results] == [raw[i]["content"] or raw[i]["message"] for i in (8, 10, 12, 14)]
    assert not any(isinstance(e, tr.UserEvent) and e.text in {r.content for r in results} for e in res.trace.events)
