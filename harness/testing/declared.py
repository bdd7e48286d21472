"""What a strategy declares it keeps, as the property kit reads it from the class.

Every declaration is found through the class, so a subclass (another class name, another ``name``)
is checked like its base (issue #45):

* ``summary_keeps(config)``: the items every summary keeps (the sections its prompt promises);
* ``clear_minimum(config)``: the tokens a clearing of tool results frees at least, per request or per
  clearing;
* ``rewrites_also``: the parts besides the messages (``"system"``, ``"tools"``) a declared rewrite
  may change;
* ``result_limits(config)``: the bytes, characters or lines every tool result is cut to at most;
* ``result_cuts(config)``: per tool, the characters past which a result is cut and the share of them kept from its
  start (the rest from its end): tiered_budget's tiers;
* ``keeps_results_whole_left(config)``: the characters (and the characters a token of the room left in the window)
  within which a result of some tools enters whole (gemini-cli's truncation threshold);
* ``spills_largest_first(config)``: whether a message over its budget gives up its largest results first (NovaCode's
  N-SPILL-2);
* ``cut_keeps_head(config)``: the bytes, characters or lines of a tool's output a cut keeps from its start at most
  (Codex's head: half the bytes, its head lines);
* ``keeps_results_whole(config)``: the characters of a result, and of a message's results, within which a result
  enters as the tool returned it (NovaCode's spill threshold and message budget);
* ``keeps_recent_tool_uses(config)``: how many of the newest tool uses keep their results as they entered;
* ``clears_all_but_recent(config)``: whether a clearing clears every result older than the newest
  ``keeps_recent_tool_uses`` tool uses, and the tools it never clears (context_editing);
* ``clears_all_beyond(config)``: the user turns and the characters of tool output before them a clearing leaves
  whole at most, and the tools it never clears (opencode's prune: two turns and its protection);
* ``clears_above(config)``: the whole prompt's input tokens (nothing cleared) past which every request clears
  all but the newest ``keeps_recent_tool_uses`` (context_editing: the API judges its trigger on the prompt sent);
* ``supersedes_reads(config)``: the text a read's result is replaced by because a later read of the same file
  stands in the request (sliding_window: Cline's duplicate file reads);
* ``keeps_recent_turns(config)``: how many of the newest user turns keep their tool results as they entered
  (opencode's prune never touches the last two);
* ``keeps_recent_tool_chars(config)``: how many characters of the newest tool output keep their results as
  they entered (opencode's prune protection);
* ``keeps_recent_reads(config)``: how many of the newest results of some tools, of a least size, keep as they
  entered (on_demand_reading's newest reads never become pointers);
* ``replaces_reads_to(config)``: the tokens those reads come to at most after a request that replaces some, unless it
  replaced all but the newest (on_demand_reading's ``keep_read_tokens``);
* ``call_models(config)``: the model a kind of call goes to (a summary on a fast model, a sub-agent's calls);
* ``clears_when_idle(config)``: the idle gap (trace clock) after which the next request clears old tool
  results, and the tools whose results it clears (Claude Code's time-based microcompact);
* ``replaces_only_when_idle(config)``: the idle gap (trace clock) a request of the main conversation must follow
  before it changes a result it sent before (on_demand_reading's ``cold_cache_s``: the cache cold anyway);
* ``compacts_above(config, window, max_output_tokens)``: the estimate of a request past which the strategy
  summarises before sending it (its auto-compaction trigger on the run's window);
* ``estimates_whole(config)``: the characters a token and the unit (JSON characters or characters) of an estimate that
  is the whole request's size with no usage anchor (cline);
* ``compacts_on_usage(config, window, max_output_tokens)``: the usage (input and output tokens) of the last answered
  main request at or past which the strategy summarises before its next (opencode's overflow; goose's, as a turn
  begins, with ``compacts_only_at_turns``);
* ``compacts_by_cut(config, messages)``: where its compaction at a trigger is a cut with no summary, whether a cut of
  a request holding ``messages`` drops any (sliding_window);
* ``restores_recent_reads(config)``: how many files its compaction restores, the tools that read a file and the input
  keys that name it (NovaCode's attachment, N-COMP-11: the files read most recently);
* ``replaces_reads_above(config)``: with ``keeps_recent_reads``, the tokens of tracked reads sent whole past which a
  request (past the idle gap of ``replaces_only_when_idle``) replaces the oldest (on_demand_reading's trigger);
* ``cache_marks_ttl(config)``: with ``cache_marks``, the TTL ("5m" or "1h") every declared mark is written with;
* ``restores_file_chars(config)``: with ``restores_recent_reads``, the least characters of a restored file's opening
  (what its last read returned) the attachment holds, or the whole (NovaCode's per-file cap at its lowest rate);
* ``estimates_from_usage(config)``: the characters a token of an estimate anchored on the last answered request's
  usage (its input and output tokens) and the messages come after the answer (NovaCode's N-COMP-5, cut_no_summary);
* ``reinjects_after_compaction(config)``: origins of messages of its own a compaction injects again on the next
  request, once the conversation has been sent one (NovaCode's memories, N-COMP-12);
* ``compaction_tail_calibrated(config)``: whether the tokens of ``compaction_tail`` are counted at no more characters a
  token than the conversation measured on its last answered request (NovaCode's calibrated budgets);
* ``keeps_across_launches(config)``: what the strategy keeps in memory from one launch to the next by design, in
  words (None: nothing; a new launch is a new process, so the kit builds it anew there and expects the same requests);
* ``writes_every(config)``: the kind of a side call made every n answered main requests, and the tool whose call by
  the recorded agent ends the promise (structured_state's todo list);
* ``compacts_above_finished(config)``: whether that trigger counts only the finished messages, so that it holds as
  a floor only (aider: what came before the user's latest message);
* ``compacts_at_turns(config, window, max_output_tokens)``: the previous request's input past which the
  strategy summarises when a user turn begins (goose);
* ``compacts_above_events(config)``: the events (a tool call or a result one each) past which a request follows a
  summary (OpenHands V1's ``max_size``);
* ``summarises_before_latest_prompt(config)``: whether a summary takes only what stands before the user's latest
  typed message and the tail it keeps, so that the trigger is not held where nothing but a summary stands before
  them (cline);
* ``compaction_breaker(config)``: the summaries that must fail in a row before the strategy stops summarising at
  its trigger (Claude Code's circuit breaker: three);
* ``compacts_only_at_turns(config)``: whether it summarises only as a user turn begins or after a refused request
  (goose);
* ``summarises_dropped(config)``: whether everything the strategy drops from the main window goes into a
  summary first (Claude Code, Codex, gemini-cli, goose, opencode, OpenHands: their compactions summarise what they drop);
* ``compaction_tail(config, window, max_output_tokens)``: what a compaction (or a cut) keeps verbatim after its summary (or note, or gap), the
  conversation's newest messages: at least and at most how much, in tokens, JSON characters, characters, messages,
  turns or a share of the conversation (NovaCode's N-COMP-6 tail, cline's preserved tokens, gemini-cli's preserved fraction);
  ``compaction_tail_shortest(config)``: and no longer than the shortest that holds every least (NovaCode's walk);
  ``compaction_tail_under_window(config)``: only where the conversation fits the window (OpenHands: past it, cut to fit);
  ``compaction_tail_walked(config)``: its leasts the bound a walk from the newest finished message stays under (aider);
* ``cut_keeps_share(config, window, max_output_tokens)``: the share of the messages after its head a cut with no summary
  keeps at least, unless the conversation was estimated past a size or a request keeping that share would be
  estimated at another or more (sliding_window: Cline's half, a quarter when half the total is still over);
* ``cache_marks(config)``: where every request of the conversation carries a cache breakpoint (the tools,
  the system prompt, the last message, the last user message);
* ``clock_epochs(config)``: the Unix times the strategy reads the trace's clock from (a date it
  stamps changes at midnight on that clock): the clock-edge scenario crosses those midnights too.

The hooks and their defaults are on :class:`ctxsim.strategies.base.Strategy`. For built-in strategies
whose modules do not declare their summary items yet (Codex, Claude Code, NovaCode, OpenHands,
gemini-cli), :func:`summary_table` holds them, as their sources give them: resolved through the method resolution order like the hooks (a class that defines
``summary_keeps`` itself wins over an entry for one of its bases), so a subclass of Codex is held to
Codex's items. The items are written out here, not read from the module's constants: a bug that drops an
item from a prompt's constant would otherwise drop it from the promise too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ctxsim.strategies.base import Strategy, StrategyConfig


@dataclass(frozen=True)
class Declared:
    summary_items: tuple[str, ...] = ()
    clear_minimum: tuple[int, str] | None = None  # (tokens, "request" | "clearing")
    rewrites_also: frozenset[str] = frozenset()
    epochs: tuple[float, ...] = ()
    result_limits: tuple[tuple[int, str], ...] = ()  # (amount, "bytes" | "chars" | "lines")
    recent_kept: int = 0  # the newest tool uses whose results stay as they entered
    recent_chars: int = 0  # the newest characters of tool output whose results stay as they entered
    recent_turns: int = 0  # the newest user turns whose tool results stay as they entered
    recent_reads: tuple[int, tuple[str, ...] | None, int] | None = None  # (n, tools or any, least chars) kept as entered
    reads_to: int | None = None  # the tokens those reads come to at most after a request that replaces some
    reads_above: int | None = None  # ... and the tokens of reads sent whole past which a round, once idle, replaces some
    result_cuts: tuple[tuple[tuple[str, ...], int, float], ...] = ()  # (tools, characters, head share) of a cut
    head_at_most: tuple[tuple[int, str], ...] = ()  # (amount, unit) a cut result keeps from its start at most
    whole_under: tuple[int, int] | None = None  # (a result's, a message's results' characters) that enter whole
    whole_left: tuple[int, float | None, tuple[str, ...] | None] | None = None  # (cap, chars a token left, tools) kept whole
    largest_first: bool = False  # a message over its budget gives up its largest results first
    cold_only: float | None = None  # seconds since the main conversation's last request before a result may change
    clears_all_but: tuple[str, ...] | None = None  # a clearing clears all but the newest recent_kept (these tools apart)
    clears_above: int | None = None  # the whole prompt's tokens past which every request clears all but recent_kept
    clears_beyond: tuple[int, int, tuple[str, ...]] | None = None  # (turns, chars, tools apart) a clearing leaves at most
    superseded: str | None = None  # the text a read's result is replaced by when a later read of its file stands
    call_models: tuple[tuple[str, str], ...] = ()  # (kind of call, the model it goes to)
    idle_clear: tuple[float, tuple[str, ...]] | None = None  # (idle seconds, tools whose old results it clears)
    cache_marks: tuple[str, ...] = ()  # where every main-line request carries a breakpoint (CACHE_PLACES)
    compacts_above: int | None = None  # the estimate past which the strategy summarises before sending
    compacts_at_turns: int | None = None  # the previous request's input past which a user turn begins with a summary
    by_cut: Callable[[Any], bool] | None = None  # a compaction at the trigger is a cut: whether one drops any of these messages
    restores: tuple[int, tuple[str, ...], tuple[str, ...]] | None = None  # (files, read tools, path keys) restored
    marks_ttl: str | None = None  # the TTL every declared cache mark carries (cache_marks_ttl)
    restore_chars: int | None = None  # ... each holding at least this much of its last read's opening (or the whole)
    on_usage: int | None = None  # the last answered main request's usage at or past which the next is preceded by a summary
    from_usage: float | None = None  # chars per token of an estimate anchored on the last answered request's usage
    estimates_whole: tuple[float, str] | None = None  # (chars per token, unit) of an estimate of the whole request
    reinjects: tuple[str, ...] = ()  # origins of its own messages a compaction injects again on the next request
    writes_every: tuple[str, int, str] | None = None  # (side call kind, every n answered main requests, tool that ends it)
    across_launches: str | None = None  # what the strategy keeps in memory across launches by design (None: nothing)
    above_finished: bool = False  # compacts_above counts only the finished messages: never a summary under it
    only_at_turns: bool = False  # ... and no summary of the main conversation but as a user turn begins (or after a refusal)
    breaker: int | None = None  # the summaries failing in a row after which the strategy stops summarising
    before_prompt: bool = False  # a summary takes only what stands before the user's latest typed message
    above_events: int | None = None  # the events (each tool call and result one) past which a request follows a summary
    summarises_dropped: bool = False  # what leaves the main window went into a summary the request holds
    tail: tuple[tuple[float, float | None, str], ...] = ()  # (least, most, unit) of what a compaction keeps verbatim
    tail_shortest: bool = False  # ... and no more than the shortest tail that holds every least
    tail_under_window: bool = False  # ... only where the conversation fits the window (past it, cut to fit)
    tail_walked: bool = False  # ... its leasts the bound a walk from the newest finished message stays under
    tail_calibrated: bool = False  # ... its tokens counted at no more characters a token than the conversation measured
    newest_users: bool = False  # the user messages a compaction keeps are the newest, in order (keeps_newest_user_messages)
    cut_share: tuple[float, int, float | None, float] | None = None  # (share, head, over, under) a cut keeps at least


def _codex(config: Any) -> tuple[str, ...]:
    # openai/codex codex-rs/core/templates/compact/prompt.md @ 928a707f6a5ed63d89f1575f794aa7135be2f5c9
    # ("- Active task: / - Progress so far: / - Next steps (active task only): / - Key context / constraints /
    # preferences (still relevant only): / - Completed tasks (optional, brief):", /work/scratch/46/peers.md 1a);
    # the 2025 prompt (summary_prompt="handoff_2025") has four items and no task item
    if getattr(config, "summary_prompt", "active_task") == "handoff_2025":
        return ("Progress and key decisions", "Context, constraints and user preferences",
                "Remaining work and next steps", "Critical data and references")
    return ("Active task", "Progress so far", "Next steps", "Key context", "Completed tasks")


# Claude Code's nine summary sections (reported, peers.md; what the bundled compaction requests ask for in
# traces/real/claude-code/spotter/*/subagents/agent-acompact-*.jsonl): NovaCode asks for the same nine
_CLAUDE_CODE_SECTIONS = ("Primary request and intent", "Key technical concepts", "Files and code sections",
                         "Errors and fixes", "Problem solving", "All user messages", "Pending tasks",
                         "Current work", "Optional next step")


# OpenHands' LLMSummarizingCondenser prompt (software-agent-sdk v1.43.1; the V0 prompt the same): its
# state sections, as strategies/openhands.py reads them
_OPENHANDS_SECTIONS = ("USER_CONTEXT", "TASK_TRACKING", "COMPLETED", "PENDING", "CURRENT_STATE", "CODE_STATE",
                       "TESTS", "CHANGES", "DEPS", "VERSION_CONTROL_STATUS")
# gemini-cli v0.56.0 packages/core/src/core/prompts.ts getCompressionPrompt: the <state_snapshot>'s children
_GEMINI_SECTIONS = ("overall_goal", "active_constraints", "key_knowledge", "artifact_trail", "file_system_state",
                    "recent_actions", "task_state")


def _summary_table() -> dict[type, Callable[[Any], tuple[str, ...]]]:
    from ctxsim.strategies.claude_code import ClaudeCode
    from ctxsim.strategies.codex import Codex
    from ctxsim.strategies.gemini_cli import GeminiCli
    from ctxsim.strategies.novacode.strategy import NovaCode
    from ctxsim.strategies.openhands import OpenHands

    return {
        Codex: _codex,
        ClaudeCode: lambda c: _CLAUDE_CODE_SECTIONS,
        NovaCode: lambda c: _CLAUDE_CODE_SECTIONS,
        OpenHands: lambda c: _OPENHANDS_SECTIONS,
        GeminiCli: lambda c: _GEMINI_SECTIONS,
    }


_TABLE: dict[type, Callable[[Any], tuple[str, ...]]] | None = None


def summary_table() -> dict[type, Callable[[Any], tuple[str, ...]]]:
    """Built-in strategies whose modules do not declare ``summary_keeps`` yet (loaded on first use)."""
    global _TABLE
    if _TABLE is None:
        _TABLE = _summary_table()
    return _TABLE


def summary_items(cls: type[Strategy], config: StrategyConfig) -> tuple[str, ...]:
    """The items ``cls``'s summaries keep: the nearest class in its MRO that defines ``summary_keeps``
    or has an entry in the kit's table."""
    table = summary_table()
    for k in cls.__mro__:
        if "summary_keeps" in vars(k):
            return tuple(cls.summary_keeps(config))  # k's, the nearest definition
        if k in table:
            return tuple(table[k](config))
    return ()


RESULT_UNITS = ("bytes", "chars", "lines")   # what Strategy.result_limits may count in
TAIL_UNITS = ("tokens", "json_chars", "chars", "messages", "turns", "events", "share")   # what Strategy.compaction_tail may count in
CACHE_PLACES = ("tools", "system", "last", "last_user")   # where Strategy.cache_marks may promise a breakpoint


def declared(cls: type[Strategy], params: Mapping[str, Any] | None = None, window: int = 0,
             max_output_tokens: int = 0) -> Declared:
    """What ``cls`` run with ``params`` declares (on a model of ``window`` and ``max_output_tokens``: a
    trigger is judged only where both are known). A configuration that does not validate declares nothing
    (the run itself reports it)."""
    from ctxsim.strategies import registry

    try:
        config = registry.make_config(cls, dict(params or {}))
    except Exception:  # noqa: BLE001 - bad parameters are the run's to report
        return Declared()
    minimum = _hook(cls, "clear_minimum", config, None)
    if minimum is not None:
        tokens, per = minimum
        if per not in ("request", "clearing"):
            raise ValueError(f"{cls.__qualname__}.clear_minimum: per must be 'request' or 'clearing', got {per!r}")
        minimum = (int(tokens), per)
    epochs = tuple(_hook(cls, "clock_epochs", config, ()))
    also = frozenset(getattr(cls, "rewrites_also", frozenset()))
    bad = also - {"system", "tools"}
    if bad:
        raise ValueError(f"{cls.__qualname__}.rewrites_also: only 'system' and 'tools', got {sorted(bad)}")
    limits = tuple((int(n), unit) for n, unit in _hook(cls, "result_limits", config, ()))
    odd = sorted({unit for _, unit in limits} - set(RESULT_UNITS))
    if odd:
        raise ValueError(f"{cls.__qualname__}.result_limits: units are {', '.join(RESULT_UNITS)}, got {odd}")
    models = dict(_hook(cls, "call_models", config, {}))
    odd = sorted(repr(k) for k, m in models.items() if not isinstance(k, str) or not isinstance(m, str))
    if odd:
        raise ValueError(f"{cls.__qualname__}.call_models: kinds and models are strings, got {', '.join(odd)}")
    idle = _hook(cls, "clears_when_idle", config, None)
    if idle is not None:
        shaped = isinstance(idle, tuple | list) and len(idle) == 2
        gap, tools = idle if shaped else (None, None)
        if not _amount(gap) or not _names(tools):
            raise ValueError(f"{cls.__qualname__}.clears_when_idle: (seconds, tool names) or None, got {idle!r}")
        idle = (float(gap), tuple(tools))
    marks = _hook(cls, "cache_marks", config, ())
    if not isinstance(marks, tuple | list) or not all(isinstance(p, str) for p in marks) or set(marks) - set(CACHE_PLACES):
        raise ValueError(f"{cls.__qualname__}.cache_marks: places among {', '.join(CACHE_PLACES)}, got {marks!r}")
    trigger, at_turns, on_usage = (_tokens_hook(cls, hook, config, window, max_output_tokens)
                                   for hook in ("compacts_above", "compacts_at_turns", "compacts_on_usage"))
    summarises = _flag(cls, "summarises_dropped", config)
    head = tuple(_hook(cls, "cut_keeps_head", config, ()))
    if not all(isinstance(h, tuple | list) and len(h) == 2 and _amount(h[0]) and h[1] in RESULT_UNITS for h in head):
        raise ValueError(f"{cls.__qualname__}.cut_keeps_head: (amount, unit among {', '.join(RESULT_UNITS)}) each, "
                         f"got {head!r}")
    whole = _checked(cls, "keeps_results_whole", config, None,
                     lambda v: v is None or isinstance(v, tuple | list) and len(v) == 2 and all(_amount(x) for x in v),
                     "(characters of a result, characters of a message's results) or None")
    breaker = _checked(cls, "compaction_breaker", config, None,
                       lambda v: v is None or isinstance(v, int) and not isinstance(v, bool) and v >= 1,
                       "a number of failures (1 or more) or None")
    only_at_turns = _flag(cls, "compacts_only_at_turns", config)
    above_finished = _flag(cls, "compacts_above_finished", config)
    reinjects = _checked(cls, "reinjects_after_compaction", config, (),
                         lambda v: _names(v) and all(v), "origins")
    every = _checked(cls, "writes_every", config, None,
                     lambda v: v is None or isinstance(v, tuple | list) and len(v) == 3 and isinstance(v[0], str)
                     and isinstance(v[1], int) and not isinstance(v[1], bool) and v[1] >= 1 and isinstance(v[2], str),
                     "(side call kind, n of 1 or more, tool name) or None")
    across = _checked(cls, "keeps_across_launches", config, None, lambda v: v is None or isinstance(v, str) and v.strip(),
                      "what it keeps, in words, or None")
    whole_est = _checked(cls, "estimates_whole", config, None,
                         lambda v: v is None or isinstance(v, tuple | list) and len(v) == 2 and _amount(v[0]) and v[0] > 0
                         and v[1] in ("json_chars", "chars"), "(characters per token, 'json_chars' or 'chars') or None")
    from_usage = _checked(cls, "estimates_from_usage", config, None, lambda v: v is None or _amount(v) and v > 0,
                          "characters per token or None")
    by_cut = _by_cut(cls, config)
    restores = _checked(cls, "restores_recent_reads", config, None,
                        lambda v: v is None or isinstance(v, tuple | list) and len(v) == 3 and isinstance(v[0], int)
                        and not isinstance(v[0], bool) and v[0] >= 1 and _names(v[1]) and _names(v[2]),
                        "(files, read tool names, path input keys) or None")
    marks_ttl = _checked(cls, "cache_marks_ttl", config, None, lambda v: v is None or v in ("5m", "1h"), "'5m', '1h' or None")
    restore_chars = _checked(cls, "restores_file_chars", config, None, lambda v: v is None or _amount(v) and v >= 1,
                             "characters (1 or more) or None")
    before_prompt = _flag(cls, "summarises_before_latest_prompt", config)
    events = _checked(cls, "compacts_above_events", config, None,
                      lambda v: v is None or isinstance(v, int) and not isinstance(v, bool) and v >= 1,
                      "a number of events (1 or more) or None")
    clears_all = _checked(cls, "clears_all_but_recent", config, None,
                          lambda v: v is None or _names(v),
                          "tool names or None")
    clears_above = _checked(cls, "clears_above", config, None, lambda v: v is None or _amount(v) and clears_all is not None,
                            "a number of tokens with clears_all_but_recent, or None")
    beyond = _checked(cls, "clears_all_beyond", config, None,
                      lambda v: v is None or isinstance(v, tuple | list) and len(v) == 3 and all(
                          isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in v[:2])
                      and _names(v[2]),
                      "(user turns, characters, tool names) or None")
    superseded = _checked(cls, "supersedes_reads", config, None, lambda v: v is None or isinstance(v, str) and bool(v.strip()),
                          "the replacement text or None")
    cuts = tuple(_hook(cls, "result_cuts", config, ()))
    for cut in cuts:
        ok = (isinstance(cut, tuple | list) and len(cut) == 3
              and _names(cut[0]) and _amount(cut[1]) and _amount(cut[2]) and cut[2] <= 1)
        if not ok:
            raise ValueError(f"{cls.__qualname__}.result_cuts: (tool names, characters, head share 0-1) each, got {cut!r}")
    cold = _checked(cls, "replaces_only_when_idle", config, None, lambda v: v is None or _amount(v),
                    "a number of seconds or None")
    turns = _checked(cls, "keeps_recent_turns", config, 0, lambda v: _amount(v) and int(v) == v, "a number of user turns")
    chars = _checked(cls, "keeps_recent_tool_chars", config, 0, _amount, "a number of characters")
    reads_to = _checked(cls, "replaces_reads_to", config, None, lambda v: v is None or _amount(v), "a number of tokens or None")
    reads_above = _checked(cls, "replaces_reads_above", config, None, lambda v: v is None or _amount(v),
                           "a number of tokens or None")
    reads = _checked(cls, "keeps_recent_reads", config, None,
                     lambda v: v is None or isinstance(v, tuple | list) and len(v) == 3 and isinstance(v[0], int)
                     and not isinstance(v[0], bool) and v[0] >= 0 and (v[1] is None or _names(v[1])) and _amount(v[2]),
                     "(newest results, tool names or None, least characters) or None")
    tail = _tail(cls, config, window, max_output_tokens)
    shortest = _flag(cls, "compaction_tail_shortest", config)
    under_window = _flag(cls, "compaction_tail_under_window", config)
    walked = _flag(cls, "compaction_tail_walked", config)
    calibrated = _flag(cls, "compaction_tail_calibrated", config)
    largest_first = _flag(cls, "spills_largest_first", config)
    left = _checked(cls, "keeps_results_whole_left", config, None,
                    lambda v: v is None or isinstance(v, tuple | list) and len(v) == 3 and _amount(v[0])
                    and (v[1] is None or _amount(v[1]) and v[1] > 0)
                    and (v[2] is None or _names(v[2])),
                    "(characters, characters a token of the room left or None, tool names or None) or None")
    share = _cut_share(cls, config, window, max_output_tokens)
    return Declared(summary_items=summary_items(cls, config), clear_minimum=minimum, rewrites_also=also, epochs=epochs,
                    result_limits=limits, recent_kept=int(_hook(cls, "keeps_recent_tool_uses", config, 0)), recent_chars=int(chars),
                    call_models=tuple(sorted((k, m) for k, m in models.items() if m)), idle_clear=idle,
                    cache_marks=tuple(marks), compacts_above=trigger,
                    above_finished=above_finished and trigger is not None, compacts_at_turns=at_turns,
                    reinjects=tuple(reinjects), across_launches=across, writes_every=None if every is None else (every[0], every[1], every[2]),
                    from_usage=None if from_usage is None else float(from_usage), on_usage=on_usage, by_cut=by_cut,
                    restores=None if restores is None else (int(restores[0]), tuple(restores[1]), tuple(restores[2])),
                    restore_chars=None if restores is None or restore_chars is None else int(restore_chars),
                    marks_ttl=marks_ttl if marks else None,
                    estimates_whole=None if whole_est is None else (float(whole_est[0]), str(whole_est[1])),
                    summarises_dropped=summarises, clears_all_but=None if clears_all is None else tuple(clears_all),
                    clears_above=None if clears_above is None else int(clears_above), superseded=superseded,
                    reads_to=None if reads_to is None or not reads else int(reads_to),
                    reads_above=None if reads_above is None or not reads else int(reads_above),
                    recent_turns=int(turns), recent_reads=None if not reads else (
                        int(reads[0]), None if reads[1] is None else tuple(reads[1]), int(reads[2])),
                    clears_beyond=None if beyond is None else (beyond[0], beyond[1], tuple(beyond[2])),
                    result_cuts=tuple((tuple(tools), int(n), float(share)) for tools, n, share in cuts),
                    cold_only=None if cold is None else float(cold), tail=tail, only_at_turns=only_at_turns, breaker=breaker,
                    before_prompt=before_prompt and trigger is not None, above_events=events,
                    whole_under=None if whole is None else (int(whole[0]), int(whole[1])),
                    head_at_most=tuple((int(n), unit) for n, unit in head), tail_shortest=shortest and bool(tail),
                    tail_under_window=under_window and bool(tail), tail_walked=walked and bool(tail), largest_first=largest_first,
                    tail_calibrated=calibrated and any(unit == "tokens" and most is not None for _, most, unit in tail),
                    whole_left=None if left is None else (int(left[0]), None if left[1] is None else float(left[1]),
                                                          None if left[2] is None else tuple(left[2])),
                    newest_users=bool(getattr(cls, "keeps_newest_user_messages", False)), cut_share=share)


def fresh_at_launches(cls: type[Strategy], params: Mapping[str, Any], window: int = 0) -> bool:
    """Whether the kit builds ``cls`` anew at each new launch of a second replay (a new process of the agent) and
    expects the same requests: unless ``keeps_across_launches`` says what it keeps by design. A declaration the kit
    refuses is reported by the checker itself (here: built anew)."""
    try:
        return declared(cls, params, window).across_launches is None
    except ValueError:
        return True


def _hook(cls: type[Strategy], name: str, config: StrategyConfig, default: Any) -> Any:
    """What the class's declaration hook ``name`` returns for ``config`` (``default`` where it has none)."""
    f = getattr(cls, name, None)
    return f(config) if callable(f) else default


def _checked(cls: type[Strategy], name: str, config: StrategyConfig, default: Any, ok: Callable[[Any], bool],
             expected: str) -> Any:
    """:func:`_hook`'s value, refused (naming the hook and what it takes) where ``ok`` says it is not one."""
    value = _hook(cls, name, config, default)
    if not ok(value):
        raise ValueError(f"{cls.__qualname__}.{name}: {expected}, got {value!r}")
    return value


def _flag(cls: type[Strategy], name: str, config: StrategyConfig) -> bool:
    """A yes-or-no declaration hook's value (False where the class has none), refused where it is not a bool."""
    return _checked(cls, name, config, False, lambda v: isinstance(v, bool), "True or False")


def _by_cut(cls: type[Strategy], config: StrategyConfig) -> Callable[[Any], bool] | None:
    """``compacts_by_cut`` as a test of a request's messages, or None where the strategy's compaction is a summary (it
    answers None for no messages)."""
    hook = getattr(cls, "compacts_by_cut", None)
    probe = hook(config, ()) if callable(hook) else None
    if probe is None:
        return None
    if not isinstance(probe, bool):
        raise ValueError(f"{cls.__qualname__}.compacts_by_cut: True, False or None, got {probe!r}")
    return lambda messages: bool(hook(config, messages))


def _names(value: Any) -> bool:
    """``value`` is a tuple or list of names (tools, origins) a hook may declare."""
    return isinstance(value, tuple | list) and all(isinstance(t, str) for t in value)


def _amount(value: Any) -> bool:
    """``value`` is a number of seconds or tokens a hook may declare (not a bool, not negative)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


def _tokens_hook(cls: type[Strategy], hook: str, config: StrategyConfig, window: int, max_output_tokens: int) -> int | None:
    """A trigger hook's tokens on a model of ``window`` and ``max_output_tokens`` (None where either is unknown)."""
    f = getattr(cls, hook, None)
    value = f(config, window, max_output_tokens) if callable(f) and window > 0 and max_output_tokens > 0 else None
    if value is not None and not _amount(value):
        raise ValueError(f"{cls.__qualname__}.{hook}: a number of tokens or None, got {value!r}")
    return None if value is None else int(value)


def _tail(cls: type[Strategy], config: StrategyConfig, window: int,
          max_output_tokens: int) -> tuple[tuple[float, float | None, str], ...]:
    """``compaction_tail``'s entries, each checked (on a model of ``window`` and ``max_output_tokens``; none where
    either is unknown)."""
    f = getattr(cls, "compaction_tail", None)
    if not callable(f) or window <= 0 or max_output_tokens <= 0:
        return ()
    out = []
    for entry in f(config, window, max_output_tokens):
        ok = isinstance(entry, tuple | list) and len(entry) == 3 and entry[2] in TAIL_UNITS
        least, most, unit = entry if ok else (None, None, None)
        ok = ok and _amount(least) and (most is None or _amount(most) and most >= least)
        if not ok or unit == "share" and not (least <= 1 and (most is None or most <= 1)):
            raise ValueError(f"{cls.__qualname__}.compaction_tail: (least, most or None, unit among "
                             f"{', '.join(TAIL_UNITS)}; a share 0-1) each, got {entry!r}")
        out.append((float(least), None if most is None else float(most), unit))
    return tuple(out)


def _cut_share(cls: type[Strategy], config: StrategyConfig, window: int,
               max_output_tokens: int) -> tuple[float, int, float | None, float] | None:
    """``cut_keeps_share``'s value, checked (None where the model's window or output limit is unknown)."""
    f = getattr(cls, "cut_keeps_share", None)
    if not callable(f) or window <= 0 or max_output_tokens <= 0:
        return None
    value = f(config, window, max_output_tokens)
    if value is None:
        return None
    ok = isinstance(value, tuple | list) and len(value) == 4
    share, head, over, under = value if ok else (None, None, None, None)
    ok = (ok and _amount(share) and 0 < share <= 1 and isinstance(head, int) and not isinstance(head, bool) and head >= 0
          and (over is None or _amount(over)) and _amount(under))
    if not ok:
        raise ValueError(f"{cls.__qualname__}.cut_keeps_share: (share 0-1, head messages, tokens over or None, tokens "
                         f"under) or None, got {value!r}")
    return float(share), int(head), None if over is None else float(over), float(under)


def result_size(text: str, unit: str) -> int:
    """``text``'s size in ``unit`` (:data:`RESULT_UNITS`)."""
    if unit == "bytes":
        return len(text.encode("utf-8", "surrogatepass"))
    return len(text) if unit == "chars" else len(text.splitlines())
