"""Small template bases and pure helpers shared by the peer strategies (STYLE.md point 6).

Every real agent's context policy has the same two questions — *when* (a trigger on a token
estimate, an event count, a usage figure) and *then what* (summarise, cut, clear) — plus the same
chores: keep an own token estimate the way the agent does, place cache breakpoints the way its
client does, and never cut between a ``tool_use`` and its ``tool_result``. They live here, so each
peer strategy is its rule and little else:

* :class:`UsageAnchor` — the estimate real agents keep: the last usage the API reported, plus a
  characters-per-token guess for what was added since (Codex, gemini-cli and Cline all estimate
  about 4 characters, or bytes, per token);
* pair-safe boundaries (:func:`tail_start`, :func:`head_end`, :func:`drop_range`): where history may
  be cut so that every ``tool_result`` keeps the ``tool_use`` it answers;
* :func:`breakpoints_for` — where each family of clients puts ``cache_control``;
* :class:`ThresholdCompactor` — the "when, then what" template base.

The registry skips this module (``_SKIP``): nothing here is a strategy by itself.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from ctxsim.harness.files import confined
from ctxsim.harness.llm.services import CallSpec, SideCallFailed, SideCallResult
from ctxsim.harness.model.conversation import (
    Breakpoint,
    History,
    Message,
    Request,
    SystemPrompt,
    ToolSet,
    Usage,
)
from ctxsim.strategies.base import UNANSWERED_RESULT, CallInfo, Strategy, StrategyConfig, answer_dangling  # noqa: F401 (re-exported)
from pydantic import Field

CHARS_PER_TOKEN = 4.0  # codex-rs truncate.rs APPROX_BYTES_PER_TOKEN = 4; gemini-cli estimateTokenCountSync ~ chars/4

BreakpointStyle = Literal["system_last", "last_two_user", "none"]


# --- token estimate ---------------------------------------------------------------------------

def chars_to_tokens(chars: int, chars_per_token: float = CHARS_PER_TOKEN) -> int:
    """Characters to estimated tokens, rounded up (a non-empty text is never 0 tokens)."""
    if chars_per_token <= 0:
        raise ValueError(f"chars_per_token must be > 0, got {chars_per_token}")
    return math.ceil(chars / chars_per_token)


def prompt_chars(system: SystemPrompt, tools: ToolSet) -> int:
    return sum(len(b.payload) for b in system.blocks) + sum(len(t.payload) for t in tools.tools)


class UsageAnchor:
    """The token figure an agent keeps without a tokenizer.

    After each answer the API reports the usage of the request; ``input_total + output`` is the size
    of the conversation through that answer. Messages added since are estimated from their
    characters. With no anchor (at the start, after a rewrite that invalidated it) the whole request
    is estimated from characters, system prompt and tools included; a system prompt the trace has no
    text for (``opaque_tokens``) is known to the agent as its own prompt size and added as is.
    """

    def __init__(self, chars_per_token: float = CHARS_PER_TOKEN) -> None:
        self.chars_per_token = chars_per_token
        self.anchor: int | None = None
        self.anchor_len = 0
        self.last_input: int | None = None  # the last request's reported input tokens

    def record(self, usage: Usage | None, history_len: int) -> None:
        """The answer just entered history (``history_len`` messages); ``None``: request rejected,
        the old anchor still stands."""
        if usage is None:
            return
        self.anchor = usage.input_total + usage.output
        self.anchor_len = history_len
        self.last_input = usage.input_total

    def clear(self) -> None:
        self.anchor = None
        self.anchor_len = 0

    def reset(self) -> None:
        """A new launch: a new process of the agent knows no usage at all, not even the last input."""
        self.clear()
        self.last_input = None

    def saved(self) -> tuple[int | None, int, int | None]:
        """The anchor as it stands, for :meth:`restore` (a parent's while an isolated sub-agent runs)."""
        return self.anchor, self.anchor_len, self.last_input

    def restore(self, state: tuple[int | None, int, int | None], history_len: int) -> None:
        """Back to a :meth:`saved` anchor, if it still describes a prefix of a history of
        ``history_len`` messages; cleared otherwise."""
        anchor, anchor_len, last_input = state
        if anchor is not None and anchor_len <= history_len:
            self.anchor, self.anchor_len, self.last_input = anchor, anchor_len, last_input
        else:
            self.clear()

    def rebase(self, estimate: int, history_len: int) -> None:
        """After a rewrite whose effect the strategy can estimate (e.g. ``old - removed``)."""
        self.anchor = max(0, int(estimate))
        self.anchor_len = history_len

    def estimate(self, history: Sequence[Message], system: SystemPrompt, tools: ToolSet) -> int:
        cpt = self.chars_per_token
        if self.anchor is not None and self.anchor_len <= len(history):
            new = sum(m.chars for m in history[self.anchor_len:])
            return self.anchor + chars_to_tokens(new, cpt)
        chars = prompt_chars(system, tools) + sum(m.chars for m in history)
        return system.opaque_tokens + chars_to_tokens(chars, cpt)


# --- pair-safe boundaries ---------------------------------------------------------------------

def tail_start(messages: Sequence[Message], i: int, direction: Literal["forward", "back"] = "forward") -> int:
    """A start index for a kept tail near ``i`` such that the tail's first message carries no
    ``tool_result`` (whose ``tool_use`` would be cut away). ``forward`` keeps less, ``back`` keeps
    more; ``len(messages)`` (keep nothing) and ``0`` (keep all) are always safe."""
    n = len(messages)
    i = max(0, min(i, n))
    if direction == "forward":
        while i < n and messages[i].has_tool_result:
            i += 1
    else:
        while i > 0 and i < n and messages[i].has_tool_result:
            i -= 1
    return i


def head_end(messages: Sequence[Message], k: int) -> int:
    """The largest ``j <= k`` such that a kept head ``messages[:j]`` does not end with an assistant
    ``tool_use`` whose results would be cut away (its results, in ``messages[j]``, are not kept)."""
    j = max(0, min(k, len(messages)))
    while j > 0 and j < len(messages) and messages[j].has_tool_result:
        j -= 1
    return j


def drop_range(messages: Sequence[Message], start: int, end: int) -> tuple[int, int]:
    """Adjust a half-open range ``[start, end)`` of messages to drop so that dropping it splits no
    pair: ``start`` moves back off result messages (their ``tool_use`` is dropped with them) and
    ``end`` moves forward past result messages (they go with the ``tool_use`` being dropped)."""
    start = head_end(messages, start)
    end = tail_start(messages, max(end, start), "forward")
    return start, end


def input_strings(value) -> list[str]:
    """Every string in a tool input (nested lists and objects included)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in input_strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in input_strings(v)]
    return []


def is_plain_user(m: Message) -> bool:
    """A message the user typed (not tool results, not something a strategy inserted)."""
    return m.role == "user" and not m.has_tool_result and not m.meta.get("origin")


def last_plain_user(messages: Sequence[Message]) -> int:
    """Index of the newest message the user typed (-1: none)."""
    return next((i for i in range(len(messages) - 1, -1, -1) if is_plain_user(messages[i])), -1)


def transcript_text(messages: Sequence[Message], max_result_chars: int | None = None) -> str:
    """A conversation as plain text, for a summariser that gets it as one prompt rather than as
    messages (OpenHands, Goose, Cline, Roo Code, Aider do): ``[role]: text`` per block, tool uses as
    ``name {input}``, tool results cut to ``max_result_chars`` (None: whole). Thinking is left out."""
    lines = []
    for m in messages:
        for b in m.blocks:
            if b.type == "thinking":
                continue
            if b.type == "tool_result":
                text = b.text if max_result_chars is None or len(b.text) <= max_result_chars else (
                    f"{b.text[:max_result_chars]}\n...[truncated {len(b.text) - max_result_chars} chars]")
                lines.append(f"[tool result{' (error)' if b.is_error else ''}]: {text}")
            elif b.type == "tool_use":
                lines.append(f"[{m.role} tool call]: {b.payload}")
            else:
                lines.append(f"[{m.role}]: {b.text}")
    return "\n\n".join(lines)


# --- cache breakpoints ------------------------------------------------------------------------

def breakpoints_for(style: BreakpointStyle, history: Sequence[Message],
                    ttl: Literal["5m", "1h"] | None = None) -> tuple[Breakpoint, ...]:
    """Where a family of clients puts ``cache_control`` (``ttl`` None: the client's TTL for the run,
    the recorded agent's on an imported trace, else 5 minutes).

    ``system_last``: the system prompt and the last message (Anthropic's documented pattern for
    multi-turn conversations; Claude Code, OpenHands and Cline do this). ``last_two_user``: the last
    two user/tool messages and nothing else (SWE-agent ``CacheControlHistoryProcessor``,
    ``last_n_messages = 2``). ``none``: no markers (a client of an automatic-cache provider).
    """
    n = len(history)
    if style == "none" or n == 0:
        return ()
    if style == "system_last":
        return (Breakpoint("system", ttl), Breakpoint(n - 1, ttl))
    if style == "last_two_user":
        idx = [i for i in range(n - 1, -1, -1) if history[i].role == "user"][:2]
        return tuple(Breakpoint(i, ttl) for i in sorted(idx))
    raise ValueError(f"unknown breakpoint style {style!r}")


# --- the template base ------------------------------------------------------------------------

class PeerConfig(StrategyConfig):
    """Fields every peer strategy has (a concrete config subclasses this)."""

    chars_per_token: float = Field(CHARS_PER_TOKEN, gt=0, le=20, description="characters per token of the "
                                   "agent's own estimate for messages added since the last reported usage")
    breakpoints: BreakpointStyle = Field("system_last", description="where cache_control markers go: "
                                         "system_last (Anthropic clients), last_two_user (SWE-agent), none")


class PeerStrategy(Strategy):
    """Append-only history with an own usage-anchored estimate and the client's breakpoints.

    Subclasses override :meth:`prepare` (called at each model call before the request is built) to
    rewrite ``self.history``; they call :meth:`set_history` for a rewrite so the estimate and the
    declared cache break follow.
    """

    Config = PeerConfig

    def __init__(self, config, env) -> None:
        super().__init__(config, env)
        self.anchor = UsageAnchor(config.chars_per_token)
        # per open isolated sub-agent: the parent's anchor (anchor, anchor_len, last_input), put back when it returns
        self._outer_anchors: list[tuple[int | None, int, int | None]] = []

    # events
    def on_session_start(self, session: str, resume: bool, now: float) -> None:
        super().on_session_start(session, resume, now)
        if not resume:
            self.anchor.reset()

    def on_response(self, message: Message, usage: Usage | None) -> None:
        super().on_response(message, usage)
        self.anchor.record(usage, len(self.history))

    def on_user(self, message: Message) -> None:
        self.answer_dangling()
        super().on_user(message)

    def answer_dangling(self) -> None:
        """Synthetic results for a call left unanswered (see :func:`answer_dangling`)."""
        self.history, n = answer_dangling(self.history)
        self.counters.extra["synthetic_results"] += n

    def on_subtask_start(self, id: str, description: str, isolated: bool) -> None:
        super().on_subtask_start(id, description, isolated)
        if isolated:
            self._outer_anchors.append(self.anchor.saved())
            self.anchor.clear()

    def on_subtask_end(self, id: str, conclusion: str) -> None:
        """Back in the parent: its own last usage anchors its estimate again (the parent's history is the one
        that usage counted, grown by the sub-agent's result since). It used to be cleared, so the parent's first
        request after a sub-agent was estimated from characters alone: 39% low on dense output (issue #45, a
        context_editing subclass on check-strategy's random sample); and a trigger reading the last input
        (gemini_cli) read the sub-agent's."""
        isolated = self.in_isolated_subtask
        super().on_subtask_end(id, conclusion)
        if isolated:
            if self._outer_anchors:
                self.anchor.restore(self._outer_anchors.pop(), len(self.history))
            else:
                self.anchor.clear()

    # the call
    def prepare(self, call: CallInfo) -> None:
        """Rewrite history before this call's request (default: nothing)."""

    def build_request(self, call: CallInfo) -> Request:
        self.answer_dangling()
        self.prepare(call)
        return super().build_request(call)

    def breakpoints(self, history: History) -> tuple[Breakpoint, ...]:
        return breakpoints_for(self.config.breakpoints, history)

    @classmethod
    def cache_marks(cls, config) -> tuple[str, ...]:
        # what breakpoints_for marks in each style (the last two user messages: the newest is the last user)
        return {"system_last": ("system", "last"), "last_two_user": ("last_user",)}.get(config.breakpoints, ())

    def estimate(self) -> int | None:
        return self.anchor.estimate(self.history, self.env.system, self.env.tools)

    @classmethod
    def estimates_from_usage(cls, config) -> float | None:
        """:class:`UsageAnchor`: the last usage (input and output) and the history after the answer at
        ``chars_per_token``. A subclass whose estimate is another overrides this too."""
        return config.chars_per_token

    # helpers
    def rebased_estimate(self, history: Sequence[Message]) -> int | None:
        """The estimate of a request holding ``history`` instead of the current history: the anchored
        estimate scaled by the new request's share of the current one, both from characters, so the
        density the last usage measured carries over (None without a reported usage to anchor on).
        Taking rewritten text away at a fixed characters per token ran 60-80% high once dense output
        was cleared or masked (openhands' known finding #18; issue #45's cleared_after_sent)."""
        est = self.estimate()
        if est is None or self.anchor.anchor is None:
            return None
        chars = UsageAnchor(self.config.chars_per_token)   # no anchor: characters alone

        def of(msgs) -> int:
            return chars.estimate(list(msgs), self.env.system, self.env.tools)

        return round(est * of(history) / max(1, of(self.history)))

    def set_history(self, history: History, *, estimate: int | None = None) -> None:
        """Replace the history (a rewrite of already-sent messages: a declared cache break).
        ``estimate``: the strategy's estimate of the new request, or None to re-estimate from
        characters until the next reported usage. A history the same as the one it replaces (a compaction that
        found nothing to change: gemini-cli's split at its own snapshot in a long tool loop) is no rewrite: what
        is sent does not change, and the anchor stands."""
        old, self.history = self.history, history
        if len(old) == len(history) and (not len(history) or old.prefix_digest(len(old) - 1) == history.prefix_digest(len(history) - 1)):
            return
        self.rewrote = True
        if estimate is None:
            self.anchor.clear()
        else:
            self.anchor.rebase(estimate, len(history))

    def output_path(self, subdir: str, name: str) -> str:
        """Where :meth:`save_output` writes ``name``: nothing is written."""
        from ctxsim.harness.files.filenames import safe_file_name

        return str(Path(self.env.session_dir) / subdir / safe_file_name(name))  # injective: two ids never share a file

    def save_output(self, subdir: str, name: str, text: str) -> str | None:
        """Write a tool output the agent keeps on disk (a real file under the run's directory);
        counted as a spill. None when it cannot be written (counted in ``save_failed``)."""
        path = Path(self.output_path(subdir, name))
        confined.guard(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError:
            self.counters.extra["save_failed"] += 1
            return None
        self.counters.spills += 1
        return str(path)

    def tokens_of(self, messages: Sequence[Message]) -> int:
        return chars_to_tokens(sum(m.chars for m in messages), self.config.chars_per_token)

    def side_call(self, request: Request, spec: CallSpec) -> SideCallResult | None:
        """A billed side call; a failure is counted in ``counters.extra['side_call_failures']``
        and returns None (the caller decides what a failure means for its compaction)."""
        try:
            return self.env.services.call(request, spec)
        except SideCallFailed as e:
            self.counters.extra["side_call_failures"] += 1
            self.counters.extra[f"side_call_failed_{e.reason}"] += 1
            return None


class ThresholdCompactor(PeerStrategy):
    """When, then what: :meth:`should_compact` decides at each model call, :meth:`compact` rewrites
    history and returns True (done), False (tried and failed) or None (nothing worth doing: not
    counted as an attempt). The counters follow (attempted / succeeded / failed).

    On a rejected request it gives up, as the base does; an agent that compacts reactively (Claude
    Code on prompt-too-long, OpenHands' condensation request) overrides ``on_rejected`` with
    :meth:`compact_now`."""

    def should_compact(self, call: CallInfo) -> bool:
        raise NotImplementedError

    def compact(self, call: CallInfo) -> bool | None:
        raise NotImplementedError

    def prepare(self, call: CallInfo) -> None:
        if self.should_compact(call):
            self._counted(self.compact(call))

    def compact_now(self, call: CallInfo) -> bool:
        """Compact whatever the trigger says (the reaction to a rejected request), counted like any
        compaction; True when history was rewritten (worth sending again)."""
        return self._counted(self.compact(call))

    def _counted(self, done: bool | None) -> bool:
        if done is None:
            return False
        self.counters.compaction(done)
        return bool(done)
