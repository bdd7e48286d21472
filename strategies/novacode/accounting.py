"""Token accounting without re-counting (N-COMP-5): a real-usage anchor plus a character estimate.

After each assistant message enters history the strategy records the usage the server returned
for that call as the anchor: ``input_total + output`` is the size of the context through that
assistant message, as the API measured it. Messages added after the anchor are estimated at
``chars_per_token`` (3.5 by the seed). Usage = anchor + estimate(new messages). Nobody re-counts
the whole history each turn: the estimate touches only the messages since the anchor.

With no anchor (before the first answer, or after a compaction cleared it, N-COMP-12) the whole
request is estimated from characters. The engine compares every estimate with the true count, so
the error of this rule is a measured figure (``estimator`` in the metrics).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from harness.conversation import History, Message, SystemPrompt, ToolSet, Usage

CHARS_PER_TOKEN = 3.5  # N-COMP-5: "≈3.5 characters per token"


def chars_to_tokens(chars: int, chars_per_token: float = CHARS_PER_TOKEN) -> int:
    """Characters to estimated tokens (rounded up: a non-empty text is never 0 tokens)."""
    if chars_per_token <= 0:
        raise ValueError(f"chars_per_token must be > 0, got {chars_per_token}")
    return math.ceil(chars / chars_per_token)


def message_chars(messages: Iterable[Message]) -> int:
    return sum(m.chars for m in messages)


def message_tokens(m: Message, chars_per_token: float = CHARS_PER_TOKEN) -> int:
    return chars_to_tokens(m.chars, chars_per_token)


def prompt_chars(system: SystemPrompt, tools: ToolSet) -> int:
    return sum(len(b.payload) for b in system.blocks) + sum(len(t.payload) for t in tools.tools)


@dataclass
class TokenLedger:
    """The anchor and where it was taken. ``anchor_len`` is the number of history messages the
    anchored request covered, the assistant answer included; later messages are estimated."""

    chars_per_token: float = CHARS_PER_TOKEN
    anchor: int | None = None
    anchor_len: int = 0

    def record(self, usage: Usage | None, history_len: int) -> None:
        """The assistant message just entered history (``history_len`` messages now) and the API
        reported ``usage`` for its call. A rejected call (no usage) keeps the old anchor: the
        messages since it are still estimated, so the figure stays an upper-bound-ish estimate
        rather than a guess from nothing."""
        if usage is None:
            return
        self.anchor = usage.input_total + usage.output
        self.anchor_len = history_len

    def clear(self) -> None:
        """N-COMP-12: after a compaction the anchor no longer describes the history."""
        self.anchor = None
        self.anchor_len = 0

    def estimate(self, history: History, *, system: SystemPrompt, tools: ToolSet,
                 prefix: Iterable[Message] = (), extra: Iterable[Message] = ()) -> int:
        """Estimated input tokens of a request made of ``prefix`` (resident messages), ``history``
        and ``extra`` (messages sent but not kept). With an anchor: anchor + new history messages
        + extra; the system prompt, tools and resident prefix are inside the anchor."""
        cpt = self.chars_per_token
        extra_chars = message_chars(extra)
        if self.anchor is not None and self.anchor_len <= len(history):
            new = history[self.anchor_len:]
            return self.anchor + chars_to_tokens(message_chars(new) + extra_chars, cpt)
        chars = prompt_chars(system, tools) + message_chars(prefix) + message_chars(history) + extra_chars
        return system.opaque_tokens + chars_to_tokens(chars, cpt)
