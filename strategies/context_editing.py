"""context_editing: Anthropic's server-side tool-result clearing, ``clear_tool_uses_20250919``.

Source: Anthropic documentation, "Context editing" (docs.claude.com/en/docs/build-with-claude/
context-editing, beta header ``context-management-2025-06-27``, read 2025-10) and the SDK types
(``BetaClearToolUses20250919Edit``):

* ``trigger``: input tokens (default 100,000) at which clearing activates;
* ``keep``: tool uses kept (default 3, the most recent); the oldest results go first;
* ``clear_at_least``: minimum input tokens to clear when it activates (default none) — the docs'
  answer to the cache: "clearing invalidates the cached prompt prefix... you incur cache write
  costs each time content is cleared, but subsequent requests can reuse the newly cached prefix";
* ``exclude_tools``: tool names never cleared; ``clear_tool_inputs``: also clear the tool_use
  inputs (default false). A cleared result is replaced by a placeholder.

The edit runs on the server, before the model reads the prompt; the client keeps its full history.
Our reading of how it behaves between requests (the docs do not spell it out): once a result is
cleared it stays cleared (that is what lets "subsequent requests reuse the newly cached prefix"),
and the trigger is checked against the prompt as the server would send it to the model, so
clearing comes in episodes: the prompt grows back to the trigger, then the next episode clears
everything but the last ``keep`` tool uses. With ``clear_at_least`` an episode that would free less
than that is skipped (no cache break for a small gain). The strategy stands for the server, but a
strategy never sees true token counts, so the input figure is the usual estimate: the last reported
input plus 4 characters per token for what came after.

Each episode rewrites old messages, so the request declares a rewrite and the cache model bills the
re-write of everything after the first cleared result (visible as cache writes). An episode counts
as a compaction in the metrics (``compactions.succeeded``); a skipped one (``clear_at_least``) does
not.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from harness.conversation import Block, Message
from strategies.base import CallInfo
from strategies.templates import PeerConfig, ThresholdCompactor

TRIGGER_INPUT_TOKENS = 100_000  # docs: trigger default {type: input_tokens, value: 100000}
KEEP_TOOL_USES = 3  # docs: keep default {type: tool_uses, value: 3}
PLACEHOLDER = "[cleared]"  # the docs say "placeholder text" without giving it; LangChain's ClearToolUsesEdit uses "[cleared]"


class ContextEditingConfig(PeerConfig):
    trigger_input_tokens: int = Field(TRIGGER_INPUT_TOKENS, ge=1, le=10_000_000,
                                      description="clear when the prompt's input tokens exceed this")
    keep_tool_uses: int = Field(KEEP_TOOL_USES, ge=0, le=100_000, description="most recent tool uses kept")
    clear_at_least: int | None = Field(None, ge=0, le=10_000_000, description="skip an episode that would "
                                       "clear fewer input tokens than this (docs example: 5,000); None: no minimum")
    exclude_tools: tuple[str, ...] = Field((), description="tool names whose results are never cleared")
    clear_tool_inputs: bool = Field(False, description="also clear the inputs of cleared tool uses")
    placeholder: str = Field(PLACEHOLDER, min_length=1, max_length=1000, description="text of a cleared result")

    @field_validator("exclude_tools", mode="before")
    @classmethod
    def _names(cls, v):
        """``--set exclude_tools=Read,Grep`` gives a string: a comma-separated list of names."""
        return tuple(x.strip() for x in v.split(",") if x.strip()) if isinstance(v, str) else v


class ContextEditing(ThresholdCompactor):
    name = "context_editing"
    summary = "Anthropic clear_tool_uses_20250919: over 100k input, clear all but the last 3 tool results"
    Config = ContextEditingConfig

    @staticmethod
    def check_params(window: int) -> dict:
        """For the property kit's small windows: the trigger at the same share of a 200k window."""
        return {"trigger_input_tokens": max(1, TRIGGER_INPUT_TOKENS * window // 200_000)}

    def should_compact(self, call: CallInfo) -> bool:
        return (self.estimate() or 0) > self.config.trigger_input_tokens

    def _candidates(self) -> list[tuple[int, int, str]]:
        """(message, block, tool_use id) of every clearable, not yet cleared result, oldest first:
        all tool uses but the last ``keep``, minus excluded tools."""
        h = self.history
        uses: list[tuple[str, str]] = []  # (id, tool name) in order
        for m in h:
            if m.role == "assistant":
                uses += [(b.id or "", b.name or "") for b in m.blocks if b.type == "tool_use"]
        keep = self.config.keep_tool_uses
        old = uses[:-keep] if keep else uses
        excluded = set(self.config.exclude_tools)
        clearable = {i for i, name in old if name not in excluded}
        out = []
        for mi, m in enumerate(h):
            if m.role != "user":
                continue
            for bi, b in enumerate(m.blocks):
                if b.type == "tool_result" and b.id in clearable and not b.meta.get("cleared"):
                    out.append((mi, bi, b.id or ""))
        return out

    def compact(self, call: CallInfo) -> bool | None:
        c = self.config
        cands = self._candidates()
        freed_chars = sum(len(self.history[mi].blocks[bi].text) - len(c.placeholder) for mi, bi, _ in cands)
        ids = {tid for _, _, tid in cands}
        if c.clear_tool_inputs:
            for m in self.history:
                if m.role == "assistant":
                    freed_chars += sum(len(b.payload) - len(f"{b.name} {{}}") for b in m.blocks
                                       if b.type == "tool_use" and b.id in ids and not b.meta.get("cleared"))
        freed = int(freed_chars / c.chars_per_token)
        if not cands or freed <= 0 or (c.clear_at_least is not None and freed < c.clear_at_least):
            self.counters.extra["clear_skipped"] += 1
            return None
        h = self.history
        by_msg: dict[int, list[int]] = {}
        for mi, bi, _ in cands:
            by_msg.setdefault(mi, []).append(bi)
        if c.clear_tool_inputs:
            for mi, m in enumerate(h):
                if m.role == "assistant" and any(b.type == "tool_use" and b.id in ids for b in m.blocks):
                    by_msg.setdefault(mi, [])
        for mi in sorted(by_msg):
            m = h[mi]
            blocks = list(m.blocks)
            for bi in by_msg[mi]:
                b = blocks[bi]
                blocks[bi] = Block.tool_result(b.id or "", c.placeholder, b.is_error, cleared=True)
            if m.role == "assistant":
                blocks = [Block("tool_use", id=b.id, name=b.name, input={}, meta={"cleared": True})
                          if b.type == "tool_use" and b.id in ids else b for b in blocks]
            h = h.replace_at(mi, Message(m.role, tuple(blocks), m.meta))
        est = self.estimate()
        known = self.anchor.anchor is not None and est is not None
        self.set_history(h, estimate=est - freed if known else None)
        self.counters.extra["cleared_tool_results"] += len(cands)
        self.counters.extra["cleared_input_tokens_est"] += freed
        return True
