"""Cache misses that recur: requests the provider routes where the session's long cache entry is absent.

A prompt cache is not one store. OpenAI's docs ("Prompt caching", developers.openai.com/api/docs/
guides/prompt-caching, read 2026-12): requests are routed to a machine by a hash of the prompt's
first ~256 tokens; when one prefix (and ``prompt_cache_key``) exceeds about 15 requests a minute,
some overflow to additional machines, which do not hold the cache. Real logs show the same on
Anthropic deployments (the codemie Bedrock sessions here: 14 and 16 of 55 and 47 calls read only
the ~20–23k-token system prefix or nothing, and the next call reads the full long prefix again: the
entry was not evicted, the request went where it was not cached).

The model (fitted per trace at import, ``ctxsim.harness.fidelity.cache_misses.fit_miss_model``, stored with its counts
in ``header.recorded.cache_miss_model``): of the requests that continue the previous one on the
session's node (they would read what it wrote: what the log's eligible calls are; a request after
a TTL expiry, a prefix change or on another model misses or not whatever the router does), a share
``share`` lands on a node that holds
not the session's own. There the read falls back to nothing (``fallback_none`` of them: a node with
none of it) or to what the other node holds (the rest): the system prefix (it serves other
sessions with the same system prompt) and what earlier strays of the session wrote there, so a
read can stop at an earlier call's context, as the logs show. What a stray writes stays on that
node: the next request on the session's own node reads the entry before it. Which requests stray is
systematic sampling with a phase (``Router``): a replay of n such requests has round(n·share) strays,
spread evenly. The provider bills each request on replicas at evenly spaced phases and reports the
mean (``Provider``, ``ROUTER_PHASES``): the expected bill, so two strategies on one trace meet the
same provider and no run depends on one draw of where the strays fell.
"""

from __future__ import annotations

import math

from ctxsim.harness.model.trace import (
    CacheMissModel,  # the fitted model is part of a trace's recorded setting
)

OPENAI_ROUTING_DOC = ("developers.openai.com/api/docs/guides/prompt-caching (read 2026-12): routing by a hash of "
                      "the first ~256 prompt tokens; above ~15 requests/min per prefix some overflow to other machines")


ROUTER_PHASES = 8   # replicas the provider's expected bill averages over, the phases the share is fitted at


def router_phases(n: int = ROUTER_PHASES) -> list[tuple[float, float]]:
    """``n`` evenly spaced router phases (stray, fallback): the first stratified, the second a golden-
    ratio sequence so the two do not move in lock-step."""
    return [((k + 0.5) / n, (k * 0.618034 + 0.5) % 1.0) for k in range(n)]


class Router:
    """Which requests stray (systematic sampling at ``model.share``, seeded phase) and what the
    stray ones fall back to (the same at ``fallback_none``)."""

    def __init__(self, model: CacheMissModel, seed: int = 0, phases: tuple[float, float] | None = None) -> None:
        import numpy as np  # here, not at import: `ctxsim validate` reads traces that name this model

        self.model = model
        self._phase, self._phase_fb = (phases if phases is not None else
                                       np.random.default_rng(np.random.SeedSequence([seed, 0x5EED_CAC4])).random(2))
        self._n = 0
        self._k = 0

    @property
    def seen(self) -> int:
        """Requests routed so far (those that continued the previous one on the session's node)."""
        return self._n

    def next(self) -> str | None:
        """None (the session's node), or the fallback of a stray request: ``"none"`` or ``"system"``."""
        p = self.model.share
        n, self._n = self._n, self._n + 1
        if math.floor(self._phase + (n + 1) * p) == math.floor(self._phase + n * p):
            return None
        q = self.model.fallback_none
        k, self._k = self._k, self._k + 1
        return "none" if math.floor(self._phase_fb + (k + 1) * q) > math.floor(self._phase_fb + k * q) else "system"


__all__ = ["CacheMissModel", "OPENAI_ROUTING_DOC", "ROUTER_PHASES", "Router", "router_phases"]
