"""The conversation a strategy sends: blocks, messages, a persistent history, and requests.

Everything here is immutable by convention and by construction (frozen dataclasses, a persistent
history). That is what makes the replay fast and honest at once:

* a block's digest and its token count are computed once, the first time they are needed, and
  cached on the block object itself, so a block shared by a thousand requests is hashed and
  tokenised once (DESIGN.md: "nothing re-tokenises or re-hashes the whole history on every call");
* a :class:`History` is a persistent vector: appending to the newest version is O(1) and shares
  storage with every earlier version, and it carries, per message, the digest of the whole prefix
  ending there and the running block count. The provider's cache model reads those in O(1) instead
  of re-hashing the prefix on every call;
* a strategy that rewrites history (compaction, masking) builds a new history from the point of the
  change, and the prefix digests after that point change with it: the cache model sees exactly the
  cache break a real API would.

The strategy never sees token counts from here: the true counts live in the provider (engine side).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

BlockType = Literal["text", "thinking", "tool_use", "tool_result"]
Role = Literal["user", "assistant"]
TTL = Literal["5m", "1h"]

_EMPTY: Mapping[str, Any] = MappingProxyType({})
_MISSING = object()


def _h(*parts: bytes) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    for p in parts:
        h.update(len(p).to_bytes(8, "little"))
        h.update(p)
    return h.digest()


@dataclass(frozen=True, slots=True, eq=False)
class Block:
    """One content block, as in the Messages API.

    ``text`` holds the text of a text/thinking block and the content of a tool_result; a tool_use
    carries ``name`` and ``input``. ``id`` is the tool_use id (for a tool_result: the id it
    answers). ``meta`` is for strategies' own bookkeeping (e.g. ``{"spilled": path}``); it is not
    sent, so it is not part of the digest.
    """

    type: BlockType
    text: str = ""
    id: str | None = None
    name: str | None = None
    input: Mapping[str, Any] | None = None
    is_error: bool = False
    meta: Mapping[str, Any] = field(default_factory=lambda: _EMPTY, repr=False)
    # a new cache identity for the same bytes (neither sent nor counted): models a re-send the
    # provider does not match against its cache, as a recorded log can show
    revision: int = field(default=0, kw_only=True)
    # cl100k tokens of text a recorded agent sent in this block that the trace has no text for (a
    # log's hidden content, sized from its usage): counted and cached like text, never read
    opaque_tokens: int = field(default=0, kw_only=True)
    # true tokens per scaled cl100k token of this block's text, as the log measured it (the growth of
    # the recorded context between two calls, harness/fidelity/measured.py); 1.0: the fitted scale alone. Not
    # sent and not part of the digest: the same bytes, counted as the recorded model counted them
    token_factor: float = field(default=1.0, kw_only=True)
    _digest: list = field(default_factory=list, repr=False, compare=False)
    _ntok: list = field(default_factory=list, repr=False, compare=False)
    _facts: list = field(default_factory=list, repr=False, compare=False)  # [matcher, ids] (ctxsim.harness.model.textmatch)
    _payload: list = field(default_factory=list, repr=False, compare=False)  # a tool_use's payload, built once

    # --- constructors -----------------------------------------------------------------------
    @staticmethod
    def text_block(text: str, **meta: Any) -> Block:
        return Block("text", text, meta=meta or _EMPTY)

    @staticmethod
    def tool_use(id: str, name: str, input: Mapping[str, Any], **meta: Any) -> Block:
        return Block("tool_use", id=id, name=name, input=input, meta=meta or _EMPTY)

    @staticmethod
    def tool_result(tool_use_id: str, content: str, is_error: bool = False, **meta: Any) -> Block:
        return Block("tool_result", content, id=tool_use_id, is_error=is_error, meta=meta or _EMPTY)

    def with_text(self, text: str, **meta: Any) -> Block:
        """A copy with new text (how strategies 'edit' a block: they never mutate one)."""
        merged = {**self.meta, **meta}
        return Block(self.type, text, self.id, self.name, self.input, self.is_error, merged)

    def resent(self) -> Block:
        """A copy the cache does not match (``revision`` + 1): the same bytes, tokens and meta, sent
        anew in a form the trace has no bytes for (e.g. a conversation re-serialised on a resume)."""
        return Block(self.type, self.text, self.id, self.name, self.input, self.is_error, self.meta,
                     revision=self.revision + 1, opaque_tokens=self.opaque_tokens, token_factor=self.token_factor)

    # --- what is sent -----------------------------------------------------------------------
    @property
    def payload(self) -> str:
        """The text the model reads for this block (tool_use: its name and canonical JSON input)."""
        if self.type == "tool_use":
            if not self._payload:
                self._payload.append(f"{self.name} " + json.dumps(self.input or {}, sort_keys=True, ensure_ascii=False))
            return self._payload[0]
        return self.text

    @property
    def digest(self) -> bytes:
        if not self._digest:
            self._digest.append(
                _h(self.type.encode(), (self.id or "").encode(), (self.name or "").encode(),
                   b"1" if self.is_error else b"0", self.payload.encode("utf-8", "surrogatepass"),
                   str(self.revision).encode() if self.revision else b"",
                   *((b"opaque:%d" % self.opaque_tokens,) if self.opaque_tokens else ()))
            )
        return self._digest[0]

    def to_api(self) -> dict[str, Any]:
        """This block as a Messages API content block (plain dict)."""
        if self.type == "text":
            return {"type": "text", "text": self.text}
        if self.type == "thinking":
            return {"type": "thinking", "thinking": self.text, "signature": ""}
        if self.type == "tool_use":
            return {"type": "tool_use", "id": self.id, "name": self.name, "input": dict(self.input or {})}
        return {"type": "tool_result", "tool_use_id": self.id, "content": self.text, "is_error": self.is_error}


@dataclass(frozen=True, slots=True, eq=False)
class Message:
    """A message: a role and its blocks. ``meta['origin']`` says where it came from when a
    strategy made it (``summary``, ``restore``, ``injection``, ``placeholder``...)."""

    role: Role
    blocks: tuple[Block, ...]
    meta: Mapping[str, Any] = field(default_factory=lambda: _EMPTY, repr=False)
    _digest: list = field(default_factory=list, repr=False, compare=False)
    _text: list = field(default_factory=list, repr=False, compare=False)  # [text, chars], built once
    _memo: dict = field(default_factory=dict, repr=False, compare=False)  # pure derived values (see memo)

    @staticmethod
    def user(text: str, **meta: Any) -> Message:
        return Message("user", (Block.text_block(text),), meta or _EMPTY)

    def resent(self) -> Message:
        """This message with its first block :meth:`Block.resent`: a new cache identity for it and
        everything after it, the same tokens."""
        return Message(self.role, (self.blocks[0].resent(), *self.blocks[1:]) if self.blocks else (), self.meta)

    @property
    def digest(self) -> bytes:
        if not self._digest:
            self._digest.append(_h(self.role.encode(), *(b.digest for b in self.blocks)))
        return self._digest[0]

    @property
    def text(self) -> str:
        if not self._text:
            self._text.extend(("\n".join(b.payload for b in self.blocks), sum(len(b.payload) for b in self.blocks)))
        return self._text[0]

    @property
    def chars(self) -> int:
        if not self._text:
            self.text  # noqa: B018 (fills the memo)
        return self._text[1]

    def memo(self, key: str, fn) -> Any:
        """``fn(self)``, computed once per message: a strategy's size of a message (its JSON
        length, say) is a pure function of it, and a message is looked at on many calls."""
        got = self._memo.get(key, _MISSING)
        if got is _MISSING:
            got = self._memo[key] = fn(self)
        return got

    def tool_use_ids(self) -> list[str]:
        return [b.id for b in self.blocks if b.type == "tool_use"]  # type: ignore[misc]

    def tool_result_ids(self) -> list[str]:
        return [b.id for b in self.blocks if b.type == "tool_result"]  # type: ignore[misc]

    @property
    def has_tool_result(self) -> bool:
        return any(b.type == "tool_result" for b in self.blocks)

    @property
    def has_tool_use(self) -> bool:
        return any(b.type == "tool_use" for b in self.blocks)

    def to_api(self) -> dict[str, Any]:
        return {"role": self.role, "content": [b.to_api() for b in self.blocks]}

    def api_json_chars(self) -> int:
        """This message's JSON as the Messages API takes it, in characters (not memoised: a caller memoises it under
        a key of its own, so no other code's memo can stand in for it)."""
        return len(json.dumps(self.to_api(), ensure_ascii=False))


class _Store:
    """Backing arrays shared by every version of a history that extends the same prefix."""

    __slots__ = ("msgs", "prefix", "cumblocks", "folds")

    def __init__(self) -> None:
        self.msgs: list[Message] = []
        self.prefix: list[bytes] = []       # digest of messages[0..i]
        self.cumblocks: list[int] = []      # blocks in messages[0..i]
        self.folds: dict[object, list] = {}  # memoised left folds over the messages (engine side)


class History(Sequence[Message]):
    """A persistent vector of messages (structural sharing, like a Go slice).

    ``h.append(m)`` returns a new history; ``h`` is unchanged. Appending to the newest version of
    a store is O(1); appending to an older version copies the references once (a fork).
    """

    __slots__ = ("_s", "_n")

    def __init__(self, msgs: Iterable[Message] = ()) -> None:
        self._s = _Store()
        self._n = 0
        for m in msgs:
            self._push(m)

    # --- construction --------------------------------------------------------------------------
    def _push(self, m: Message) -> None:
        s = self._s
        prev = s.prefix[-1] if s.prefix else b""
        s.msgs.append(m)
        s.prefix.append(_h(prev, m.digest))
        s.cumblocks.append((s.cumblocks[-1] if s.cumblocks else 0) + len(m.blocks))
        self._n += 1

    def _own(self) -> History:
        """A history whose store may be appended to (self if newest, else a fork)."""
        if self._n == len(self._s.msgs):
            h = History.__new__(History)
            h._s, h._n = self._s, self._n
            return h
        h = History.__new__(History)
        s = _Store()
        n = self._n
        s.msgs, s.prefix, s.cumblocks = self._s.msgs[:n], self._s.prefix[:n], self._s.cumblocks[:n]
        s.folds = {k: v[:n] for k, v in self._s.folds.items()}
        h._s, h._n = s, n
        return h

    def append(self, m: Message) -> History:
        h = self._own()
        h._push(m)
        return h

    def extend(self, msgs: Iterable[Message]) -> History:
        h = self._own()
        for m in msgs:
            h._push(m)
        return h

    def truncate(self, n: int) -> History:
        """The first ``n`` messages (shares storage)."""
        n = max(0, min(n, self._n))
        h = History.__new__(History)
        h._s, h._n = self._s, n
        return h

    def replace_from(self, start: int, msgs: Iterable[Message]) -> History:
        """Keep messages[:start], then ``msgs``: a rewrite from ``start`` on."""
        return self.truncate(start).extend(msgs)

    def replace_at(self, i: int, m: Message) -> History:
        """Message ``i`` replaced by ``m``; everything after it re-linked (its prefix changed)."""
        return self.truncate(i).extend([m, *self[i + 1:]])

    def resent(self) -> History:
        """The same messages sent anew (the first one :meth:`Message.resent`): every prefix a new cache
        identity, the same tokens (a conversation re-serialised, as on a resume)."""
        return self.replace_at(0, self[0].resent()) if self._n else self

    # --- sequence protocol ---------------------------------------------------------------------
    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            start, stop, step = i.indices(self._n)   # within this version: no copy of the whole store
            if step == 1:
                return tuple(self._s.msgs[start:stop]) if start < stop else ()
            return tuple(self._s.msgs[j] for j in range(start, stop, step))
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError(i)
        return self._s.msgs[i]

    def __iter__(self) -> Iterator[Message]:
        msgs = self._s.msgs
        for i in range(self._n):
            yield msgs[i]

    def __repr__(self) -> str:
        return f"History({self._n} messages)"

    # --- engine side: O(1) per query once computed ----------------------------------------------
    def prefix_digest(self, i: int) -> bytes:
        """Digest of messages[0..i] inclusive (cache key material)."""
        return self._s.prefix[i]

    def blocks_through(self, i: int) -> int:
        return self._s.cumblocks[i] if i >= 0 else 0

    def text_contains(self, needle: str) -> bool:
        """``needle in "\\n".join(m.text for m in self)``, carried forward in the shared store: the
        answer through each message is kept, so a request that extends an earlier one joins and
        searches its new messages only (with the ``len(needle) - 1`` characters before them, where an
        occurrence across the break before them starts), in C (``str.join``, ``str.find``)."""
        if not needle:
            return True
        n = self._n
        if n == 0:
            return False
        s = self._s
        memo = s.folds.get(("text_contains", needle))
        if memo is None:
            memo = s.folds[("text_contains", needle)] = []
        k = len(memo)
        if k < n:
            if k and memo[-1]:
                memo.extend([True] * (n - k))
            else:
                keep = len(needle) - 1
                before = self._tail(k, keep) + "\n" if k else ""
                texts = [m.text for m in s.msgs[k:n]]
                pos = (before + "\n".join(texts)).find(needle)
                if pos < 0:
                    memo.extend([False] * (n - k))
                else:
                    # the message the occurrence ends in (one ending on a break: the message after it)
                    end, at, acc = pos + keep - len(before), k, 0
                    for t in texts:
                        if end < acc + len(t):
                            break
                        acc += len(t) + 1
                        at += 1
                    memo.extend([False] * (at - k) + [True] * (n - at))
        return memo[n - 1]

    def _tail(self, k: int, keep: int) -> str:
        """The last ``keep`` characters of the joined text of messages[:k]."""
        parts, got, j = [], 0, k - 1
        while j >= 0 and got < keep:
            t = self._s.msgs[j].text
            parts.append(t)
            got += len(t) + (1 if j else 0)
            j -= 1
        if j >= 0:
            parts.append("")   # the line break before the earliest message taken
        return "\n".join(reversed(parts))[-keep:] if keep else ""

    def fold_through(self, i: int, key: object, init: Any, step) -> Any:
        """``step(state, message) -> state`` folded over messages[0..i], memoised per message in
        the shared store under ``key``: each message is folded once per store, however many
        requests share it. ``i < 0`` gives ``init``. ``step`` must be a pure function of its
        arguments (the memo is shared by every version of the history)."""
        if i < 0:
            return init
        s = self._s
        memo = s.folds.get(key)
        if memo is None:
            memo = s.folds[key] = []
        while len(memo) <= i:
            k = len(memo)
            memo.append(step(memo[-1] if memo else init, s.msgs[k]))
        return memo[i]


@dataclass(frozen=True, slots=True)
class ToolDef:
    name: str
    description: str = ""
    input_schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})

    @property
    def payload(self) -> str:
        return json.dumps({"name": self.name, "description": self.description,
                           "input_schema": self.input_schema}, sort_keys=True, ensure_ascii=False)

    def to_api(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": dict(self.input_schema)}


@dataclass(frozen=True, slots=True, eq=False)
class ToolSet:
    """The tools array. Built once per run and shared by every request that sends it."""

    tools: tuple[ToolDef, ...] = ()
    _digest: list = field(default_factory=list, repr=False)
    _ntok: list = field(default_factory=list, repr=False)

    @property
    def digest(self) -> bytes:
        if not self._digest:
            self._digest.append(_h(b"tools", *(t.payload.encode() for t in self.tools)))
        return self._digest[0]

    def __len__(self) -> int:
        return len(self.tools)

    def names(self) -> list[str]:
        return [t.name for t in self.tools]


@dataclass(frozen=True, slots=True, eq=False)
class SystemPrompt:
    """The system blocks. ``opaque_tokens`` stands for prompt text a recorded agent sent that the
    trace has no text for (derived from its first call's usage): billed, cached, never read.

    ``shared_tokens`` (≤ ``opaque_tokens``) is the head of that opaque text which agents cache
    across sessions (Claude Code splits its system prompt into a static part, cached for every
    session, and a per-session part: anthropics/claude-code#32102, #94815, reported): a cache
    position of its own, the one a session's first call reads when an earlier session cached it."""

    blocks: tuple[Block, ...] = ()
    opaque_tokens: int = 0
    shared_tokens: int = 0
    revision: int = 0   # a new cache identity for the same size (the prompt changed in bytes the trace lacks)
    _digest: list = field(default_factory=list, repr=False)

    @staticmethod
    def of(*texts: str, opaque_tokens: int = 0, shared_tokens: int = 0) -> SystemPrompt:
        return SystemPrompt(tuple(Block.text_block(t) for t in texts if t), opaque_tokens,
                            min(shared_tokens, opaque_tokens))

    @property
    def digest(self) -> bytes:
        if not self._digest:
            shared = (b"shared", str(self.shared_tokens).encode()) if self.shared_tokens else ()
            rev = (b"revision", str(self.revision).encode()) if self.revision else ()
            self._digest.append(_h(b"system", str(self.opaque_tokens).encode(), *shared, *rev,
                                   *(b.digest for b in self.blocks)))
        return self._digest[0]

    @property
    def shared_digest(self) -> bytes:
        """The key of the shared head (the same for every system prompt with that head)."""
        return _h(b"system-shared", str(self.shared_tokens).encode())

    @property
    def text(self) -> str:
        return "\n".join(b.text for b in self.blocks)


BreakpointAt = int | Literal["tools", "system"]


@dataclass(frozen=True, slots=True)
class Breakpoint:
    """A ``cache_control`` marker: at the end of the tools array, of the system blocks, or of the
    message with index ``at`` (its last content block). ``ttl`` None: the client's TTL for the
    run (the recorded agent's on an imported trace, else 5 minutes, the API's default)."""

    at: BreakpointAt
    ttl: TTL | None = None


@dataclass(frozen=True, slots=True)
class Request:
    """What a strategy sends for one model call.

    ``estimated_tokens`` is the strategy's own estimate of the request's input size (compared with
    the truth by the engine); ``rewrite`` declares that the strategy rewrote history at this call
    (compaction, clearing), which the property kit uses to tell a declared cache break from a bug.
    """

    system: SystemPrompt
    tools: ToolSet
    messages: History
    breakpoints: tuple[Breakpoint, ...] = ()
    kind: str = "main"
    estimated_tokens: int | None = None
    rewrite: bool = False
    model: str | None = None
    max_output_tokens: int | None = None
    # the request's thinking setting where it is a parameter that matters to the cache (None: not
    # tracked): Anthropic's docs, extended thinking with prompt caching, say a change of it
    # invalidates the messages' cache entries while the system prompt and tools stay cached
    thinking: bool | None = None
    # the request's effort level where the agent set one (None: not tracked): a change of it keys
    # every cache entry anew, tools and system prompt included (measured on Claude Code's /effort,
    # strategies/recorded.py EFFORT_SET)
    effort: str | None = None
    # the route that serves it where a log's calls went by several (trace.ROUTE: "vertex", "anthropic"
    # ...; None: the run's one route): each route has its own cache (Provider keys caches by it)
    route: str | None = None

    def with_messages(self, messages: History, **changes: Any) -> Request:
        from dataclasses import replace

        return replace(self, messages=messages, **changes)


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage as the API reports it, normalised (N-CACHE-5): the four input kinds are
    disjoint and add up to the whole input."""

    input_uncached: int = 0
    cache_write_5m: int = 0
    cache_write_1h: int = 0
    cache_read: int = 0
    output: int = 0

    @property
    def cache_write(self) -> int:
        return self.cache_write_5m + self.cache_write_1h

    @property
    def input_total(self) -> int:
        return self.input_uncached + self.cache_write + self.cache_read

    def __add__(self, o: Usage) -> Usage:
        return Usage(self.input_uncached + o.input_uncached, self.cache_write_5m + o.cache_write_5m,
                     self.cache_write_1h + o.cache_write_1h, self.cache_read + o.cache_read,
                     self.output + o.output)


def merged_turns(messages: Iterable[Message]) -> list[tuple[Role, list[Block]]]:
    """Consecutive messages of one role merged, as the Messages API does before it validates."""
    out: list[tuple[Role, list[Block]]] = []
    for m in messages:
        if out and out[-1][0] == m.role:
            out[-1][1].extend(m.blocks)
        else:
            out.append((m.role, list(m.blocks)))
    return out
