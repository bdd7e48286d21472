"""context_editing: Anthropic's server-side tool-result clearing, ``clear_tool_uses_20250919``.

Source: Anthropic documentation, "Context editing" (platform.claude.com/docs/en/build-with-claude/
context-editing, beta header ``context-management-2025-06-27``, read 2026-12) and the SDK types
(``BetaClearToolUses20250919Edit``, ``…EditResponse``: ``cleared_tool_uses``, ``cleared_input_tokens``):

* ``trigger``: input tokens (default 100,000) past which clearing activates;
* ``keep``: tool uses kept (default 3, the most recent); the oldest results go first;
* ``clear_at_least``: minimum input tokens an activation must clear, else it is not applied
  (default none; the docs' answer to "is clearing worth breaking the cache");
* ``exclude_tools``: tool names never cleared; ``clear_tool_inputs``: also clear the tool_use
  inputs (default false). A cleared result is replaced by a placeholder.

**How it runs (the default, ``mode="per_request"``: what the docs state).** "Context editing is
applied server-side before the prompt reaches Claude. Your client application maintains the full,
unmodified conversation history." So the client keeps and sends its whole history on every call and
the server edits each request it receives on its own: once the *full* prompt is past the trigger,
every request goes out with all but the newest ``keep`` tool results cleared. Each such request
declares a rewrite and counts as a compaction; the strategy stands for the server, which measures the
full prompt, here estimated the usual way (the last reported input, plus what this request clears
again, plus 4 characters per token for what came since).

**What a clear costs in the cache, worked through** :mod:`ctxsim.harness.provider.cache` (tests:
``test_a_clear_rewrites_everything_after_the_first_message_…``). Entries are written only at
breakpoints, here the system block and each request's last message, and a read finds the longest live
entry within 20 blocks of a breakpoint. When a request clears one more result (the oldest of the
``keep`` kept before), the messages before that result are byte-identical to the previous request's,
but no entry ends there: every earlier last-message entry holds either that result, whole, or the
results its own request kept whole and that are cleared now. So the read falls back to the system
block (or the first user message, written before any result), and everything after it is written
again: **a clear invalidates the whole prompt after the system, not only what follows the newly
cleared block** (that would need an entry ending just before it, which no breakpoint writes). A
client that knows the rule can write that entry: ``boundary_breakpoint=True`` (assumed, not in the
docs) also marks the message before the oldest result still sent whole, and keeps the previous
request's mark, so a clear reads through the old boundary and re-writes only what follows it.

**clear_at_least, as the page reads.** Its section "Context editing and prompt caching" says:
"Context editing invalidates cached prompt prefixes because clearing content modifies the prompt
structure, breaking the match requirement for cache hits. To account for this, we recommend clearing
enough tokens to make the cache invalidation worthwhile. Use the ``clear_at_least`` parameter to ensure
a minimum number of tokens is cleared each time. When using prompt caching with context editing,
you'll incur cache write costs each time content is cleared, but subsequent requests can reuse the
newly cached prefix." (and the option table: "If the API can't clear at least the specified amount,
the strategy will not be applied"). The page thus supports clearing in *steps*: a request clears more
only when what it would newly clear frees at least ``clear_at_least`` tokens, else it goes out with
the cleared set of the request before, whose prefix is then read whole ("subsequent requests can reuse
the newly cached prefix" is only true then; were the minimum checked once, against the full history,
it would hold back only the first clearing and could never make an invalidation "worthwhile"). That is
``clear_at_least_scope="each"`` (the default); ``"first"`` keeps this module's reading before 2026-12.
With no ``clear_at_least`` (the docs' default) every request past the trigger with a new tool use
clears one more result and re-writes the prompt after the system: what the page warns of.

**The older reading (``mode="episodic"``, this module's default before 2026-12).** Cleared results
stay cleared in the history the client sends and the trigger is checked on the prompt as cleared, so
clearing comes in episodes: the prompt grows back to the trigger, then one episode clears everything
but the newest ``keep``. It reads the docs' "subsequent requests can reuse the newly cached prefix"
as a promise of stable cleared prefixes between episodes, which with the full history sent only
``clear_at_least`` steps give (above); kept so earlier numbers can be reproduced.

Figures (2026-12, ``ctxsim run`` on the imported spotter session 258c7280, claude-opus-4-6, 200k):
per_request with the docs' defaults $43.60, cache hit rate 0.575; ``clear_at_least=5000`` (the docs'
example) $10.79, 0.945; ``boundary_breakpoint=true`` $9.45, 0.956; episodic $9.92, 0.970. On
``ctxsim synth long-200k --seed 1`` (claude-sonnet-4-6, 200k window): $309.08 / 0.136, $59.97 / 0.912,
$39.01 / 0.974.

A rejected request: context editing is an API feature with no client behind it; a bare client's
turn errors on the 400 (no recovery is documented).
"""

from __future__ import annotations

from typing import Literal

from ctxsim.harness.model.conversation import Block, Breakpoint, History, Message, Request
from ctxsim.strategies.base import CallInfo, Rejection
from ctxsim.strategies.templates import PeerConfig, ThresholdCompactor
from pydantic import Field, field_validator

TRIGGER_INPUT_TOKENS = 100_000  # docs: trigger default {type: input_tokens, value: 100000}
KEEP_TOOL_USES = 3  # docs: keep default {type: tool_uses, value: 3}
PLACEHOLDER = "[cleared]"  # the docs say "placeholder text" without giving it; LangChain's ClearToolUsesEdit uses "[cleared]"


class ContextEditingConfig(PeerConfig):
    mode: Literal["per_request", "episodic"] = Field(
        "per_request", description="per_request: the server clears each request of the full history the "
        "client sends (the docs); episodic: cleared results stay cleared and the trigger sees the cleared "
        "prompt (this module's reading before 2026-12)")
    trigger_input_tokens: int = Field(TRIGGER_INPUT_TOKENS, ge=1, le=10_000_000,
                                      description="clear when the prompt's input tokens exceed this")
    keep_tool_uses: int = Field(KEEP_TOOL_USES, ge=0, le=100_000, description="most recent tool uses kept")
    clear_at_least: int | None = Field(None, ge=0, le=10_000_000, description="do not apply a clearing that "
                                       "would clear fewer input tokens than this (docs example: 5,000); None: no minimum")
    clear_at_least_scope: Literal["each", "first"] = Field(
        "each", description="per_request: each: every clearing must free clear_at_least tokens more than the "
        "previous request cleared, else the request keeps the previous cleared set (the docs: 'each time'); "
        "first: only the first activation is held to it (this module's reading before 2026-12)")
    exclude_tools: tuple[str, ...] = Field((), description="tool names whose results are never cleared")
    clear_tool_inputs: bool = Field(False, description="also clear the inputs of cleared tool uses")
    placeholder: str = Field(PLACEHOLDER, min_length=1, max_length=1000, description="text of a cleared result")
    boundary_breakpoint: bool = Field(False, description="per_request: the client also marks the message before "
                                      "the oldest result still sent whole (where the next clear will start), and "
                                      "keeps the previous request's mark, so a clear re-writes only what follows "
                                      "the newly cleared block (assumed client behaviour, not in the docs; off: "
                                      "the markers every Anthropic client places, system and last message)")

    @field_validator("exclude_tools", mode="before")
    @classmethod
    def _names(cls, v):
        """``--set exclude_tools=Read,Grep`` gives a string: a comma-separated list of names."""
        return tuple(x.strip() for x in v.split(",") if x.strip()) if isinstance(v, str) else v


def clearable_ids(messages, keep: int, excluded: set[str]) -> list[str]:
    """Tool use ids whose results the edit clears, oldest first: all but the newest ``keep`` tool
    uses, minus excluded tools."""
    uses = [(b.id or "", b.name or "") for m in messages if m.role == "assistant" for b in m.blocks
            if b.type == "tool_use"]
    old = uses[:-keep] if keep else uses
    return [i for i, name in old if name not in excluded]


class ContextEditing(ThresholdCompactor):
    name = "context_editing"
    summary = "Anthropic clear_tool_uses_20250919: past 100k input, each request cleared to the last 3 tool results"
    on_rejection = "none: the API's 400 ends the bare client's turn (context editing is an API feature; no recovery documented)"
    Config = ContextEditingConfig

    @staticmethod
    def check_params(window: int) -> dict:
        """For the property kit's small windows: the trigger at the same share of a 200k window."""
        return {"trigger_input_tokens": max(1, TRIGGER_INPUT_TOKENS * window // 200_000)}

    def __init__(self, config, env) -> None:
        super().__init__(config, env)
        self._outer_views: list[dict] = []  # the parents' clearing state while a sub-agent runs
        self._reset_view()

    # --- per_request: the edited copy of the full history, kept incrementally ---------------------
    def _reset_view(self) -> None:
        self._view = History()
        self._view_src: History | None = None  # the history the view mirrors (its first messages)
        self._cleared: set[str] = set()
        self._sent: frozenset[str] = frozenset()  # ids cleared in the last request of this conversation
        self._cleared_chars = 0  # characters the cleared blocks no longer send
        self._uses: dict[str, int] = {}  # tool id -> index of the message holding the tool_use
        self._results: dict[str, int] = {}  # tool id -> index of the message holding its result
        self._boundary: int | None = None  # boundary_breakpoint: the mark the last request placed

    def on_session_start(self, session: str, resume: bool, now: float) -> None:
        super().on_session_start(session, resume, now)
        if not resume:
            self._outer_views = []
            self._reset_view()

    _VIEW_STATE = ("_view", "_view_src", "_cleared", "_sent", "_cleared_chars", "_uses", "_results", "_boundary")

    def on_subtask_start(self, id: str, description: str, isolated: bool) -> None:
        """An isolated sub-agent is a conversation of its own: the server clears its requests from
        scratch, and the parent's cleared set is put aside, whole, until the sub-agent returns."""
        super().on_subtask_start(id, description, isolated)
        if isolated:
            self._outer_views.append({k: getattr(self, k) for k in self._VIEW_STATE})
            self._reset_view()

    def on_subtask_end(self, id: str, conclusion: str) -> None:
        """Back in the parent: its cleared set is what it was (issue #29: it used to be forgotten, so
        the parent's next request went out un-cleared without declaring a rewrite)."""
        isolated = self.in_isolated_subtask
        super().on_subtask_end(id, conclusion)
        if isolated:
            if self._outer_views:
                for k, v in self._outer_views.pop().items():
                    setattr(self, k, v)
            else:
                self._reset_view()

    def _sync_view(self) -> None:
        """Append to the view what the history gained since (or rebuild it when the history was
        replaced); appended messages hold only results newer than the kept ones, so they go as is."""
        h = self.history
        src = self._view_src
        if src is None or len(src) > len(h) or (len(src) and src.prefix_digest(len(src) - 1) != h.prefix_digest(len(src) - 1)):
            replaced = src is not None and bool(self._sent)
            self._reset_view()
            self.rewrote = self.rewrote or replaced
            src = History()
        for i in range(len(src), len(h)):
            m = h[i]
            for b in m.blocks:
                if b.id and b.type == "tool_use":
                    self._uses[b.id] = i
                elif b.id and b.type == "tool_result":
                    self._results[b.id] = i
            self._view = self._view.append(m)
        self._view_src = h

    def _clear_in_view(self, ids: list[str]) -> int:
        """Clear these results (and inputs) in the view; returns the characters freed."""
        c = self.config
        freed = 0
        view = self._view
        by_msg: dict[int, set[str]] = {}
        for tid in ids:
            if tid in self._results:
                by_msg.setdefault(self._results[tid], set()).add(tid)
            if c.clear_tool_inputs and tid in self._uses:
                by_msg.setdefault(self._uses[tid], set()).add(tid)
        for mi in sorted(by_msg):
            m = view[mi]
            blocks = []
            for b in m.blocks:
                if b.id in by_msg[mi] and b.type == "tool_result":
                    freed += len(b.text) - len(c.placeholder)
                    b = Block.tool_result(b.id or "", c.placeholder, b.is_error, cleared=True)
                elif b.id in by_msg[mi] and b.type == "tool_use":
                    freed += len(b.payload) - len(f"{b.name} {{}}")
                    b = Block("tool_use", id=b.id, name=b.name, input={}, meta={"cleared": True})
                blocks.append(b)
            view = view.replace_at(mi, Message(m.role, tuple(blocks), m.meta))
        self._view = view
        return freed

    def _per_request(self) -> Request:
        c = self.config
        self._sync_view()
        full = (self.anchor.estimate(self._view if self._cleared else self.history, self.env.system, self.env.tools)
                + int(self._cleared_chars / c.chars_per_token))
        new: list[str] = []
        if full > c.trigger_input_tokens:
            new = [i for i in clearable_ids(self.history, c.keep_tool_uses, set(c.exclude_tools)) if i not in self._cleared]
        if new:
            before = self._view
            freed = self._clear_in_view(new)
            tokens = int(freed / c.chars_per_token)
            gated = c.clear_at_least_scope == "each" or not self._cleared
            if c.clear_at_least is not None and gated and tokens < c.clear_at_least:
                self._view = before  # not worth it: the request goes out in full
                self.counters.extra["clear_skipped"] += 1
            else:
                self._cleared.update(new)
                self._cleared_chars += freed
                self.rewrote = True
                self.counters.compactions_attempted += 1
                self.counters.compactions_succeeded += 1
                self.counters.extra["cleared_tool_results"] += len(new)
                self.counters.extra["cleared_input_tokens_est"] += tokens
        messages = self._view if self._cleared else self.history
        bps = self.breakpoints(messages)
        if c.boundary_breakpoint:
            bps = self._with_boundaries(messages, bps)
        est = full - int(self._cleared_chars / c.chars_per_token) if self._cleared else full
        sent = frozenset(self._cleared)
        if not sent >= self._sent:  # results the last request had cleared go out whole again
            self.rewrote = True
        self._sent = sent
        return Request(self.env.system, self.env.tools, messages, bps,
                       kind="subagent" if self.in_isolated_subtask else "main",
                       estimated_tokens=est, rewrite=self._take_rewrite())

    def _with_boundaries(self, messages, bps: tuple[Breakpoint, ...]) -> tuple[Breakpoint, ...]:
        """``boundary_breakpoint``: a mark at the end of the message before the oldest clearable
        result still sent whole (before its tool_use with ``clear_tool_inputs``), plus the previous
        request's mark: the next clear changes nothing before it, so that entry is still read; at
        most 4 marks (system, previous boundary, boundary, last message)."""
        c = self.config
        pending = [i for i in clearable_ids(self.history, 0, set(c.exclude_tools)) if i not in self._cleared]
        at = None
        if pending:
            idx = (self._uses if c.clear_tool_inputs else self._results).get(pending[0])
            at = idx - 1 if idx is not None and idx >= 1 else None
        last = len(messages) - 1
        marks = sorted({b for b in (self._boundary, at) if b is not None and 0 <= b < last})
        self._boundary = at
        return tuple(sorted([*bps, *(Breakpoint(b) for b in marks)],
                            key=lambda b: -2 if b.at == "tools" else -1 if b.at == "system" else int(b.at)))

    def build_request(self, call: CallInfo) -> Request:
        if self.config.mode == "per_request":
            self.answer_dangling()
            return self._per_request()
        return super().build_request(call)

    def on_rejected(self, rejection: Rejection, call: CallInfo) -> bool:
        return False

    # --- episodic (the older reading) --------------------------------------------------------------
    def should_compact(self, call: CallInfo) -> bool:
        return (self.estimate() or 0) > self.config.trigger_input_tokens

    def _candidates(self) -> list[tuple[int, int, str]]:
        """(message, block, tool_use id) of every clearable, not yet cleared result, oldest first."""
        c = self.config
        clearable = set(clearable_ids(self.history, c.keep_tool_uses, set(c.exclude_tools)))
        return [(mi, bi, b.id or "") for mi, m in enumerate(self.history) if m.role == "user"
                for bi, b in enumerate(m.blocks)
                if b.type == "tool_result" and b.id in clearable and not b.meta.get("cleared")]

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
