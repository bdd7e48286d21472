"""Token accounting without re-counting (N-COMP-5): a real-usage anchor plus a character estimate.

After each assistant message enters history the strategy records the usage the server returned
for that call as the anchor: ``input_total + output`` is the size of the context through that
assistant message, as the API measured it. Messages added after the anchor are estimated at
``chars_per_token`` (3.5 by the seed). Usage = anchor + estimate(new messages). Nobody re-counts
the whole history each turn: the estimate touches only the messages since the anchor.

With no anchor (before the first answer, after a compaction cleared it, N-COMP-12, or in a new
launch) the whole request is estimated from characters. The engine compares every estimate with the
true count, so the error of this rule is a measured figure (``estimator`` in the metrics).

Beyond the seed, calibrated unanchored estimates (``calibrate``, on by default). The seed's premise
is that only the messages since the anchor are estimated, so 3.5 chars/token errs on a turn's worth
of text, well inside the 3,000-token hard margin (N-COMP-3). An unanchored estimate errs on the whole
context: on real Claude Code traffic the recorded tokens are 2.3–3.0 characters each (peers.md,
"Tokens per character"), so 3.5 runs 14–34% low there, and a session of crash-and-resume launches
(every resume clears the anchor) sent 32,109 tokens into a 32,000 window. So every real usage also
measures this conversation's characters per token (the anchored request's characters over its
tokens), and an unanchored estimate uses that figure when it is lower than the seed's: never below
the seed's estimate, and as close to the API's count as the conversation's own history allows. The
figure survives a compaction (same process) and a resume (it is read back from the transcript's last
record carrying a usage, strategy.py); a conversation never measured uses the seed's 3.5.

Beyond the seed too, calibrated budgets (``budget_cpt``, NovaCode's ``calibrate_budgets``, on by
default): the seed sizes the restore attachment and the verbatim tail in estimated tokens at 3.5
characters each, and so does the summary request it fits. On a step of dense output (a test log in
Chinese, a dump of escapes; real tool output runs ~2.7 characters per recorded token) those budgets
hold two to four times the tokens they were meant to, the forced compaction cannot shrink the
request, and the session ends (issue #29). Each count the API gives also measures the *newest*
text: the tokens the request gained since the previous count, over the characters it gained
(``recent_cpt``, when at least :data:`RECENT_MIN_CHARS` were added). The budgets use the lowest of
the seed's figure, the whole conversation's and the newest text's: the tail and the restored files
are the newest text.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from ctxsim.harness.model.conversation import History, Message, SystemPrompt, ToolSet, Usage

CHARS_PER_TOKEN = 3.5  # N-COMP-5: "≈3.5 characters per token"
RECENT_MIN_CHARS = 2_000  # not in the seed: the newest text is measured once this much was added  # assumed
# not in the seed: the lowest characters per token a budget uses. CJK text and escapes run ~1 per
# cl100k token (the kit's dense text: 0.97); a measured figure far below it comes from a usage that
# counts text the strategy never saw (a hidden prefix), not from the conversation's text.  # assumed
MIN_BUDGET_CPT = 0.5


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
    anchored request covered, the assistant answer included; later messages are estimated.
    ``anchor_chars`` is that request's size in characters (kept incrementally: each anchor adds the
    characters of the messages since the previous one), ``observed_cpt`` the characters per token
    the last anchor measured (see the module docstring)."""

    chars_per_token: float = CHARS_PER_TOKEN
    calibrate: bool = True
    anchor: int | None = None
    anchor_len: int = 0
    anchor_chars: int | None = None
    observed_cpt: float | None = None
    recent_cpt: float | None = None  # characters per token of the text added between the last two counts

    def record(self, usage: Usage | None, history_len: int, chars: int | None = None,
               opaque_tokens: int = 0) -> None:
        """The assistant message just entered history (``history_len`` messages now) and the API
        reported ``usage`` for its call; ``chars`` is that request's size in characters with the
        answer (:meth:`request_chars`, taken before this call; None: nothing is measured).
        A rejected call (no usage) keeps the old anchor: the messages since it are still estimated,
        so the figure stays an upper-bound-ish estimate rather than a guess from nothing."""
        if usage is None:
            return
        self.set_anchor(usage.input_total + usage.output, history_len, chars, opaque_tokens)

    def set_anchor(self, tokens: int, history_len: int, chars: int | None = None, opaque_tokens: int = 0) -> None:
        """An API count of a request covering ``history_len`` history messages and ``chars``
        characters (a usage, or the count a prompt-too-long 400 states)."""
        if (chars is not None and self.anchor is not None and self.anchor_chars is not None
                and chars - self.anchor_chars >= RECENT_MIN_CHARS and tokens > self.anchor):
            self.recent_cpt = (chars - self.anchor_chars) / (tokens - self.anchor)
        self.anchor, self.anchor_len, self.anchor_chars = tokens, history_len, chars
        if chars:
            self.measure(tokens, chars, opaque_tokens)

    def measure(self, tokens: int, chars: int, opaque_tokens: int = 0) -> None:
        """A request of ``chars`` characters was ``tokens`` tokens by the API's count (``opaque_tokens``
        of them without text in hand): this conversation's characters per token."""
        if chars > 0 and tokens - opaque_tokens > 0:
            self.observed_cpt = chars / (tokens - opaque_tokens)

    def clear(self) -> None:
        """N-COMP-12: after a compaction the anchor no longer describes the history (the measured
        characters per token still describe the conversation's text)."""
        self.anchor = None
        self.anchor_len = 0
        self.anchor_chars = None

    def unanchored_cpt(self) -> float:
        """Characters per token of an estimate with no anchor: the seed's, or the measured figure
        when calibrating and it is lower (a larger, safer estimate)."""
        if self.calibrate and self.observed_cpt is not None:
            return min(self.chars_per_token, self.observed_cpt)
        return self.chars_per_token

    def budget_cpt(self, calibrated: bool = True) -> float:
        """Characters per token of a budget in tokens (the tail, the restore attachment, the messages
        of a summary request): the seed's figure, or with ``calibrated`` the lowest of it, the
        conversation's measured figure and its newest text's (see the module docstring)."""
        if not calibrated:
            return self.chars_per_token
        return max(min(MIN_BUDGET_CPT, self.chars_per_token),
                   min([self.chars_per_token] + [x for x in (self.observed_cpt, self.recent_cpt) if x]))

    def estimate(self, history: History, *, system: SystemPrompt, tools: ToolSet,
                 prefix: Iterable[Message] = (), extra: Iterable[Message] = (), cpt: float | None = None) -> int:
        """Estimated input tokens of a request made of ``prefix`` (resident messages), ``history``
        and ``extra`` (messages sent but not kept). With an anchor: anchor + new history messages
        + extra at the seed's rate; the system prompt, tools and resident prefix are inside the
        anchor. Without: everything, at :meth:`unanchored_cpt`. ``cpt``: the rate of what is
        estimated, over both (a budget's, :meth:`budget_cpt`)."""
        extra_chars = message_chars(extra)
        if self.anchor is not None and self.anchor_len <= len(history):
            new = history[self.anchor_len:]
            return self.anchor + chars_to_tokens(message_chars(new) + extra_chars, cpt or self.chars_per_token)
        chars = prompt_chars(system, tools) + message_chars(prefix) + message_chars(history) + extra_chars
        return system.opaque_tokens + chars_to_tokens(chars, cpt or self.unanchored_cpt())

    def request_chars(self, history: History, *, system: SystemPrompt, tools: ToolSet,
                      prefix: Iterable[Message] = ()) -> int:
        """Characters of the request made of ``prefix`` and ``history`` (cheap with an anchor)."""
        if self.anchor is not None and self.anchor_chars is not None and self.anchor_len <= len(history):
            return self.anchor_chars + message_chars(history[self.anchor_len:])
        return prompt_chars(system, tools) + message_chars(prefix) + message_chars(history)
