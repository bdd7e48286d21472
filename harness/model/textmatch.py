"""Which of many needles occur in a text, in one pass over the text.

``needle in text`` for every needle costs O(len(text) x needles): on a session whose planted facts
grow with its length, checking each new block against every fact makes doubling a session cost 4x.
A :class:`Matcher` compiles the needles into an Aho-Corasick automaton (pyahocorasick, in C), so a
search runs over the text once, whatever the number of needles. The answer is exactly
``{k for k, s in needles.items() if s in text}``: the automaton reports every occurrence of every
needle, overlapping and nested ones included.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

import ahocorasick


class Matcher:
    """``present(text)``: the keys of the needles that occur in ``text`` (frozenset)."""

    __slots__ = ("_auto", "_n", "_always", "_no_newline")

    def __init__(self, needles: Mapping[str, str]) -> None:
        by_text: dict[str, list[str]] = {}
        for key, s in needles.items():
            by_text.setdefault(s, []).append(key)
        self._always = frozenset(k for k in by_text.pop("", ()))  # "" is in every text
        self._n = len(by_text)
        self._auto = None
        if by_text:
            auto = ahocorasick.Automaton()
            for w, keys in by_text.items():
                auto.add_word(w, (w, frozenset(keys)))
            auto.make_automaton()
            self._auto = auto
        # no needle spans a line break: a message's needles are those of its blocks
        self._no_newline = not any("\n" in w for w in by_text)

    def present(self, text: str) -> frozenset[str]:
        auto = self._auto
        if auto is None or not text:
            return self._always
        seen: dict[str, frozenset[str]] = {}
        for _end, (w, keys) in auto.iter(text):
            if w not in seen:
                seen[w] = keys
                if len(seen) == self._n:   # every needle found: the rest of the text cannot add one
                    break
        if not seen:
            return self._always
        return self._always.union(*seen.values())

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
        found = [got for got in map(self.in_block, m.blocks) if got]
        if not found:
            return self._always
        if len(found) == 1 and not self._always:
            return found[0]
        return self._always.union(*found)   # one union (a union a block cost a message of many blocks O(blocks x facts))


@lru_cache(maxsize=16)
def _cached(items: tuple[tuple[str, str], ...]) -> Matcher:
    return Matcher(dict(items))


def matcher(needles: Mapping[str, str]) -> Matcher:
    """A Matcher for ``needles``, shared by every run over the same set (a sweep worker compiles
    each trace's facts once)."""
    return _cached(tuple(sorted(needles.items())))
