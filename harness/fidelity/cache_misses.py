"""Fit the provider-side miss model (harness/provider/routing.py) on a log's own calls.

Each call of a context thread that could have read its predecessor's whole context — no TTL expiry
in between, same model, no compaction, no ``/mcp`` reconnection, ``/effort`` level or resumed
launch, not a new user turn on a model
whose API drops the previous turn's thinking — is *eligible*. An eligible call whose read falls
short of that context is, walking the thread in order, either

* a **return**: the read reaches the context of the last call that landed on the session's own
  node, which a stray came after (the long entry was there all along: the stray wrote elsewhere); or
* a **stray**: the read fell back to nothing or to a short prefix (the system prompt's).

The model is fitted only when strays recur (at least ``MIN_STRAYS``, and the long prefix is read
again after one of them); a lone fall-back stays "unexplained" and is reported with its cost.
``fallback_none`` = strays that read nothing / strays; ``share`` is fitted so that a shadow replay
of the model on the log's own context sizes reads, over the eligible calls, the tokens the log read
(a stray on a call that misses anyway costs nothing more, so the share is measured where it can be
seen; the raw count strays / eligible is kept beside it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ctxsim.harness.fidelity.recorded import CHANGES_PREFIX, other_cache
from ctxsim.harness.provider.cache import TTL_SECONDS, expired_on_log_clock
from ctxsim.harness.provider.routing import OPENAI_ROUTING_DOC, ROUTER_PHASES, CacheMissModel, Router

MIN_STRAYS = 2          # assumed: one fall-back is an accident, two that recover are a pattern
NOTHING_TOKENS = 256    # a read at most this long is "nothing" (assumed; real reads are 0 or ≥ 1,024)
# whether the API drops the previous turn's thinking for a model (strategies.recorded.strips_previous_thinking)
Strips = Callable[[str | None], bool] | None


MAX_SHARE = 0.5   # strays are the minority: past half, the "other" node is the session's own
SHARE_GRID = (0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, MAX_SHARE)


def first_crossing(read: Callable[[float], float], target: float, iterations: int = 12) -> float:
    """The smallest share at which ``read`` (what the calls read under the model) falls to
    ``target``. ``read`` falls as strays begin and rises again as they grow common (a stray reads
    what the previous stray wrote on the other node, which then holds the session): bisection over
    the whole range found the far side (shares of 0.78-1.0 on sessions whose raw share is 0.03), so
    the first crossing is bracketed on a grid from 0 up, then bisected. 0 when ``read(0)`` is
    already at or under the target; :data:`MAX_SHARE` when nothing up to it gets there."""
    lo = 0.0
    if read(lo) <= target:
        return 0.0
    for hi in SHARE_GRID:
        if read(hi) <= target:
            break
        lo = hi
    else:
        return MAX_SHARE
    for _ in range(iterations):
        mid = (lo + hi) / 2
        if read(mid) > target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def read_tolerance(expected: int) -> float:
    # the same tolerance fidelity.classify_misses uses (MISS_TOLERANCE_*): the last message's
    # framing is not cached, so real full reads are context − 3 … − 14 tokens
    return max(256, 0.01 * expected)


def label_calls(calls: list[Any], strips: Strips = None) -> tuple[dict[int, str], int, dict[str, int], int]:
    """``({call index: "stray" | "return"}, eligible, strays by fallback, recovered)`` over
    ``calls`` (``ctxsim.harness.fidelity.recorded.RecordedCall``); ``strips``: whether a model's API drops the
    previous turn's thinking at a new user turn (a miss there is the client's change)."""
    labels: dict[int, str] = {}
    eligible = recovered = 0
    fell: dict[str, int] = {}
    primary: dict[str, int] = {}     # thread -> context of the last call on the session's own node
    stray_before: dict[str, bool] = {}
    for c in calls:
        prev = calls[c.prev_in_thread] if c.prev_in_thread is not None else None
        if c.usage is None:
            continue
        if prev is None or prev.usage is None or c.after_compact:
            primary[c.thread] = c.cached
            stray_before[c.thread] = False
            continue
        expected = prev.cached   # what the previous call left cached (RecordedCall.cached), not all it sent
        read = c.usage.cache_read
        short = read + read_tolerance(expected) < expected
        explained = _explained(c, prev, strips)
        if explained:
            primary[c.thread] = c.cached
            stray_before[c.thread] = False
            continue
        eligible += 1
        home = primary.get(c.thread, 0)
        if not short:
            recovered += stray_before.get(c.thread, False)
            primary[c.thread] = c.cached
            stray_before[c.thread] = False
        elif stray_before.get(c.thread) and read + read_tolerance(home) >= home:
            labels[c.index] = "return"
            recovered += 1
            primary[c.thread] = c.cached
            stray_before[c.thread] = False
        else:
            labels[c.index] = "stray"
            where = "none" if read <= NOTHING_TOKENS else "system"
            fell[where] = fell.get(where, 0) + 1
            stray_before[c.thread] = True
    return labels, eligible, fell, recovered


def expired_since(prev: Any, c: Any) -> bool:
    """Whether the entry ``prev`` (a recorded call) wrote had run out, on the log's clock, when ``c`` came."""
    return expired_on_log_clock(c.t - prev.t, TTL_SECONDS[prev.usage.written_ttl or "5m"])


def routed(c: Any, prev: Any, strips: Strips) -> bool:
    """Whether recorded call ``c`` is eligible: it could have read ``prev``'s whole context (its
    predecessor in the thread) and the log shows no cause for a miss in between."""
    return (c.usage is not None and prev is not None and prev.usage is not None and not c.after_compact
            and not _explained(c, prev, strips))


@dataclass(frozen=True)
class Stake:
    """A part of a log's eligible calls, on the cost scale: ``stake_usd`` is what they would cost over a
    read if each fell back to nothing (Σ the previous context × the fall-back's premium per token),
    ``lost_usd`` what the log's fall-backs among them cost (Σ the tokens each read short × the same);
    ``lost_usd / stake_usd`` is the part's miss rate at the stakes the calls carried."""

    eligible: int = 0
    fell_back: int = 0     # strays and returns (label_calls)
    stake_usd: float = 0.0
    lost_usd: float = 0.0

    @property
    def rate(self) -> float:
        return self.lost_usd / self.stake_usd if self.stake_usd else 0.0


def stakes(calls: list[Any], strips: Strips, upto: int, premium: Callable[[Any], float],
           labels: dict[int, str]) -> tuple[Stake, Stake]:
    """The eligible calls' :class:`Stake` before ``upto`` (the fit part) and from it on (held out).
    ``premium(c)``: what one token costs call ``c`` over a read when it falls back (a write, or
    uncached input on an automatic cache); ``labels``: :func:`label_calls`' strays and returns. A read
    that fell short counts at what it fell short by."""
    parts = ([0, 0, 0.0, 0.0], [0, 0, 0.0, 0.0])
    for c in calls:
        prev = calls[c.prev_in_thread] if c.prev_in_thread is not None else None
        if not routed(c, prev, strips):
            continue
        part, rate = parts[c.index >= upto], premium(c)
        part[0] += 1
        part[2] += prev.cached * rate
        if c.index in labels:
            part[1] += 1
            part[3] += max(0, prev.cached - c.usage.cache_read) * rate
    fit, held = (Stake(n, k, round(s, 6), round(lost, 6)) for n, k, s, lost in parts)
    return fit, held


def _explained(c: Any, prev: Any, strips: Strips) -> bool:
    return (expired_since(prev, c) or other_cache(c, prev) or c.trigger in CHANGES_PREFIX
            or getattr(c, "thinking_switch", False)
            or (c.new_turn and strips is not None and strips(c.model) and c.after_thinking))


def shadow_read(calls: list[Any], strips: Strips, share: float, fallback_none: float,
                system_prefix: int, phases: int = ROUTER_PHASES) -> float:
    """Tokens the eligible calls read under the model (a routing.Router at each of ``phases``
    evenly spaced phases, the stray and the fall-back draw at the same phase; averaged), on the log's
    own context sizes: a call on the session's node reads the last context written there, a stray
    reads nothing or what the other node holds (the last stray's context of this context thread
    while its TTL lasts and no change came in between, else the system prefix)."""
    model = CacheMissModel(share=share, fallback_none=fallback_none, strays=0, returns=0, eligible=0)
    total = 0.0
    for k in range(phases):
        phase = (k + 0.5) / phases
        router = Router(model, phases=(phase, phase))
        home: dict[str, int] = {}
        other: dict[str, tuple[int, float, float]] = {}   # thread -> (context, written at, TTL s) on the other node
        for c in calls:
            if c.usage is None:
                continue
            prev = calls[c.prev_in_thread] if c.prev_in_thread is not None else None
            if prev is None or prev.usage is None or c.after_compact:
                home[c.thread] = c.cached
                other.pop(c.thread, None)
                continue
            if _explained(c, prev, strips):   # a TTL expiry, another model, a changed prefix: the
                home[c.thread] = c.cached       # other node's entries of this thread no longer match
                other.pop(c.thread, None)
                continue
            # the router draws only for requests that continue the previous one (Provider.bill)
            stray = router.next()
            if stray is None:
                total += min(home.get(c.thread, 0), c.context)
                home[c.thread] = c.cached
            elif stray == "system":
                o = other.get(c.thread)
                live = o is not None and not expired_on_log_clock(c.t - o[1], o[2]) and o[0] <= c.context
                total += min(o[0] if live else system_prefix, c.context)
                ttl = TTL_SECONDS[c.usage.written_ttl or "5m"]
                other[c.thread] = (c.cached, c.t, ttl)
    return total / phases


def fit_miss_model(calls: list[Any], strips: Strips = None, provider: str = "anthropic",
                   system_prefix: int = 0) -> tuple[CacheMissModel | None, dict[int, str]]:
    """The fitted model (None when strays do not recur) and the calls it accounts for. The share
    is the one whose shadow replay (:func:`shadow_read`) reads what the eligible calls read (the
    first crossing: :func:`first_crossing`)."""
    labels, eligible, fell, recovered = label_calls(calls, strips)
    strays = sum(fell.values())
    if strays < MIN_STRAYS or not recovered or not eligible:
        return None, {}
    q_none = fell.get("none", 0) / strays
    target = 0.0
    for c in calls:
        if routed(c, calls[c.prev_in_thread] if c.prev_in_thread is not None else None, strips):
            target += c.usage.cache_read
    share = first_crossing(lambda x: shadow_read(calls, strips, x, q_none, system_prefix), target, iterations=20)
    returns = sum(1 for v in labels.values() if v == "return")
    mech = (OPENAI_ROUTING_DOC if provider == "openai" else
            "reads that fall back and recover with no cause in the log (a request served where the session's "
            "entries are absent); anthropics/claude-code#87966 reports such intermittent fall-backs")
    model = CacheMissModel(
        share=round(share, 6), fallback_none=round(q_none, 6), strays=strays,
        returns=returns, eligible=eligible, fell_back_to={"nothing": fell.get("none", 0), "a short prefix": fell.get("system", 0)},
        source=(f"fitted on the log: {strays} of {eligible} eligible calls fell back ({fell.get('none', 0)} to nothing, "
                f"{fell.get('system', 0)} to a short prefix), {recovered} times the long prefix was read again after; "
                f"{returns} calls read the entry before a stray; share {share:.3f} is the one at which a shadow replay "
                f"on the log's context sizes reads the {target:,.0f} tokens those calls read (raw share "
                f"{strays / eligible:.3f}). Mechanism: {mech}"))
    return model, labels


# Requests that leave their messages uncached (issue 41). In the development population 6 main
# contexts of 2 users (Claude Code 2.0.76, 2.1.49, 2.1.62; all served by a proxy, their ids none of
# Anthropic's API) sent, call after call, the whole conversation as uncached input and read only a
# fixed floor (the system prompt and the first turn's startup content, growing by tens of tokens);
# once it began it held to the end of the log (a stretch of cached calls in one). Reported as a fixed
# cache floor while the uncached input grows, behind a relay and on Anthropic's API, with several
# triggers (anthropics/claude-code#90018, #96101). A cached request leaves only its last message's
# framing uncached (3-14 tokens in the population's logs).
FLOOR_MIN_UNCACHED = 2048   # assumed: uncached input that no cached request leaves (and no write covers)
FLOOR_MIN_CONTEXT = 4096    # assumed: calls this long at least (the largest minimum cacheable prompt, Opus 4.5+)
FLOOR_WINDOW = 6            # assumed: the last calls of the fit part that decide ...
FLOOR_AT_LEAST = 5          # ... when at least this many of them leave their messages uncached


def sent_uncached(usage: Any) -> bool:
    """A call that sent at least :data:`FLOOR_MIN_UNCACHED` tokens as uncached input, more than it
    wrote to the cache, while the cache was in use (it read or wrote): its messages were not cached."""
    writes = usage.cache_write_5m + usage.cache_write_1h
    return usage.input >= FLOOR_MIN_UNCACHED and usage.input > writes and bool(usage.cache_read or writes)


def messages_uncached_from(calls: list[Any], upto: int) -> tuple[int | None, str]:
    """The call (its index) from which the main context's requests left their messages uncached,
    and the evidence, or ``(None, "")``: decided on the calls before ``upto`` (the fit part; the
    rest is held out). At least :data:`FLOOR_AT_LEAST` of the last :data:`FLOOR_WINDOW` main calls
    there (at least :data:`FLOOR_MIN_CONTEXT` tokens, not a thread's first) must be
    :func:`sent_uncached`; the pattern began at the first of the run of such calls that reaches the
    end of the fit part with no two others in a row."""
    main = [c for c in calls[:upto] if c.thread == "main" and c.usage is not None and c.prev_in_thread is not None
            and c.context >= FLOOR_MIN_CONTEXT]
    last = main[-FLOOR_WINDOW:]
    if len(last) < FLOOR_WINDOW or sum(sent_uncached(c.usage) for c in last) < FLOOR_AT_LEAST:
        return None, ""
    onset, others = None, 0
    for c in reversed(main):
        if sent_uncached(c.usage):
            onset, others = c, 0
        else:
            others += 1
            if others == 2:
                break
    run = [c for c in main if c.index >= onset.index]
    reads = sorted(c.usage.cache_read for c in run)
    return onset.index, (
        f"{sum(sent_uncached(c.usage) for c in run)} of the {len(run)} main-context calls from call {onset.index + 1} "
        f"to the end of the fit part (call {upto}) sent at least {FLOOR_MIN_UNCACHED:,} tokens as uncached input and "
        f"wrote less, reading a floor of {reads[0]:,}-{reads[-1]:,} tokens: the client left the messages uncached "
        "(a fixed cache floor: anthropics/claude-code#90018, #96101)")


# assumed (a parameter of :func:`shrunk`): the share fitted on a log's first calls counts as
# ``eligible`` calls' evidence against this many calls of none. Fall-backs come in bursts, so a
# share fitted on the first 30% of a log is a noisy guess at the rest. On the development
# population (issue 41, 169 sessions billed by Anthropic), scored on the held-out 70%: with no
# shrinking 47% of sessions were within 5% of their bill (median |error| 5.6%, p90 18.7%, median
# signed +0.1%); with no miss model at all 53% (4.3%, 18.5%, -2.6%); shrunk at 100, 53% (4.4%,
# 14.5%, -0.9%).
SHARE_PRIOR_CALLS = 100.0
# The routes that measure was made on (Anthropic's API and Vertex, as a Claude Code log's ids show:
# importers.claude_code.route_of). Elsewhere strays are a property of the route (the bundled codemie
# Bedrock sessions fall back on 14 of 55 and 16 of 47 calls, 5 of the first 11 eligible): no prior was
# measured there, and the share fitted on the first calls stands.
SHRUNK_ROUTES = ("anthropic", "vertex")


def shrunk(model: CacheMissModel, prior_calls: float = SHARE_PRIOR_CALLS) -> CacheMissModel:
    """``model`` with its share shrunk towards no strays: × eligible / (eligible + ``prior_calls``)."""
    if not prior_calls or not model.eligible:
        return model
    k = model.eligible / (model.eligible + prior_calls)
    return model.model_copy(update={"share": round(model.share * k, 6), "source": model.source + (
        f"; shrunk towards no strays by {model.eligible} / ({model.eligible} + {prior_calls:g}) = {k:.3f} (a share "
        f"fitted on a log's first calls overstates the rest: SHARE_PRIOR_CALLS): {model.share * k:.4f}")})


def fit_share_on_requests(model: CacheMissModel, requests: list[tuple[Any, float, bool, bool]], target_share: float,
                          provider_factory, iterations: int = 16) -> CacheMissModel:
    """``model`` with its share refitted on the requests a replay of the trace sent (``(request,
    time, counted, warmed)``, in order): the share at which billing them through the provider model (``provider_factory
    (miss_model)``: a fresh provider, as the run builds it, whose bill is the mean over its router
    phases) reads ``target_share`` of the input of the counted ones (those the log billed: the log's
    cache-read share). ``warmed``: the engine found the request's shared head cached by an earlier
    session (the first main call, a span's first call), and so does this billing. The requests of an
    open-loop replay do not depend on what the cache did, so this is the replay's own cache, not a
    stand-in for it."""

    def read(share: float) -> float:
        prov = provider_factory(model.model_copy(update={"share": share}))
        total = inp = 0.0
        for req, now, counted, warmed in requests:
            if warmed:   # what the engine did before billing it
                prov.warm_shared_prefix(req, now)
            u = prov.bill(req, now, 0).usage
            if counted:
                total += u.cache_read
                inp += u.input_total
        return total / inp if inp else 0.0

    # 0 when the replay reads no more than the log with no strays at all
    return model.model_copy(update={"share": round(first_crossing(read, target_share, iterations), 6)})


__all__ = ["expired_since", "read_tolerance", "FLOOR_AT_LEAST", "FLOOR_MIN_UNCACHED", "FLOOR_WINDOW", "MIN_STRAYS", "SHARE_PRIOR_CALLS", "SHRUNK_ROUTES",
           "Stake", "fit_miss_model", "fit_share_on_requests", "label_calls", "routed", "stakes", "messages_uncached_from", "sent_uncached", "shrunk"]
