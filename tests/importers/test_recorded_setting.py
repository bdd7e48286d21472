"""The setting the agent ran with, read from its log: models by role, the window (from an
auto-compaction's preTokens or the peak context), the cache TTL (from the usage split)."""

from __future__ import annotations

import pytest
from ctxsim.harness.importers import import_file
from ctxsim.harness.importers.claude_code import recorded_window

from tests.helpers_claude_code import asst, rec, result, text, user, write


def test_recorded_window_from_an_auto_compaction_or_the_peak():
    # 167,200 is just past 200k's trigger (200,000 − 20,000 − 13,000 = 167,000)
    w, ev = recorded_window([167_200], 170_000)
    assert w == 200_000 and "preTokens 167,200" in ev and "167,000 at 200,000" in ev
    # far from the trigger (an older version's 155,979): still the smallest window above it, said so
    w, ev = recorded_window([155_979], 160_000)
    assert w == 200_000 and "-11,021 from that trigger" in ev
    # 1M: a compaction at 967k
    assert recorded_window([967_500], 0)[0] == 1_000_000
    # no compaction: a peak past 200k can only be the 1M window; below it, Claude Code's default
    assert recorded_window([], 250_000) == (1_000_000, "no auto-compaction; peak context 250,000 > 200,000: "
                                                       "the 1,000,000 window")
    w, ev = recorded_window([], 141_787)
    assert w == 200_000 and "default window" in ev and "cannot be told apart" in ev


def session(tmp_path, *, pre_tokens=None, w1h=0, w5m=100, big_read=0):
    recs = [user(0, "go"),
            asst(1, "r1", {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "a"}},
                 w1h=w1h, w5m=w5m),
            result(2, "t1", "A"),
            asst(3, "r2", text("read it"), w1h=w1h, w5m=w5m, read=big_read, model="claude-haiku-4-5-20251001")]
    if pre_tokens:
        recs += [rec("system", 5, subtype="compact_boundary", content="Conversation compacted",
                     compactMetadata={"trigger": "auto", "preTokens": pre_tokens}),
                 user(5.1, "This session is being continued ... summary", isCompactSummary=True)]
    recs.append(asst(6, "r3", text("b"), w1h=w1h, w5m=w5m))
    return write(tmp_path / "s.jsonl", recs)


def test_window_ttl_and_models_are_read_from_the_log(tmp_path):
    res = import_file("claude-code", session(tmp_path, pre_tokens=167_094, w1h=400, w5m=0), calibrate=False)
    rec_ = res.trace.header.recorded
    assert rec_.window == 200_000 and "preTokens 167,094" in rec_.window_evidence
    assert rec_.cache_ttl == "1h"
    assert rec_.cache_ttl_evidence == ("cache_creation over 3 calls: ephemeral_1h_input_tokens 1,200, "
                                       "ephemeral_5m_input_tokens 0")
    assert rec_.models == {"claude-haiku-4-5-20251001": {"main": 1}, "claude-opus-4-6": {"main": 2}}


def test_5m_writes_and_a_peak_past_200k(tmp_path):
    res = import_file("claude-code", session(tmp_path, w5m=100, big_read=250_000), calibrate=False)
    rec_ = res.trace.header.recorded
    assert rec_.cache_ttl == "5m" and rec_.window == 1_000_000
    assert "peak context 250,103" in rec_.window_evidence   # 3 + 100 + 250,000


@pytest.mark.parametrize("w1h,w5m,want", [(0, 0, None), (10, 300, "5m"), (300, 10, "1h")])
def test_ttl_is_the_larger_share_of_the_writes(tmp_path, w1h, w5m, want):
    res = import_file("claude-code", session(tmp_path, w1h=w1h, w5m=w5m), calibrate=False)
    assert res.trace.header.recorded.cache_ttl == want
