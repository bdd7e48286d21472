"""Which of many needles occur in a text, in one pass over the text.

``needle in text`` for every needle costs O(len(text) x needles): on a session whose planted facts
grow with its length, checking each new block against every fact makes doubling a session cost 4x.
A :class:`Matcher` compiles the needles into one regular expression shaped as their trie, so a
search runs at C speed over the text once, whatever the number of needles. The answer is exactly
``{k for k, s in needles.items() if s in text}``: at each position the trie finds the longest needle
that starts there, and every needle that is a prefix of it starts there too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache


def _pattern(words: Iterable[str]) -> str:
    trie: dict = {}
    for w in words:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict) -> str:
        # a chain of single children is one literal run (no recursion per character)
        out = []
        while "" not in node and len(node) == 1:
            (ch, node), = node.items()
            out.append(re.escape(ch))
        if not node:
            return "".join(out)
        alts = [re.escape(ch) + emit(sub) for ch, sub in sorted(node.items()) if ch]
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        # greedy: the longer needle first, this one if nothing longer matches
        return "".join(out) + (f"(?:{body})?" if "" in node and alts else body if alts else "")

    return emit(trie)


class Matcher:
    """``present(text)``: the keys of the needles that occur in ``text`` (frozenset)."""

    __slots__ = ("_rx", "_closure", "_always", "_no_newline")

    def __init__(self, needles: Mapping[str, str]) -> None:
        by_text: dict[str, list[str]] = {}
        for key, s in needles.items():
            by_text.setdefault(s, []).append(key)
        self._always = frozenset(k for k in by_text.pop("", ()))  # "" is in every text
        words = sorted(by_text)
        # every needle that is a prefix of ``w`` (w included): what a match of ``w`` implies
        lengths = sorted({len(w) for w in words})
        self._closure = {w: frozenset(k for n in lengths if n <= len(w) for k in by_text.get(w[:n], ()))
                         | self._always for w in words}
        self._rx = re.compile(_pattern(words)) if words else None
        # no needle spans a line break: a message's needles are those of its blocks
        self._no_newline = not any("\n" in w for w in words)

    def present(self, text: str) -> frozenset[str]:
        rx = self._rx
        if rx is None:
            return self._always
        m = rx.search(text)
        if m is None:
            return self._always
        found = set(self._always)
        closure = self._closure
        while m is not None:
            found |= closure[m.group()]
            m = rx.search(text, m.start() + 1)
        return frozenset(found)


    def in_block(self, b) -> frozenset[str]:
        """``present(b.payload)``, kept on the block (immutable): a block shared by many requests,
        runs or models is searched once per matcher."""
        c = b._facts
        if c and c[0] is self:
            return c[1]
        got = self.present(b.payload)
        c[:] = [self, got]
        return got

    def in_message(self, m) -> frozenset[str]:
        """``present(m.text)`` (its blocks' payloads joined by line breaks), from its blocks'."""
        if not self._no_newline:
            return self.present(m.text)
        out = self._always
        for b in m.blocks:
            got = self.in_block(b)
            if got:
                out = out | got
        return out


@lru_cache(maxsize=16)
def _cached(items: tuple[tuple[str, str], ...]) -> Matcher:
    return Matcher(dict(items))


def matcher(needles: Mapping[str, str]) -> Matcher:
    """A Matcher for ``needles``, shared by every run over the same set (a sweep worker compiles
    each trace's facts once)."""
    return _cached(tuple(sorted(needles.items())))
