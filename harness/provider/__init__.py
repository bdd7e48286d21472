"""The provider model: true token counts, prompt cache, price and latency of every call.

The engine owns one :class:`Provider` per run; strategies never see it. ``bill`` is what the API
would do with a request: count its tokens, consult and update the cache, and report usage exactly as
the API would (split into uncached input, cache writes 5 m / 1 h, cache reads, output), with its
price and timing.

May import: files, model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxsim.harness.model.conversation import Message, Request, Usage
from ctxsim.harness.provider.cache import AnthropicCache, CacheOutcome, Layout, OpenAICache
from ctxsim.harness.provider.latency import duration_s, ttft_s
from ctxsim.harness.provider.models import DEFAULT_MODEL, ModelSpec, load_table
from ctxsim.harness.provider.routing import ROUTER_PHASES, CacheMissModel, Router, router_phases
from ctxsim.harness.provider.tokenizer import REQUEST_OVERHEAD, Tokenizer, for_provider

__all__ = ["Bill", "CacheMissModel", "Provider", "DEFAULT_MODEL", "ModelSpec", "ROUTER_PHASES", "load_table", "router_phases"]


@dataclass(frozen=True, slots=True)
class Bill:
    usage: Usage
    cost_usd: float
    ttft_s: float
    duration_s: float
    context_tokens: int
    miss_reason: str = ""


def _cache_key(spec: ModelSpec, route: str | None) -> Any:
    """A cache's key among a provider's: the model, and the route where the request names one (Request.route)."""
    return spec.name if route is None else (route, spec.name)


@dataclass(slots=True)
class _Replica:
    """One replica of the provider's nodes: the session's caches and the other node, per model."""
    router: Router
    caches: dict = field(default_factory=dict)
    others: dict = field(default_factory=dict)


class Provider:
    """One model family's API, as seen by one run. ``window`` overrides the model's context window
    (to price a 200k setting of a 1M model, say); ``cache=False`` prices as on a provider without
    prompt caching; ``token_scale`` overrides the model's calibrated scale; ``cache_ttl`` is the
    client's TTL, for breakpoints that set none (default 5 minutes, the API's); ``miss_model`` routes
    a fitted share of requests where the session's entries are absent (harness/provider/routing.py);
    ``uncached_models``: model ids whose requests go by a route without prompt caching (a log's).

    Under a miss model the bill is the expected one: the provider keeps :data:`ROUTER_PHASES` replicas
    of its caches, each routed at one of evenly spaced router phases (the ones the model's share is
    fitted at, harness/fidelity/cache_misses.py), bills each request on every replica and reports the mean
    usage. Where requests stray is the provider's doing, not the strategy's: a single draw put a
    55-call Bedrock replay anywhere from 7% below to 16% above its bill depending on which calls the
    strays hit (codemie 624a4a58, seeds 0-5), and two strategies compared on one trace met different
    draws. ``seed`` no longer moves the bill; it is kept for the callers that pass it."""

    def __init__(self, model: str | None = None, *, window: int | None = None, cache: bool = True,
                 token_scale: float | dict[str, float] | None = None, models_file: str | Path | None = None,
                 tokenizer: Tokenizer | None = None, cache_ttl: str | None = None,
                 miss_model: CacheMissModel | None = None, seed: int = 0,
                 uncached_models: tuple[str, ...] = (), ttl_grace_s: float = 0.0, head_kept_warm: bool = False) -> None:
        self.table = load_table(str(models_file) if models_file else None)
        self.spec = self.table.get(model)
        self.model = model or self.spec.name
        self.window = window or self.spec.window
        self.cache_enabled = cache
        self.uncached_models = frozenset(uncached_models)   # model ids sent on a route without caching
        self.cache_ttl = cache_ttl or "5m"
        self.ttl_grace_s = ttl_grace_s   # cache.LOG_CLOCK_GRACE_S when the clock is a recorded log's
        # a warmed shared head never expires: other sessions keep it (recorded.warm_prefix_kept, fidelity/warm_head.py)
        self.head_kept_warm = head_kept_warm
        # one scale for the run's model, or {model: scale} when a log mixes models (sub-agents, side calls)
        self._scales = dict(token_scale) if isinstance(token_scale, Mapping) else {}
        self.token_scale = (token_scale if isinstance(token_scale, (int, float)) else
                            self._scales.get(self.model, self.spec.token_scale))
        self.tok = tokenizer or for_provider(self.spec.provider)
        self._caches: dict[str, AnthropicCache | OpenAICache] = {}
        self.miss_model = miss_model if cache and miss_model is not None and miss_model.share > 0 else None
        # replicas of the provider's nodes, one per router phase (empty: no miss model, one node)
        self._replicas = ([_Replica(Router(self.miss_model, phases=phase)) for phase in router_phases()]
                          if self.miss_model is not None else [])
        self.routed = 0.0   # requests the miss model sent astray in this run (mean over the replicas)
        # a bound method is a fresh object each time: keep one, it keys the history memo
        self._count_message = self.tok.message

    # --- tokens -------------------------------------------------------------------------------------
    def spec_for(self, model: str | None) -> ModelSpec:
        return self.spec if model is None or model == self.model else self.table.get(model)

    def scale_for(self, model: str | None) -> float:
        if model is None or model == self.model:
            return self.token_scale
        if model in self._scales:
            return self._scales[model]
        return self.token_scale if not self._scales else self.spec_for(model).token_scale

    def _scaled(self, raw: int) -> int:
        return int(round(raw * self.token_scale))

    def message_tokens(self, m: Message) -> int:
        return self._scaled(self.tok.message(m))

    def layout(self, req: Request) -> Layout:
        msgs = req.messages
        count = self._count_message
        scale = self.scale_for(req.model)

        def msg_tokens(i: int) -> int:
            return int(round(msgs.fold_through(i, count, 0, lambda acc, m: acc + count(m)) * scale))

        tools = int(round(self.tok.tools(req.tools) * scale))
        system = int(round(self.tok.system(req.system) * scale)) + req.system.opaque_tokens + REQUEST_OVERHEAD
        return Layout(req, tools, system, msg_tokens)

    def request_tokens(self, req: Request) -> int:
        return self.layout(req).total()

    def output_tokens(self, m: Message) -> int:
        return self._scaled(sum(self.tok.block(b) for b in m.blocks))

    def count_text(self, text: str) -> int:
        return self._scaled(self.tok.count(text))

    def table_count(self, text: str) -> int:
        """The API's count of ``text`` on the run's model as the models table has it (the tokenizer's count ×
        the model's ``token_scale``), never a trace's fitted scale: the same in an import's raw replay and in
        the run it calibrates (what an agent's own count of a file is modelled as: StrategyEnv.count_tokens)."""
        return int(round(self.tok.count(text) * self.spec.token_scale))

    # --- billing ------------------------------------------------------------------------------------
    def _new_cache(self, spec: ModelSpec) -> AnthropicCache | OpenAICache:
        return (AnthropicCache(spec.min_cacheable, self.cache_ttl, grace_s=self.ttl_grace_s) if spec.provider == "anthropic"
                else OpenAICache(spec.min_cacheable, spec.cache_ttl_s))

    def _cache_for(self, spec: ModelSpec, caches: dict[Any, AnthropicCache | OpenAICache] | None = None,
                   route: str | None = None) -> AnthropicCache | OpenAICache:
        """The cache of ``spec``'s model on ``route`` (Request.route; None: the run's one route): a call
        Vertex served reads nothing Anthropic's API cached, and back. Development population: 17 sessions
        switch route between main calls 284 times within the TTL; 246 of those calls read what their own
        route's last call wrote (within 2%), 2 what the previous call (the other route) wrote."""
        caches = self._caches if caches is None else caches
        key = _cache_key(spec, route)
        c = caches.get(key)
        if c is None:
            c = caches[key] = self._new_cache(spec)
        return c

    @property
    def continuing(self) -> float:
        """Requests that continued the previous one on the session's node (what the miss model
        routes), mean over the replicas."""
        return sum(r.router.seen for r in self._replicas) / len(self._replicas) if self._replicas else 0.0

    def _astray(self, spec: ModelSpec, lay: Layout, now: float, fallback: str,
                other: dict[Any, AnthropicCache | OpenAICache]) -> CacheOutcome:
        """The request on another node than the session's (routing.py). ``none``: a node with nothing
        of it (what it writes is not seen again); ``system``: the other node, which holds the system
        prefix (other sessions send it) and what earlier strays of this run wrote there."""
        if fallback == "none":
            node = self._new_cache(spec)
        else:
            slot = _cache_key(spec, lay.req.route)
            node = other.get(slot)
            if node is None:
                node = other[slot] = self._new_cache(spec)
                if isinstance(node, AnthropicCache):
                    # assumed: the other node's read finds any earlier entry of the session it holds (the
                    # codemie logs show strays reading the context of a stray 4 calls and > 20 blocks back)
                    node.lookback = 1 << 30
            key = lay.key(-1)
            if isinstance(node, AnthropicCache):
                if node._live(key, now) is None:
                    node.warm(key, now + 1.0)
            elif node.entries.get(key, -1.0) < now:
                node.entries[key] = now + 1.0
        out = node.process(lay, now)
        return CacheOutcome(out.read, out.write_5m, out.write_1h, "routed")

    def warm_shared_prefix(self, req: Request, expires: float) -> bool:
        """An earlier session cached the shared head of ``req``'s system prompt: it is live until
        ``expires`` (for good where other sessions keep it: ``head_kept_warm``) in the cache of
        ``req``'s model (explicit-breakpoint caches only)."""
        head = self.layout(req).head()
        spec = self.spec_for(req.model)
        caches = ([self._cache_for(spec, r.caches, req.route) for r in self._replicas]
                  or [self._cache_for(spec, route=req.route)])
        if head is None or not self.cache_enabled or not isinstance(caches[0], AnthropicCache):
            return False
        for cache in caches:
            cache.warm(head[0], math.inf if self.head_kept_warm else expires)
        return True

    def bill(self, req: Request, now: float, output_tokens: int, layout: Layout | None = None) -> Bill:
        spec = self.spec_for(req.model)
        lay = layout or self.layout(req)
        total = lay.total()
        if not self.cache_enabled or (req.model is not None and req.model in self.uncached_models):
            outcome = CacheOutcome(miss_reason="disabled")
        elif self._replicas:
            outcome = self._expected(spec, lay, now)
        else:
            outcome = self._cache_for(spec, route=req.route).process(lay, now)
        read, w5, w1 = outcome.read, outcome.write_5m, outcome.write_1h
        usage = Usage(total - read - w5 - w1, w5, w1, read, output_tokens)
        return Bill(usage, self.price(usage, spec), ttft_s(spec, usage), duration_s(spec, usage), total,
                    outcome.miss_reason)

    def _expected(self, spec: ModelSpec, lay: Layout, now: float) -> CacheOutcome:
        """The request on every replica (its own router phase), and the mean of what they read and
        wrote, rounded down (so read + writes never exceed the request). The miss reason is the one
        most replicas met (ties: the first replica's)."""
        n = len(self._replicas)
        read = w5 = w1 = 0
        reasons: dict[str, int] = {}
        for r in self._replicas:
            home = self._cache_for(spec, r.caches, lay.req.route)
            stray = None
            # only a request that continues the previous one on its node (it would read what that one
            # wrote) is routed by the model: what the log's eligible calls are (harness/fidelity/cache_misses.py)
            hit = home.peek(lay, now)
            if hit is not None and hit == home.last_key:
                stray = r.router.next()
            if stray is not None:
                out = self._astray(spec, lay, now, stray, r.others)
                self.routed += 1 / n
            else:
                out = home.process(lay, now)
            read, w5, w1 = read + out.read, w5 + out.write_5m, w1 + out.write_1h
            reasons[out.miss_reason] = reasons.get(out.miss_reason, 0) + 1
        return CacheOutcome(read // n, w5 // n, w1 // n, max(reasons, key=reasons.__getitem__))

    def price(self, usage: Usage, spec: ModelSpec | None = None) -> float:
        spec = spec or self.spec
        r_in, r_w5, r_w1, r_rd, r_out = spec.rates(usage.input_total)
        return (usage.input_uncached * r_in + usage.cache_write_5m * r_w5 + usage.cache_write_1h * r_w1
                + usage.cache_read * r_rd + usage.output * r_out)
