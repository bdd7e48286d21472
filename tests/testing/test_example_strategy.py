"""docs/examples/keep_recent.py, the guide's example strategy: imported from its file, so the guide
cannot rot. Its behaviour on hand-built histories, then the whole property suite on it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from ctxsim.harness.model.conversation import Block, History, Message, SystemPrompt, ToolSet
from ctxsim.harness.testing.machine import find_failure
from ctxsim.strategies.base import CallInfo, StrategyEnv
from ctxsim.strategies.registry import make_config

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"


def _load():
    spec = importlib.util.spec_from_file_location("keep_recent", EXAMPLES / "keep_recent.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("keep_recent", module)
    spec.loader.exec_module(module)
    return module


kr = _load()


def env(tmp_path: Path, window: int = 1_000) -> StrategyEnv:
    return StrategyEnv(session_dir=tmp_path, services=None, now=lambda: 0.0, window=window, max_output_tokens=1_000,
                       model="claude-sonnet-4-6", provider="anthropic", system=SystemPrompt.of("s" * 100),
                       tools=ToolSet(()), rng=np.random.default_rng(0))


def use(i: str) -> Message:
    return Message("assistant", (Block.tool_use(i, "Read", {}),))  # payload "Read {}": 7 chars


def result(i: str, text: str) -> Message:
    return Message("user", (Block.tool_result(i, text),))


def test_truncate_keeps_the_limit_and_says_how_much_was_cut():
    out = kr.truncate("abcdefghij" * 10, 50)
    # room is made for the longest note, "\n[... 100 characters truncated]" (31 characters): 19 kept,
    # 81 cut, and the note says 81 (30 characters): 49 in all
    assert out == "abcdefghijabcdefghi" + "\n[... 81 characters truncated]"
    assert len(out) == 49
    assert kr.truncate("short", 50) == "short"


def test_cut_points_never_start_at_a_result():
    msgs = [Message.user("go"), use("a"), result("a", "r"), use("b"), result("b", "s"), Message.user("next")]
    assert kr.cut_points(msgs) == [1, 3, 5]


def test_results_of_one_message_share_the_budget(tmp_path):
    s = kr.KeepRecent(make_config(kr.KeepRecent, {"max_result_chars": 100}), env(tmp_path))
    s.on_tool_results(Message("user", (Block.tool_result("a", "x" * 80), Block.tool_result("b", "y" * 30))))
    # two results: 100 // 2 = 50 characters each; the 80-character one keeps 50 - 30 (the note
    # "\n[... 80 characters truncated]") = 20 and says 60 were cut; the 30-character one is untouched
    a, b = s.history[0].blocks
    assert len(a.text) == 50 and a.text.endswith("[... 60 characters truncated]")
    assert b.text == "y" * 30


def test_cut_drops_the_oldest_at_a_pair_safe_point_and_declares_it(tmp_path):
    s = kr.KeepRecent(make_config(kr.KeepRecent, {}), env(tmp_path, window=1_000))
    s.history = History([Message.user("a" * 460), use("t1"), result("t1", "r" * 460), use("t2"), result("t2", "s" * 460)])
    # fixed: 100 system chars / 2.5 = 40 tokens. Messages, each +40 chars of framing:
    # 500 + 47 + 500 + 47 + 500 = 1,594 chars -> 637 tokens; 677 > 0.6 * 1,000 = 600: cut.
    assert s.estimate() == 677
    req = s.build_request(CallInfo(0, 0.0))
    # target 0.35 * 1,000 - 40 = 310 tokens. Cut points [1, 3]: from 1, 1,094 chars -> 437 > 310;
    # from 3, 547 chars -> 218 <= 310: messages 3 and 4 stay, after a notice.
    assert [m.role for m in req.messages] == ["user", "assistant", "user"]
    assert req.messages[0].text == "[3 earlier messages were dropped to stay within the context window.]"
    assert req.rewrite
    notice = len(req.messages[0].text) + 40
    assert req.estimated_tokens == 40 + int((notice + 547) / 2.5)
    again = s.build_request(CallInfo(1, 1.0))
    assert not again.rewrite and again.messages.prefix_digest(2) == req.messages.prefix_digest(2)


def test_resume_answers_the_calls_a_crash_left_open_n_trans_5(tmp_path):
    s = kr.KeepRecent(make_config(kr.KeepRecent, {}), env(tmp_path))
    s.history = History([Message.user("go"), use("t1")])
    s.on_session_start("s2", True, 0.0)
    last = s.history[-1]
    assert last.role == "user" and last.tool_result_ids() == ["t1"] and last.blocks[0].is_error


def test_a_refused_request_is_cut_again_at_the_apis_count(tmp_path):
    from ctxsim.strategies.base import Rejection

    s = kr.KeepRecent(make_config(kr.KeepRecent, {}), env(tmp_path, window=1_000))
    s.history = History([Message.user("a" * 460), use("t1"), result("t1", "r" * 460), use("t2"), result("t2", "s" * 460)])
    # the API counted 1,354 tokens where the estimate said 677: a ratio of 2, so the target is
    # 0.35 * 1,000 / 2 - 40 = 135 tokens; from cut point 1, 437 > 135; from 3, 218 > 135: the last
    # point, 3, is taken (keep as little as possible)
    assert s.on_rejected(Rejection(("overflow",), "prompt is too long", 1_354, 1_000, 1), CallInfo(0, 0.0))
    assert [m.role for m in s.history] == ["user", "assistant", "user"] and s.history[0].meta["origin"] == "notice"
    # refused again: nothing but the notice is left to drop: it gives up (the session ends there)
    assert not s.on_rejected(Rejection(("overflow",), "prompt is too long", 1_354, 1_000, 2), CallInfo(0, 0.0))
    # a 400 for another reason is not its to fix
    assert not s.on_rejected(Rejection(("pairing",), "unexpected tool_use_id", 500, 1_000, 1), CallInfo(0, 0.0))


@pytest.mark.parametrize("crashes", [False, True], ids=["sessions", "crash-resume"])
def test_the_property_suite_passes_on_the_example(crashes):
    assert find_failure(kr.KeepRecent, crashes=crashes) is None


GUIDE = Path(__file__).resolve().parents[2] / "docs" / "writing-a-strategy.md"


def _blocks(lang: str) -> list[str]:
    text = GUIDE.read_text(encoding="utf-8")
    parts = text.split(f"```{lang}\n")[1:]
    return [p.split("```", 1)[0] for p in parts]


def test_guide_listings_are_the_tested_file():
    """Every listing of the guide marked as from keep_recent.py is in that file, line for line."""
    source = (EXAMPLES / "keep_recent.py").read_text(encoding="utf-8")
    listings = [b for b in _blocks("python") if b.startswith("# docs/examples/keep_recent.py\n")]
    assert len(listings) == 4
    for listing in listings:
        body = listing.split("\n", 1)[1].rstrip("\n")
        assert body in source, body[:200]


def test_guide_sweep_grid_is_a_valid_sweep_config():
    import tomllib

    from ctxsim.harness.sweep.grid import SweepConfig

    grids = [b for b in _blocks("toml") if "[[strategies]]" in b]
    assert len(grids) == 1
    cfg = SweepConfig.model_validate(tomllib.loads(grids[0]))
    assert cfg.strategies[0].grid == {"budget_share": [0.5, 0.6, 0.8], "target_share": [0.25, 0.35]}
