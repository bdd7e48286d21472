"""context_editing: Anthropic's server-side context editing, ``clear_tool_uses_20250919`` (tool result
clearing) and, when asked for, ``clear_thinking_20251015`` (thinking block clearing).

Source: Anthropic documentation, "Context editing" (platform.claude.com/docs/en/build-with-claude/
context-editing, beta header ``context-management-2025-06-27``, read 2026-12; its option table and
quotes as collected in /work/scratch/46/peers.md section 4) and the SDK types
(anthropics/anthropic-sdk-python @ 887ee67: ``BetaClearToolUses20250919EditParam``,
``BetaToolUsesTriggerParam``, ``BetaClearThinking20251015EditParam``; the response's
``cleared_tool_uses``, ``cleared_input_tokens``):

* ``trigger``: "Once the prompt exceeds this threshold, clearing begins. You can specify this value in
  either ``input_tokens`` or ``tool_uses``" (default 100,000 input tokens): ``trigger_type`` and
  ``trigger_input_tokens`` / ``trigger_tool_uses`` (the SDK: ``{type: "tool_uses", value: int}``);
* ``keep``: tool uses kept (default 3, the most recent); "The API removes the oldest tool
  interactions first";
* ``clear_at_least``: "Ensures a minimum number of tokens is cleared each time the strategy
  activates. If the API can't clear at least the specified amount, the strategy will not be
  applied" (default none; see below for the two readings);
* ``exclude_tools``: tool names never cleared; ``clear_tool_inputs``: "Controls whether the tool call
  parameters are cleared along with the tool results" (default false); the SDK types it
  ``Union[bool, SequenceNotStr[str]]``, "Whether to clear all tool inputs (bool) or specific tool
  inputs to clear (list)": a list clears the inputs of the cleared uses of those tools only. A cleared
  result is replaced by a placeholder.
* ``clear_thinking_20251015`` (``clear_thinking=True``): "Number of most recent assistant turns to keep
  thinking blocks for. Older turns will have their thinking blocks removed" (SDK); its ``keep``
  (``keep_thinking_turns``) is ``{type: "thinking_turns", value: N}`` with N > 0, or ``"all"``; the
  default is model-specific (docs, current): "Opus 4.5+ and Sonnet 4.6+: all turns. Fable and Mythos
  models: all turns. Earlier Opus/Sonnet and all Haiku: last turn only" (:func:`default_thinking_keep`).
  "Assistant conversation turns may include multiple content blocks (e.g. with tool use)": a turn is
  every assistant message between two user messages that are not tool results. The docs list the
  thinking edit first; each edit here sees the prompt as the one before left it (a reading: the docs
  do not say), so the tool trigger measures the prompt without the cleared thinking. Clearing
  thinking "invalidates the cache at the point where clearing occurs": a declared rewrite.

**How it runs (the default, ``mode="per_request"``: what the docs state).** "Context editing is
applied server-side before the prompt reaches Claude. Your client application maintains the full,
unmodified conversation history." So the client keeps and sends its whole history on every call and
the server edits each request it receives on its own: once the *full* prompt is past the trigger,
every request goes out with all but the newest ``keep`` tool results cleared. Each such request
declares a rewrite and counts as a compaction; the strategy stands for the server, which measures the
full prompt. Its estimate (issue #45): the last reported input counts what the last request sent at
its true density; the full prompt and the request after a clearing are that figure scaled by their
share of the last request, both from characters (as openhands re-bases after a condensation, known
finding #18). Taking the cleared text away at 4 characters per token instead ran ~70% high once a
large result of common tool output (~2.7 characters per token) was cleared (the kit's
``cleared_after_sent`` scenario).

**What a clear costs in the cache, worked through** :mod:`ctxsim.harness.provider.cache` (tests:
``test_a_clear_rewrites_everything_after_the_first_message_…``). Entries are written only at
breakpoints, here the system block and each request's last message, and a read finds the longest live
entry within LOOKBACK_BLOCKS (24) blocks of a breakpoint. When a request clears one more result (the oldest of the
``keep`` kept before), the messages before that result are byte-identical to the previous request's,
but no entry ends there: every earlier last-message entry holds either that result, whole, or the
results its own request kept whole and that are cleared now. So the read falls back to the system
block (or the first user message, written before any result), and everything after it is written
again: **a clear invalidates the whole prompt after the system, not only what follows the newly
cleared block** (that would need an entry ending just before it, which no breakpoint writes). A
client that knows the rule can write that entry: ``boundary_breakpoint=True`` (assumed, not in the
docs) also marks the message before the oldest result still sent whole, and keeps the previous
request's mark, so a clear reads through the old boundary and re-writes only what follows it.

**clear_at_least: two readings the docs do not settle** (issue #46; ``clear_at_least_scope``, a
sweepable parameter, and a reading listed by ``ctxsim strategies context_editing`` and in a report's
Assumptions). The option table: "Ensures a minimum number of tokens is cleared each time the strategy
activates. If the API can't clear at least the specified amount, the strategy will not be applied."

* ``per_request`` (the default: the table's words). The strategy activates on each request whose full
  prompt is past the trigger; the server, which keeps no state, clears that request of everything but
  the newest ``keep`` tool uses, and applies the edit only if *all it clears on that request* frees at
  least ``clear_at_least`` (all or nothing: else the request goes out whole). Once one request has
  cleared enough, every later one clears at least as much (the history only grows), so the minimum
  delays the first clearing only and every later request with a new tool use clears one more result
  and re-writes the prompt after the system. (This module's ``"first"`` reading before 2026-12 is
  the same behaviour and maps to it.)
* ``per_clearing`` (this module's default ``"each"`` before 2026-12). The caching section says "Use
  the ``clear_at_least`` parameter to ensure a minimum number of tokens is cleared each time. When
  using prompt caching with context editing, you'll incur cache write costs each time content is
  cleared, but subsequent requests can reuse the newly cached prefix": read as a minimum on *each new
  clearing*, a request clears more only when what it would newly clear frees at least
  ``clear_at_least``, else it goes out with the cleared set of the request before, whose prefix is then
  read whole. Clearing comes in steps, and "subsequent requests can reuse the newly cached prefix"
  holds between them; under ``per_request`` it holds only until the next tool use.

With no ``clear_at_least`` (the docs' default) the two are one: every request past the trigger with a
new tool use clears one more result and re-writes the prompt after the system, what the page warns of.

**The older reading (``mode="episodic"``, this module's default before 2026-12).** Cleared results
stay cleared in the history the client sends and the trigger is checked on the prompt as cleared, so
clearing comes in episodes: the prompt grows back to the trigger, then one episode clears everything
but the newest ``keep`` (an episode is held to ``clear_at_least``). It reads the docs' "subsequent
requests can reuse the newly cached prefix" as a promise of stable cleared prefixes between episodes.
Kept so earlier numbers can be reproduced; thinking clearing is modelled in ``per_request`` only.

Figures (2026-12, ``ctxsim run`` on the imported spotter session 258c7280, claude-opus-4-6, 200k):
per_request with the docs' defaults $43.60, cache hit rate 0.575; ``clear_at_least=5000`` (the docs'
example) with ``per_clearing`` $10.79, 0.945; ``boundary_breakpoint=true`` $9.45, 0.956; episodic
$9.92, 0.970. On ``ctxsim synth long-200k --seed 1`` (claude-sonnet-4-6, 200k window): $309.08 /
0.136, $59.97 / 0.912, $39.01 / 0.974. (Measured before the estimate re-basing of issue #45, which
moves when the trigger is met by the density the reported usage shows.)

A rejected request: context editing is an API feature with no client behind it; a bare client's
turn errors on the 400 (no recovery is documented).
"""

from __future__ import annotations

import re
from typing import Literal

from ctxsim.harness.model.conversation import Block, Breakpoint, History, Message, Request
from ctxsim.strategies.base import CallInfo, Rejection
from ctxsim.strategies.departures import Departure
from ctxsim.strategies.templates import PeerConfig, ThresholdCompactor, chars_to_tokens, prompt_chars
from pydantic import Field, field_validator, model_validator

TRIGGER_INPUT_TOKENS = 100_000  # docs: trigger default {type: input_tokens, value: 100000}
KEEP_TOOL_USES = 3  # docs: keep default {type: tool_uses, value: 3}
CLEAR_AT_LEAST_EXAMPLE = 5_000  # docs: the example {type: input_tokens, value: 5000} (the kit scales it)
PLACEHOLDER = "[cleared]"  # the docs say "placeholder text" without giving it; LangChain's ClearToolUsesEdit uses "[cleared]"
# the older names of clear_at_least_scope (this module before 2026-12): "each" is per_clearing; "first",
# which held only the first clearing of a view to the minimum, behaves as per_request (see the docstring)
_OLD_SCOPES = {"each": "per_clearing", "first": "per_request"}


def default_thinking_keep(model: str) -> int | None:
    """``clear_thinking_20251015``'s ``keep`` when none is given, for ``model`` (None: all turns).
    Docs (current, peers.md section 4): "Model-specific ... Opus 4.5+ and Sonnet 4.6+: all turns. Fable
    and Mythos models: all turns. Earlier Opus/Sonnet and all Haiku: last turn only." A model id the
    rule does not name (an older naming such as claude-3-7-sonnet) keeps the last turn: the older
    docs' default without the strategy ("equivalent to keep: {type: thinking_turns, value: 1}")."""
    m = re.search(r"(opus|sonnet|haiku|fable|mythos)(?:-(\d{1,2})(?!\d)(?:-(\d{1,2})(?!\d))?)?", model.lower())
    if m is None:
        return 1
    family, major, minor = m.group(1), int(m.group(2) or 0), int(m.group(3) or 0)
    if family in ("fable", "mythos"):
        return None
    if family == "opus" and (major, minor) >= (4, 5):
        return None
    if family == "sonnet" and (major, minor) >= (4, 6):
        return None
    return 1


class ContextEditingConfig(PeerConfig):
    mode: Literal["per_request", "episodic"] = Field(
        "per_request", description="per_request: the server clears each request of the full history the "
        "client sends (the docs); episodic: cleared results stay cleared and the trigger sees the cleared "
        "prompt (this module's reading before 2026-12)")
    trigger_type: Literal["input_tokens", "tool_uses"] = Field(
        "input_tokens", description="what the trigger counts in the prompt (docs: 'either input_tokens or "
        "tool_uses'): input_tokens (trigger_input_tokens) or tool_uses (trigger_tool_uses)")
    trigger_input_tokens: int = Field(TRIGGER_INPUT_TOKENS, ge=1, le=10_000_000,
                                      description="trigger_type input_tokens: clear when the prompt's input tokens exceed this")
    trigger_tool_uses: int | None = Field(None, ge=0, le=10_000_000, description="trigger_type tool_uses: clear "
                                          "when the prompt holds more tool uses than this (the docs give no default)")
    keep_tool_uses: int = Field(KEEP_TOOL_USES, ge=0, le=100_000, description="most recent tool uses kept")
    clear_at_least: int | None = Field(None, ge=0, le=10_000_000, description="do not apply a clearing that "
                                       "would clear fewer input tokens than this (docs example: 5,000); None: no minimum")
    clear_at_least_scope: Literal["per_request", "per_clearing"] = Field(
        "per_request", description="what clear_at_least is held against, a reading the docs do not settle: "
        "per_request (the option table's 'each time the strategy activates': all a request clears, all or "
        "nothing; past the first clearing every request clears one more result); per_clearing (the caching "
        "section's 'each time ... subsequent requests can reuse the newly cached prefix': each new clearing "
        "beyond the previous request's, else the previous cleared set is sent again, so clearing comes in "
        "steps). Older names: each = per_clearing, first = per_request")
    exclude_tools: tuple[str, ...] = Field((), description="tool names whose results are never cleared")
    clear_tool_inputs: bool | tuple[str, ...] = Field(
        False, description="also clear the inputs of cleared tool uses: true (all), false, or a list of tool "
        "names whose inputs are cleared (the SDK: 'all tool inputs (bool) or specific tool inputs to clear (list)')")
    clear_thinking: bool = Field(False, description="the request also carries clear_thinking_20251015 (listed "
                                 "first, as the docs' example): thinking of older assistant turns is removed")
    keep_thinking_turns: int | Literal["all"] | None = Field(
        None, description="clear_thinking: the most recent assistant turns that keep their thinking (>0), or "
        "all; None: the model's default (docs: all for Opus 4.5+, Sonnet 4.6+, Fable, Mythos; the last turn "
        "for earlier Opus/Sonnet and all Haiku)")
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

    @field_validator("clear_tool_inputs", mode="before")
    @classmethod
    def _inputs(cls, v):
        """``--set clear_tool_inputs=true`` (or false) is a bool; ``=Read,Grep`` a list of tool names."""
        if isinstance(v, str):
            low = v.strip().lower()
            if low in ("true", "false", "1", "0", "yes", "no", "on", "off"):
                return low in ("true", "1", "yes", "on")
            return tuple(x.strip() for x in v.split(",") if x.strip())
        if isinstance(v, list):
            return tuple(v)
        return v

    @field_validator("clear_at_least_scope", mode="before")
    @classmethod
    def _old_scope(cls, v):
        return _OLD_SCOPES.get(v, v) if isinstance(v, str) else v

    @field_validator("keep_thinking_turns")
    @classmethod
    def _thinking_turns(cls, v):
        if isinstance(v, int) and v < 1:
            raise ValueError("keep_thinking_turns must be > 0 (docs: 'N must be > 0') or 'all'")
        return v

    @model_validator(mode="after")
    def _consistent(self):
        if self.trigger_type == "tool_uses" and self.trigger_tool_uses is None:
            raise ValueError("trigger_type tool_uses needs trigger_tool_uses (the docs give no default)")
        if self.clear_thinking and self.mode != "per_request":
            raise ValueError("clear_thinking is modelled in mode per_request only")
        return self


def clearable_ids(messages, keep: int, excluded: set[str]) -> list[str]:
    """Tool use ids whose results the edit clears, oldest first: all but the newest ``keep`` tool
    uses, minus excluded tools."""
    uses = [(b.id or "", b.name or "") for m in messages if m.role == "assistant" for b in m.blocks
            if b.type == "tool_use"]
    old = uses[:-keep] if keep else uses
    return [i for i, name in old if name not in excluded]


def clears_input(config: ContextEditingConfig, tool: str) -> bool:
    """Whether a cleared use of ``tool`` loses its input too (``clear_tool_inputs``: a bool, or the
    names of the tools whose inputs go)."""
    v = config.clear_tool_inputs
    return v if isinstance(v, bool) else tool in v


def _turn_starts(m: Message) -> bool:
    """A user message that is not tool results opens a new turn (the assistant's answers to it and
    their tool loop are one assistant turn)."""
    return m.role == "user" and not m.has_tool_result


class ContextEditing(ThresholdCompactor):
    name = "context_editing"
    summary = "Anthropic clear_tool_uses_20250919: past 100k input, each request cleared to the last 3 tool results"
    on_rejection = "none: the API's 400 ends the bare client's turn (context editing is an API feature; no recovery documented)"
    Config = ContextEditingConfig
    keeps_replacements = True  # a result cleared or masked keeps its placeholder (the kit's replaced_once)
    seed_readings = (
        Departure("clear_at_least_scope", "docs, clear_at_least: 'each time the strategy activates'",
                  "per_request (default): all a request clears, all or nothing, so past the first clearing every "
                  "request clears one more result; per_clearing: each new clearing beyond the previous request's "
                  "(clearing in steps, the caching section's 'subsequent requests can reuse the newly cached "
                  "prefix'). Sweep both where clear_at_least is set: they differ in cost and hit rate"),
        Departure("clear_thinking", "docs: the order of edits",
                  "clear_thinking_20251015 is applied first and the tool trigger sees the prompt without the "
                  "cleared thinking (the docs list it first; they do not say what the trigger counts)"),
    )

    @classmethod
    def keeps_recent_tool_uses(cls, config) -> int:
        return config.keep_tool_uses   # clear_tool_uses_20250919's keep: the newest tool uses are never cleared

    @classmethod
    def clears_all_but_recent(cls, config) -> tuple[str, ...] | None:
        # a clearing takes every result older than the newest keep tool uses (clearable_ids), excluded tools apart
        return tuple(config.exclude_tools)

    @classmethod
    def clears_above(cls, config) -> int | None:
        """per_request (the docs' reading): the API edits each request it is sent, so once the *whole* prompt the
        client sends is past ``trigger_input_tokens`` every request clears all but the newest ``keep`` (with
        clear_at_least held per request: the total only grows). Episodic clearing and a tool-use trigger judge
        the prompt as cleared or count uses: no promise in tokens."""
        if (config.mode == "per_request" and config.trigger_type == "input_tokens"
                and (config.clear_at_least is None or config.clear_at_least_scope == "per_request")):
            return config.trigger_input_tokens
        return None

    @staticmethod
    def check_params(window: int) -> dict:
        """For the property kit's small windows: the trigger at the same share of a 200k window, and the
        docs' example minimum (5,000) scaled alike, so the kit holds every clearing to it."""
        return {"trigger_input_tokens": max(1, TRIGGER_INPUT_TOKENS * window // 200_000),
                "clear_at_least": max(1, CLEAR_AT_LEAST_EXAMPLE * window // 200_000)}

    @classmethod
    def clear_minimum(cls, config) -> tuple[int, str] | None:
        """The property kit holds each clearing to ``clear_at_least``: per request (everything the request
        clears), or per clearing (``per_clearing``, and every episode of ``episodic``)."""
        if config.clear_at_least is None:
            return None
        per = "request" if config.mode == "per_request" and config.clear_at_least_scope == "per_request" else "clearing"
        return (config.clear_at_least, per)

    def __init__(self, config, env) -> None:
        super().__init__(config, env)
        self._outer_views: list[dict] = []  # the parents' clearing state while a sub-agent runs
        self._prompt_chars = prompt_chars(env.system, env.tools)
        self._thinking_keep = (None if config.keep_thinking_turns == "all" else
                               config.keep_thinking_turns if config.keep_thinking_turns is not None
                               else default_thinking_keep(env.model))
        self._reset_view()

    # --- per_request: the edited copy of the full history, kept incrementally ---------------------
    def _reset_view(self) -> None:
        self._view = History()
        self._view_src: History | None = None  # the history the view mirrors (its first messages)
        self._cleared: set[str] = set()
        self._sent: frozenset[str] = frozenset()  # what the last request of this conversation sent cleared
        self._sent_view = False  # the last request sent the view (else the history, whole)
        self._cleared_chars = 0  # characters the cleared tool results and inputs no longer send
        self._cleared_tokens = 0  # ... and their tokens, as estimated when each was cleared (while they were sent whole)
        self._hist_chars = 0  # characters of the history's messages (the full prompt's)
        self._view_chars = 0  # ... and of the view's
        self._thinking_chars = 0  # characters the cleared thinking no longer sends
        self._uses: dict[str, int] = {}  # tool id -> index of the message holding the tool_use
        self._names: dict[str, str] = {}  # tool id -> its tool's name
        self._results: dict[str, int] = {}  # tool id -> index of the message holding its result
        self._turn = 0  # user turns so far (clear_thinking)
        self._turns: list[int] = []  # the distinct turns holding assistant messages, in order
        self._thinking: list[tuple[int, int]] = []  # (message, turn) of assistant messages with thinking
        self._thinking_done = 0  # how many of those were cleared (the oldest first)
        self._boundary: int | None = None  # boundary_breakpoint: the mark the last request placed

    def on_session_start(self, session: str, resume: bool, now: float) -> None:
        super().on_session_start(session, resume, now)
        if not resume:
            self._outer_views = []
            self._reset_view()

    _VIEW_STATE = ("_view", "_view_src", "_cleared", "_sent", "_sent_view", "_cleared_chars", "_cleared_tokens", "_hist_chars",
                   "_view_chars", "_thinking_chars", "_uses", "_names", "_results", "_turn", "_turns",
                   "_thinking", "_thinking_done", "_boundary")

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
            if _turn_starts(m):
                self._turn += 1
            for b in m.blocks:
                if b.id and b.type == "tool_use":
                    self._uses[b.id] = i
                    self._names[b.id] = b.name or ""
                elif b.id and b.type == "tool_result":
                    self._results[b.id] = i
            if m.role == "assistant":
                if not self._turns or self._turns[-1] != self._turn:
                    self._turns.append(self._turn)
                if any(b.type == "thinking" for b in m.blocks):
                    self._thinking.append((i, self._turn))
            self._view = self._view.append(m)
            self._hist_chars += m.chars
            self._view_chars += m.chars
        self._view_src = h

    def _chars_estimate(self, chars: int) -> int:
        """A request of these message characters, from characters alone (system and tools included)."""
        return self.env.system.opaque_tokens + chars_to_tokens(self._prompt_chars + chars, self.config.chars_per_token)

    def _replace_in_view(self, mi: int, m: Message) -> int:
        """Put ``m`` at ``mi`` in the view; returns the characters it frees."""
        freed = self._view[mi].chars - m.chars
        self._view = self._view.replace_at(mi, m)
        self._view_chars -= freed
        return freed

    def _clear_in_view(self, ids: list[str]) -> int:
        """Clear these results (and inputs) in the view; returns the characters freed."""
        c = self.config
        freed = 0
        by_msg: dict[int, set[str]] = {}
        for tid in ids:
            if tid in self._results:
                by_msg.setdefault(self._results[tid], set()).add(tid)
            if tid in self._uses and clears_input(c, self._names.get(tid, "")):
                by_msg.setdefault(self._uses[tid], set()).add(tid)
        for mi in sorted(by_msg):
            m = self._view[mi]
            blocks = []
            for b in m.blocks:
                if b.id in by_msg[mi] and b.type == "tool_result":
                    b = Block.tool_result(b.id or "", c.placeholder, b.is_error, cleared=True)
                elif b.id in by_msg[mi] and b.type == "tool_use":
                    b = Block("tool_use", id=b.id, name=b.name, input={}, meta={"cleared": True})
                blocks.append(b)
            freed += self._replace_in_view(mi, Message(m.role, tuple(blocks), m.meta))
        return freed

    def _clear_thinking(self) -> int:
        """clear_thinking_20251015: remove the thinking of the assistant turns older than the newest
        ``keep``; returns how many messages lost theirs. A message that holds nothing else keeps it
        (an assistant message needs content)."""
        keep = self._thinking_keep
        if not self.config.clear_thinking or keep is None or len(self._turns) <= keep:
            return 0
        oldest_kept = self._turns[-keep]
        n = 0
        while self._thinking_done < len(self._thinking) and self._thinking[self._thinking_done][1] < oldest_kept:
            mi = self._thinking[self._thinking_done][0]
            self._thinking_done += 1
            m = self._view[mi]
            blocks = tuple(b for b in m.blocks if b.type != "thinking")
            if blocks:
                self._thinking_chars += self._replace_in_view(mi, Message(m.role, blocks, m.meta))
                n += 1
        return n

    def _per_request(self) -> Request:
        c = self.config
        self._sync_view()
        # what the last request sent, plus what came since: the reported usage counts it at its true
        # density; every other size is that figure scaled by its share of it, both from characters
        basis, basis_chars = (self._view, self._view_chars) if self._sent_view else (self.history, self._hist_chars)
        anchored = self.anchor.estimate(basis, self.env.system, self.env.tools)
        density = anchored / max(1, self._chars_estimate(basis_chars))
        thinking = self._clear_thinking()
        if c.trigger_type == "tool_uses":
            over = len(self._uses) > (c.trigger_tool_uses or 0)
        else:  # the full prompt as the thinking edit left it (the tool edit comes second): what is sent, and what
            # earlier clearings took out at the density of the requests that sent it whole (the view's own may be
            # far from it: a dense output cleared, prose left)
            over = round(density * self._chars_estimate(self._view_chars)) + self._cleared_tokens > c.trigger_input_tokens
        new: list[str] = []
        if over:
            new = [i for i in clearable_ids(self.history, c.keep_tool_uses, set(c.exclude_tools)) if i not in self._cleared]
        cleared = False
        if new:
            before, before_chars = self._view, self._view_chars
            freed = self._clear_in_view(new)
            tokens = int(freed / c.chars_per_token)  # what it frees, as the strategy estimates text
            # per_request: all this request clears; what earlier requests cleared passed already and
            # the full history only grows, so the total passes too (the server re-checks it each time)
            held = c.clear_at_least is not None and tokens < c.clear_at_least and (
                c.clear_at_least_scope == "per_clearing" or not self._cleared)
            if held:
                self._view, self._view_chars = before, before_chars  # not worth it: nothing more is cleared
                self.counters.extra["clear_skipped"] += 1
            else:
                self._cleared.update(new)
                self._cleared_chars += freed
                self._cleared_tokens += round(density * freed / c.chars_per_token)  # the basis sent them whole
                cleared = True
                self.counters.extra["cleared_tool_results"] += len(new)
                self.counters.extra["cleared_input_tokens_est"] += tokens
        if thinking:
            self.counters.extra["cleared_thinking_messages"] += thinking
        if cleared or thinking:
            self.rewrote = True
            self.counters.compaction(True)
        use_view = bool(self._cleared) or self._thinking_done > 0
        messages = self._view if use_view else self.history
        bps = self.breakpoints(messages)
        if c.boundary_breakpoint:
            bps = self._with_boundaries(messages, bps)
        est = round(density * self._chars_estimate(self._view_chars if use_view else self._hist_chars))
        sent = frozenset(self._cleared) | frozenset(f"thinking:{i}" for i, _ in self._thinking[:self._thinking_done])
        if not sent >= self._sent:  # what the last request had cleared goes out whole again
            self.rewrote = True
        self._sent, self._sent_view = sent, use_view
        return Request(self.env.system, self.env.tools, messages, bps,
                       kind="subagent" if self.in_isolated_subtask else "main",
                       estimated_tokens=est, rewrite=self._take_rewrite())

    def _with_boundaries(self, messages, bps: tuple[Breakpoint, ...]) -> tuple[Breakpoint, ...]:
        """``boundary_breakpoint``: a mark at the end of the message before the oldest clearable
        result still sent whole (before its tool_use when its input is cleared too), plus the previous
        request's mark: the next clear changes nothing before it, so that entry is still read; at
        most 4 marks (system, previous boundary, boundary, last message)."""
        c = self.config
        pending = [i for i in clearable_ids(self.history, 0, set(c.exclude_tools)) if i not in self._cleared]
        at = None
        if pending:
            first = pending[0]
            idx = (self._uses if clears_input(c, self._names.get(first, "")) else self._results).get(first)
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
        c = self.config
        if c.trigger_type == "tool_uses":
            return sum(len(m.tool_use_ids()) for m in self.history) > (c.trigger_tool_uses or 0)
        return (self.estimate() or 0) > c.trigger_input_tokens

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
        inputs = set()
        for m in self.history:
            if m.role == "assistant":
                for b in m.blocks:
                    if (b.type == "tool_use" and b.id in ids and not b.meta.get("cleared")
                            and clears_input(c, b.name or "")):
                        inputs.add(b.id)
                        freed_chars += len(b.payload) - len(f"{b.name} {{}}")
        freed = int(freed_chars / c.chars_per_token)
        if not cands or freed <= 0 or (c.clear_at_least is not None and freed < c.clear_at_least):
            self.counters.extra["clear_skipped"] += 1
            return None
        h = self.history
        by_msg: dict[int, list[int]] = {}
        for mi, bi, _ in cands:
            by_msg.setdefault(mi, []).append(bi)
        for mi, m in enumerate(h):
            if m.role == "assistant" and any(b.type == "tool_use" and b.id in inputs for b in m.blocks):
                by_msg.setdefault(mi, [])
        for mi in sorted(by_msg):
            m = h[mi]
            blocks = list(m.blocks)
            for bi in by_msg[mi]:
                b = blocks[bi]
                blocks[bi] = Block.tool_result(b.id or "", c.placeholder, b.is_error, cleared=True)
            if m.role == "assistant":
                blocks = [Block("tool_use", id=b.id, name=b.name, input={}, meta={"cleared": True})
                          if b.type == "tool_use" and b.id in inputs else b for b in blocks]
            h = h.replace_at(mi, Message(m.role, tuple(blocks), m.meta))
        # the anchored estimate scaled by the new request's share of the old one, both from characters
        # (issue #45, as openhands: taking the cleared text away at a fixed rate ran high on dense output)
        self.set_history(h, estimate=self.rebased_estimate(h))
        self.counters.extra["cleared_tool_results"] += len(cands)
        self.counters.extra["cleared_input_tokens_est"] += freed
        return True
