"""Issue #45, eighth round: what a compaction keeps besides its summary. Blind sets 19, 21 and 22, written apart,
each changed the verbatim tail a compaction keeps and nothing the kit held: cline's preserved tokens summed in
the characters of each message's JSON (about a third of the tail kept, blind set 21), its cut clamped past the
latest typed prompt (``max`` for ``min``: the prompt in hand summarised away, blind set 19), gemini-cli's split
point given the preserved fraction where it takes the compressed one (seven tenths kept, blind set 19). Each
strategy now declares its tail (``compaction_tail``), held by ``kept_tail``; each mutant beside its correct twin,
the registered base. NovaCode's tail sized at the seed's rate where it takes the calibrated one (blind set 22)
declares the same way and is still not seen: on the kit's text (2.9 characters a token) the cap it overruns by
3.5 / 2.9 is within the quarter a tail sized at an estimate is given."""

from __future__ import annotations

from contextlib import contextmanager

from ctxsim.strategies import cline as cl
from ctxsim.strategies import gemini_cli as gc
from ctxsim.strategies.cline import Cline
from ctxsim.strategies.gemini_cli import GeminiCli


@contextmanager
def _swapped(module, name: str, replacement):
    """``module.name`` is ``replacement(original)`` while the block runs (the mutant's one changed call)."""
    original = getattr(module, name)
    setattr(module, name, replacement(original))
    try:
        yield
    finally:
        setattr(module, name, original)


class ClineKeepsInCharacters(Cline):
    """The preserved tokens compared with each message's JSON characters: a third of the tail kept."""

    name = "cline_keeps_in_characters"

    def compact(self, call):
        with _swapped(cl, "safe_cut", lambda cut: lambda messages, preserve, cpt: cut(messages, preserve, 1.0)):
            return super().compact(call)


def _cut_past_prompt(messages, preserve_tokens, cpt):
    """``safe_cut`` with ``max`` where it clamps to the latest typed prompt."""
    total, cut = 0, len(messages)
    for i in range(len(messages) - 1, -1, -1):
        total += cl.chars_to_tokens(cl.message_json_chars(messages[i]), cpt)
        cut = i
        if total >= preserve_tokens:
            break
    if cut <= 0:
        return 0
    last_turn = max((i for i, m in enumerate(messages) if cl.is_plain_user(m)), default=0)
    if last_turn > 0:
        cut = max(cut, last_turn)
    while cut > 0 and not (messages[cut].role == "assistant" or cl.is_plain_user(messages[cut])):
        cut -= 1
    return cut


class ClineCutPastPrompt(Cline):
    """The cut clamped forward to the latest typed prompt: the tail shorter than preserved."""

    name = "cline_cut_past_prompt"

    def compact(self, call):
        with _swapped(cl, "safe_cut", lambda cut: _cut_past_prompt):
            return super().compact(call)


class GeminiPreservedFractionAsSplit(GeminiCli):
    """The split point given the preserved fraction (0.3), not the compressed one: seven tenths kept."""

    name = "gemini_preserved_fraction_as_split"

    def compact(self, call):
        with _swapped(gc, "compress_split_point", lambda split: lambda messages, fraction: split(messages, 1 - fraction)):
            return super().compact(call)
