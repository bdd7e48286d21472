"""keep_recent: a complete small context strategy, the example of docs/writing-a-strategy.md.

What it does, as a real agent would:

* a tool-results message keeps at most ``max_result_chars`` characters of results; longer results
  are cut (irreversibly: this is truncation, not spilling — nothing is kept on disk);
* when its own estimate of the request passes ``budget_share`` of the window, it drops the oldest
  messages down to ``target_share``, at a boundary that never splits a tool_use from its
  tool_result, leaves a one-line notice in their place, and declares the rewrite
  (``self.rewrote = True``) so the cache break is a known cost, not a bug;
* two cache breakpoints: the system prompt and the last message, whose prefix stays byte-stable
  between cuts;
* after a crash, a resumed session first answers the calls left open (N-TRANS-5, the base's
  ``on_session_start``), or the next request would be a 400: all of them, or the ones still open
  beside the results that came back before the crash;
* when the API still refuses a request as too long (its own estimate was low: text that takes more
  tokens per character than it assumes), it cuts again at once, counting at the API's figure, and
  has the call sent again; with nothing left to cut it gives up.

Run the property suite on it: ``ctxsim check-strategy keep_recent:KeepRecent`` (with docs/examples
on PYTHONPATH).
"""

from __future__ import annotations

from ctxsim.harness.model.conversation import Breakpoint, History, Message, Request, Usage
from ctxsim.strategies.base import CallInfo, Rejection, Strategy, StrategyConfig
from pydantic import Field

NOTICE = "[{n} earlier messages were dropped to stay within the context window.]"


class KeepRecentConfig(StrategyConfig):
    budget_share: float = Field(0.6, gt=0.0, le=0.95,
                                description="cut when the estimated request passes this share of the window")
    target_share: float = Field(0.35, gt=0.0, le=0.9, description="cut down to this share of the window")
    max_result_chars: int = Field(20_000, ge=100, le=10_000_000,
                                  description="characters of tool results one message keeps (the rest is cut)")
    chars_per_token: float = Field(2.5, gt=0.5, le=10.0,
                                   description="characters per estimated token (low: estimate high, stay safe)")


def truncate(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, saying how many were cut."""
    if len(text) <= limit:
        return text
    keep = max(0, limit - len(f"\n[... {len(text):,} characters truncated]"))  # room for the longest note
    return text[:keep] + f"\n[... {len(text) - keep:,} characters truncated]"


def cut_points(messages) -> list[int]:
    """Indices where history may start without splitting a pair: an assistant message (its tool
    uses are answered by the message after it) or a user message that answers nothing."""
    return [i for i, m in enumerate(messages) if i > 0 and (m.role == "assistant" or not m.has_tool_result)]


class KeepRecent(Strategy):
    name = "keep_recent"
    summary = "truncate big tool results, drop the oldest messages at pair-safe points (docs example)"
    Config = KeepRecentConfig
    manages_window = True
    on_rejection = ("prompt too long: cut at once to the target share, counted at the API's figure, and send "
                    "again; nothing left to cut: the turn errors (the guide's example)")

    # --- events ---------------------------------------------------------------------------------
    def on_tool_results(self, message: Message) -> None:
        limit = self.config.max_result_chars // max(1, len(message.blocks))
        blocks = tuple(b.with_text(truncate(b.text, limit)) if len(b.text) > limit else b for b in message.blocks)
        self.history = self.history.append(Message("user", blocks, message.meta))

    def on_response(self, message: Message, usage: Usage | None) -> None:
        self.history = self.history.append(message)

    # --- the model call ---------------------------------------------------------------------------
    def tokens(self, messages) -> int:
        chars = sum(m.chars + 40 for m in messages)  # ~40 characters of framing per message
        return int(chars / self.config.chars_per_token)

    def fixed_tokens(self) -> int:
        env = self.env
        chars = len(env.system.text) + sum(len(t.payload) for t in env.tools.tools)
        return int(chars / self.config.chars_per_token) + env.system.opaque_tokens

    def estimate(self) -> int:
        return self.fixed_tokens() + self.tokens(self.history)

    def build_request(self, call: CallInfo) -> Request:
        window = self.env.window
        if self.estimate() > self.config.budget_share * window:
            self.cut(int(self.config.target_share * window) - self.fixed_tokens())
        h = self.history
        bps = (Breakpoint("system"), Breakpoint(len(h) - 1)) if len(h) else (Breakpoint("system"),)
        return Request(self.env.system, self.env.tools, h, bps,
                       kind="subagent" if self.in_isolated_subtask else "main",
                       estimated_tokens=self.estimate(), rewrite=self._take_rewrite())

    def cut(self, target: int) -> None:
        """Drop the oldest messages: the first pair-safe start whose rest fits ``target``, else the
        last one (keep as little as possible)."""
        msgs = list(self.history)
        points = cut_points(msgs)
        if not points:
            return
        start = next((i for i in points if self.tokens(msgs[i:]) <= target), points[-1])
        notice = Message.user(NOTICE.format(n=start), origin="notice")
        self.history = History([notice, *msgs[start:]])
        self.rewrote = True

    def on_rejected(self, rejection: Rejection, call: CallInfo) -> bool:
        """Too long after all: the API counted ``rejection.tokens`` where the estimate said less, so
        cut to the target share scaled by that ratio; retry only if something was cut."""
        if "overflow" not in rejection.reasons:
            return False
        ratio = rejection.tokens / max(1, self.estimate())
        kept = sum(1 for m in self.history if m.meta.get("origin") != "notice")
        self.cut(int(self.config.target_share * self.env.window / max(1.0, ratio)) - self.fixed_tokens())
        return sum(1 for m in self.history if m.meta.get("origin") != "notice") < kept
