"""whole_repo: the snapshot is real (project files, files the agent reads, else a pinned package's
sources), its size and cap, where it sits, what it costs, and its window fallback."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ctxsim.harness.model.conversation import Block, Message, SystemPrompt, ToolDef, ToolSet, Usage
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.strategies.base import CallInfo, StrategyEnv
from ctxsim.strategies.registry import get, make_config
from ctxsim.strategies.whole_repo import WholeRepo, corpus_files, file_block, strip_line_numbers

from tests.fakes import IndexedServices
from tests.helpers_traces import Builder


def make(tmp_path: Path, files: dict[str, str] | None = None, window: int = 200_000, **params) -> WholeRepo:
    project = tmp_path / "project"
    project.mkdir(parents=True, exist_ok=True)
    for name, text in (files or {}).items():
        (project / name).write_text(text)
    env = StrategyEnv(session_dir=tmp_path, services=IndexedServices("<summary>s</summary>"), now=lambda: 0.0,
                      window=window, max_output_tokens=64_000, model="m", provider="anthropic",
                      system=SystemPrompt.of("sys"), tools=ToolSet((ToolDef("Read", "read"),)),
                      rng=np.random.default_rng(0), project_dir=project)
    return WholeRepo(make_config(WholeRepo, params), env)


def test_a_project_with_files_is_its_own_repository(tmp_path):
    # repo_tokens 1,000 x 3.5 = 3,500 chars: a.py's block is 19 + 1,000 + 8 = 1,027, b.py's 2,027:
    # 3,054 fit; c.py (another 2,027) does not, dropped whole; no corpus file is added
    s = make(tmp_path, {"a.py": "x" * 1000, "b.py": "y" * 2000, "c.py": "z" * 2000}, repo_tokens=1_000)
    assert get("whole_repo") is WholeRepo
    assert [p for p, _ in s.files] == ["a.py", "b.py"]
    assert s.counters.extra["repo_chars"] == 3_054 and s.counters.extra["repo_files_dropped"] == 1


def test_with_no_project_file_the_repository_is_a_real_pinned_corpus(tmp_path):
    """rich==15.0.0 (pinned in pyproject.toml): its 100 modules in path order, up to half of
    window - reserve: 0.5 x 180,000 x 3.5 = 315,000 characters of file blocks."""
    corpus = corpus_files("rich")
    assert len(corpus) == 100 and corpus[0][0] == "rich/__init__.py"
    s = make(tmp_path)
    assert s.files == [f for f in corpus if f in s.files] and s.files[0][0] == "rich/__init__.py"
    total = sum(len(file_block(p, t)) for p, t in s.files)
    assert total == s.counters.extra["repo_chars"] <= 315_000
    assert s.counters.extra["repo_files"] + s.counters.extra["repo_files_dropped"] == 100
    big = make(tmp_path / "1m", window=1_000_000)  # the whole package fits a 1M window's share
    assert big.counters.extra["repo_files_dropped"] == 0
    with pytest.raises(ValueError, match="neither a directory nor an installed package"):
        make(tmp_path / "bad", corpus="no_such_package_here")


def test_line_numbers_of_a_read_are_stripped():
    assert strip_line_numbers("     1\tdef f():\n     2\t    return 1") == "def f():\n    return 1"
    assert strip_line_numbers("plain text\n     2\tone numbered") == "plain text\n     2\tone numbered"


def test_files_the_agent_reads_replace_the_corpus_at_the_next_re_pack(tmp_path):
    s = make(tmp_path, trigger_tokens=100_000, keep_tokens=500, repo_tokens=20_000)
    first = s.history[0]
    assert first.text.count('<file path="rich/') >= 1
    s.on_user(Message.user("fix the parser"))
    s.build_request(CallInfo(0, 0.0))
    s.on_response(Message("assistant", (Block.tool_use("r1", "Read", {"file_path": "/src/parser.ex"}),)), None)
    s.on_tool_results(Message("user", (Block.tool_result("r1", "     1\tdefmodule Parser do\n     2\tend"),)))
    assert s.history[0] is first  # learned, not yet packed: the cached prefix holds
    s.on_session_start("s2", resume=False, now=1.0)
    repo = s.history[0]
    assert repo.meta["origin"] == "repository" and "rich/" not in repo.text
    assert file_block("/src/parser.ex", "defmodule Parser do\nend") in repo.text


def test_the_snapshot_is_the_pinned_first_message_behind_its_own_breakpoint(tmp_path):
    s = make(tmp_path, {"a.py": "x" * 1000})
    s.on_user(Message.user("fix it"))
    req = s.build_request(CallInfo(0, 0.0))
    assert req.messages[0].meta["origin"] == "repository" and s.pinned == 1
    assert [b.at for b in req.breakpoints] == ["system", 0, 1]
    assert len(req.messages[0].blocks) == 3  # opening tag, a.py, closing tag
    s.on_session_start("s2", resume=False, now=1.0)
    assert len(s.history) == 1 and s.history[0].meta["origin"] == "repository"


def test_an_unchanged_repository_keeps_its_bytes_through_a_compaction(tmp_path):
    s = make(tmp_path, {"a.py": "x" * 1000}, trigger_tokens=2_000, keep_tokens=500)
    repo = s.history[0]
    s.on_user(Message.user("go"))
    for i in range(4):
        req = s.build_request(CallInfo(i, float(i)))
        s.on_response(Message("assistant", (Block.tool_use(f"t{i}", "Bash", {"c": i}),)), Usage(input_uncached=req.estimated_tokens))
        s.on_tool_results(Message("user", (Block.tool_result(f"t{i}", "o" * 2000),)))
    s.build_request(CallInfo(4, 4.0))
    assert s.counters.compactions_succeeded >= 1 and s.history[0] is repo
    assert s.counters.extra["repo_packs"] == 1


def test_every_call_pays_for_the_repository(tmp_path):
    rng = np.random.default_rng(0)
    b = Builder()
    b.user("Fix the export bug.")
    for i in range(6):
        b.call(f"step {i}", results=[" ".join(rng.choice(["alpha", "beta", "def", "x"], 300))], dt=30.0)
    t = b.build()
    base = replay(t, "append_only", {"cache_breakpoints": True}, RunConfig())
    repo = replay(t, "whole_repo", {"repo_tokens": 20_000}, RunConfig())
    extra = repo.calls.context_tokens.to_numpy() - base.calls.context_tokens.to_numpy()
    # about 20,000 estimated tokens of real Python (rich) on every call, the same on every call
    assert all(12_000 < x < 25_000 for x in extra) and extra.max() - extra.min() < 50
    assert repo.metrics["cost_usd"] > 2 * base.metrics["cost_usd"]
    assert repo.metrics["pairing_violations"] == 0 and repo.metrics["overflows"] == 0
