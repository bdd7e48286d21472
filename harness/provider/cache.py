"""Prompt-cache models: Anthropic's explicit breakpoints and OpenAI's automatic prefix cache.

Both work on a request's *prefix positions*: the end of the tools array, the end of the system
blocks, and the end of every message. Each position has a key (the digest of everything up to it,
in the API's order tools → system → messages, so a change invalidates that level and all after
it), a true token count and a block count. The history precomputes prefix digests, so a lookup
costs O(blocks looked back), never O(history).

Anthropic (docs "Prompt caching"; peers.md):
* at most 4 breakpoints (a 5th is a 400: ctxsim.harness.provider.protocol);
* a write happens only at a breakpoint and covers everything up to and including that block;
* a read looks for the longest prefix with a live entry at each breakpoint's own block and the
  :data:`LOOKBACK_BLOCKS` block positions before it (the docs: "up to 20 blocks before your explicit
  breakpoint"), so a write further back of the only breakpoint is not found. ctxsim counts the blocks its
  requests hold, not the API's: replayed at 20, the development population's calls that added 21 to 24 blocks
  fell back where the logs read the whole previous context; at 24 the replay is nearest the bills (the sweep
  at LOOKBACK_BLOCKS). Past about 25 blocks the logs fall back too (an earlier count: 22 to 30 added blocks,
  9 of 9);
* entries live 5 minutes or 1 hour and the TTL is refreshed, at no cost, on every hit; a breakpoint
  with no TTL of its own takes the client's (``default_ttl``: the recorded agent's, else 5 minutes);
* a system prompt's shared head (``SystemPrompt.shared_tokens``: the static part agents cache for
  every session, and sub-agents of one kind share) is a position of its own between the tools and
  the end of the system blocks: an earlier session wrote it (:meth:`AnthropicCache.warm`), or a
  write in this run that covers it writes it too (no token more), and a read finds it;
* below the model's minimum cacheable length nothing is written and both counters are 0.

OpenAI (platform.openai.com/docs/guides/prompt-caching; peers.md): automatic for prompts of at least
1,024 tokens; hits in 128-token increments (1,024 + 128k); cached tokens are part of
``prompt_tokens``; entries idle out after ``cache_ttl_s``. Matching is modelled at message
granularity (the longest previously sent message prefix), then floored to the 128-token grid.
"""

from __future__ import annotations

from dataclasses import dataclass

from ctxsim.harness.model.conversation import Request

# A read checks the block positions before each breakpoint, up to a limit. Anthropic's docs say 20 blocks; ctxsim
# counts blocks as its requests hold them (each reminder the importer puts back a message of its own, thinking
# included), not as the API does, and the logs read further back. Fitted on the development population (issue 41,
# 2026-12, `ctxsim fidelity` of its 169 sessions billed by Anthropic at each limit): 20: 64 / 81 / 89% within
# 2 / 5 / 10%, median 1.24%; 22: 65 / 82 / 91%, 1.22%; 24: 66 / 82 / 92%, 1.22%; 26: 67 / 83 / 91%, 1.15%;
# unlimited: 64 / 82 / 91%, 1.32% (signed -0.11%: past reads found that the logs did not). At 24, 9 sessions
# move, all nearer their bill (8 on Sonnet 4.5, many tool calls at once: +11.4% -> +4.9%, +13.3% -> +9.6%). Checked
# on an outside sample it was not fitted on (65 sessions): 85% -> 89% within 5%. A parameter of AnthropicCache.
LOOKBACK_BLOCKS = 24
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}  # Anthropic docs: ephemeral cache TTLs
# How long past its TTL an entry is still read, as a recorded log's clock (the client's record of each
# answer) sees it. Measured on the development population (issue 41, 2026-12, Anthropic-billed calls whose
# previous call of the same context wrote 5-minute entries): 300-310 s after it, 9 of 9 calls read the
# whole previous context; 310-315 s, 4 of 6; 315 s or more, 0 of 15 (up to 360 s), and about 5% beyond
# (fall-backs aside): 30 calls at 300-360 s in 20 sessions, Claude Code 1.0.80-2.1.14, 4 models, but only
# 2 users' repositories. The record of an answer is written as it ends, and the next request leaves after it:
# the server's 5 minutes run between the two. Replays of a recorded log use it; a synthetic clock is the
# server's own (0).
LOG_CLOCK_GRACE_S = 12.0


def expired_on_log_clock(gap_s: float, ttl_s: float) -> bool:
    """An entry written ``gap_s`` before, with a TTL of ``ttl_s``, is gone as a recorded log's clock sees it."""
    return gap_s > ttl_s + LOG_CLOCK_GRACE_S
OPENAI_MIN_TOKENS = 1024  # OpenAI docs: caching starts at 1,024 prompt tokens
OPENAI_STEP = 128  # OpenAI docs: cache hits in 128-token increments


@dataclass(frozen=True, slots=True)
class CacheOutcome:
    read: int = 0
    write_5m: int = 0
    write_1h: int = 0
    miss_reason: str = ""  # "", "cold", "ttl", "prefix_change", "below_minimum", "disabled"


class Layout:
    """Prefix positions of one request. Position ``-2`` is the end of tools, ``-1`` the end of the
    system blocks, ``i >= 0`` the end of message i. Lazily evaluated: only positions a lookup
    touches are computed."""

    __slots__ = ("req", "tok_tools", "tok_system", "msg_tokens", "n_tools", "n_system", "_tk", "_ts")

    def __init__(self, req: Request, tok_tools: int, tok_system: int, msg_tokens) -> None:
        self.req = req
        self.tok_tools, self.tok_system = tok_tools, tok_system
        self.msg_tokens = msg_tokens  # i -> true tokens of messages[0..i]
        self.n_tools = len(req.tools)
        self.n_system = len(req.system.blocks) + (1 if req.system.opaque_tokens else 0)
        # an effort level keys every entry from the tools on (Request.effort)
        self._tk = req.tools.digest if req.effort is None else (req.tools.digest, req.effort)
        self._ts = req.system.digest

    @property
    def last(self) -> int:
        return len(self.req.messages) - 1

    def head(self) -> tuple[tuple, int] | None:
        """(key, tokens) of the system prompt's shared head, if it has one."""
        shared = self.req.system.shared_tokens
        return ((self._tk, self.req.system.shared_digest), self.tok_tools + shared) if shared else None

    def key(self, pos: int) -> tuple:
        if pos == -2:
            return (self._tk,)
        if pos == -1:
            return (self._tk, self._ts)
        if self.req.thinking is not None:   # the thinking setting keys the messages' entries (Request.thinking)
            return (self._tk, self._ts, self.req.thinking, self.req.messages.prefix_digest(pos))
        return (self._tk, self._ts, self.req.messages.prefix_digest(pos))

    def tokens(self, pos: int) -> int:
        if pos == -2:
            return self.tok_tools
        base = self.tok_tools + self.tok_system
        return base if pos == -1 else base + self.msg_tokens(pos)

    def blocks(self, pos: int) -> int:
        if pos == -2:
            return self.n_tools
        base = self.n_tools + self.n_system
        return base if pos == -1 else base + self.req.messages.blocks_through(pos)

    def resolve(self, at) -> int:
        return -2 if at == "tools" else -1 if at == "system" else int(at)

    def total(self) -> int:
        return self.tokens(self.last) if self.last >= 0 else self.tokens(-1)


class _Entry:
    __slots__ = ("expires", "ttl")

    def __init__(self, expires: float, ttl: float) -> None:
        self.expires, self.ttl = expires, ttl


class AnthropicCache:
    """Explicit-breakpoint cache of one model."""

    def __init__(self, min_cacheable: int, default_ttl: str = "5m", lookback: int = LOOKBACK_BLOCKS,
                 grace_s: float = 0.0) -> None:
        self.min_cacheable = min_cacheable
        self.default_ttl = default_ttl
        self.grace_s = grace_s   # read past its TTL by this much (LOG_CLOCK_GRACE_S on a log's clock)
        self.lookback = lookback
        self.entries: dict[tuple, _Entry] = {}
        self.last_key: tuple | None = None   # the longest position the last request processed covered
        self._expired_seen: set[tuple] = set()
        self._ops = 0

    def _live(self, key: tuple, now: float) -> _Entry | None:
        e = self.entries.get(key)
        if e is None:
            return None
        if not self._unexpired(e, now):
            self._expired_seen.add(key)
            del self.entries[key]
            return None
        return e

    def warm(self, key: tuple, expires: float, ttl: str | None = None) -> None:
        """An entry an earlier session wrote (e.g. a system prompt's shared head), live until ``expires``."""
        self.entries[key] = _Entry(expires, TTL_SECONDS[ttl or self.default_ttl])

    def process(self, lay: Layout, now: float) -> CacheOutcome:
        default = self.default_ttl
        bps = sorted(((lay.resolve(b.at), TTL_SECONDS[b.ttl or default]) for b in lay.req.breakpoints),
                     key=lambda x: x[0])
        if not bps:
            return CacheOutcome(miss_reason="no_breakpoints")
        if lay.total() < self.min_cacheable:
            return CacheOutcome(miss_reason="below_minimum")
        self._maybe_prune(now)
        hit, hit_tokens, expired_near = self._lookup(lay, bps, now)
        if hit is not None:
            e = self.entries[hit]
            e.expires = max(e.expires, now + e.ttl)  # TTL refreshed on every hit, at no cost
        return self._write(lay, bps, now, hit, hit_tokens, expired_near)

    def peek(self, lay: Layout, now: float) -> tuple | None:
        """The key a read of ``lay`` would hit now, nothing changed (routing.py asks it)."""
        bps = sorted((lay.resolve(b.at), 0.0) for b in lay.req.breakpoints)
        if not bps or lay.total() < self.min_cacheable:
            return None
        return self._lookup(lay, bps, now)[0]

    def _lookup(self, lay: Layout, bps, now: float) -> tuple[tuple | None, int, bool]:
        # read: the longest live entry within the lookback window of any breakpoint
        hit, hit_tokens = None, 0
        expired_near = False
        for pos, _ttl in bps:
            floor_blocks = lay.blocks(pos) - self.lookback - 1   # the breakpoint's block and `lookback` before it
            p = pos
            while p >= -2 and lay.blocks(p) > floor_blocks:
                t = lay.tokens(p)
                if t <= hit_tokens:
                    break
                key = lay.key(p)
                e = self._live(key, now)
                if e is not None:
                    hit, hit_tokens = key, t
                    break
                if key in self._expired_seen:
                    expired_near = True
                if p == -1 and (head := lay.head()) is not None and head[1] > hit_tokens:
                    if self._live(head[0], now) is not None:
                        hit, hit_tokens = head
                        break
                p -= 1
        return hit, hit_tokens, expired_near

    def _write(self, lay: Layout, bps, now: float, hit, hit_tokens: int, expired_near: bool) -> CacheOutcome:
        # writes: at every breakpoint beyond what was read, if long enough
        w5 = w1 = 0
        covered = hit_tokens
        for pos, ttl in bps:
            t = lay.tokens(pos)
            key = lay.key(pos)
            e = self.entries.get(key)
            if e is not None and self._unexpired(e, now):
                e.expires = max(e.expires, now + ttl)
                e.ttl = max(e.ttl, ttl)
            if t <= covered or t < self.min_cacheable:
                continue
            if ttl >= TTL_SECONDS["1h"]:
                w1 += t - covered
            else:
                w5 += t - covered
            head = lay.head() if pos >= -1 else None
            if head is not None and covered < head[1] <= t and head[1] >= self.min_cacheable:
                # the shared head is part of what this write covers: its own entry too (the static part
                # of the prompt has its own breakpoint in the agent's request), no extra token billed
                self.entries[head[0]] = _Entry(now + ttl, ttl)
            covered = t
            self.entries[key] = _Entry(now + ttl, ttl)
            self._expired_seen.discard(key)
        self.last_key = lay.key(bps[-1][0])   # what the next request continuing this one reads
        reason = ""
        if hit is None:
            reason = "ttl" if expired_near else ("cold" if not self.entries or (w5 + w1) else "prefix_change")
        elif w5 + w1:
            reason = "partial"
        return CacheOutcome(hit_tokens, w5, w1, reason)

    def _unexpired(self, e: _Entry, now: float) -> bool:
        return e.expires + self.grace_s >= now

    def _maybe_prune(self, now: float) -> None:
        self._ops += 1
        if self._ops % 512 == 0:
            dead = [k for k, e in self.entries.items() if not self._unexpired(e, now)]
            for k in dead:
                del self.entries[k]
                self._expired_seen.add(k)
            if len(self._expired_seen) > 100_000:
                self._expired_seen.clear()


class OpenAICache:
    """Automatic prefix cache of one model (no write premium, 128-token steps)."""

    def __init__(self, min_cacheable: int = OPENAI_MIN_TOKENS, ttl_s: float = 300.0) -> None:
        self.min_cacheable = max(min_cacheable, OPENAI_MIN_TOKENS)
        self.ttl_s = ttl_s
        self.entries: dict[tuple, float] = {}
        self.last_key: tuple | None = None
        self._ops = 0

    def peek(self, lay: Layout, now: float) -> tuple | None:
        p = lay.last
        while p >= -2:
            key = lay.key(p)
            exp = self.entries.get(key)
            if exp is not None and exp >= now:
                return key
            p -= 1
        return None

    def process(self, lay: Layout, now: float) -> CacheOutcome:
        total = lay.total()
        self._ops += 1
        if self._ops % 512 == 0:
            for k in [k for k, exp in self.entries.items() if exp < now]:
                del self.entries[k]
        hit_pos = None
        p = lay.last
        while p >= -2:
            exp = self.entries.get(lay.key(p))
            if exp is not None and exp >= now:
                hit_pos = p
                break
            p -= 1
        cached = 0
        if hit_pos is not None:
            cached = openai_steps(lay.tokens(hit_pos), self.min_cacheable)
            self.entries[lay.key(hit_pos)] = now + self.ttl_s
        if total >= self.min_cacheable:
            # the prompt's prefixes become cacheable; record the positions this request added
            start = (hit_pos if hit_pos is not None else -3) + 1
            for q in range(max(start, -2), lay.last + 1):
                self.entries[lay.key(q)] = now + self.ttl_s
            self.last_key = lay.key(lay.last)
        return CacheOutcome(read=cached, miss_reason="" if cached else "cold")


def openai_steps(tokens: int, minimum: int = OPENAI_MIN_TOKENS) -> int:
    """Cached tokens OpenAI reports for a matching prefix of ``tokens`` tokens."""
    if tokens < minimum:
        return 0
    return minimum + ((tokens - minimum) // OPENAI_STEP) * OPENAI_STEP
