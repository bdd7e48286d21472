"""A strategy never mutates what it is fed (the ``inputs`` invariant; STYLE.md point 5).

What a strategy can reach of the trace is mutable in two places: the ``input`` dict of every
``tool_use`` block (the trace's own dict, shared by every request and by other runs of the same
trace) and the tool schemas of ``env.tools`` (the header's dicts: N-CACHE-2's "shared tool-schema
dicts"). A block's digest and token count are memoised, so an in-place edit is invisible to the
cache model and to a digest comparison; this guard keeps a deep copy of each as it is fed and
compares by value.

The same holds for what the strategy itself sent: a ``tool_use`` block it made (a TodoWrite, a
memory edit) whose ``input`` is a live object of its own (a list it keeps appending to) changes a
request after it was sent, and every later request that holds the block, with no digest seeing it
(:class:`SentGuard`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from typing import Any

from ctxsim.harness.model import trace as tr


def _short(value: Any, n: int = 90) -> str:
    s = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return s if len(s) <= n else s[:n] + "…"


class InputGuard:
    """Deep copies of the mutable parts of a trace, compared with the live objects on demand."""

    def __init__(self, header: tr.Header) -> None:
        self._tools = [(t.name, t.input_schema, copy.deepcopy(t.input_schema)) for t in header.tools]
        self._meta = (header.meta, copy.deepcopy(header.meta))
        self._uses: list[tuple[str, dict, dict]] = []
        self._saved: dict[str, dict] = {}
        self._reported: set[str] = set()

    def add(self, events: Iterable[Any]) -> None:
        for e in events:
            if isinstance(e, tr.AssistantEvent):
                for c in e.content:
                    if isinstance(c, tr.ToolUseContent):
                        saved = copy.deepcopy(c.input)
                        self._uses.append((c.id, c.input, saved))
                        self._saved[c.id] = saved

    def pristine(self, event: Any) -> Any:
        """``event`` as it was fed (a copy with the saved tool inputs where the live ones changed)."""
        if not isinstance(event, tr.AssistantEvent):
            return event
        content = [c.model_copy(update={"input": copy.deepcopy(self._saved[c.id])})
                   if isinstance(c, tr.ToolUseContent) and c.id in self._saved and c.input != self._saved[c.id] else c
                   for c in event.content]
        return event if all(a is b for a, b in zip(content, event.content)) else event.model_copy(update={"content": content})

    def changes(self) -> list[str]:
        """One line per input found changed since it was fed (each reported once)."""
        out = []
        for name, live, saved in self._tools:
            if live != saved and f"tool:{name}" not in self._reported:
                self._reported.add(f"tool:{name}")
                out.append(f"the shared tool schema of {name} was changed in place: {_short(saved)} -> {_short(live)}")
        live, saved = self._meta
        if live != saved and "meta" not in self._reported:
            self._reported.add("meta")
            out.append(f"the trace header's meta was changed in place: {_short(saved)} -> {_short(live)}")
        for uid, live, saved in self._uses:
            if live != saved and uid not in self._reported:
                self._reported.add(uid)
                out.append(f"the trace's tool_use {uid} input was changed in place: {_short(saved)} -> {_short(live)}")
        return out


class SentGuard:
    """Deep copies of the ``input`` of every ``tool_use`` block a strategy sends (its own, not the
    trace's: :class:`InputGuard` keeps those), taken when first sent and compared on demand."""

    def __init__(self) -> None:
        self._seen: dict[int, Any] = {}   # id -> the block (held, so an id is never reused while watched)
        self._uses: list[tuple[str, Any, Any]] = []
        self._reported: set[str] = set()

    def sent(self, request: Any, trace_ids: Iterable[str] | set[str] = ()) -> None:
        for m in request.messages:
            for b in m.blocks:
                if b.type != "tool_use" or b.input is None or id(b) in self._seen:
                    continue
                self._seen[id(b)] = b
                if b.id not in trace_ids:
                    self._uses.append((str(b.id), b.input, copy.deepcopy(b.input)))

    def changes(self) -> list[str]:
        out = []
        for uid, live, saved in self._uses:
            if live != saved and uid not in self._reported:
                self._reported.add(uid)
                out.append(f"the tool_use {uid} the strategy sent was changed in place afterwards (its input shares "
                           f"an object the strategy kept changing): {_short(saved)} -> {_short(live)}")
        return out
