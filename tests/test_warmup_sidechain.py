"""issue 27: a 1-call warm-up sidechain (Claude Code 2.0.x writes a "Warmup" sidechain with no main
call). Every strategy sends the 16,965-token prefix the log measured for the span (not only
``recorded``); the header names the model the log ran on; every strategy writes the TTL the log
wrote (5 minutes here, not ``claude_code``'s 1-hour default)."""

from __future__ import annotations

import pytest
from ctxsim.harness.importers import import_file
from ctxsim.harness.replay.engine import RunConfig, replay

from tests.helpers_claude_code import asst, text, user, write

MODEL = "claude-sonnet-4-5-20250929"


@pytest.fixture(scope="module")
def warmup(tmp_path_factory):
    f = write(tmp_path_factory.mktemp("w") / "w.jsonl", [
        user(0, "Warmup", isSidechain=True, version="2.0.76"),
        asst(2, "r1", text("ready"), out=12, w5m=16_965, inp=3, model=MODEL, isSidechain=True, version="2.0.76")])
    return import_file("claude-code", f).trace


def test_the_header_names_the_sidechains_model_and_ttl(warmup):
    h = warmup.header
    assert h.model == MODEL and h.recorded.cache_ttl == "5m"
    assert h.prefix_tokens == 0 and list(h.recorded.subagent_prefix_tokens.values()) == [16_953]  # 16,968 − 15 visible


@pytest.mark.parametrize("strategy", ["recorded", "novacode", "append_only", "claude_code", "codex"])
def test_every_strategy_keeps_the_sidechains_prefix(warmup, strategy):
    """Recorded: 3 + 16,965 written + 12 out on Sonnet 4.5 = (3·3 + 16,965·3.75 + 12·15)/1e6 =
    $0.0638. Every strategy sends at least the 16,953-token prefix (was 14 tokens and $0.0001
    outside ``recorded``) and pays within 25% of the bill (append_only sets no breakpoint: all
    uncached at $3/M, $0.051)."""
    res = replay(warmup, strategy, {}, RunConfig())
    m = res.metrics
    assert m["peak_context_tokens"] >= 16_953
    assert 0.75 * 0.0638 <= m["cost_usd"] <= 1.25 * 0.0638
    assert res.calls["model"].tolist() == [MODEL]
    assert int(res.calls["cache_write_1h"].sum()) == 0   # the log wrote 5-minute entries
