"""Whether a summary restates a fact in its own words: the recall of the fact's content words.

A model's summary paraphrases. Claude Code's compaction summary restates the user's request under
"Primary Request and Intent" (peers.md, its sections) but rarely verbatim: on the codemie 624a4a58
log the user's first line ("review old and current implementation for claude metrics. there is a
need to make sure that sync logic will work as expected and track all chansges ...") comes back as
"Review existing metrics and conversation sync implementations to ensure incremental tracking
works correctly". A verbatim search scores that goal lost, so the recorded agent looked as if it
forgot its task while a simulated summariser, which copies facts verbatim, kept it: two strategies
scored by two different rules.

:func:`recall` is the share of the fact's content words (lower-cased, at least 4 characters, not a
stop word, light suffix stripping so "tracked"/"tracking" meet "track") that occur in the text.
:func:`restates` adds that every name the fact gives (a path, an issue id) is in the text. The
retention model uses it for the goal inside summaries only (retention.GIST_FACTS), where a
paraphrase is the rule; a file's content or a command's output is re-read, not restated.
"""

from __future__ import annotations

import re
from functools import lru_cache

_WORD = re.compile(r"[a-z0-9][a-z0-9_./-]*[a-z0-9]|[a-z0-9]")
# assumed: function words and the filler of requests ("make sure", "there is a need"), which say
# nothing about which task it is
_STOP = frozenset("""
about above after again also been before being below between both could does doing down during each
from further have having here into itself just more most must need needs only other over same should
some such than that their them then there these they this those through under until very want were
what when where which while will with would your yours make sure please thing things like well
""".split())
_SUFFIXES = ("ations", "ation", "ings", "ing", "edly", "ies", "ied", "ed", "es", "s", "ly")
MIN_WORDS = 4   # assumed: a fact of fewer content words is too short to recognise in other words


def _stem(w: str) -> str:
    for s in _SUFFIXES:
        if len(w) - len(s) >= 4 and w.endswith(s):
            return w[: -len(s)]
    return w


@lru_cache(maxsize=4096)
def content_words(text: str) -> frozenset[str]:
    """The stems of the content words of ``text``. A path, dotted or dashed name counts as a word and
    also by its parts, so ``src/a/ARCH-REFACTOR.md`` meets a summary that names ``ARCH-REFACTOR.md``."""
    out = set()
    for w in _WORD.findall(text.lower()):
        parts = [w, *re.split(r"[/._-]+", w)] if _is_identifier(w) else [w]
        out.update(_stem(p) for p in parts if len(p) >= 4 and p not in _STOP)
    return frozenset(out)


def _is_identifier(w: str) -> bool:
    return any(c in w for c in "/._-") or (any(c.isdigit() for c in w) and any(c.isalpha() for c in w))


@lru_cache(maxsize=4096)
def identifiers(text: str) -> frozenset[str]:
    """The names in ``text`` a paraphrase keeps as they are: paths, dotted, dashed or numbered names
    (``spotter-4te``, ``ARCH-REFACTOR.md``), lower-cased, at least 4 characters."""
    return frozenset(w for w in _WORD.findall(text.lower()) if len(w) >= 4 and _is_identifier(w))


def restates(fact: str, text: str, text_words: frozenset[str], min_recall: float) -> bool:
    """``text`` restates ``fact``: at least ``min_recall`` of its content words (:func:`recall`) and
    every name it gives (:func:`identifiers`): two tasks of one project share their vocabulary (a
    goal of the spotter logs meets 0.71 of its words in the other session's summary) but not the
    name of the issue they work on."""
    if recall(fact, text_words) < min_recall:
        return False
    low = text.lower()
    return all(i in low for i in identifiers(fact))


def recall(fact: str, text_words: frozenset[str]) -> float:
    """Share of ``fact``'s content words among ``text_words`` (:func:`content_words` of the text);
    0 when the fact has fewer than :data:`MIN_WORDS` of them."""
    words = content_words(fact)
    if len(words) < MIN_WORDS:
        return 0.0
    return len(words & text_words) / len(words)


__all__ = ["MIN_WORDS", "content_words", "identifiers", "recall", "restates"]
