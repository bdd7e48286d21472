"""recorded: re-enact what the recorded agent did, so a replay can be compared with its log.

Used by ``ctxsim fidelity``: if the simulator is right, replaying a real Claude Code session with
this strategy gives, call by call, the context, cache reads and cost the real API reported. What it
re-enacts, and where each habit was read:

* history is append-only between compactions (Claude Code never rewrites old messages; every
  recorded call reads the previous call's whole context from cache: ``cache_read_i ≈ context_{i-1}``
  in the spotter logs);
* at a recorded ``compact`` event it makes the compaction call the agent made: one billed summary
  side call over the current history plus the compaction prompt, so it reuses the cached prefix (the
  real ``agent-acompact-*`` calls read ≈99% of their input from cache), then replaces the history
  by the *recorded* summary text as one user message (what the agent sent next). The compaction
  call runs on the model, and writes with the TTL, of the recorded ``agent-acompact-*`` call
  (``compact_models``, ``compact_ttls``): in spotter ``ae4a77f8`` the session ran on Haiku but
  ``/compact`` called Opus with 5-minute writes, so it re-wrote the whole history into Opus's
  cache — the most expensive call of the session, which a Haiku summary call would miss;
* cache breakpoints where Claude Code puts them: the system block and the last message (reads after
  a compaction stop at the system prefix, 21,460 tokens in the spotter logs), with the client's TTL
  (the one the log wrote, ``header.recorded.cache_ttl``: ``1h`` for Claude Code 2.1.x) unless
  ``ttl`` sets one;
* from the call where the log began sending its conversation uncached (``messages_uncached_from``:
  its reads stay at the system prompt and startup content while its uncached input grows, fitted on
  the first part of the log, ``harness/fidelity/cache_misses.messages_uncached_from``), no breakpoint
  on the main context's messages past the startup content;
* a sub-agent span (``isolated``) runs in its own context: its own history and its own system
  prefix (``subtask_prefix_tokens``), the parent's history untouched until the Task result arrives;
* the model of each call, as the log recorded it (the engine runs each call on it: a Skill that
  runs on Haiku, a sub-agent on Sonnet), each with its own price, cache and system prompt
  (``model_prefix_tokens``);
* earlier turns' thinking dropped at each new user turn, on the models whose API does that
  (``strip_previous_thinking``; Anthropic's extended-thinking docs: models before Opus 4.5 remove
  the thinking blocks of previous assistant turns from context). The codemie logs (Sonnet 4.5)
  show it call by call: the context *shrinks* at each new user message by the previous turn's
  thinking (e.g. 2,060 cl100k thinking tokens ×1.18 ≈ 2,438 vs a recorded −2,771; 816 → 966 vs
  −863), and never between tool calls; Opus 4.6 keeps them (no shrink in the spotter logs). A
  client can ask the API to keep them (Claude Code does: ``recorded.previous_thinking_kept``, judged
  on the log's own new turns by harness/fidelity/kept_thinking.py): then nothing is dropped. OpenAI's
  reasoning models do the same with the reasoning items Codex sends back (``STRIPS_PREVIOUS_OPENAI``);
* a new user turn that switches thinking on or off (the log's first call of the turn thinks where
  the previous turn's did not, or the reverse: user ``meta.thinking``, set by the importer) changes
  the request's thinking setting, which on models sent a budget (before Opus 4.6) invalidates the
  messages' cache while the system prompt and tools stay cached (``thinking_switches``;
  Anthropic's extended-thinking docs; 42 of 44 such turns in the development population read
  only the system prefix);
* an ``/effort`` command that set a level (``effort_changes``; Claude Code 2.1.x): the next call
  reads nothing it wrote before, tools and system prompt included. Measured, no document states it:
  in the development population 19 of the 20 calls after a "Set effort level to …" read nothing (14)
  or only the system prompt's shared head (5); the level keys every entry from then on;
* after an ``/mcp`` command reconnected a server, the session part of the system prompt sent anew
  (``mcp_reconnect``: MCP servers' instructions are in that part, reported, anthropics/claude-code
  source readings: ultraworkers/claw-code#1639; spotter ``tool_heavy`` reads back only the shared
  head after one): the messages' cache is lost, the shared head is not;
* on the models of ``tool_load_rekeys`` (Opus 4.7, :data:`TOOL_LOAD_REKEYS`, measured), the first tool a
  tool search loads (a tool result's ``tool_reference`` blocks) does the same to the next call;
* a resumed launch (``session_start`` with ``resume``: the importer reads Claude Code's resume marks)
  sends the conversation anew (``resume_resends_messages``, :data:`RESUME_EVIDENCE`): the messages'
  cache is lost from the first message on, the tools and system prompt stay cached;
* the first turn's hidden startup content (``startup_tokens``: CLAUDE.md, unscoped rules, auto
  memory, SessionStart hook output; no text in the log) as one opaque message at the head of the
  main context, apart from the system prompt, where the log measures the split
  (:func:`ctxsim.harness.fidelity.compare.startup_split`: the first read after a compaction stops at the system
  block); unmeasured, it stays inside the system prompt's opaque size (the same tokens);
* after a compaction, what Claude Code's docs say comes back (code.claude.com/docs/en/context-window,
  "What survives compaction"): the system prompt unchanged; the startup content re-injected from
  disk (``startup_after_compaction``: CLAUDE.md, rules and auto memory are re-read, SessionStart hooks
  matching ``compact`` run again; the block is re-sent whole, sized as the first turn measured it: an
  upper bound, as the skill listing it holds is not re-injected (same page) and no log sizes it);
  then the summary and what :mod:`ctxsim.strategies.reattach` rebuilds from the log: up to 5 files read or
  edited (most recently modified first; one over 5,000 tokens as a path only), the plan, the invoked
  skills (5,000 tokens each, 25,000 in all) and the todo list; on a log of an earlier release, what that
  release's bundle re-attached (``reattach.RELEASE_CAPS``: to 1.0.84, 10,000 tokens a file, one over it
  re-read as its first 100 lines, 2,000 from 1.0.53, under the same check; to 1.0.113, the most recently
  read or edited first).

Cache misses the log shows no cause for (a fall-back to the system prefix after a
``<task-notification>`` in one bundled session, seen at a full hit in others) are classified and
reported by ``ctxsim fidelity``, never re-enacted.

It never sees recorded token counts: the parameters are the agent's *choices* (where it put
breakpoints, which model it called) and the sizes of the prompts the log has no text for, read from
the trace's recorded setting (:meth:`Recorded.trace_defaults`), so ``ctxsim run TRACE --strategy
recorded`` and ``ctxsim fidelity`` replay the same thing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from ctxsim.harness.llm.services import SUBAGENT, SUMMARY, CallSpec, SideCallFailed
from ctxsim.harness.model.closest import nearest_prefix
from ctxsim.harness.model.conversation import Block, Breakpoint, History, Message, Request, SystemPrompt
from ctxsim.harness.model.trace import REATTACH_MEASURED, TOOLS_LOADED
from ctxsim.strategies.base import CallInfo, Strategy, StrategyConfig
from ctxsim.strategies.claude_code import VERSION, version_tuple
from ctxsim.strategies.reattach import RELEASE_CAPS, ReattachCaps, ReattachTracker, caps_for, reattachments
from pydantic import Field

# What Claude Code's compaction prompt asks for (peers.md, "Summary prompt sections", reported).
COMPACT_SECTIONS = ("Primary request and intent", "Key technical concepts", "Files and code sections",
                    "Errors and fixes", "Problem solving", "All user messages", "Pending tasks",
                    "Current work", "Optional next step")
COMPACT_INSTRUCTIONS = (
    "Your task is to create a detailed summary of the conversation so far, paying close attention to the "
    "user's explicit requests and your previous actions. Wrap your analysis in <analysis> tags, then write "
    "the summary with these sections: " + "; ".join(f"{i}. {s}" for i, s in enumerate(COMPACT_SECTIONS, 1)) + "."
)
SUMMARY_MAX_OUTPUT_TOKENS = 20_000  # N-COMP-1's reserve: what a summary may take
MCP_COMMAND = "<command-name>/mcp</command-name>"   # Claude Code's record of the /mcp local command
# Claude Code's record of an /effort local command that set a level (its stdout); the level is the word after
EFFORT_SET = "Set effort level to "
# A resumed launch (claude --continue / --resume on the same transcript) re-serialises the conversation
# from the transcript, and the first messages differ in bytes from what the earlier launch sent: reported
# for Claude Code 2.1.x (anthropics/claude-code#43657: a system-reminder block not persisted moves out of
# messages[0]; #51764: still on 2.1.116; #93490: the session-start message replayed as a string, 2026-09),
# the next request reading only the tools and system prompt. Measured on the development population
# (issue 41; resumes read off the log by importers/claude_code.py): of the 51 first calls after a resume
# within the TTL on the same model (24 sessions, Claude Code 1.0.89-2.1.143), 50 read short, at most the
# tools and system prompt; one (2.1.114) read the whole context
RESUME_EVIDENCE = ("anthropics/claude-code#43657, #51764, #93490; in the development population 50 of 51 first "
                   "calls after a resume within the TTL read at most the tools and system prompt")
# Models on which the first tool a tool search loads into a session (a tool_result's tool_reference
# blocks, trace.TOOLS_LOADED) changes the cached prefix: the next call reads at most the system prompt's
# shared head. Measured, no document states it. Claude Code builds the request alike for every model (2.1.114's
# bundle: a loaded tool joins the tools array with defer_loading, which Anthropic's tool-search docs keep out
# of the cached prefix), so the difference is the API's. In the development population (issue 41) the call
# after each Opus 4.7 session's first load read nothing (18) or about the shared head (16,714-17,574
# tokens, 11): 29 of 29 sessions, Claude Code 2.1.114 and 2.1.143, all of one user (the only Opus 4.7 logs
# that load a tool); later loads in those sessions read the whole context (54 of 59). On other models the
# call after the first load read the whole context in 40 of 43 sessions (Opus 4.6, 4.8, 5; Sonnet 4.5, 4.6;
# 2.1.69-2.1.232; the population and two outside samples)
TOOL_LOAD_REKEYS = ("claude-opus-4-7",)


def load_rekeys(model: str | None, models: tuple[str, ...] = TOOL_LOAD_REKEYS) -> bool:
    """Whether the first tool a tool search loads changes the cached prefix on ``model`` (an id or
    its prefix in ``models``)."""
    return bool(model) and model.startswith(models)
MISSING_SUMMARY = "[the recorded log has no summary text for this compaction]"
# assumed: the logs hold the content before the clearing, never the placeholder Claude Code sends
CLEARED_PLACEHOLDER = "[Old tool result content cleared]"
# Anthropic extended-thinking docs: models before Claude Opus 4.5 drop previous turns' thinking blocks
STRIPS_PREVIOUS_ANTHROPIC = ("claude-sonnet-4-5", "claude-haiku-4-5", "claude-opus-4-1", "claude-opus-4-0",
                             "claude-opus-4-2", "claude-sonnet-4-0", "claude-sonnet-4-2", "claude-3-7-sonnet")
# OpenAI's reasoning models behind the Responses API: the reasoning items of turns before the last user
# message are left out of the model's input, though Codex sends them back (openai/codex,
# codex-rs/protocol/src/protocol.rs, TokenUsage::tokens_in_context_window: "reasoning output tokens from
# prior turns being dropped from the context window"). The development population's Codex rollout
# (0.118, gpt-5.3-codex) shows it call by call: at each new user turn the input shrinks by about the
# previous turn's reasoning_output_tokens (-1,188 for 1,227; -4,138 for 4,397) and the cache reads up to
# where the previous turn began (17,920 of a 17,960-token turn start; 31,744 of 31,827; 47,488 of 47,566)
STRIPS_PREVIOUS_OPENAI = ("gpt-5", "o1", "o3", "o4-mini", "codex-mini")
STRIPS_PREVIOUS_THINKING = STRIPS_PREVIOUS_ANTHROPIC + STRIPS_PREVIOUS_OPENAI
# Anthropic extended-thinking docs ("Extended thinking with prompt caching"): a change of the thinking
# parameters (enabled or disabled, budget) invalidates the messages' cache breakpoints; the system
# prompt and tools stay cached. It matters on the models sent a thinking budget; those with adaptive
# thinking (Opus 4.6, Sonnet 4.6 and later: one constant setting, the model decides) are not. The
# development population (issue 41) shows it call by call: at a new user turn whose first call
# thinks where the previous turn did not, or the reverse, Opus 4.1 / Sonnet 4 (Claude Code 1.0.x) and
# Opus 4.5 (2.0-2.1) read only the system prefix 42 times in 44; Opus 4.6 / 4.7 and Sonnet 4.6 read
# their whole context as often as at any other turn (25 misses in 263 switches)
THINKING_BUDGET_MODELS = STRIPS_PREVIOUS_ANTHROPIC + ("claude-opus-4-5",)


def effort_level(text: str) -> str | None:
    """The level an /effort command's output set (:data:`EFFORT_SET` and the word after it), else None."""
    if EFFORT_SET not in text:
        return None
    words = text.split(EFFORT_SET, 1)[1].split(maxsplit=1)
    return (words[0].rstrip(":.") or None) if words else None


def model_family(model: str | None) -> str:
    """A model id without its route or Bedrock region prefix (``converse/jp.anthropic.claude-haiku-4-5-…``
    → ``claude-haiku-4-5-…``), for the prefix rules above."""
    m = (model or "").rsplit("/", 1)[-1]
    return m.split("anthropic.", 1)[1] if "anthropic." in m else m


def strips_previous_thinking(model: str | None) -> bool:
    """Whether the API drops the previous turns' thinking blocks for ``model`` (any route or region
    prefix): the one test of :data:`STRIPS_PREVIOUS_THINKING` the strategy and fidelity share."""
    return bool(model) and model_family(model).startswith(STRIPS_PREVIOUS_THINKING)


def strips_for(recorded) -> Callable[[str | None], bool]:
    """:func:`strips_previous_thinking` as a log's recorded setting has it: never where the log
    shows its client kept the previous turns' thinking (``previous_thinking_kept``,
    harness/fidelity/kept_thinking.py), the API's default otherwise."""
    if recorded is not None and recorded.previous_thinking_kept:
        return lambda model: False
    return strips_previous_thinking


def budget_thinking(model: str | None) -> bool:
    """Whether ``model`` is sent a thinking budget, so its messages' cache keys on the setting
    (:data:`THINKING_BUDGET_MODELS`, any route or region prefix)."""
    return bool(model) and model_family(model).startswith(THINKING_BUDGET_MODELS)


def thinking_switch(model: str | None, before: bool | None, now: bool | None) -> bool:
    """Whether a new user turn changes a thinking parameter the model's cache keys on: the turn's
    first call thinks where the previous turn's did not, or the reverse, on a model sent a budget."""
    return before is not None and now is not None and before != now and budget_thinking(model)


def compaction_calls(trace) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The model and the cache TTL of each recorded compaction call (``agent-acompact-*``), in
    order: the agent's choices, read from the log ('' where the log does not say)."""
    from ctxsim.harness.model.trace import CompactEvent

    models, ttls = [], []
    for e in trace.events:
        if isinstance(e, CompactEvent):
            models.append(str(e.meta.get("call_model") or ""))
            ttls.append(e.usage.written_ttl if e.usage is not None else "")
    return tuple(models), tuple(ttls)


def ttl_switches(trace, first: str | None) -> dict[int, str]:
    """The main-context calls (0-based over the trace's model calls, as ``CallInfo.index``) from which the
    log's cache writes ask for another TTL than the calls before, starting from ``first``: a Claude Code
    client moves between 1h and 5m within a session (2.1.x logs: 1h for dozens of calls, then 5m, at times
    back), and the writes before a switch keep their own TTL. A call that writes nothing keeps the TTL
    before it. Empty where the log never switches."""
    from ctxsim.harness.model.trace import SubtaskEnd, SubtaskStart, is_call

    out: dict[int, str] = {}
    index = depth = 0
    now = first or ""
    for e in trace.events:
        if isinstance(e, SubtaskStart):
            depth += 1
        elif isinstance(e, SubtaskEnd):
            depth -= 1
        elif is_call(e):
            ttl = e.usage.written_ttl if depth == 0 and e.usage is not None else ""
            if ttl and ttl != now:
                out[index] = now = ttl
            index += 1
    return out


class RecordedConfig(StrategyConfig):
    breakpoints: Literal["system+last", "last", "none"] = Field(
        "system+last", description="where the recorded agent put cache breakpoints (Claude Code: system block and last message)")
    ttl: Literal["5m", "1h"] | None = Field(
        None, description="cache TTL of the breakpoints (none: the client's, the TTL the log wrote)")
    subtask_ttl: Literal["5m", "1h"] | None = Field(
        None, description="cache TTL of the sub-agents' breakpoints (none: the same as the main context's); the "
        "log's when its sub-agents wrote with another TTL (header.recorded.subagent_cache_ttl)")
    summary_call: bool = Field(True, description="bill the recorded compaction's summary call (off: replace history only)")
    compact_instructions: str = Field(COMPACT_INSTRUCTIONS, min_length=1,
                                      description="the compaction prompt sent after the history")
    model_prefix_tokens: dict[str, int] = Field(
        {}, description="system+tools tokens of the main context per model, when the log "
        "switched models (each model gets its own system prompt); others use the trace header's")
    subtask_prefix_tokens: dict[str, int] = Field(
        {}, description="system+tools tokens of each sub-agent span (by span id) the log has no text for")
    subtask_shared_tokens: dict[str, int] = Field(
        {}, description="head of each sub-agent span's prefix that sub-agents of its kind share (its first call read "
        "it from the cache), by span id")
    compact_models: tuple[str, ...] = Field(
        (), description="model of each recorded compaction call in order ('' or none: the last call's model)")
    mcp_reconnect: bool = Field(
        True, description="an /mcp command changes the session part of the system prompt (a new cache identity, "
        "same size; its shared head stays cached)")
    effort_changes: bool = Field(
        True, description="an /effort command that set a level (its 'Set effort level to …' output) keys every "
        "cache entry anew from the next call on, tools and system prompt included (measured: 19 of 20 such calls "
        "in the development population read nothing or only the shared head); off: the level is not tracked")
    tool_load_rekeys: tuple[str, ...] = Field(
        TOOL_LOAD_REKEYS, description="models (ids or their prefixes) on which the first tool a tool search loads "
        "(a tool result's tool_reference blocks) sends the session part of the system prompt anew, as an /mcp "
        "reconnect does: the next call reads only the shared head (TOOL_LOAD_REKEYS, measured); empty: a "
        "loaded tool changes nothing the cache sees")
    resume_resends_messages: bool = Field(
        True, description="a resumed launch (session_start with resume) sends the conversation anew: the messages' "
        "cache is lost, the tools and system prompt stay cached (RESUME_EVIDENCE); off: a resume changes nothing "
        "the cache sees")
    reattach: Literal["claude-code", "none"] = Field(
        "none", description="what the agent re-attaches after a compaction: Claude Code's recently read or edited "
        "files, plan, skills and todo list (the default on Claude Code logs), or nothing")
    reattach_max_files: int = Field(ReattachCaps.max_files, ge=0, le=100, description="files re-attached at most")
    reattach_file_tokens: int = Field(ReattachCaps.file_tokens, ge=0, le=1_000_000,
                                      description="tokens of a file (its content counted: ReattachCaps.over) above which only its path is re-attached")
    reattach_total_tokens: int = Field(ReattachCaps.total_tokens, ge=0, le=10_000_000,
                                       description="estimated tokens of all re-attached files")
    reattach_chars_per_token: float = Field(ReattachCaps.chars_per_token, gt=0, le=20,
                                            description="characters per token of the agent's size estimate")
    reattach_order: Literal["modified", "read"] = Field(
        ReattachCaps.order, description="which files come back: the most recently modified (docs; files only read "
        "rank after, by their latest read) or the most recently read or edited")
    reattach_resume_rebuilds: bool = Field(
        ReattachCaps.resume_rebuilds, description="a resumed launch knows the files the conversation read whole or "
        "wrote (Claude Code from 2.0.59); off: only those it reads or edits after (before 2.0.59)")
    reattach_over_cap: Literal["reference", "head", "none"] = Field(
        ReattachCaps.over_cap, description="what a file over reattach_file_tokens comes back as: its path (docs), "
        "its first reattach_head_lines lines or nothing")
    reattach_head_lines: int = Field(ReattachCaps.head_lines, ge=1, le=1_000_000,
                                     description="the lines of a file over the cap re-read where reattach_over_cap is head, "
                                     "under the same size check (100 to Claude Code 1.0.51, 2,000 from 1.0.53)")
    strip_previous_thinking: Literal["auto", "always", "never"] = Field(
        "auto", description="drop earlier turns' thinking blocks at a new user turn (auto: on the models "
        "whose API does, those before Opus 4.5)")
    thinking_switches: bool = Field(
        True, description="a new user turn whose thinking differs from the previous turn's (the log's user "
        "meta.thinking) changes the request's thinking setting: on a model sent a budget (before Opus 4.6) the "
        "messages' cache is invalidated, the system prompt and tools stay cached (Anthropic's extended-thinking "
        "docs); off: the setting is not tracked")
    cleared_results: dict[int, tuple[str, ...]] = Field(
        {}, description="tool results (by tool_use id) whose content the agent cleared before a call (by its 0-based "
        "index): the log's microcompact_boundary records, and the context drops its usage shows with no record "
        "(harness/fidelity/drops.py); each is sent as a placeholder from that call on")
    cleared_placeholder: str = Field(
        CLEARED_PLACEHOLDER, min_length=1, max_length=1000, description="the text a cleared tool result is sent as")
    compact_without_call: tuple[int, ...] = Field(
        (), description="0-based indices of the recorded compactions that made no summary call (plan mode's clear "
        "context: the plan replaces the history as it is)")
    compact_reattached_in_log: tuple[int, ...] = Field(
        (), description="0-based indices of the recorded compactions whose re-attached files, plan and skills the "
        "log records itself (Claude Code 2.1.105+ attachment records, in the trace): none modelled for them")
    compact_measured: dict[int, int] = Field(
        {}, description="0-based indices of the recorded compactions whose first main call the log measured apart from "
        "the rebuilt re-attachments, and by how many recorded tokens (harness/fidelity/reattached.py): more is sent "
        "as content the log has no text for, less leaves rebuilt re-attachments out (last first, closest)")
    measured_token_scale: float = Field(
        1.0, gt=0, le=10, description="recorded tokens per cl100k token at which compact_measured was measured (the "
        "trace's fitted scale)")
    compact_ttls: tuple[Literal["", "5m", "1h"], ...] = Field(
        (), description="cache TTL each recorded compaction call wrote with, in order ('' or none: ttl)")
    call_ttls: dict[int, Literal["5m", "1h"]] = Field(
        {}, description="main calls (0-based over the trace's model calls) from which the log's cache writes ask for "
        "another TTL: the main context's TTL from that call on (none: ttl throughout)")
    startup_tokens: int = Field(
        0, ge=0, le=10_000_000, description="recorded tokens of the first turn's hidden startup content (CLAUDE.md, "
        "rules, auto memory, SessionStart hook output), taken out of the system prompt's opaque size and sent as "
        "an opaque message at the head of the main context (0: left in the system prompt)")
    startup_token_scale: float = Field(
        1.0, gt=0, le=10, description="recorded tokens per cl100k token at which startup_tokens was measured "
        "(the trace's fitted scale): the opaque message is startup_tokens / this cl100k tokens")
    resent_startup_tokens: int | None = Field(
        None, ge=0, le=10_000_000, description="recorded tokens of the startup content re-sent after a compaction "
        "(the log's measure, at startup_token_scale); None: all of startup_tokens")
    messages_uncached_from: int | None = Field(
        None, ge=0, description="0-based index of the call from which the main context's requests carry no cache "
        "breakpoint on their messages past the startup content (the log's: header.recorded.messages_uncached_from); "
        "none: every request's last message is a breakpoint")
    startup_after_compaction: bool = Field(
        True, description="re-send the startup content after a compaction (Claude Code's docs: CLAUDE.md, rules and "
        "auto memory re-injected from disk, SessionStart hooks matching compact re-run); off: it is lost")


def _startup_message(raw: int) -> Message:
    """Startup content the log has no text for (CLAUDE.md, rules, memory, skills): ``raw`` opaque
    cl100k tokens in a meta user message."""
    return Message("user", (Block("text", "", opaque_tokens=raw),), {"origin": "startup", "meta_record": True})


class Recorded(Strategy):
    name = "recorded"
    needs_recorded_trace = True
    closed_loop = False   # its recoveries are the log's own (base.Strategy.closed_loop)
    summary = "re-enacts the recorded agent: append-only, its own compactions, breakpoints and models (fidelity)"
    on_rejection = ("the turn errors and the session ends (the log holds no rejected request to re-enact: the API "
                    "accepted every recorded call; only a smaller --window than the recorded one makes one)")
    Config = RecordedConfig

    def __init__(self, config: RecordedConfig, env) -> None:
        super().__init__(config, env)
        self.system: SystemPrompt = env.system
        self._stack: list[tuple[History, SystemPrompt]] = []
        self._spans: list[str] = []        # open isolated sub-agent spans, innermost last
        self._last_model: str | None = None  # the model of the last call (the compaction call uses it)
        self._systems: dict[str, SystemPrompt] = {}
        self._new_turn = False             # a user message (not tool results, not a meta record) came in
        self._thinking: bool | None = None       # the thinking setting of the main context's requests so far
        self._turn_thinking: bool | None = None  # the log's for the turn that opened last (user meta.thinking)
        self._effort: str | None = None          # the effort level the main context's requests carry (/effort)
        self._loaded: Literal["no", "pending", "yes"] = "no"   # has a tool search loaded a tool (main context)
        self._reattach = ReattachTracker()  # what Claude Code would re-attach after a compaction
        self._startup: Message | None = None   # the first turn's hidden startup content (opaque)
        self._uncached = False   # the main context's messages are left uncached from here on (messages_uncached_from)
        c = config
        if c.startup_tokens and c.startup_tokens < self.system.opaque_tokens:
            s = self.system
            rest = s.opaque_tokens - c.startup_tokens
            self.system = SystemPrompt(s.blocks, rest, min(s.shared_tokens, rest), s.revision)
            self._startup = _startup_message(max(1, round(c.startup_tokens / c.startup_token_scale)))
            self.history = History([self._startup])
        self._resent = self._startup   # what a compaction re-reads from disk (the log's measure, if it has one)
        if self._startup is not None and c.resent_startup_tokens is not None:
            raw = round(min(c.resent_startup_tokens, c.startup_tokens) / c.startup_token_scale)
            self._resent = _startup_message(raw) if raw else None

    # --- the model call ---------------------------------------------------------------------------
    def breakpoints(self, history: History, ttl: str | None = None) -> tuple[Breakpoint, ...]:
        mode, ttl = self.config.breakpoints, ttl or self.config.ttl
        out: list[Breakpoint] = []
        if mode == "system+last":
            out.append(Breakpoint("system", ttl))
        if mode != "none" and len(history):
            last = len(history) - 1
            if self._uncached and not self._spans:
                # the log's reads stay at a floor: the system prompt and, where the log has it, the startup content
                last = 0 if history[0].meta.get("origin") == "startup" else -1
            if last >= 0:
                out.append(Breakpoint(last, ttl))
        return tuple(out)

    @classmethod
    def trace_defaults(cls, trace, overrides: frozenset[str]) -> dict:
        """The recorded setting this replay needs: each sub-agent's and each model's prompt size,
        and the model and TTL of each recorded compaction call (unless the run sets them)."""
        rec = trace.header.recorded
        models, ttls = compaction_calls(trace)
        out: dict = {"subtask_prefix_tokens": dict(rec.subagent_prefix_tokens)}
        if rec.subagent_shared_tokens:
            out["subtask_shared_tokens"] = dict(rec.subagent_shared_tokens)
        if len(rec.model_prefix_tokens) > 1:
            out["model_prefix_tokens"] = dict(rec.model_prefix_tokens)
        if (trace.header.source or {}).get("format") == "claude-code":
            out["reattach"] = "claude-code"
            if rec.agent_version and VERSION.match(rec.agent_version):   # what that release re-attached
                caps = caps_for(version_tuple(rec.agent_version))
                out.update({f"reattach_{k}": getattr(caps, k) for _, row in RELEASE_CAPS for k in row})
        if rec.messages_uncached_from is not None:
            out["messages_uncached_from"] = rec.messages_uncached_from
        if rec.startup_tokens and rec.token_scale:
            out["startup_tokens"], out["startup_token_scale"] = rec.startup_tokens, rec.token_scale
            if rec.resent_startup_tokens is not None:
                out["resent_startup_tokens"] = rec.resent_startup_tokens
        if "model" not in overrides and any(models):
            out["compact_models"] = models
        if rec.previous_thinking_kept:   # the log's client kept them (harness/fidelity/kept_thinking.py)
            out["strip_previous_thinking"] = "never"
        from ctxsim.harness.model.trace import CompactEvent, ToolResultEvent

        compacts = [e for e in trace.events if isinstance(e, CompactEvent)]
        for key, mark in (("compact_without_call", "no_call"), ("compact_reattached_in_log", "reattached_in_log")):
            marked = tuple(i for i, e in enumerate(compacts) if e.meta.get(mark))
            if marked:
                out[key] = marked
        measured = {i: e.meta[REATTACH_MEASURED] for i, e in enumerate(compacts)
                    if isinstance(e.meta.get(REATTACH_MEASURED), int) and e.meta[REATTACH_MEASURED]}
        if measured and rec.token_scale:
            out["compact_measured"], out["measured_token_scale"] = measured, rec.token_scale
        cleared: dict[int, list[str]] = {}
        for e in trace.events:
            at = e.meta.get("cleared_at_call") if isinstance(e, ToolResultEvent) else None
            if isinstance(at, int):
                cleared.setdefault(at, []).append(e.tool_use_id)
        if cleared:
            out["cleared_results"] = {k: tuple(v) for k, v in sorted(cleared.items())}
        if "cache_ttl" not in overrides and rec.subagent_cache_ttl and rec.subagent_cache_ttl != rec.cache_ttl:
            out["subtask_ttl"] = rec.subagent_cache_ttl
        if "cache_ttl" not in overrides and any(t and t != rec.cache_ttl for t in ttls):
            out["compact_ttls"] = tuple(t if t != rec.cache_ttl else "" for t in ttls)
        if "cache_ttl" not in overrides and (switches := ttl_switches(trace, rec.cache_ttl)):
            out["call_ttls"] = switches
        return out

    def build_request(self, call: CallInfo) -> Request:
        self._last_model = call.model
        at = self.config.messages_uncached_from
        if at is not None and call.index >= at and not self._spans:
            self._uncached = True
        model = self._last_model or self.env.model
        if call.index in self.config.cleared_results and not self._spans:
            self._clear_results(set(self.config.cleared_results[call.index]))
        if self._new_turn:
            self._new_turn = False
            if self._strips(model):
                self._strip_thinking()
            if self.config.thinking_switches and not self._spans and self._turn_thinking is not None:
                if thinking_switch(model, self._thinking, self._turn_thinking):
                    self.rewrote = True   # a declared break: the messages' entries are keyed by the setting
                    self.counters.extra["thinking switched at a new user turn (messages' cache invalidated)"] += 1
                self._thinking = self._turn_thinking
        if self._loaded == "pending" and not self._spans:
            self._loaded = "yes"
            if load_rekeys(model, self.config.tool_load_rekeys):
                self._resend_system()
                self.counters.extra["system prompt sent anew after the first tool a tool search loaded"] += 1
        system = self.system
        if not self._spans and self._last_model in self.config.model_prefix_tokens:
            system = self._system_for(self._last_model)
        ttl = self.config.subtask_ttl if self._spans else self._main_ttl(call.index)
        return Request(system, self.env.tools, self.history, self.breakpoints(self.history, ttl),
                       kind=SUBAGENT if self._spans else "main", estimated_tokens=self.estimate(),
                       rewrite=self._take_rewrite(), model=self._last_model, thinking=self._thinking_param(model),
                       effort=None if self._spans else self._effort)

    def _resend_system(self) -> None:
        """The session part of the system prompt goes anew (same size, a new cache identity; its shared head stays)."""
        s = self.system
        self.system = SystemPrompt(s.blocks, s.opaque_tokens, s.shared_tokens, s.revision + 1)
        self._systems.clear()

    def _reattach_caps(self) -> ReattachCaps:
        """The caps the config's ``reattach_*`` fields set (one for each ReattachCaps field of that name)."""
        c = self.config
        return ReattachCaps(**{f: getattr(c, f"reattach_{f}") for f in ReattachCaps.__dataclass_fields__
                               if hasattr(c, f"reattach_{f}")})

    def _main_ttl(self, index: int) -> str | None:
        """The TTL the log's main context asked for at call ``index`` (:func:`ttl_switches`; None: ``ttl``)."""
        at = max((i for i in self.config.call_ttls if i <= index), default=None)
        return None if at is None else self.config.call_ttls[at]

    def _thinking_param(self, model: str | None) -> bool | None:
        """The thinking setting the request carries where the cache keys on it (main context, a
        model with a budget, the log's turn known), else None."""
        if self._spans or not self.config.thinking_switches or not budget_thinking(model):
            return None
        return self._thinking

    def _system_for(self, model: str) -> SystemPrompt:
        """One SystemPrompt object per model (same bytes, same cache key, call after call)."""
        sp = self._systems.get(model)
        if sp is None:
            base, opaque = self.system, self.config.model_prefix_tokens[model]
            if self._startup is not None:   # each model's prefix holds the same startup content
                opaque = max(0, opaque - self.config.startup_tokens)
            sp = self._systems[model] = base if opaque == base.opaque_tokens else SystemPrompt(
                base.blocks, opaque, min(base.shared_tokens, opaque), base.revision)
        return sp

    # --- the recorded agent's own context management ------------------------------------------------
    def on_session_start(self, session: str, resume: bool, now: float) -> None:
        super().on_session_start(session, resume, now)
        if not self._spans:   # a new process: which files it knows (ReattachTracker.new_launch)
            self._reattach.new_launch(resume and self.config.reattach_resume_rebuilds)
        if not resume and self._startup is not None:   # a new launch loads its startup content again
            self.history = History([self._startup])
        elif resume and self.config.resume_resends_messages and len(self.history) and not self._spans:
            self.history = self.history.resent()
            self.rewrote = True   # a declared break: the conversation is re-serialised from its first message
            self.counters.extra["resumed launch (the conversation sent anew, messages' cache lost)"] += 1

    def on_user(self, message: Message) -> None:
        super().on_user(message)
        if not message.meta.get("meta_record") and not message.meta.get("hidden"):
            self._new_turn = True
            if not self._spans and isinstance(message.meta.get("thinking"), bool):
                self._turn_thinking = message.meta["thinking"]
        if not self._spans:
            self._reattach.on_user(message)
            if self.config.mcp_reconnect and MCP_COMMAND in message.text:
                self._resend_system()
                self.counters.extra["system prompt sent anew after /mcp"] += 1
            level = effort_level(message.text) if self.config.effort_changes else None
            if level and level != self._effort:
                self._effort = level
                self.rewrote = True   # a declared break: every entry is keyed by the level
                self.counters.extra["effort level set (every cache entry keyed anew)"] += 1

    def on_tool_results(self, message: Message) -> None:
        super().on_tool_results(message)
        if not self._spans:
            self._reattach.on_results(message, len(self.history) - 1)
            if self._loaded == "no" and any(b.meta.get(TOOLS_LOADED) for b in message.blocks):
                self._loaded = "pending"   # the next main call sends the loaded tool (build_request)

    def on_response(self, message: Message, usage) -> None:
        super().on_response(message, usage)
        if not self._spans:
            self._reattach.on_assistant(message)

    def _strips(self, model: str | None) -> bool:
        mode = self.config.strip_previous_thinking
        return mode == "always" or (mode == "auto" and strips_previous_thinking(model))

    def _clear_results(self, ids: set[str]) -> None:
        """The agent cleared these tool results' content (microcompact): each is sent as the
        placeholder from now on, a declared rewrite (the cache breaks at the first of them)."""
        h = self.history
        for i in range(len(h)):
            m = h[i]
            if m.role != "user" or not any(b.type == "tool_result" and b.id in ids for b in m.blocks):
                continue
            blocks = tuple(Block.tool_result(b.id or "", self.config.cleared_placeholder, b.is_error, cleared=True)
                           if b.type == "tool_result" and b.id in ids else b for b in m.blocks)
            h = h.replace_at(i, Message(m.role, blocks, m.meta))
            self.counters.extra["tool results cleared (the log's microcompact)"] += sum(
                1 for b in m.blocks if b.type == "tool_result" and b.id in ids)
            self.rewrote = True
        self.history = h

    def _strip_thinking(self) -> None:
        """Every assistant message before the new user turn loses its thinking blocks (what the API
        removes); a message that was only thinking keeps them (an empty message cannot be sent)."""
        h = self.history
        first = next((i for i in range(len(h)) if h[i].role == "assistant"
                      and any(b.type == "thinking" for b in h[i].blocks)), None)
        if first is None:
            return
        out = []
        for m in h[first:]:
            kept = tuple(b for b in m.blocks if b.type != "thinking") if m.role == "assistant" else m.blocks
            out.append(m if len(kept) == len(m.blocks) or not kept else Message(m.role, kept, m.meta))
        self.history = h.replace_from(first, out)
        self.counters.extra["turns whose earlier thinking was dropped"] += 1

    def on_recorded_compact(self, trigger: str, summary: str | None, now: float) -> None:
        n = self.counters.compactions_attempted
        self.counters.compactions_attempted += 1
        if self.config.summary_call and len(self.history) and n not in self.config.compact_without_call:
            models, ttls = self.config.compact_models, self.config.compact_ttls
            model = (models[n] if n < len(models) else "") or self._last_model
            ttl = (ttls[n] if n < len(ttls) else "") or None
            system = self.system
            if not self._spans and model in self.config.model_prefix_tokens:
                system = self._system_for(model)
            req = Request(system, self.env.tools, self.history, self.breakpoints(self.history, ttl),
                          kind=SUMMARY, model=model, thinking=self._thinking_param(model or self.env.model),
                          effort=None if self._spans else self._effort)
            try:
                # not blocking: the log's timestamps already hold the wait for the recorded compaction
                # (its boundary is written when the call returns); moving the clock again by the
                # simulated duration would expire 5-minute caches the real agent still read
                # the summary the log holds is what the call wrote: its output is billed at that size
                # (the development population's 25 compaction calls whose usage the log shows: the
                # summary at the trace's token scale is a median 0.86 of their output, the analysis
                # Claude Code drops from it the rest; the simulated summariser's length, 0.76)
                said = {"expected_output": summary} if summary is not None else {}
                self.env.services.call(req, CallSpec(kind=SUMMARY, instructions=self.config.compact_instructions,
                                                     sections=COMPACT_SECTIONS, blocking=False,
                                                     max_output_tokens=SUMMARY_MAX_OUTPUT_TOKENS, params=said))
            except SideCallFailed as e:
                # the recorded agent did compact: the replay follows the record whatever the simulation says
                self.counters.compactions_failed += 1
                self.counters.extra[f"summary call failed ({e.reason}); record followed"] += 1
        if summary is None:
            self.counters.extra["compaction without recorded summary"] += 1
        after = [Message.user(summary or MISSING_SUMMARY, origin="summary")]
        if self._resent is not None and not self._spans and self.config.startup_after_compaction:
            after.insert(0, self._resent)   # re-read from disk: prepended, as at the first turn
            self.counters.extra["startup content re-sent after compactions"] += 1
        if self.config.reattach == "claude-code" and not self._spans and n not in self.config.compact_without_call \
                and n not in self.config.compact_reattached_in_log:
            # a compaction re-attaches (Claude Code's compact routine does); plan mode's "clear context",
            # a new conversation opened with the plan, does not: in the 3 the development population
            # holds, the next call's context is the prefix and the plan (within 1.2k tokens), not 25k more
            extra = reattachments(self._reattach, self._reattach_caps(), self.env.count_tokens)
            after += extra
            self.counters.extra["messages re-attached after compactions"] += len(extra)
        if self.config.compact_measured.get(n) and not self._spans:
            after = self._as_measured(after, self.config.compact_measured[n])
            self.counters.extra["compactions sized as the log measured their first call"] += 1
        self.history = History(after)
        self.counters.compactions_succeeded += 1
        self.rewrote = True

    def _as_measured(self, after: list[Message], diff: int) -> list[Message]:
        """What a compaction put back, ``diff`` recorded tokens from what was rebuilt as the log's first
        call after it measured (harness/fidelity/reattached.py): more is content the log has no text
        for (opaque, after the re-attachments); less leaves the rebuilt re-attachments out, last first
        (todo list, skills, plan, then the least recently modified file), as many as come closest."""
        if diff > 0:
            raw = max(1, round(diff / self.config.measured_token_scale))
            return [*after, Message("user", (Block("text", "", opaque_tokens=raw),),
                                    {"origin": "reattach", "reattached": "measured", "meta_record": True})]
        count = self.env.count_tokens or (lambda text: len(text) // 4)
        rebuilt = (i for i in reversed(range(len(after))) if after[i].meta.get("origin") == "reattach")
        left_out, _ = nearest_prefix(((i, sum(count(b.text) + b.opaque_tokens for b in after[i].blocks))
                                      for i in rebuilt), -diff)
        dropped = set(left_out)
        return [m for i, m in enumerate(after) if i not in dropped]

    def on_subtask_start(self, id: str, description: str, isolated: bool) -> None:
        if not isolated:
            return
        self._stack.append((self.history, self.system))
        opaque = self.config.subtask_prefix_tokens.get(id, self.system.opaque_tokens)
        shared = min(self.config.subtask_shared_tokens.get(id, 0), opaque)
        self.system = SystemPrompt(self.system.blocks, opaque, shared)
        self.history = History()
        self._spans.append(id)

    def on_subtask_end(self, id: str, conclusion: str) -> None:
        if not self._spans or self._spans[-1] != id:
            return  # a span that was not isolated: nothing was set aside
        self.history, self.system = self._stack.pop()
        self._spans.pop()
