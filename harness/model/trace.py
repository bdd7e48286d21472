"""Trace format v1: one JSON header line, then one JSON event per line (see traces/README.md).

The loader streams and validates; every problem is an error naming the file, the line and what is
wrong (``TraceError``), never a silently dropped line. The one repair: a lone UTF-16 surrogate
(valid JSON, ``"\\ud83d"``: a string cut mid-emoji) is replaced by U+FFFD, listed in
``Trace.repairs`` and warned about (``strictjson.InputRepaired``) with the file and line; the
content hash is that of the repaired text (what the run replays). The writer emits the canonical
form (fixed key order, defaults omitted), so ``write(load(f)) == f`` byte for byte for any file the
writer produced.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

FORMAT = "ctxsim-trace"
VERSION = 1

# planted facts (synthetic sessions) use FACT_CATEGORIES; facts derived from a session's content
# (harness/retention/probes.py) are named for the kind of item (goal and error, and ITEM_CATEGORIES)
FACT_CATEGORIES = ("goal", "constraint", "decision", "error", "file", "preference", "feedback")
ITEM_CATEGORIES = ("path", "identifier", "hash", "ticket", "command")
ALL_CATEGORIES = FACT_CATEGORIES + ITEM_CATEGORIES
FactCategory = Literal["goal", "constraint", "decision", "error", "file", "preference", "feedback",
                       "path", "identifier", "hash", "ticket", "command"]


# bounds of values that can be real (a value outside them is refused where it enters: loader and importers)
MAX_TOKENS = 100_000_000   # assumed: 100x the largest window here (1M); no call of any agent reads more
MAX_T = 1e9                # assumed: seconds in a trace (~31 years); a larger time is a damaged one
Tokens = Annotated[int, Field(ge=0, le=MAX_TOKENS, strict=True)]


class TraceError(ValueError):
    """Input that cannot be used (a trace, or a log an importer reads); the message names
    ``path:line`` (``path:line:column`` when the column is known, as in a JSON document). The CLI
    turns it into exit 2 and this one line: the only error path for bad input files."""

    def __init__(self, path: str | Path, line: int | None, what: str, column: int | None = None) -> None:
        self.path, self.line, self.what, self.column = str(path), line, what, column
        where = f"{path}:{line}" if line else str(path)
        if line and column:
            where += f":{column}"
        super().__init__(f"{where}: {what}")


class NoModelCalls(TraceError):
    """A log that holds no model call: a session started and left before any answer, or one whose
    every request failed (its records are only the user's, commands and API errors). Nothing was
    billed and nothing is lost; a folder import leaves it out with a note, not as a failure."""


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RecordedUsage(_M):
    """Usage the recorded agent's API reported for one call, normalised (N-CACHE-5)."""

    input: Tokens = Field(0, description="uncached input tokens")
    cache_write_5m: Tokens = Field(0, description="input tokens written to the cache with a 5-minute TTL")
    cache_write_1h: Tokens = Field(0, description="input tokens written to the cache with a 1-hour TTL")
    cache_read: Tokens = Field(0, description="input tokens read from the cache")
    output: Tokens = Field(0, description="output tokens")

    @property
    def context_tokens(self) -> int:
        return self.input + self.cache_write_5m + self.cache_write_1h + self.cache_read

    @property
    def written_ttl(self) -> str:
        """The TTL the call's cache writes asked for (the request's ``cache_control.ttl``, which the usage
        splits): "1h" where most of the write was 1-hour, "5m" where the rest was, "" with no write."""
        if not (self.cache_write_1h or self.cache_write_5m):
            return ""
        return "1h" if self.cache_write_1h > self.cache_write_5m else "5m"


class ToolSpec(_M):
    name: str
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class CacheMissModel(BaseModel):
    """A provider-side miss model fitted on one log (what ``ctxsim.harness.fidelity.cache_misses.fit_miss_model`` found; the
    provider routes by it, harness/provider/routing.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    share: float = Field(ge=0.0, le=1.0, description="share of requests routed where the session's entries are absent")
    fallback_none: float = Field(ge=0.0, le=1.0, description="of those, the share that read nothing (the rest read "
                                 "the system prefix)")
    strays: int = Field(ge=0, description="recorded calls whose read fell back short of the previous call's context "
                        "with no cause in the log (evidence)")
    returns: int = Field(ge=0, description="recorded calls right after a stray that read the entry before it (evidence "
                         "that the long entry was not evicted)")
    eligible: int = Field(ge=0, description="recorded calls that could have read the previous call's context (no TTL "
                          "expiry, model switch, compaction or change the log shows in between)")
    fell_back_to: dict[str, int] = Field(default_factory=dict, description="strays by where the read fell back to")
    source: str = Field("", description="how it was fitted, and the documented mechanism it stands for")
    in_sample: bool = Field(False, description="fitted on all the log's calls, not its first part only: the first "
                            "part's fall-backs did not recur, the whole log's did (a labelled fallback; fidelity "
                            "scores such a session apart, its miss model having seen the calls it is scored on)")


class RecordedSetting(_M):
    """The setting the recorded agent ran with, as its log shows it (importers write it; the token
    scale and the prefix sizes are fitted on the log's own first calls by ``ctxsim import``).
    ``run``, ``compare``, ``sweep`` and ``ctxsim.harness.replay.engine.replay`` take it as the defaults of a
    replay of this trace; ``--model`` / ``--window`` / ``--cache-ttl`` / ``--token-scale``
    override it. Each ``*_evidence`` says what in the log the value was read from."""

    models: dict[str, dict[str, Annotated[int, Field(ge=0, strict=True)]]] = Field(
        default_factory=dict, description="calls per model and role (main, subagent, compaction); each "
        "assistant event's own `model` says which call ran on which")
    window: int | None = Field(None, gt=0, le=MAX_TOKENS, strict=True,
                               description="context window the agent ran with (tokens)")
    window_evidence: str = Field("", description="what in the log the window was read from")
    cache_ttl: Literal["5m", "1h"] | None = Field(
        None, description="TTL of the agent's cache writes (Anthropic usage: ephemeral_5m / _1h); null: "
        "automatic caching, no TTL written (OpenAI), or no write recorded")
    cache_ttl_evidence: str = Field("", description="the usage fields the TTL was read from")
    subagent_cache_ttl: Literal["5m", "1h"] | None = Field(
        None, description="TTL of the sub-agents' cache writes, read from their own usage like cache_ttl; null: "
        "no sub-agent wrote, or the same TTL as the main calls (Claude Code 2.1.x writes the main context with "
        "1h and its sub-agents with 5m in the development population's logs)")
    subagent_cache_ttl_evidence: str = Field("", description="the sub-agents' usage fields it was read from")
    token_scale: float | None = Field(
        None, ge=0.1, le=10.0, allow_inf_nan=False,  # assumed bounds: tokenizers differ by tens of per cent, not 10x
        description="recorded tokens per cl100k token, fitted on the first calls (fit_calls)")
    token_scale_evidence: str = Field("", description="how the scale was fitted, on which calls")
    # the default is ctxsim.harness.provider.tokenizer.DEFAULT (this package cannot import it); left
    # out of the file when it is the default, so a cl100k import writes the header it wrote before
    tokenizer: str = Field("cl100k", min_length=1, max_length=40, pattern=r"^[a-z0-9_-]+$",
                           description="the tokenizer the token scale and the prefixes were fitted with (ctxsim "
                           "--tokenizer at import): a run under another one warns (issue 44 fresh, case 32)")
    # left out of the file when it is the default, as the tokenizer is: a trace imported before tool
    # calls were rendered by provider (issue 41) reads as fitted on JSON
    tool_calls: Literal["json", "xml"] = Field(
        "json", description="how tool calls were rendered when the scale and prefixes were fitted "
        "(ctxsim.harness.provider.tokenizer.TOOL_FORMAT): xml, Claude's function-call format, for an Anthropic "
        "model; json otherwise. Fidelity fits a trace fitted with another rendering than its model's again")
    fit_calls: int = Field(0, ge=0, strict=True, description="the first calls the scale was fitted on (the rest are held out)")
    measured_sizes_evidence: str = Field("", description="how many tool results and user messages carry the size the "
                                         "log's context growth measured (meta.token_factor, harness/fidelity/measured.py)")
    warm_prefix_tokens: Tokens = Field(
        0, description="head of the opaque prefix the first call already read from the cache (cached "
        "by an earlier session within its TTL): a replay starts with it warm")
    warm_prefix_evidence: str = Field("", description="what the first call read")
    warm_prefix_kept: bool | None = Field(
        None, description="whether that head stays cached across the log's idle gaps (other sessions keep it): "
        "true where the log's calls after a TTL expiry read it again, false where they read nothing; judged on "
        "the first part of the log (warm_prefix_kept_evidence, harness/fidelity/warm_head.py); null: the "
        "provider model's own TTL")
    warm_prefix_kept_evidence: str = Field("", description="the calls warm_prefix_kept was read from")
    in_sample: list[Literal["previous_thinking_kept", "warm_prefix_kept", "cache_miss_model"]] = Field(
        default_factory=list, description="the settings decided on all the log's calls because its first part "
        "showed them neither way (a labelled fallback): fidelity scores such a session apart from the held-out ones")
    model_prefix_tokens: dict[str, Tokens] = Field(
        default_factory=dict, description="system+tools tokens of the main context per model, when the "
        "log switched models (each model has its own system prompt)")
    subagent_prefix_tokens: dict[str, Tokens] = Field(
        default_factory=dict, description="system+tools tokens of each sub-agent span (by span id)")
    subagent_shared_tokens: dict[str, Tokens] = Field(
        default_factory=dict, description="head of a sub-agent span's prefix that its first call read from the cache "
        "(the part sub-agents of one kind share: an earlier one wrote it), by span id")
    subagent_warm_spans: list[str] = Field(
        default_factory=list, description="the spans whose first call read their shared head (subagent_shared_tokens) "
        "though no earlier span of the log wrote it: an earlier session did, as the main context's warm_prefix_tokens; "
        "the replay finds it cached when the span starts")
    startup_tokens: int = Field(
        0, ge=0, description="part of the main context's opaque prefix (header.prefix_tokens) that is not the "
        "system prompt but the hidden startup content of the first turn (CLAUDE.md, rules, auto memory, "
        "SessionStart hook output): the prefix minus the system prompt where the log measures it (the first "
        "read after a compaction stops at the system block); 0: not measured, it stays in the prefix")
    startup_evidence: str = Field("", description="what in the log the split was read from, and what of it "
                                  "the agent re-sends after a compaction")
    resent_startup_tokens: int | None = Field(
        None, ge=0, description="recorded tokens of the startup content the agent re-sent after a compaction, as "
        "the first calls after the log's compactions measure it (harness/fidelity/measured.py); None: all of it")
    cache_miss_model: CacheMissModel | None = Field(
        None, description="provider-side misses that recur, fitted on the log with their counts "
        "(harness/provider/routing.py): every replay of the trace routes this share of requests astray")
    prompt_caching: bool = Field(
        True, description="false: the log shows no cache read and no cache write in any of its calls "
        "(caching_evidence), so its replays price without prompt caching unless the run says otherwise")
    caching_evidence: str = Field("", description="the calls prompt_caching (and uncached_models) was read from")
    uncached_models: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list, description="model ids (as the log names them) whose calls never read or wrote the "
        "cache while the log's other calls did: a route without caching (a Bedrock converse/ sub-agent); replays "
        "send those calls uncached")
    messages_uncached_from: int | None = Field(
        None, ge=0, description="0-based index of the call from which the log's main-context requests left their "
        "messages uncached: each sent the conversation as uncached input and read only a fixed floor (the system "
        "prompt and the startup content), fitted on the first part of the log (messages_uncached_evidence); "
        "replays of the recorded agent put no breakpoint on the later messages from there on")
    messages_uncached_evidence: str = Field("", description="the calls messages_uncached_from was read from")
    agent_version: str | None = Field(
        None, max_length=64, description="the recording agent's version as its log names it (Claude Code's "
        "`version`, e.g. 2.1.39): a peer of that agent replays the release it names unless the run sets one")
    previous_thinking_kept: bool | None = Field(
        None, description="whether the previous turns' thinking stayed in the requests at a new user turn on a "
        "model whose API drops it by default (before Opus 4.5): true where the log's new turns read the whole "
        "cached prefix that held it (the client asked the API to keep it), false where they read only up to it; "
        "decided on the first part of the log (previous_thinking_evidence), else by the agent's version; "
        "null: the API's default")
    previous_thinking_evidence: str = Field("", description="the new turns previous_thinking_kept was read from")


class Header(_M):
    type: Literal["header"] = "header"
    format: Literal["ctxsim-trace"] = FORMAT
    version: Literal[1] = VERSION
    name: str = Field(min_length=1)
    model: str | None = Field(None, min_length=1, description="model of the recorded agent, if any")
    system: str = Field("", description="system prompt text")
    tools: list[ToolSpec] = Field(default_factory=list)
    prefix_tokens: Tokens = Field(0, description="recorded prompt tokens with no text in the trace")
    usage: Literal["per_call", "aggregate", "none"] = "none"
    output_tokens_partial: bool = Field(False, description="recorded output counts are partial (streaming)")
    source: dict[str, Any] | None = None
    recorded: RecordedSetting | None = Field(None, description="the setting the recorded agent ran with "
                                             "(imported traces): the defaults of a replay")
    notes: list[str] = Field(default_factory=list)
    meta: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _sane(self) -> Header:
        files = self.meta.get("files")
        if files is not None:
            _check_files(files)
        tool = self.meta.get("read_tool")
        if tool is not None and (not isinstance(tool, str) or not tool):
            raise ValueError("meta.read_tool must be the name of the file-reading tool (a string)")
        rec = self.recorded
        if rec is not None and rec.warm_prefix_tokens > self.prefix_tokens:
            raise ValueError(f"recorded.warm_prefix_tokens {rec.warm_prefix_tokens} is more than prefix_tokens "
                             f"{self.prefix_tokens} (only the opaque prefix can be warm)")
        return self


def _check_files(files: Any) -> None:
    """``header.meta.files``: the files a run seeds into its directory (relative path -> text)."""
    if not isinstance(files, dict):
        raise ValueError("meta.files must be an object of relative path -> file text")
    names = set(files)
    for rel, text in files.items():
        if not isinstance(text, str):
            raise ValueError(f"meta.files[{rel!r}] must be the file's text (a string)")
        parts = rel.replace("\\", "/").split("/")
        if not rel or rel.startswith(("/", "~")) or ":" in parts[0] or any(p in ("", ".", "..") for p in parts):
            raise ValueError(f"meta.files: {rel!r} is not a plain relative path inside the run directory")
        _check_file_name(rel, parts)
        for i in range(1, len(parts)):
            if "/".join(parts[:i]) in names:
                raise ValueError(f"meta.files: {'/'.join(parts[:i])!r} is a file and the folder of {rel!r}")


# the folders a run directory always has (ctxsim.harness.replay.rundirs.seed_files): a file cannot take their name
RUN_FOLDERS = ("home", "project")
NAME_MAX = 255   # bytes in one path component (Linux, macOS: limits.h NAME_MAX)


def _check_file_name(rel: str, parts: list[str]) -> None:
    """What the run directory's file system will refuse, refused here (``validate`` and ``run``
    alike), not as a crash of every strategy when the run seeds the file."""
    if any(ord(c) < 32 or ord(c) == 127 for c in rel):
        raise ValueError(f"meta.files: {rel!r}: a control character (NUL, newline ...) in a file name")
    try:
        sizes = [len(p.encode("utf-8")) for p in parts]
    except UnicodeEncodeError:
        raise ValueError(f"meta.files: {rel!r}: not encodable as UTF-8 (a lone surrogate)") from None
    if max(sizes) > NAME_MAX:
        raise ValueError(f"meta.files: {rel[:60]!r}...: a name of {max(sizes)} bytes (at most {NAME_MAX} per "
                         "folder or file name)")
    if len(parts) == 1 and parts[0] in RUN_FOLDERS:
        raise ValueError(f"meta.files: {rel!r} is a folder of every run directory ({', '.join(RUN_FOLDERS)}); "
                         f"put the file under it, e.g. {rel}/NAME")


class TextContent(_M):
    type: Literal["text"] = "text"
    text: str


class ThinkingContent(_M):
    type: Literal["thinking"] = "thinking"
    thinking: str


# a tool_use Block's meta (harness/replay/events.py): the input keys the log holds that the agent did not send
LOGGED_ONLY = "logged_only"


class ToolUseContent(_M):
    type: Literal["tool_use"] = "tool_use"
    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    input: dict[str, Any] = Field(default_factory=dict)
    logged_only: dict[str, Any] = Field(
        default_factory=dict, description="input keys the log holds that the agent's client kept out of the "
        "requests it sent (Claude Code's ExitPlanMode plan: harness/importers/claude_code.LOGGED_ONLY_INPUT); "
        "never sent nor counted, known to the strategy")


AssistantContent = Annotated[TextContent | ThinkingContent | ToolUseContent, Field(discriminator="type")]


class _Ev(_M):
    t: float = Field(ge=0, le=MAX_T, strict=True, allow_inf_nan=False, description="seconds since the start of the trace")


def _check_sizes(meta: dict[str, Any]) -> None:
    """The sizes an importer measured (harness/fidelity/measured.py), as every strategy's request counts them."""
    f = meta.get("token_factor")
    if f is not None and (isinstance(f, bool) or not isinstance(f, (int, float)) or not 0.01 <= f <= 100):
        raise ValueError(f"meta.token_factor must be a number in [0.01, 100] (got {f!r})")
    h = meta.get("hidden_tokens")
    if h is not None and (isinstance(h, bool) or not isinstance(h, int) or not 0 <= h <= 100_000_000):
        raise ValueError(f"meta.hidden_tokens must be a whole number in 0..100,000,000 (got {h!r})")


class UserEvent(_Ev):
    type: Literal["user"] = "user"
    text: str
    meta: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _sizes(self) -> UserEvent:
        _check_sizes(self.meta)
        return self


# assistant event meta: the route that served the call ("anthropic", "vertex", "bedrock", "proxy", from its
# ids: harness/importers/claude_code.route_of), written where a session's calls went by more than one. Each
# route is its own cache: a log split between Vertex and Anthropic reads, on each, what that route cached
ROUTE = "route"


class AssistantEvent(_Ev):
    type: Literal["assistant"] = "assistant"
    content: list[AssistantContent]
    usage: RecordedUsage | None = None
    model: str | None = Field(None, min_length=1)
    request_id: str | None = None
    copied: bool = Field(False, description=(
        "a copy of a call an earlier session made, written into this log when that conversation was resumed "
        "(Claude Code 1.0.x): history this session starts from, not a call of its own. No request is sent for "
        "it and its usage (the original's) is not billed here; the strategy receives it as an answer with no "
        "usage (Strategy.on_response)"))
    meta: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _sizes(self) -> AssistantEvent:
        _check_sizes(self.meta)   # meta.hidden_tokens: thinking the log withheld, sized by its growth
        return self

    def tool_uses(self) -> list[ToolUseContent]:
        return [c for c in self.content if isinstance(c, ToolUseContent)]


# tool result meta: the tools a tool search loaded (the names of the result's tool_reference blocks; the API
# puts each tool's definition in their place, and the client sends the tool from then on with
# defer_loading): Claude Code's ToolSearch. The first such load changes a cached prefix on some models
# (strategies/recorded.py TOOL_LOAD_REKEYS)
TOOLS_LOADED = "tools_loaded"
# CompactEvent meta: recorded tokens by which the log's first main call after the compaction differs from
# what the replay rebuilds there (harness/fidelity/reattached.py; strategies/recorded.py follows it)
REATTACH_MEASURED = "reattach_measured"


class ToolResultEvent(_Ev):
    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str = Field(min_length=1)
    content: str
    is_error: bool = False
    meta: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _sizes(self) -> ToolResultEvent:
        _check_sizes(self.meta)
        loaded = self.meta.get(TOOLS_LOADED)
        if loaded is not None and not (isinstance(loaded, list) and all(isinstance(x, str) and x for x in loaded)):
            raise ValueError(f"meta.{TOOLS_LOADED}: a list of tool names, not {str(loaded)[:40]!r}")
        return self


class CompactEvent(_Ev):
    """A compaction the recorded agent did, between the previous call and the next one."""

    type: Literal["compact"] = "compact"
    trigger: Literal["auto", "manual"] = "auto"
    pre_tokens: Tokens | None = None
    summary: str | None = None
    usage: RecordedUsage | None = Field(None, description="the compaction call's own usage")
    meta: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _measured(self) -> CompactEvent:
        d = self.meta.get(REATTACH_MEASURED)   # a size the calibration measured, as _check_sizes' are
        if d is not None and (isinstance(d, bool) or not isinstance(d, int) or not -MAX_TOKENS <= d <= MAX_TOKENS):
            raise ValueError(f"meta.{REATTACH_MEASURED} must be a whole number in ±{MAX_TOKENS:,} (got {d!r})")
        return self


class SessionStart(_Ev):
    type: Literal["session_start"] = "session_start"
    session: str
    resume: bool = False
    cwd: str | None = None


class SessionEnd(_Ev):
    type: Literal["session_end"] = "session_end"
    session: str


class FactEvent(_Ev):
    """A checkable piece of information; ``text`` appears verbatim in the content event before it."""

    type: Literal["fact"] = "fact"
    id: str
    category: FactCategory
    text: str = Field(min_length=1)


class ProbeEvent(_Ev):
    """A point that needs facts: scored on the request of the next model call."""

    type: Literal["probe"] = "probe"
    id: str
    needs: list[str] = Field(min_length=1)


class SubtaskStart(_Ev):
    type: Literal["subtask_start"] = "subtask_start"
    id: str
    description: str = ""
    isolated: bool = Field(False, description="the recorded agent ran it in its own context")
    fork: bool = Field(False, description=(
        "an isolated span whose context begins as a copy of its parent's: a forked agent (Claude Code's side "
        "question, /btw, and prompt suggestion) sends the parent's conversation as it stands, then the span's own "
        "messages, and nothing of it stays in the parent. The replay sends it from the parent's last request "
        "(harness/replay/fork.py); the strategy is not told"))

    @model_validator(mode="after")
    def _fork_is_isolated(self) -> SubtaskStart:
        if self.fork and not self.isolated:
            raise ValueError("a fork span is isolated (nothing of it stays in its parent): fork without isolated")
        return self


class SubtaskEnd(_Ev):
    type: Literal["subtask_end"] = "subtask_end"
    id: str
    conclusion: str = ""


Event = Annotated[
    UserEvent | AssistantEvent | ToolResultEvent | CompactEvent | SessionStart | SessionEnd
    | FactEvent | ProbeEvent | SubtaskStart | SubtaskEnd,
    Field(discriminator="type"),
]
_EVENT = TypeAdapter(Event)
CONTENT_EVENTS = (UserEvent, AssistantEvent, ToolResultEvent)


def is_call(e: Any) -> bool:
    """A model call of this session: an assistant event that is not a copy of an earlier session's
    (``AssistantEvent.copied``). Calls are what the replay sends, bills and indexes (0-based)."""
    return isinstance(e, AssistantEvent) and not e.copied


@dataclass
class Trace:
    header: Header
    events: list[Any]
    path: str | None = None
    lines: list[int] = field(default_factory=list, repr=False)  # source line of each event
    content_hash: str = ""
    repairs: list[str] = field(default_factory=list, repr=False)   # "path:line: what was repaired"
    # engine-side memo (immutable blocks built from events), shared by every run of this trace in
    # a process, so token counts are computed once per trace, not once per run
    memo: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def calls(self) -> int:
        """The model calls the replay makes: every assistant event but the copies (``copied``)."""
        return sum(1 for e in self.events if is_call(e))

    def facts(self) -> dict[str, FactEvent]:
        return {e.id: e for e in self.events if isinstance(e, FactEvent)}


# --- reading ------------------------------------------------------------------------------------

def _fmt_validation(e: ValidationError) -> str:
    parts = []
    for err in e.errors()[:3]:
        loc = ".".join(str(x) for x in err["loc"] if not isinstance(x, int) or True)
        msg = err["msg"].removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)


class _Checker:
    """The semantic rules of a trace, checked line by line as the loader streams."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.t = 0.0
        self.seen_tool_uses: set[str] = set()
        self.open_tool_uses: dict[str, int] = {}  # id -> line of its assistant event
        self.last_content: Any = None
        self.facts: dict[str, FactEvent] = {}
        self.fact_ids: set[str] = set()
        self.probe_ids: set[str] = set()
        self.pending_probe: tuple[str, int] | None = None
        self.session: str | None = None
        self.subtasks: list[str] = []
        self.outer_open: list[dict[str, int]] = []  # open tool uses of the enclosing contexts

    def err(self, line: int, what: str) -> TraceError:
        return TraceError(self.path, line, what)

    def check(self, ev: Any, line: int) -> None:
        if ev.t < self.t:
            raise self.err(line, f"time goes backwards: t={ev.t} after t={self.t}")
        self.t = ev.t
        if isinstance(ev, AssistantEvent):
            if self.open_tool_uses:
                ids = ", ".join(sorted(self.open_tool_uses))
                raise self.err(line, f"tool_use {ids} has no tool_result before the next assistant call")
            for tu in ev.tool_uses():
                if tu.id in self.seen_tool_uses:
                    raise self.err(line, f"duplicate tool_use id {tu.id!r}")
                self.seen_tool_uses.add(tu.id)
                self.open_tool_uses[tu.id] = line
            if not ev.copied:   # a probe is asked of the next call the session makes
                self.pending_probe = None
        elif isinstance(ev, ToolResultEvent):
            if ev.tool_use_id not in self.open_tool_uses:
                what = "an already answered" if ev.tool_use_id in self.seen_tool_uses else "an unknown"
                raise self.err(line, f"tool_result for {what} tool_use id {ev.tool_use_id!r}")
            del self.open_tool_uses[ev.tool_use_id]
        elif isinstance(ev, FactEvent):
            if ev.id in self.fact_ids:
                raise self.err(line, f"duplicate fact id {ev.id!r}")
            if self.last_content is None or ev.text not in content_text(self.last_content):
                raise self.err(line, f"fact {ev.id!r}: its text does not appear in the content event before it")
            self.fact_ids.add(ev.id)
        elif isinstance(ev, ProbeEvent):
            if ev.id in self.probe_ids:
                raise self.err(line, f"duplicate probe id {ev.id!r}")
            unknown = [f for f in ev.needs if f not in self.fact_ids]
            if unknown:
                raise self.err(line, f"probe {ev.id!r} needs unknown fact(s) {', '.join(unknown)}")
            self.probe_ids.add(ev.id)
            self.pending_probe = (ev.id, line)
        elif isinstance(ev, SessionStart):
            if self.session is not None:
                raise self.err(line, f"session {ev.session!r} starts before session {self.session!r} ended")
            self.session = ev.session
            self.open_tool_uses.clear()  # dangling calls of a crashed session are repaired on resume
        elif isinstance(ev, SessionEnd):
            if self.session != ev.session:
                raise self.err(line, f"session_end for {ev.session!r}, but the open session is {self.session!r}")
            self.session = None
        elif isinstance(ev, SubtaskStart):
            # a sub-agent runs while its parent's tool call (e.g. Task) is open: its own calls
            # are paired within the span, the parent's open calls wait until the span ends
            self.subtasks.append(ev.id)
            self.outer_open.append(self.open_tool_uses)
            self.open_tool_uses = {}
        elif isinstance(ev, SubtaskEnd):
            if not self.subtasks or self.subtasks[-1] != ev.id:
                raise self.err(line, f"subtask_end {ev.id!r} does not close the open subtask")
            if self.open_tool_uses:
                ids = ", ".join(sorted(self.open_tool_uses))
                raise self.err(line, f"tool_use {ids} of subtask {ev.id!r} has no tool_result before subtask_end")
            self.subtasks.pop()
            self.open_tool_uses = self.outer_open.pop()
        if isinstance(ev, CONTENT_EVENTS):
            self.last_content = ev

    def finish(self, last_line: int) -> None:
        if self.pending_probe:
            pid, line = self.pending_probe
            raise self.err(line, f"probe {pid!r} is not followed by a model call (nothing to score)")
        if self.subtasks:
            raise self.err(last_line, f"subtask {self.subtasks[-1]!r} never ends")


def content_text(ev: Any) -> str:
    """The text a content event sends: a user's message, a tool result, or an answer's text, thinking and
    tool inputs (as JSON) one per line. The one rendering the synthesiser, the trace checks and the importers
    measure content by."""
    if isinstance(ev, UserEvent):
        return ev.text
    if isinstance(ev, ToolResultEvent):
        return ev.content
    parts = []
    for c in ev.content:
        parts.append(c.text if isinstance(c, TextContent) else c.thinking if isinstance(c, ThinkingContent)
                     else json.dumps(c.input, ensure_ascii=False))
    return "\n".join(parts)


def iter_lines(path: str | Path, repairs: list[str] | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of each line; bad bytes, bad JSON, NaN, deep nesting are refused
    with the line and column they are on (a UTF-8 byte-order mark and CRLF line ends are fine); a
    lone surrogate is replaced, said in ``repairs`` and as an ``InputRepaired`` warning."""
    from ctxsim.harness.files import regular, strictjson

    path = Path(path)
    try:
        fh = regular.open_regular(path)   # a device or a fifo refused: /dev/zero never ends, a fifo blocks
    except OSError as e:
        raise TraceError(path, None, f"cannot read: {e.strerror or e}") from None
    with fh:
        for no, raw in enumerate(_capped(fh, path), 1):
            if no == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            text = decode_line(raw, path, no)
            if not text.strip():
                raise TraceError(path, no, "empty line")
            try:
                obj = strictjson.loads(text)
            except strictjson.BadJSON as e:
                raise TraceError(path, no, f"{e.what} at column {e.pos + 1}") from None
            if not isinstance(obj, dict):
                raise TraceError(path, no, "a line must be a JSON object")
            obj, lone = strictjson.lone_surrogates(text, obj)
            if lone is not None:
                note = f"{path}:{no}: {strictjson.surrogate_note(lone)}"
                if repairs is not None:
                    repairs.append(note)
                import warnings

                warnings.warn(note, strictjson.InputRepaired, stacklevel=2)
            yield no, obj


def _capped(fh: Any, path: Path) -> Iterator[bytes]:
    """The file's lines, a line longer than ``regular.MAX_LINE_BYTES`` refused at its place."""
    from ctxsim.harness.files import regular

    try:
        yield from regular.lines(fh, path)
    except regular.InputFileError as e:
        raise TraceError(path, e.line, f"cannot read: {e.strerror}") from None
    except OSError as e:
        raise TraceError(path, None, f"cannot read: {e.strerror or e}") from None


def load(path: str | Path) -> Trace:
    """Read and validate a trace file. Raises :class:`TraceError` naming the file and line."""
    path = Path(path)
    digest = hashlib.sha256()
    header: Header | None = None
    events: list[Any] = []
    lines: list[int] = []
    chk = _Checker(str(path))
    last = 0
    repairs: list[str] = []
    try:
        for no, obj in iter_lines(path, repairs):
            last = no
            digest.update(_canonical(obj).encode("utf-8", "surrogatepass"))
            if header is None:
                if obj.get("type") != "header":
                    raise TraceError(path, no, "the first line must be the header ({\"type\": \"header\", ...})")
                try:
                    header = Header.model_validate(obj)
                except ValidationError as e:
                    raise TraceError(path, no, f"bad header: {_fmt_validation(e)}") from None
                continue
            if obj.get("type") == "header":
                raise TraceError(path, no, "a second header line")
            try:
                ev = _EVENT.validate_python(obj)
            except ValidationError as e:
                raise TraceError(path, no, f"bad {obj.get('type', 'untyped')!s} event: {_fmt_validation(e)}") from None
            chk.check(ev, no)
            events.append(ev)
            lines.append(no)
    except UnicodeDecodeError as e:
        raise TraceError(path, last + 1, f"not UTF-8: {e.reason}") from None
    if header is None:
        raise TraceError(path, None, "empty file: no header line")
    chk.finish(last)
    _check_whole(header, events, path, lines)
    return Trace(header, events, str(path), lines, digest.hexdigest()[:16], repairs)


def decode_line(raw: bytes, path: str | Path, no: int) -> str:
    """One line of a JSON-lines file as text: bad UTF-8 or a NUL character (damaged bytes) refused
    at its place (shared by the trace loader and the importers' reader)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TraceError(path, no, f"not UTF-8: {e.reason} (byte {raw[e.start]:#04x} at byte {e.start + 1} "
                         "of the line)") from None
    if "\x00" in text:
        raise TraceError(path, no, f"a NUL character at column {text.index(chr(0)) + 1} (damaged bytes)")
    return text


def _check_whole(header: Header, events: list[Any], path: str | Path, lines: list[int]) -> None:
    """What only the whole trace shows: a replay needs a model call; the fit covers calls it has."""
    calls = sum(1 for e in events if is_call(e))
    if not calls:
        copies = any(isinstance(e, AssistantEvent) for e in events)
        raise TraceError(path, lines[-1] if lines else 1, "no model call: every assistant event is a copy of an earlier "
                         "session's call (copied)" if copies else "no assistant event: a trace needs at least one "
                         "model call to replay")
    rec = header.recorded
    if rec is not None and rec.fit_calls > calls:
        raise TraceError(path, 1, f"recorded.fit_calls is {rec.fit_calls} but the trace has {calls} model calls")


def validate_events(header: Header, events: Iterable[Any], name: str = "<memory>") -> Trace:
    """Run the semantic checks on in-memory events (what generators and importers produce)."""
    chk = _Checker(name)
    evs = list(events)
    for i, ev in enumerate(evs, 2):
        chk.check(ev, i)
    chk.finish(len(evs) + 1)
    _check_whole(header, evs, name, list(range(2, len(evs) + 2)))
    h = hashlib.sha256()
    for obj in _dump_all(header, evs):
        h.update(_canonical(obj).encode("utf-8", "surrogatepass"))   # never a crash on a lone surrogate
    return Trace(header, evs, None, list(range(2, len(evs) + 2)), h.hexdigest()[:16])


def with_header(trace: Trace, header: Header) -> Trace:
    """The same events under another header: content hash recomputed, a fresh engine memo (the
    memo holds the system prefix built from the header)."""
    h = hashlib.sha256()
    for obj in _dump_all(header, trace.events):
        h.update(_canonical(obj).encode("utf-8", "surrogatepass"))   # never a crash on a lone surrogate
    return Trace(header, trace.events, trace.path, trace.lines, h.hexdigest()[:16])


def with_events(trace: Trace, events: list[Any]) -> Trace:
    """The same header over other events (an event's meta changed): content hash recomputed."""
    return with_header(Trace(trace.header, events, trace.path, trace.lines), trace.header)


# --- writing ------------------------------------------------------------------------------------

def _canonical(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def _dump(m: BaseModel) -> dict[str, Any]:
    d = m.model_dump(mode="json", exclude_defaults=True)
    d = {"type": m.type, **{k: v for k, v in d.items() if k != "type"}}
    if isinstance(m, _Ev):
        d = {"type": d.pop("type"), "t": m.t, **{k: v for k, v in d.items() if k != "t"}}
    if isinstance(m, AssistantEvent):  # content blocks always carry their type
        d["content"] = [{"type": c.type, **c.model_dump(mode="json", exclude_defaults=True)} for c in m.content]
    return d


def _dump_all(header: Header, events: Iterable[Any]) -> Iterator[dict[str, Any]]:
    h = _dump(header)
    h["format"], h["version"] = FORMAT, VERSION
    yield {"type": "header", "format": FORMAT, "version": VERSION, **{k: v for k, v in h.items()
                                                                      if k not in ("type", "format", "version")}}
    for ev in events:
        yield _dump(ev)


def dumps(trace: Trace) -> str:
    return "".join(_canonical(o) + "\n" for o in _dump_all(trace.header, trace.events))


def write(trace: Trace, path: str | Path) -> None:
    """Write the canonical form (atomic: a temporary file renamed into place; ctxsim.harness.files.atomic)."""
    from ctxsim.harness.files import atomic

    text = dumps(trace)
    atomic.write(path, lambda p: p.write_text(text, encoding="utf-8"))


def json_schema() -> dict[str, Any]:
    """JSON Schema of one trace line (header or event)."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "ctxsim trace line (format v1)",
        "oneOf": [Header.model_json_schema(), TypeAdapter(Event).json_schema()],
    }
