"""The environment block (N-COMP-12: "环境与记忆的注入标记被重置，下一轮重新注入"): what it says, read
from real files, and its marker."""

from __future__ import annotations

from pathlib import Path

from ctxsim.harness.model import trace as tr
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.strategies.novacode.environment import EPOCH_S, EnvironmentInjection, date_at, git_state, render


def test_git_state_from_the_files(tmp_path: Path):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/fix/parser\n")
    (repo / "src").mkdir()
    assert git_state(repo / "src") == (True, "fix/parser")  # the nearest repository above
    (repo / ".git" / "HEAD").write_text("0123456789abcdef0123456789abcdef01234567\n")
    assert git_state(repo) == (True, "detached at 0123456789ab")
    assert git_state(tmp_path) == (False, None)


def test_render_and_date():
    """Day 0 of the assumed epoch is 2026-01-05 (09:00 UTC); 15 hours later it is the 6th."""
    assert date_at(EPOCH_S, 0.0) == "2026-01-05" and date_at(EPOCH_S, 15 * 3600.0) == "2026-01-06"
    text = render("/w/p", "linux", "2026-01-05", True, "main")
    assert text == ("<environment>\nWorking directory: /w/p\nIs directory a git repo: yes\nGit branch: main\n"
                    "Platform: linux\nToday's date: 2026-01-05\n</environment>")
    assert "Git branch" not in render("/w/p", "linux", "2026-01-05", False, None)


def test_n_comp_12_marker_renders_once_until_reset(tmp_path: Path):
    """Rendered at the first request, the same message object afterwards (byte-stable across
    midnight), rendered again with the new date only after a reset."""
    env = EnvironmentInjection(tmp_path)
    first = env.current(0.0)
    assert env.current(20 * 3600.0) is first and "2026-01-05" in first.text
    env.reset()
    again = env.current(20 * 3600.0)
    assert again is not first and "2026-01-06" in again.text and again.meta["origin"] == "environment"


def test_environment_block_in_every_request_with_the_seeded_git_state():
    """Through the engine: a trace seeding the project's .git/HEAD; every main request carries the
    block after the instruction file, naming the run's project directory and the branch."""
    h = tr.Header(name="env", system="You are a coding agent.", tools=[tr.ToolSpec(name="Read")],
                  meta={"files": {"project/.git/HEAD": "ref: refs/heads/release-2.4\n",
                                  "project/NOVACODE.md": "RULE-1"}})
    evs = [tr.UserEvent(t=0.0, text="hi"), tr.AssistantEvent(t=2.0, content=[tr.TextContent(text="hello")]),
           tr.UserEvent(t=10.0, text="again"), tr.AssistantEvent(t=12.0, content=[tr.TextContent(text="ok")])]
    seen = []
    replay(tr.validate_events(h, evs), "novacode", None, RunConfig(observer=lambda req, info: seen.append(req)))
    mains = [r for r in seen if r.kind == "main"]
    assert len(mains) == 2
    origins = [m.meta.get("origin") for m in mains[0].messages[:2]]
    assert origins == ["instructions", "environment"]
    block = mains[0].messages[1]
    assert "Git branch: release-2.4" in block.text and "/project" in block.text
    assert mains[1].messages[1] is block
