"""Latency model: time to first token grows with the input the model must prefill; cached input is
cheaper to prefill; the answer streams at the model's decode rate.

    ttft     = base + uncached_input × prefill + cached_input × cached_prefill
    duration = ttft + output / decode_rate

Default constants (models.toml) are fitted to Anthropic's caching launch figures (Claude 3.5
Sonnet, peers.md): a 100k-token prompt 11.5 s uncached → 2.4 s cached; a 10k-token prompt 1.6 s →
1.1 s. Uncached: 11.5 = b + 100k·p and 1.6 = b + 10k·p give p = 9.9 / 90k = 1.1e-4 s/token and
b = 0.5 s. Cached: least squares of 2.4 = b + 100k·c and 1.1 = b + 10k·c with b = 0.5 gives
c = (1.9·1e5 + 0.6·1e4) / (1e10 + 1e8) = 1.94e-5 s/token. Decode rates per model from Artificial
Analysis (peers.md). Cache writes prefill like uncached input.
"""

from __future__ import annotations

from ctxsim.harness.model.conversation import Usage
from ctxsim.harness.provider.models import ModelSpec


def ttft_s(spec: ModelSpec, usage: Usage) -> float:
    uncached = usage.input_uncached + usage.cache_write
    return spec.ttft_base_s + uncached * spec.prefill_s_per_tok + usage.cache_read * spec.cached_prefill_s_per_tok


def duration_s(spec: ModelSpec, usage: Usage) -> float:
    return ttft_s(spec, usage) + usage.output / spec.decode_tok_s
