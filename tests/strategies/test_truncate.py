"""truncate: Codex CLI's cut of tool output (10 KiB / 256 lines, head 128 + tail 128 lines)."""

from __future__ import annotations

import pytest
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.strategies.registry import StrategyError, make_config
from ctxsim.strategies.truncate import Truncate, truncate_head_tail

from tests.helpers_traces import Builder


def test_small_output_unchanged():
    text = "ok\n" * 256  # 256 lines, 768 bytes: within both limits
    assert truncate_head_tail(text) == text


def test_too_many_lines_keeps_128_head_and_128_tail():
    text = "".join(f"line {i}\n" for i in range(300))  # 300 lines, ~2.6 KB: over 256 lines only
    out = truncate_head_tail(text)
    # 300 − 128 − 128 = 44 lines omitted
    assert out.startswith("Total output lines: 300\n\n")
    assert "[... omitted 44 of 300 lines ...]" in out
    assert "line 127\n" in out and "line 128\n" not in out  # head: lines 0..127
    assert "line 171\n" not in out and "line 172\n" in out  # tail: lines 172..299 (300 − 128 = 172)
    assert out.endswith("line 299\n")


def test_too_many_bytes_head_gets_half_the_budget():
    line = "x" * 199 + "\n"  # 200 bytes
    text = line * 100  # 100 lines, 20,000 bytes: over 10 KiB (10,240), under 256 lines
    out = truncate_head_tail(text)
    body = out.split("\n\n", 1)[1]
    head, rest = body.split("\n[... omitted", 1)
    # all 100 lines fit the line limit, so they are all "head" lines, then cut to 10,240 / 2 = 5,120 bytes
    assert len(head.encode()) == 5_120
    assert "omitted 0 of 100 lines" in out
    assert len(out.encode()) < 20_000


def test_parameterised_head_and_tail():
    text = "".join(f"{i}\n" for i in range(50))
    out = truncate_head_tail(text, max_lines=10, head_lines=2, tail_lines=3)
    # 50 − 2 − 3 = 45 omitted
    assert "[... omitted 45 of 50 lines ...]" in out
    assert out.endswith("47\n48\n49\n")
    with pytest.raises(StrategyError):
        make_config(Truncate, {"max_lines": 10, "head_lines": 8, "tail_lines": 8})


def test_replay_cuts_results_and_keeps_pairs():
    big = "".join(f"row {i}\n" for i in range(1_000))
    t = Builder().user("list the rows").call("reading", [big]).call("reading again", [big]).call("done").build()
    seen = []
    r = replay(t, "truncate", None, RunConfig(observer=lambda req, info: seen.append(req)))
    assert r.metrics["pairing_violations"] == 0
    last = seen[-1].messages
    results = [b.text for m in last for b in m.blocks if b.type == "tool_result"]
    assert len(results) == 2 and all("[... omitted 744 of 1000 lines ...]" in x for x in results)  # 1000 − 256
