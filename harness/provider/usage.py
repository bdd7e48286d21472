"""Usage normalisation across providers (N-CACHE-5).

Anthropic reports cache reads and writes *beside* ``input_tokens`` (total input = input_tokens +
cache_creation_input_tokens + cache_read_input_tokens; the creation splits into
``cache_creation.ephemeral_5m_input_tokens`` and ``ephemeral_1h_input_tokens``). OpenAI includes
``cached_tokens`` *in* ``prompt_tokens`` (Chat Completions) or ``input_tokens`` (Responses), so it
must be subtracted; Gemini likewise includes ``cached_content_token_count`` in
``prompt_token_count``. After normalisation the four input kinds are disjoint and add up, whatever
the provider.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxsim.harness.model.conversation import Usage


def _get(d: Mapping[str, Any] | None, *keys: str) -> int:
    if not d:
        return 0
    for k in keys:
        v = d.get(k)
        if v is not None:
            return int(v)
    return 0


def from_anthropic(u: Mapping[str, Any]) -> Usage:
    creation = _get(u, "cache_creation_input_tokens")
    detail = u.get("cache_creation") or {}
    w1 = _get(detail, "ephemeral_1h_input_tokens")
    w5 = _get(detail, "ephemeral_5m_input_tokens") if detail else creation
    if detail and w5 + w1 != creation:  # older logs: detail missing a part; creation is the total
        w5 = max(0, creation - w1)
    return Usage(_get(u, "input_tokens"), w5, w1, _get(u, "cache_read_input_tokens"), _get(u, "output_tokens"))


def from_openai(u: Mapping[str, Any]) -> Usage:
    if "prompt_tokens" in u:  # Chat Completions
        total = _get(u, "prompt_tokens")
        cached = _get(u.get("prompt_tokens_details"), "cached_tokens")
        out = _get(u, "completion_tokens")
    else:  # Responses API (and Codex CLI token_count events)
        total = _get(u, "input_tokens")
        cached = _get(u.get("input_tokens_details"), "cached_tokens") or _get(u, "cached_input_tokens")
        out = _get(u, "output_tokens")
    return Usage(total - cached, 0, 0, cached, out)


def from_gemini(u: Mapping[str, Any]) -> Usage:
    total = _get(u, "prompt_token_count", "promptTokenCount")
    cached = _get(u, "cached_content_token_count", "cachedContentTokenCount")
    out = _get(u, "candidates_token_count", "candidatesTokenCount") + _get(u, "thoughts_token_count", "thoughtsTokenCount")
    return Usage(total - cached, 0, 0, cached, out)


def normalise(provider: str, raw: Mapping[str, Any]) -> Usage:
    try:
        return {"anthropic": from_anthropic, "openai": from_openai, "gemini": from_gemini}[provider](raw)
    except KeyError:
        raise ValueError(f"unknown provider {provider!r}: anthropic, openai or gemini") from None


def to_anthropic(u: Usage) -> dict[str, Any]:
    """The Messages API ``usage`` object for a normalised usage (what the loopback server sends)."""
    return {"input_tokens": u.input_uncached, "cache_creation_input_tokens": u.cache_write,
            "cache_read_input_tokens": u.cache_read, "output_tokens": u.output,
            "cache_creation": {"ephemeral_5m_input_tokens": u.cache_write_5m,
                               "ephemeral_1h_input_tokens": u.cache_write_1h}}
