"""models.toml against a maintained price list (genai-prices, pydantic/genai-prices, a dated
database of Anthropic, Bedrock and OpenAI prices): every row's per-token rates, below and above
the long-context line, at the row's ``as_of`` date. The table stays the source the simulator
reads (each row names the page it was read from); this catches a transcription error or a price
the maintained list has and the table lacks. Where the two disagree on purpose the difference is
listed with its reason, so a new one fails."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from ctxsim.harness.provider.models import load_table

gp = pytest.importorskip("genai_prices")

# (row, request size) -> why the table differs from genai-prices 0.2.5 there
KNOWN = {
    ("claude-sonnet-4", 300_000): "Anthropic's pricing page (Long context pricing) bills Sonnet 4 with the 1M "
                                  "window at 6 / 22.50 above 200k input; genai-prices 0.2.5 has no tier for it",
}
# rows whose cache-write rate in genai-prices is not billed here, and why
WRITE_NOT_BILLED = {
    name: "genai-prices 0.2.5 lists a cache-write rate (1.25x input) that OpenAI's usage cannot show (no written-"
          "token count): writes are billed as uncached input"
    for name in ("gpt-5.6-sol", "gpt-5.6-terra", "gpt-5.6-luna")
} | {"minimax-m2.7": "genai-prices 0.2.5 lists a cache-write rate (0.375) that the automatic-cache model here bills "
                     "as uncached input (models.toml says so)"}
# rows priced from another genai-prices entry than (their provider, their id): where the provider's own
# price is not in the list (the row's source says so)
PRICED_AS = {"glm-4.7-flash": ("openrouter", "z-ai/glm-4.7-flash")}
SIZES = (100_000, 300_000, 600_000)   # 600k: past the 512k line of minimax-m3


def _theirs(model: str, provider: str, n: int, as_of: str) -> tuple[float, float, float, float, float]:
    """(uncached, write 5m, read, output) USD per million tokens for an ``n``-token request (genai-prices
    0.2.5 prices ``cache_write_tokens`` at the 5-minute rate: the 1-hour rate is not compared)."""
    when = datetime.fromisoformat(as_of).replace(tzinfo=UTC)

    def price(**usage) -> float:
        r = gp.calc_price(gp.Usage(**usage), model_ref=model, provider_id=provider, genai_request_timestamp=when)
        return float(r.total_price)

    per = 1e6 / n
    uncached = price(input_tokens=n) * per
    read = price(input_tokens=n, cache_read_tokens=n) * per
    w5 = price(input_tokens=n, cache_write_tokens=n) * per
    out = (price(input_tokens=n, output_tokens=n) - price(input_tokens=n)) * per
    return uncached, w5, read, out


def _rows():
    t = load_table()
    return [(name, spec) for name, spec in t.models.items()
            if spec.provider in ("anthropic", "openai", "zai", "deepseek", "minimax")]


@pytest.mark.parametrize("name,spec", _rows(), ids=[n for n, _ in _rows()])
def test_each_row_has_the_maintained_lists_prices(name, spec):
    for n in SIZES:
        if (name, n) in KNOWN or n > spec.window:
            continue
        ours = [r * 1e6 for r in spec.rates(n)]
        provider, ref = PRICED_AS.get(name, (spec.provider, name))
        theirs = _theirs(ref, provider, n, spec.as_of)
        pairs = {"input": (ours[0], theirs[0]), "cache write 5m": (ours[1], theirs[1]),
                 "cache read": (ours[3], theirs[2]), "output": (ours[4], theirs[3])}
        if spec.provider != "anthropic":   # no write premium: a write is an uncached input
            pairs["cache write 5m"] = (ours[0], theirs[1])
        if name in WRITE_NOT_BILLED:
            del pairs["cache write 5m"]
        for what, (a, b) in pairs.items():
            assert a == pytest.approx(b, rel=1e-6), f"{name} at {n:,} tokens: {what} {a} here, {b} in genai-prices"


@pytest.mark.parametrize("name", ["claude-sonnet-4-5", "claude-haiku-4-5", "claude-opus-4-6", "claude-sonnet-4"])
def test_bedrock_regional_premium_agrees_with_the_maintained_list(name):
    """The geographic Bedrock form (``us.anthropic.<id>``) against genai-prices' ``regional`` rows."""
    t = load_table()
    spec = t.models[name]
    dated = {"claude-sonnet-4-5": "claude-sonnet-4-5-20250929-v1:0", "claude-haiku-4-5": "claude-haiku-4-5-20251001-v1:0",
             "claude-opus-4-6": "claude-opus-4-6-v1", "claude-sonnet-4": "claude-sonnet-4-20250514-v1:0"}[name]
    ours = t.get(f"us.anthropic.{dated}").input
    when = datetime.fromisoformat(spec.as_of).replace(tzinfo=UTC)
    r = gp.calc_price(gp.Usage(input_tokens=100_000), model_ref=f"us.anthropic.{dated}", provider_id="aws",
                      genai_request_timestamp=when)
    assert ours == pytest.approx(float(r.total_price) * 10, rel=1e-6)
