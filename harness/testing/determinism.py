"""Same inputs twice, same requests byte for byte (the ``deterministic`` invariant).

A run must be a pure function of (trace, strategy config, provider config, seed) (DESIGN.md): a
strategy that names files with ``uuid4``, draws from the global ``random``, reads the wall clock or
keys anything on ``id()`` gives other requests, so other numbers, on every run. The property kit
replays each generated session twice, in two run directories, and compares what was sent, request
by request, in the API's form (:meth:`Block.to_api` and friends: by value, never by a memoised
digest). The two run directories have names of the same length, and the second's is read as the
first's, so paths to the strategy's own files compare equal.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ctxsim.harness.model.conversation import Message, Request


class Canon:
    """Requests in canonical API form, one string per message (cached per message object: the
    messages of a history are shared by every request that sends them)."""

    def __init__(self, own_dir: str = "", as_dir: str = "") -> None:
        self.own_dir, self.as_dir = own_dir, as_dir
        self._msgs: dict[int, tuple[Message, str]] = {}

    def _s(self, value: Any) -> str:
        s = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
        return s.replace(self.own_dir, self.as_dir) if self.own_dir and self.own_dir != self.as_dir else s

    def message(self, m: Message) -> str:
        hit = self._msgs.get(id(m))
        if hit is not None and hit[0] is m:
            return hit[1]
        s = self._s(m.to_api())
        self._msgs[id(m)] = (m, s)
        return s

    def head(self, req: Request) -> str:
        """Everything but the messages."""
        return self._s({
            "system": [b.to_api() for b in req.system.blocks], "opaque_system_tokens": req.system.opaque_tokens,
            "tools": [t.to_api() for t in req.tools.tools],
            "breakpoints": [[b.at, b.ttl] for b in req.breakpoints], "kind": req.kind, "rewrite": req.rewrite,
            "estimated_tokens": req.estimated_tokens, "model": req.model, "max_output_tokens": req.max_output_tokens,
        })


def _short(s: str, n: int = 70) -> str:
    return s if len(s) <= n else s[:n] + f"…({len(s):,} chars)"


def _first_diff(a: str, b: str) -> str:
    k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    lo = max(0, k - 25)
    return f"{_short(a[lo:])!r} vs {_short(b[lo:])!r}"


def request_difference(a: Request, b: Request, ca: Canon, cb: Canon) -> str:
    """How ``b`` (the second run's request) differs from ``a``, or ``""``."""
    if a.kind != b.kind:
        return f"the first run sent a {a.kind} request here, the second a {b.kind} request"
    ha, hb = ca.head(a), cb.head(b)
    if ha != hb:
        return f"the request's system, tools or settings differ: {_first_diff(ha, hb)}"
    if len(a.messages) != len(b.messages):
        return f"{len(a.messages)} messages in the first run, {len(b.messages)} in the second"
    for i, (ma, mb) in enumerate(zip(a.messages, b.messages)):
        if ma is mb:
            continue
        sa, sb = ca.message(ma), cb.message(mb)
        if sa != sb:
            return f"message {i} ({ma.role}) differs: {_first_diff(sa, sb)}"
    return ""


def first_difference(a: Sequence[Any], b: Sequence[Any], ca: Canon, cb: Canon) -> tuple[Any, str] | None:
    """Two runs of one session compared, their requests in order (entries with a ``request``): the first entry of
    ``a`` whose request ``b``'s differs from, and what is said of it; where one run sent more, ``a``'s last entry (None:
    it sent none) and the counts; None where the two are alike."""
    for x, y in zip(a, b):
        diff = request_difference(x.request, y.request, ca, cb)
        if diff:
            return x, f"the same session replayed again sent another request: {diff}"
    if len(a) != len(b):
        return (a[-1] if a else None), f"the same session replayed again sent {len(b)} requests where the first run " \
                                       f"sent {len(a)}"
    return None
