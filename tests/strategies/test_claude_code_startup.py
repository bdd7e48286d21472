"""claude_code: the startup files (CLAUDE.md, auto-memory index) load before the first prompt and are
re-injected from disk after a compaction, on synthetic traces too (issue #33).

Read at: code.claude.com/docs/en/context-window ("What survives compaction": project-root CLAUDE.md
and unscoped rules, auto memory: re-injected from disk), code.claude.com/docs/en/memory (MEMORY.md:
first 200 lines or 25KB), read 2026-12."""

from __future__ import annotations

from dataclasses import replace

from ctxsim.harness.model.conversation import Message
from ctxsim.strategies.base import CallInfo
from ctxsim.strategies.registry import build

from tests.strategies.peer_env import FakeServices, make, step


def files(root):
    (root / "home" / ".novacode").mkdir(parents=True)
    (root / "home" / ".novacode" / "NOVACODE.md").write_text("Always answer in English.\n")
    (root / "project" / ".novacode" / "memory").mkdir(parents=True)
    (root / "project" / "NOVACODE.md").write_text("Run the tests with pytest -q.\n")
    index = "\n".join(f"- [m{i}](m{i}.md) — memory {i}" for i in range(250))
    (root / "project" / ".novacode" / "memory" / "MEMORY.md").write_text(index)
    return root / "home", root / "project"


def claude(tmp_path, params=None, services=None):
    home, project = files(tmp_path)
    s = make("claude_code", params, services=services)
    return build("claude_code", params, replace(s.env, home_dir=home, project_dir=project))


def test_startup_files_load_before_the_first_prompt(tmp_path):
    s = claude(tmp_path)
    s.on_user(Message.user("fix the failing test"))
    first, prompt = s.history
    assert first.meta["origin"] == "startup" and prompt.text == "fix the failing test"
    assert "Always answer in English." in first.text and "Run the tests with pytest -q." in first.text
    # MEMORY.md: the first 200 lines only (lines 0 .. 199)
    assert "memory 199" in first.text and "memory 200" not in first.text
    assert first.text.startswith("<system-reminder>") and first.text.endswith("</system-reminder>")
    s.on_user(Message.user("and the next one"))
    assert sum(m.meta.get("origin") == "startup" for m in s.history) == 1  # once per launch


def test_startup_files_are_re_injected_after_a_compaction(tmp_path):
    s = claude(tmp_path, services=FakeServices("SUMMARY"))
    s.on_user(Message.user("fix the failing test"))
    startup = s.history[0].text
    step(s, 0, "out")
    (tmp_path / "project" / "NOVACODE.md").write_text("Run the tests with pytest -x.\n")  # edited on disk
    assert s.compact(CallInfo(1, 1.0))
    assert [m.meta.get("origin") for m in s.history][:2] == ["startup", "summary"]
    # re-read from disk, not replayed from memory
    assert "pytest -x" in s.history[0].text and s.history[0].text == startup.replace("pytest -q", "pytest -x")
    assert s.counters.extra["startup_reinjected"] == 1
    lost = claude(tmp_path / "b", {"startup_after_compaction": False}, services=FakeServices("SUMMARY"))
    lost.on_user(Message.user("fix the failing test"))
    assert lost.compact(CallInfo(1, 1.0)) and lost.history[0].meta.get("origin") == "summary"


def test_claude_md_is_preferred_and_the_older_reading_sends_nothing(tmp_path):
    s = claude(tmp_path)
    (tmp_path / "project" / "CLAUDE.md").write_text("Use ruff.\n")
    s.on_user(Message.user("go"))
    assert "Use ruff." in s.history[0].text and "pytest -q" not in s.history[0].text
    off = claude(tmp_path / "b", {"startup_files": False})
    off.on_user(Message.user("go"))
    assert [m.text for m in off.history] == ["go"]
    bare = make("claude_code")  # no home or project (an imported log): nothing to load
    bare.on_user(Message.user("go"))
    assert [m.text for m in bare.history] == ["go"]
