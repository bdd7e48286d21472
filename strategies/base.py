"""The strategy protocol: what the engine drives, what a strategy may do, what it is told.

A strategy owns the conversation it will send. The engine feeds it, in trace order, what a real
agent would see (user text, the results of tool calls, its own model's answers and the usage the
API reported for them) and asks it for a request at every model call. It may transform tool
results as they arrive (spill, truncate, mask), rewrite history (compact, clear, drop), add context
(memories, attachments) and place cache breakpoints. It never sees true token counts, the cache
state, or the trace's facts and probes.

:class:`Strategy` is a template base whose default behaviour is append-only history with no cache
breakpoints; a concrete strategy overrides the few hooks it changes. Its parameters are a
:class:`StrategyConfig` (pydantic): every field has a default, a description and bounds, and unknown
fields are rejected, so ``--set`` and sweeps can vary any of them by name and a typo fails loudly.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from ctxsim.harness.llm.services import LLMServices
from ctxsim.harness.model.conversation import (
    Block,
    Breakpoint,
    History,
    Message,
    Request,
    SystemPrompt,
    ToolSet,
    Usage,
)
from pydantic import BaseModel, ConfigDict


class StrategyError(ValueError):
    """Unknown strategy or invalid parameters (exit status 2 at the CLI; re-exported by the registry)."""


class StrategyConfig(BaseModel):
    """Base of every strategy's parameters: frozen, unknown fields rejected, no NaN or infinite
    number (refused as "not a finite number", not as a bound it happens to fail)."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, allow_inf_nan=False)


@dataclass
class StrategyEnv:
    """What the engine gives a strategy: the same things a real agent has.

    ``window`` and ``max_output_tokens`` are the model's published limits (an agent knows them);
    ``session_dir`` is a real directory for this run's files (spills, transcripts, memories);
    ``services`` makes billed side calls; ``now()`` is the simulated clock in seconds.
    """

    session_dir: Path
    services: LLMServices
    now: Any  # Callable[[], float]
    window: int
    max_output_tokens: int
    model: str
    provider: str
    system: SystemPrompt
    tools: ToolSet
    rng: np.random.Generator
    home_dir: Path | None = None      # the simulated user's home (user-level memory, conventions)
    project_dir: Path | None = None   # the simulated project root (instruction files, project memory)
    # the API's token count of a text on the run's model, as an agent that asks the API for it gets it
    # (Claude Code's Read tool does; ctxsim.harness.provider.Provider.table_count); None: none to ask
    count_tokens: Callable[[str], int] | None = None


@dataclass(frozen=True)
class CallInfo:
    index: int                 # index of this main call in the replay (0-based)
    now: float                 # simulated time, seconds
    session: str | None = None
    subtask: str | None = None  # id of the open subtask span, if any
    model: str | None = None    # the model the recorded agent used for this call (None: the run's)


@dataclass(frozen=True)
class Rejection:
    """The API refused the request built for a call (a 400: nothing billed, nothing answered).

    What ``ctxsim.harness.provider.protocol`` found, in the API's words: ``reasons`` holds each of "overflow"
    (prompt is too long), "pairing" (a tool_use/tool_result mismatch) and "breakpoints" (cache_control
    misuse) that applies; ``detail`` is the API's message; ``tokens`` the request's input tokens as
    the API counted them (a prompt-too-long 400 states them: a strategy may re-anchor its estimate on
    it); ``window`` the limit the API enforced; ``attempt`` is 1 at the first rejection of this call,
    2 after one retry, and so on."""

    reasons: tuple[str, ...]
    detail: str
    tokens: int
    window: int
    attempt: int


@dataclass
class Counters:
    """What a strategy reports about its own work (the engine counts calls and tokens itself)."""

    spills: int = 0
    readbacks: int = 0
    compactions_attempted: int = 0
    compactions_succeeded: int = 0
    compactions_failed: int = 0
    breaker_trips: int = 0
    extra: Counter = field(default_factory=Counter)

    def compaction(self, succeeded: bool = True) -> None:
        """Count one compaction. The one definition every strategy counts by: any rewrite of history
        that removes content (a summary in place of messages, a cut with no summary, cleared or
        masked results); ``succeeded=False`` for an attempt that left history as it was."""
        self.compactions_attempted += 1
        if succeeded:
            self.compactions_succeeded += 1
        else:
            self.compactions_failed += 1


class Strategy:
    """Template base: append-only history, no breakpoints. Override what you change."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    Config: ClassVar[type[StrategyConfig]] = StrategyConfig
    # True when the strategy promises that no request exceeds the window (the property kit holds
    # it to that); append-only baselines do not.
    manages_window: ClassVar[bool] = False
    # True for strategies that only make sense on an imported log (they re-enact what it records);
    # `name = "all"` in a sweep leaves them out
    needs_recorded_trace: ClassVar[bool] = False
    # False for a strategy whose context is the recorded agent's own (it re-enacts the log): what the
    # agent did after forgetting (re-reads, a user restating the task) is already in the log, so the
    # closed loop of harness/retention/recovery.py adds nothing for it (it would bill the log's forgetting twice)
    closed_loop: ClassVar[bool] = True
    # True when nothing leaves the window without a summary or a path back (a file the model can
    # read): NovaCode's principle; the property kit holds such strategies to it
    keeps_path_back: ClassVar[bool] = False
    # True when every compaction keeps the request in hand: the user's latest message stays in the
    # window as the user wrote it (goose re-sends it; Codex keeps recent user messages); the property
    # kit holds such strategies to it
    keeps_latest_request: ClassVar[bool] = False
    # True: the user messages it keeps across a compaction are the user's own, as written (a cut keeps their
    # opening): no summary, note or other text of its own sent as a plain user message (the kit's user_messages)
    keeps_user_messages: ClassVar[bool] = False
    # True (with keeps_user_messages): the user messages a compaction keeps are the newest the user wrote, in the order
    # written (the oldest kept may be cut): Codex walks back from the newest within its budget
    keeps_newest_user_messages: ClassVar[bool] = False
    # True: a tool result it replaced (cleared, masked, pruned) keeps that replacement for as long as it is sent
    # replaced: nothing is replaced again from its own placeholder (the kit's replaced_once)
    keeps_replacements: ClassVar[bool] = False
    # One line: what the modelled agent does when the API rejects a request, with its source (listed
    # by `ctxsim strategies`). The default is what most real agents do (peers.md, "Real agents never
    # keep sending a rejected request"): gemini-cli refuses to send and ends the turn, Codex errors
    # the turn, SWE-agent exits.
    on_rejection: ClassVar[str] = "the turn errors and the session ends"

    # --- what a strategy declares it keeps (the property kit holds it to each; docs/writing-a-strategy.md) ---
    # Parts of the request besides its messages that a declared rewrite (``Request.rewrite``) may change:
    # "system", "tools". A compaction rewrites messages; one that also re-renders the system prompt or the
    # tools (and so loses their cache entry) says so here.
    rewrites_also: ClassVar[frozenset[str]] = frozenset()
    # Optional (not defined here): ``check_params``, the parameters for the property kit's small window
    # (a mapping, or a function of the window; a classmethod reading ``cls.Config`` serves subclasses too).

    @classmethod
    def summary_keeps(cls, config: StrategyConfig) -> tuple[str, ...]:
        """The items every summary this strategy asks for keeps (the sections its prompt promises), by
        name: each summary request's instructions name them, each answer holds them, and the request
        that uses the summary still holds them. Empty: no promise."""
        return ()

    @classmethod
    def clear_minimum(cls, config: StrategyConfig) -> tuple[int, str] | None:
        """``(tokens, per)``: a clearing of tool results (results replaced by a placeholder) frees at
        least ``tokens`` input tokens, counted ``per`` ``"request"`` (all a request clears) or
        ``"clearing"`` (what it clears beyond the request before it). None: no minimum."""
        return None

    @classmethod
    def keeps_recent_tool_uses(cls, config: StrategyConfig) -> int:
        """How many of the newest tool uses keep their results as they entered, whatever the strategy
        clears or masks (context_editing's ``keep``). 0: no promise."""
        return 0

    @classmethod
    def clears_all_but_recent(cls, config: StrategyConfig) -> tuple[str, ...] | None:
        """Whether a clearing clears every result but the newest ``keeps_recent_tool_uses`` tool uses' (by
        call): the tools whose results it never clears, or None (no promise). context_editing's
        ``clear_tool_uses`` clears all the older results at once, its ``exclude_tools`` apart."""
        return None

    @classmethod
    def clears_all_beyond(cls, config: StrategyConfig) -> tuple[int, int, tuple[str, ...]] | None:
        """``(turns, chars, tools)``: a request that newly replaces results (a clearing, a prune) replaces every
        result older than the newest ``turns`` user turns and than the ``chars`` characters of tool output before
        them (walking back from those turns to the first result already replaced), the results of ``tools`` apart:
        opencode's prune, which leaves the last two turns and the newest 40,000 tokens before them. None: no
        promise."""
        return None

    @classmethod
    def supersedes_reads(cls, config: StrategyConfig) -> str | None:
        """The text a read's result is replaced by because a later read of the same file stands in the request
        (Cline's duplicate file reads: all but the latest read of each file): every result sent with it has a
        later call of the same tool on that file whose result is sent as it entered. None: no such replacement."""
        return None

    @classmethod
    def clears_above(cls, config: StrategyConfig) -> int | None:
        """The input tokens of the whole prompt (every result and input as it entered, nothing cleared) past
        which every request clears all but the newest ``keeps_recent_tool_uses`` tool uses' results (with
        ``clears_all_but_recent``): context_editing as the API edits each request it is sent, judged on the
        full prompt the client sends, not on what an earlier clearing left. None: no such trigger."""
        return None

    @classmethod
    def keeps_recent_turns(cls, config: StrategyConfig) -> int:
        """How many of the newest user turns keep their tool results as they entered, whatever the strategy clears:
        every result after the Nth newest message the user typed (opencode's prune never touches the last two
        turns). 0: no promise."""
        return 0

    @classmethod
    def keeps_recent_reads(cls, config: StrategyConfig) -> tuple[int, tuple[str, ...] | None, int] | None:
        """``(n, tools, chars)``: the results of the newest ``n`` uses of these tools (None: any tool) that entered
        at ``chars`` characters or more keep as they entered, newest by where each stands (on_demand_reading's
        ``keep_recent_reads``: its newest reads are never replaced by pointers). None: no promise."""
        return None

    @classmethod
    def replaces_reads_to(cls, config: StrategyConfig) -> int | None:
        """With ``keeps_recent_reads``: the tokens (the strategy's estimate) the reads it tracks come to at most after a
        request that replaces some, unless it replaced every read but the newest it keeps (on_demand_reading's
        ``keep_read_tokens``: a round replaces the oldest until the rest fit). None: no promise."""
        return None

    @classmethod
    def keeps_recent_tool_chars(cls, config: StrategyConfig) -> int:
        """How many characters of the newest tool output (walking back from the newest result, by where
        each stands) keep their results as they entered, whatever the strategy clears: a protection
        budget counted in characters or estimated tokens times the characters per token the strategy
        counts (opencode's ``PRUNE_PROTECT``). 0: no promise."""
        return 0

    @classmethod
    def call_models(cls, config: StrategyConfig) -> Mapping[str, str]:
        """The model a kind of call goes to, where the strategy fixes one (on an Anthropic route, the
        property kit's): keys ``"summary"`` (the main conversation's summaries), ``"subagent"`` (the calls
        of a sub-agent the strategy starts itself, for work the log did in its main context),
        ``"subagent:summary"`` (summaries inside one), ``"report"`` (the summary asked for as one ends),
        or any other side-call kind. A model left to the run is no promise: leave it out (or give "").
        Empty: none."""
        return {}

    @classmethod
    def clears_when_idle(cls, config: StrategyConfig) -> tuple[float, tuple[str, ...]] | None:
        """``(seconds, tools)``: after the main conversation has been idle longer than ``seconds`` on the
        trace's clock (its last answer to the next request), that request clears the old results of
        ``tools`` (all tools if empty), all but the newest ``keeps_recent_tool_uses`` (Claude Code's
        time-based microcompact: the cache is cold by then). None: no such rule."""
        return None

    @classmethod
    def replaces_only_when_idle(cls, config: StrategyConfig) -> float | None:
        """Seconds: the strategy changes a result it sent before (a pointer for an old read, a cleared output) only
        at a request of the main conversation that follows one of its own by more than this on the trace's clock
        (the cache is cold then: on_demand_reading's ``cold_cache_s``); a request sooner after changes none. None:
        no such rule."""
        return None

    @classmethod
    def compacts_above(cls, config: StrategyConfig, window: int, max_output_tokens: int) -> int | None:
        """The tokens past which the strategy summarises before sending: once its own estimate of a request of
        the main conversation (``Request.estimated_tokens``) passes them, it asks for a summary first (on a
        model with this ``window`` and output limit). None: no such trigger (or one that may find nothing
        worth summarising, unless ``summarises_before_latest_prompt`` says where)."""
        return None

    @classmethod
    def estimates_whole(cls, config: StrategyConfig) -> tuple[float, str] | None:
        """``(characters per token, unit)`` where the strategy's estimate of every request of its main conversation is
        the request's whole size with no usage anchor: the system prompt's and tools' characters and each message's
        (``"json_chars"``: its JSON as the API takes it; ``"chars"``: ``Message.chars``) over that many characters a
        token, rounded up, and the opaque prefix's tokens (cline: ``JSON.stringify`` over 3). None: no promise."""
        return None

    @classmethod
    def replaces_reads_above(cls, config: StrategyConfig) -> int | None:
        """With ``keeps_recent_reads``: the tokens (at the strategy's own rate) of the tracked reads it sends whole past
        which a request of the main conversation replaces the oldest, once past the idle gap of
        ``replaces_only_when_idle`` (on_demand_reading's ``inline_read_tokens``). None: no promise."""
        return None

    @classmethod
    def restores_recent_reads(cls, config: StrategyConfig) -> tuple[int, tuple[str, ...], tuple[str, ...]] | None:
        """``(files, read tools, path keys)`` where a compaction attaches the files read most recently (a message of
        origin "restore"): at most that many, newest first, a read being a call of one of those tools naming its file
        by the first of those input keys, answered without an error (NovaCode's N-COMP-11). None: no promise."""
        return None

    @classmethod
    def cache_marks_ttl(cls, config: StrategyConfig) -> str | None:
        """With ``cache_marks``: the TTL (``"5m"`` or ``"1h"``) the declared breakpoints are written with; the kit
        reports one written with none (at the API's default, five minutes) where this is an hour. None: no promise."""
        return None

    @classmethod
    def restores_file_chars(cls, config: StrategyConfig) -> int | None:
        """With ``restores_recent_reads``: the least characters of a restored file's opening (what its last read
        returned) the attachment holds, or the whole where it is shorter. None: no promise."""
        return None

    @classmethod
    def estimates_from_usage(cls, config: StrategyConfig) -> float | None:
        """The characters per token where the strategy's estimate of a request of its main conversation that continues
        the last answered one (nothing rewritten, no launch or sub-agent between) is that request's usage, its input
        and the answer's output tokens, and the characters (``Message.chars``) of the messages come after the answer
        over that many a token, rounded up (NovaCode's N-COMP-5 anchor). None: no promise."""
        return None

    @classmethod
    def reinjects_after_compaction(cls, config: StrategyConfig) -> tuple[str, ...]:
        """Origins (``Message.meta["origin"]``) of messages of the strategy's own that a compaction injects again on the
        very next request, once the conversation has been sent one (NovaCode's recalled memories, N-COMP-12). ():
        no promise."""
        return ()

    @classmethod
    def keeps_across_launches(cls, config: StrategyConfig) -> str | None:
        """What the strategy keeps in memory from one launch to the next by design, in words. A new launch of an agent
        is a new process: it starts with its files and nothing else, so by default (None) the property kit builds
        the strategy anew at each new launch (not at a resume) and expects the requests one instance sends."""
        return None

    @classmethod
    def writes_every(cls, config: StrategyConfig) -> tuple[str, int, str] | None:
        """``(kind, n, tool)``: once it has begun, a side call of this kind comes after exactly ``n`` answered requests
        of the main conversation since the last one (sooner where the user typed a message since), until an answer
        calls ``tool`` itself (the recorded agent keeps its own: structured_state's todo list re-written every
        ``todo_every`` calls, unless the log writes TodoWrite). None: no promise."""
        return None

    @classmethod
    def compacts_above_finished(cls, config: StrategyConfig) -> bool:
        """Whether ``compacts_above`` counts only the finished messages (those before the user's latest typed message:
        aider's ``done_messages``): no summary is asked for while the whole conversation is under it, but a request
        past it may go unsummarised. False: the whole request counts."""
        return False

    @classmethod
    def compacts_above_events(cls, config: StrategyConfig) -> int | None:
        """The events past which the strategy summarises before sending: a request of the main conversation whose view
        holds more (the system prompt one event, each tool call one, each tool result one, any other message one)
        follows a summary asked for (OpenHands V1's ``max_size``). None: no such trigger."""
        return None

    @classmethod
    def summarises_before_latest_prompt(cls, config: StrategyConfig) -> bool:
        """Whether a summary takes only what stands before the user's latest typed message and before the tail it keeps
        (``compaction_tail``'s leasts; Cline's cut passes neither): with nothing but an earlier summary before them there
        is nothing to summarise, and the trigger ``compacts_above`` declares is not held there. False: no such
        exception."""
        return False

    @classmethod
    def compaction_breaker(cls, config: StrategyConfig) -> int | None:
        """The summaries that must fail in a row (refused, failed, or answered empty; a good one resets the count,
        as a new launch does) before the strategy stops summarising at its trigger: Claude Code's circuit breaker.
        None: no promise (the kit stops holding the trigger once a summary failed)."""
        return None

    @classmethod
    def compacts_at_turns(cls, config: StrategyConfig, window: int, max_output_tokens: int) -> int | None:
        """The tokens past which the strategy summarises when a user turn begins: at the first request after
        the user's message, once the conversation's previous request held more input than this, it asks for
        a summary first (goose: a reply that starts over 80% of the window). None: no such trigger."""
        return None

    @classmethod
    def compacts_by_cut(cls, config: StrategyConfig, messages: Sequence[Message]) -> bool | None:
        """Where the strategy's compaction at its trigger (``compacts_above``, ``compacts_on_usage``) is a cut with no
        summary: whether a cut of a request holding ``messages`` drops any. A request past the trigger is then a
        rewrite instead of following a summary, where a cut would drop some (sliding_window: Cline's range, which
        finds nothing to drop in a short conversation or where the first kept message would be left empty). None:
        its compaction is a summary."""
        return None

    @classmethod
    def compacts_on_usage(cls, config: StrategyConfig, window: int, max_output_tokens: int) -> int | None:
        """The tokens at or past which the usage of the last answered request of the main conversation (its input and
        the answer's output, as the API reported them) makes the strategy summarise before its next request (on a
        model with this ``window`` and output limit; with ``compacts_only_at_turns``, only as a user turn begins).
        opencode's overflow check; goose's at a reply's start. None: no such trigger."""
        return None

    @classmethod
    def compaction_tail(cls, config: StrategyConfig, window: int,
                        max_output_tokens: int) -> tuple[tuple[float, float | None, str], ...]:
        """``((least, most, unit), ...)``: what a compaction keeps verbatim after its summary, the conversation's
        newest messages as they stood (messages of its own, an attachment or a note, apart), on a model with this
        ``window`` and output limit. Each entry: the tail holds at least ``least`` and at most ``most`` (None: no
        cap) counted in ``unit``: ``"tokens"`` (sized at the strategy's own estimate: a least judged in true tokens by
        the kit's factor for estimates, a cap by the characters at 4 a token), ``"json_chars"`` (each message's JSON as the API takes it),
        ``"chars"`` (``Message.chars``), ``"messages"``, ``"turns"`` (the newest user turns whole; a least judged where the turns
        wanted leave something before them and fit every cap), ``"events"`` (OpenHands': a tool call or a result one each,
        any other message one), or ``"share"`` (a share of the conversation's JSON characters, 0-1: where a user message
        the user typed stands within it, the tail starts at one). A least yields to any most: a tail that the
        messages before it (with the calls their results answer) would carry past a cap may hold less. Empty:
        no promise. A cut with no summary is held to it too: the tail is what stands after the strategy's own last
        message of text (its note of the cut), or with none, after the gap the cut left."""
        return ()

    @classmethod
    def spills_largest_first(cls, config: StrategyConfig) -> bool:
        """Whether a message whose results pass a budget gives up its largest results first: no result of a message
        enters whole while a shorter one of the same message enters replaced (NovaCode's N-SPILL-2; a read of the
        strategy's own file apart). False: no promise."""
        return False

    @classmethod
    def cut_keeps_share(cls, config: StrategyConfig, window: int,
                        max_output_tokens: int) -> tuple[float, int, float | None, float] | None:
        """``(share, head, over, under)``: a cut that drops messages with no summary keeps at least ``share`` (0-1,
        rounded up) of the conversation's messages after its first ``head``, unless the conversation before it was
        estimated past ``over`` tokens (None: at any size), or a request keeping only that share (and the pair
        before it) would still be estimated at ``under`` tokens or more, so that it cuts again (on a model with this
        ``window`` and output limit; estimates at the rate of the strategy's own estimate of the request the cut
        sent). Cline's classic truncation keeps half of what follows the first exchange, a quarter when half the
        total is still over. None: no promise."""
        return None

    @classmethod
    def compaction_tail_walked(cls, config: StrategyConfig) -> bool:
        """Whether ``compaction_tail``'s leasts are the bound a walk from the newest finished message stays under, not a
        floor: the finished messages kept (those before the latest message the user typed), with the message before
        them, reach it, where any is kept (aider's ``summarize_real``: the newest messages under half its budget;
        none kept where the whole history is summarised, but where a second round summarised the first's summary and
        tail, that first tail is the walk's). False: each least is a floor."""
        return False

    @classmethod
    def compaction_tail_under_window(cls, config: StrategyConfig) -> bool:
        """Whether ``compaction_tail`` holds only for a compaction of a conversation that fits the window: one past it
        is cut to fit instead, whatever the tail (OpenHands' token requirement beside its count of events). False: the
        tail holds at every compaction."""
        return False

    @classmethod
    def compaction_tail_shortest(cls, config: StrategyConfig) -> bool:
        """Whether the tail a compaction keeps is the shortest that holds every least of ``compaction_tail`` (walking
        back from the newest message until they all hold, then back to a message that answers no call): without its
        oldest message and the results that answer it, it would hold less than one of them. False: no promise (a
        tail may keep more)."""
        return False

    @classmethod
    def compaction_tail_calibrated(cls, config: StrategyConfig) -> bool:
        """Whether the tokens of ``compaction_tail`` are counted at a rate no higher than the characters a token the
        conversation measured on its last answered request (its input and output over its characters, the answer's
        too): a cap then holds at that rate. False: no promise (a fixed rate may count a dense tail far under its
        true tokens)."""
        return False

    @classmethod
    def compacts_only_at_turns(cls, config: StrategyConfig) -> bool:
        """Whether the strategy summarises the main conversation only as a user turn begins (its first request after
        the user's message) or in reaction to a refused request: goose checks its threshold as a reply starts, not
        between the tool calls of one. False: no promise."""
        return False

    @classmethod
    def cache_marks(cls, config: StrategyConfig) -> tuple[str, ...]:
        """Where every request of the conversation (main and sub-agent) carries a cache breakpoint:
        ``"tools"`` (the end of the tools array, when there are tools), ``"system"`` (the end of the system
        prompt, when there is one), ``"last"`` (the request's last message), ``"last_user"`` (its last user
        message). Empty: no promise."""
        return ()

    @classmethod
    def summarises_dropped(cls, config: StrategyConfig) -> bool:
        """Whether everything this strategy drops from the main window goes into a summary first: a
        message of the session (a user's or the model's text, a tool call's result) leaves the window
        only after a summary request took it in, and the request that drops it holds that summary
        (a result cleared to a placeholder stays in the window). False: no promise (a sliding window
        drops without one)."""
        return False

    @classmethod
    def result_limits(cls, config: StrategyConfig) -> tuple[tuple[int, str], ...]:
        """``((amount, unit), ...)``: every tool result this strategy sends is cut to at most ``amount``
        ``"bytes"`` (UTF-8), ``"chars"`` or ``"lines"`` (a cut's own notices aside). Empty: no limit."""
        return ()

    @classmethod
    def result_cuts(cls, config: StrategyConfig) -> tuple[tuple[tuple[str, ...], int, float], ...]:
        """``((tools, chars, head_share), ...)``: a result of one of ``tools`` (empty: of any tool no other entry
        names) longer than ``chars`` characters enters holding its first ``int(chars × head_share)`` characters and
        its last ``chars`` less those, as the tool returned them (a cut's marker, a spill's note around them); one
        no longer enters whole. A read of the strategy's own file aside. Empty: no promise."""
        return ()

    @classmethod
    def cut_keeps_head(cls, config: StrategyConfig) -> tuple[tuple[int, str], ...]:
        """``((amount, unit), ...)``: a tool result the strategy cuts keeps at most ``amount`` ``"bytes"``,
        ``"chars"`` or ``"lines"`` of the tool's output from its start (the rest of what it keeps from its end):
        Codex's cut gives the head at most half its bytes and its head lines. Empty: no promise."""
        return ()

    @classmethod
    def keeps_results_whole(cls, config: StrategyConfig) -> tuple[int, int] | None:
        """``(per_result, per_message)`` characters: a tool result of at most ``per_result`` characters, in a message
        whose results total at most ``per_message`` (those over ``per_result`` counted as they are sent: replaced
        first), enters as the tool returned it (NovaCode spills only past its threshold and then past its message
        budget, N-SPILL-1 and N-SPILL-2). None: no promise."""
        return None

    @classmethod
    def keeps_results_whole_left(cls, config: StrategyConfig) -> tuple[int, float | None, tuple[str, ...] | None] | None:
        """``(cap, chars_per_token, tools)``: a result of these tools (None: any) of at most ``cap`` characters, and (with
        ``chars_per_token``) at most that many characters a token of the room the window had left after the main
        conversation's last request, enters as the tool returned it (gemini-cli's truncation threshold
        ``min(40,000, 4 × (limit − last prompt tokens))``). None: no promise."""
        return None

    @classmethod
    def clock_epochs(cls, config: StrategyConfig) -> tuple[float, ...]:
        """Unix times the strategy reads a trace's clock from (the trace's t = 0 shown as that
        instant, e.g. to stamp a date): the property kit crosses midnight on each clock as well.
        Default: the values of the parameters whose names end in ``epoch_s``."""
        return tuple(float(v) for n, v in config if n.endswith("epoch_s") and isinstance(v, int | float)
                     and not isinstance(v, bool))

    def __init__(self, config: StrategyConfig, env: StrategyEnv) -> None:
        self.config = config
        self.env = env
        self.history = History()
        self.counters = Counters()
        self.rewrote = False  # set when this call's request rewrote history (declared cache break)
        self._spans: list[tuple[str, History | None]] = []  # open subtask spans (outer history if isolated)

    # --- events, in trace order -----------------------------------------------------------------
    def on_session_start(self, session: str, resume: bool, now: float) -> None:
        """A new agent launch. The base keeps the conversation only when resuming, and then
        answers a call the previous launch left open (the API rejects it otherwise)."""
        if not resume:
            self.history = History()
        else:
            self.history, n = answer_dangling(self.history)
            self.counters.extra["synthetic_results"] += n

    def on_session_end(self, session: str, now: float) -> None:
        pass

    def on_user(self, message: Message) -> None:
        self.history = self.history.append(message)

    def on_tool_results(self, message: Message) -> None:
        """A user message holding the results of the previous call's tool uses (one block each,
        in trace order). Transform here (spill, truncate) before they enter history."""
        self.history = self.history.append(message)

    def on_response(self, message: Message, usage: Usage | None) -> None:
        """The model's answer (as recorded) and the usage the API reported for the request, or
        ``None`` when no request of this run made it: the API rejected it (the answer is still what
        the agent did next), or it is a copy of an earlier session's call that a resumed conversation
        starts from (``AssistantEvent.copied``: history, no request sent)."""
        self.history = self.history.append(message)

    def on_recorded_compact(self, trigger: str, summary: str | None, now: float) -> None:
        """The recorded agent compacted here. Only strategies that re-enact a log act on it."""

    def on_subtask_start(self, id: str, description: str, isolated: bool) -> None:
        """A span of sub-task work. When the recorded agent ran it ``isolated`` (a sub-agent with
        its own context, as Claude Code's Task tool does), its calls are sent from a fresh history
        and the parent's history resumes at the end; otherwise it is ordinary main-loop work."""
        self._spans.append((id, self.history if isolated else None))
        if isolated:
            self.history = History()

    def on_subtask_end(self, id: str, conclusion: str) -> None:
        _, outer = self._spans.pop()
        if outer is not None:
            self.history = outer

    @property
    def in_isolated_subtask(self) -> bool:
        return any(outer is not None for _, outer in self._spans)

    # --- the model call ---------------------------------------------------------------------------
    def build_request(self, call: CallInfo) -> Request:
        return Request(self.env.system, self.env.tools, self.history, self.breakpoints(self.history),
                       kind="subagent" if self.in_isolated_subtask else "main",
                       estimated_tokens=self.estimate(), rewrite=self._take_rewrite())

    def on_rejected(self, rejection: Rejection, call: CallInfo) -> bool:
        """The API rejected the request built for ``call``. React as the agent does (reactive
        compaction, truncation, dropping tool output ...) and return True: the engine rebuilds the
        request with build_request(call) and sends it again (billed like any call; side calls made
        here are billed too). Return False to give up: the call fails, the session ends there.

        The engine asks at most ``MAX_ATTEMPTS_PER_CALL − 1`` times per call (harness/replay/engine.py);
        after that the call fails whatever the strategy would do. The default gives up."""
        return False

    def breakpoints(self, history: History) -> tuple[Breakpoint, ...]:
        return ()

    def estimate(self) -> int | None:
        """The strategy's own estimate of the request's input tokens (None: it keeps none)."""
        return None

    def _take_rewrite(self) -> bool:
        r, self.rewrote = self.rewrote, False
        return r

    # --- introspection ----------------------------------------------------------------------------
    @classmethod
    def trace_defaults(cls, trace: Any, overrides: frozenset[str]) -> dict[str, Any]:
        """Parameters this strategy reads from an imported trace's recorded setting
        (``trace.header.recorded``): the engine passes them as defaults, under the caller's own
        parameters. ``overrides`` names the recorded fields the run sets for every call instead
        (``model``, ``window``, ``cache_ttl``, ``token_scale``).

        The base gives every strategy with a ``cache_ttl`` parameter the TTL the log wrote (issue 27:
        a strategy writing 1-hour entries on a log of 5-minute ones prices a cache the user never
        bought); ``--set cache_ttl=…`` still wins. Overrides should start from ``super()``'s."""
        rec = getattr(getattr(trace, "header", None), "recorded", None)
        if (rec is not None and rec.cache_ttl and "cache_ttl" not in overrides
                and "cache_ttl" in cls.Config.model_fields):
            return {"cache_ttl": rec.cache_ttl}
        return {}

    @classmethod
    def parameters(cls) -> dict[str, dict[str, Any]]:
        """Every parameter with its default, type, description and bounds (for ``ctxsim strategies``)."""
        schema = cls.Config.model_json_schema()
        out = {}
        for name, f in cls.Config.model_fields.items():
            prop = schema.get("properties", {}).get(name, {})
            out[name] = {
                "default": f.default,
                "type": prop.get("type") or ("|".join(p.get("type", "?") for p in prop.get("anyOf", [])) or "?"),
                "description": f.description or "",
                **{k: prop[k] for k in ("minimum", "maximum", "exclusiveMinimum", "enum") if k in prop},
            }
            if "enum" not in out[name] and "$ref" in prop:
                ref = schema.get("$defs", {}).get(prop["$ref"].split("/")[-1], {})
                if "enum" in ref:
                    out[name]["enum"] = ref["enum"]
        return out


UNANSWERED_RESULT = "[no result: the session ended before this tool call returned]"


def check_room(strategy: str, window: int, line: int, params: dict[str, int]) -> None:
    """Refuse parameters that put a strategy's last line (the effective window, the hard or the
    auto-compact line) at or below zero tokens in this window: a reserve or margin larger than the
    window, where every request is over the line and the run's numbers would look like a result
    (issue 44). A soft line below zero with room under the hard one is a choice (a compaction
    attempted at every call), not refused. Raised when the strategy is built for a run, the window
    known: exit 2 at the command line, naming the parameters and the window."""
    if line > 0:
        return
    given = ", ".join(f"{k} {v:,}" for k, v in params.items())
    raise StrategyError(f"{strategy}: {given} {'leaves' if len(params) == 1 else 'leave'} no room in a window of "
                        f"{window:,} tokens (the compaction line "
                        f"would be at {line:,}): lower {'it' if len(params) == 1 else 'them'} or give a larger --window")


def answer_dangling(history: History) -> tuple[History, int]:
    """A history whose last message is an assistant ``tool_use`` that never got its results (the
    agent stopped mid-call and was resumed) gets a synthetic error result for each, as every real
    agent does before its next request (Claude Code on resume; NovaCode N-TRANS-5): the API rejects
    an unanswered ``tool_use`` with a 400. A crash while parallel calls ran leaves the results that
    came back before it: the last message then answers some of the calls before it, and the missing
    ones are added to it, after its results (it was never sent: no cache entry holds it). Only the
    last two messages are looked at, so this is O(1) per call. Returns the history and the number of
    results added."""
    n = len(history)
    if not n:
        return history, 0
    last = history[-1]
    if last.role == "assistant":
        ids = last.tool_use_ids()
        if not ids:
            return history, 0
        return history.append(Message("user", _unanswered(ids), {"origin": "synthetic_result"})), len(ids)
    if n < 2 or history[-2].role != "assistant" or not last.has_tool_result:
        return history, 0
    answered = {b.id for b in last.blocks if b.type == "tool_result"}
    missing = [i for i in history[-2].tool_use_ids() if i not in answered]
    if not missing:
        return history, 0
    results = tuple(b for b in last.blocks if b.type == "tool_result")
    others = tuple(b for b in last.blocks if b.type != "tool_result")
    return history.replace_at(n - 1, Message(last.role, results + _unanswered(missing) + others, last.meta)), len(missing)


def _unanswered(ids) -> tuple[Block, ...]:
    """The synthetic error result of each call ``ids`` names that never got its own."""
    return tuple(Block.tool_result(i, UNANSWERED_RESULT, True, synthetic=True) for i in ids)


def tool_result_message(blocks: list[Block], **meta: Any) -> Message:
    return Message("user", tuple(blocks), meta or {})
