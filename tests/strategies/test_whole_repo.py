"""whole_repo: the repository snapshot (size, sources, cap), where it sits, and what it costs."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from harness.conversation import Message, SystemPrompt, ToolDef, ToolSet
from harness.engine import RunConfig, replay
from strategies.base import CallInfo, StrategyEnv
from strategies.registry import get, make_config
from strategies.whole_repo import WholeRepo, file_block
from tests.helpers_traces import Builder


def make(tmp_path: Path, files: dict[str, str] | None = None, window: int = 200_000, seed: int = 0,
         **params) -> WholeRepo:
    project = tmp_path / "project"
    project.mkdir(parents=True, exist_ok=True)
    for name, text in (files or {}).items():
        (project / name).write_text(text)
    env = StrategyEnv(session_dir=tmp_path, services=None, now=lambda: 0.0, window=window,
                      max_output_tokens=64_000, model="m", provider="anthropic", system=SystemPrompt.of("sys"),
                      tools=ToolSet((ToolDef("Read", "read"),)), rng=np.random.default_rng(seed),
                      project_dir=project)
    return WholeRepo(make_config(WholeRepo, params), env)


def snapshot_chars(s: WholeRepo) -> int:
    return sum(len(file_block(p, t)) for p, t in s.files)


def test_project_files_first_then_synthesised_code_to_the_exact_budget(tmp_path):
    # repo_tokens 1,000 x 3.5 chars/token = 3,500 chars of file blocks.
    # a.py: '<file path="a.py">\n' (19) + 1,000 + '\n</file>' (8) = 1,027; b.py: 19 + 2,000 + 8 = 2,027;
    # 3,054 so far, and one synthesised module cut to fill the last 446 characters exactly.
    s = make(tmp_path, {"a.py": "x" * 1000, "b.py": "y" * 2000}, repo_tokens=1_000)
    assert get("whole_repo") is WholeRepo
    assert [p for p, _ in s.files[:2]] == ["a.py", "b.py"]
    assert len(s.files) == 3 and s.files[2][0].startswith("src/")
    assert snapshot_chars(s) == 3_500
    assert s.counters.extra["repo_chars"] == 3_500


def test_synthetic_source_ignores_the_project_and_is_deterministic(tmp_path):
    a = make(tmp_path / "a", {"a.py": "x" * 1000}, repo_tokens=2_000, source="synthetic")
    b = make(tmp_path / "b", {"a.py": "x" * 1000}, repo_tokens=2_000, source="synthetic")
    c = make(tmp_path / "c", {"a.py": "x" * 1000}, repo_tokens=2_000, source="synthetic", seed=1)
    assert "a.py" not in [p for p, _ in a.files]
    assert a.files == b.files and a.files != c.files
    assert snapshot_chars(a) <= 7_000 and "def " in a.files[0][1]


def test_a_snapshot_over_its_share_of_the_window_drops_whole_files(tmp_path):
    # five files of 5,000 chars: blocks of 19 + 5,000 + 8 = 5,027, 25,135 in all (repo_tokens 7,182
    # x 3.5 = 25,137: the two characters left are too few for another file).
    # cap: 0.5 x (10,000 window - 2,000 reserve) x 3.5 = 14,000 chars -> two files (10,054); three dropped.
    files = {f"{c}.py": c * 5000 for c in "abcde"}
    s = make(tmp_path, files, window=10_000, repo_tokens=7_182, max_repo_share=0.5, reserve_tokens=2_000,
             keep_tokens=1_000)
    assert [p for p, _ in s.files] == ["a.py", "b.py"]
    assert s.counters.extra["repo_files_dropped"] == 3 and s.counters.extra["repo_chars"] == 10_054


def test_the_snapshot_is_the_pinned_first_message_behind_its_own_breakpoint(tmp_path):
    s = make(tmp_path, {"a.py": "x" * 1000}, repo_tokens=1_000)
    s.on_user(Message.user("fix it"))
    req = s.build_request(CallInfo(0, 0.0))
    assert req.messages[0].meta["origin"] == "repository" and s.pinned == 1
    assert [b.at for b in req.breakpoints] == ["system", 0, 1]
    # the snapshot's blocks: opening tag, a.py (1,027 chars), one synthesised module filling the
    # remaining 2,473 of 3,500, closing tag
    assert len(req.messages[0].blocks) == 4
    s.on_session_start("s2", resume=False, now=1.0)
    assert len(s.history) == 1 and s.history[0].meta["origin"] == "repository"


def test_every_call_pays_for_the_repository(tmp_path):
    rng = np.random.default_rng(0)
    b = Builder()
    b.user("Fix the export bug.")
    for i in range(6):
        b.call(f"step {i}", results=[" ".join(rng.choice(["alpha", "beta", "def", "x"], 300))], dt=30.0)
    t = b.build()
    base = replay(t, "append_only", {"cache_breakpoints": True}, RunConfig())
    repo = replay(t, "whole_repo", {"repo_tokens": 20_000, "source": "synthetic"}, RunConfig())
    extra = repo.calls.context_tokens.to_numpy() - base.calls.context_tokens.to_numpy()
    # about 20,000 true tokens more on every call (the estimate is 3.5 chars/token; code tokenises
    # near that): within 25% of the asked size, and the same on every call
    assert all(15_000 < x < 25_000 for x in extra) and extra.max() - extra.min() < 50
    assert repo.metrics["cost_usd"] > 2 * base.metrics["cost_usd"]
    assert repo.metrics["pairing_violations"] == 0 and repo.metrics["overflows"] == 0
