"""Section 7 of the spec: what the window size changes (N-WIN-1..3)."""

import pytest
from ctxsim.harness.model.conversation import Usage
from ctxsim.harness.provider import Provider
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.harness.sweep.analysis import compaction_ledger
from ctxsim.strategies.novacode.compaction import thresholds

from tests.helpers_traces import Builder


def growing(calls=40, words=3_000):
    b = Builder().user("port the parser to the streaming API")
    for i in range(calls):
        b.call(f"step {i}", [f"out {i} " + "tok " * words])
    return b.call("done").build()


def test_n_win_1_mechanisms_stay_parameters_move():
    """N-WIN-1: the same rules at 1M give later triggers (200k: 167,000 / 177,000; 1M: 967,000 /
    977,000), and a session that compacts on 200k runs verbatim on 1M."""
    assert (thresholds(200_000).soft, thresholds(200_000).hard) == (167_000, 177_000)
    assert (thresholds(1_000_000).soft, thresholds(1_000_000).hard) == (967_000, 977_000)
    t = growing()  # ~120k tokens: over a 100k window, far under 1M
    small = replay(t, "novacode", None, RunConfig(window=100_000))
    big = replay(t, "novacode", None, RunConfig(window=1_000_000))
    assert small.metrics["compactions"]["succeeded"] >= 1 and small.metrics["overflows"] == 0
    assert big.metrics["compactions"]["attempted"] == 0
    assert big.metrics["peak_context_tokens"] > small.metrics["peak_context_tokens"]


def test_n_win_2_cost_linear_in_tokens_caching_only_cuts_the_hit_part():
    """N-WIN-2: twice the tokens cost twice as much; a cache hit is billed at a tenth, not free."""
    p = Provider("claude-sonnet-4-6")
    one, two = p.price(Usage(input_uncached=400_000)), p.price(Usage(input_uncached=800_000))
    assert two == pytest.approx(2 * one)
    hit = p.price(Usage(cache_read=400_000))
    assert hit == pytest.approx(0.1 * one) and hit > 0


def test_n_win_3_the_threshold_is_a_ledger():
    """N-WIN-3: per trigger point, the summary calls' cost against the cost of carrying the text;
    an earlier trigger makes more (cheap) summaries and carries less."""
    led = compaction_ledger(growing(), 100_000, [3_000, 40_000])
    assert led["trigger_tokens"].tolist() == [100_000 - 20_000 - 3_000, 100_000 - 20_000 - 40_000]
    late, early = led.iloc[0], led.iloc[1]
    assert early["compactions"] > late["compactions"] >= 1
    assert early["summary_cost_usd"] > 0 and late["summary_cost_usd"] > 0
    assert early["main_cost_usd"] < late["main_cost_usd"]
    assert (led["total_cost_usd"] == led["summary_cost_usd"] + led["main_cost_usd"]).all()
