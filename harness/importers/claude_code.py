"""Claude Code session transcripts (``~/.claude/projects/<project>/<session>.jsonl``) to a trace.

Facts of the format this importer relies on (read off the logs in ``shared/traces/real``, Claude
Code 2.0.76 and 2.1.38/2.1.39):

* one JSONL line per *content block*: a model call that answered thinking + text + two tool uses
  is four ``assistant`` lines, each repeating the call's usage; they are joined by ``requestId``
  (2.0.x logs have none: ``message.id``). Tools run while the call still streams, so a call's
  later blocks can come after the results of its first tool uses;
* ``usage``: ``input_tokens`` (uncached), ``cache_creation_input_tokens`` split into
  ``cache_creation.ephemeral_5m/1h_input_tokens``, ``cache_read_input_tokens``, ``output_tokens``.
  From 2.1 the per-line ``output_tokens`` is a streaming count taken mid-call (1, 8, 10 ...); the
  importer keeps the largest one seen for the call and marks the header
  ``output_tokens_partial``: they are not the truth;
* ``user`` lines hold the user's text, or ``tool_result`` blocks (content: a string or a list of
  blocks); a result of the ``Task`` tool carries ``toolUseResult.agentId``, the sub-agent whose own
  transcript is ``<session>/subagents/agent-<agentId>.jsonl``: it becomes an isolated
  ``subtask_start``/``subtask_end`` span placed where it ran, before the Task result;
* ``system``/``compact_boundary`` with ``compactMetadata {trigger, preTokens}`` is a compaction;
  the next ``user`` line with ``isCompactSummary`` is the summary that replaced the history, and
  ``subagents/agent-acompact-*.jsonl`` holds the compaction call itself (its usage goes to the
  ``compact`` event);
* ``isSidechain`` lines inside the main file (older versions) are sub-agent calls too: each
  contiguous run becomes a span;
* ``progress``, ``file-history-snapshot``, ``queue-operation`` and the other ``system`` subtypes are
  not sent to the model: ignored, and counted. ``progress``/``hook_progress`` records still say
  which hooks ran for which tool use (read, then ignored);
* a resume (``claude --continue``/``--resume``: a new launch appending to the same transcript) leaves
  its marks: the ``<synthetic>`` "No response requested." answer, the meta "Continue from where you
  left off." message, the file-history snapshots written again, or a SessionStart hook run for the
  ``resume`` source, or a main-context record of a Claude Code version no earlier one carries. After a
  model call, the first of them becomes ``session_end`` +
  ``session_start(resume=True)`` (the trace then opens with a ``session_start``); a tool use still
  open there is closed with a synthetic error result, as the resume drops it.

Hidden content. Claude Code sends the model messages its transcript does not hold (hook outputs,
reminders, files re-attached after a compaction). Where another log file holds their text, the
importer puts it back where the API received it — as meta user messages before the next call,
marked ``meta.hidden`` and counted in ``header.notes`` — and never invents any:

* ``attachment`` records (2.1.105+) hold what Claude Code attached beside the conversation: skill
  listings, files (@-mentions, and those re-attached after a compaction), plans, invoked skills'
  bodies, edited files' snippets, deferred tools, queued prompts. Each goes in at its place as a meta
  user message with its recorded content (``harness/importers/attachments.py``: the frame around it is
  assumed). A compaction whose re-attachments the log records is marked ``meta.reattached_in_log``
  (the replay models none for it); with file attachments in the log no @-mention is rebuilt; the
  kinds whose text the log does not hold (plan mode's reminder) are counted as ignored;
* ``agent-acompact-*.jsonl`` is the compaction request as the API received it: the ``isMeta``
  user messages before its compaction prompt are conversation messages the main transcript lost
  (e.g. ``PostToolUse:Edit hook additional context: [COMPILE ERROR] ...``). Each goes before the
  first main call after its timestamp;
* a tool use that a ``PreToolUse`` hook blocked (its hooks ran, no ``PostToolUse``/
  ``PostToolUseFailure`` hook did, and the result is the error ``toolUseResult`` "Error: <text>")
  reaches the model twice: as the tool's error result and, repeated, as a ``<system-reminder>``
  "<hook> hook blocking error from command: ..." user message (Claude Code's own rendering of a
  ``hook_blocking_error`` attachment; anthropics/claude-code#56121; the ae4a77f8 summary lists
  "system-reminder hook blocking errors from the pre-commit validation script" among the user
  messages). The reminder is rebuilt from the result's text and the hook name of the
  ``hook_progress`` records; which of the hook commands blocked is not recorded, so the command
  (a few tokens) is left out.

The system prompt and tool schemas are not in the transcript. Their size is derived from the first
call: ``prefix_tokens`` = its recorded context − the cl100k count of the visible messages it sent
(at token scale 1; ``ctxsim fidelity`` re-derives it with the fitted scale, see
``header.meta.first_call_context``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from ctxsim.harness.importers import attachments
from ctxsim.harness.importers.common import (
    SHAPE_ERRORS,
    ImportResult,
    SkippedLine,
    TraceBuilder,
    cache_ttl_of,
    caching_of,
    count,
    finalize,
    first_records,
    flatten_content,
    iso_time,
    models_by_role,
    notes_from,
    parse_time,
    read_jsonl,
    shape_error,
    uncached_models,
)
from ctxsim.harness.model import mentions
from ctxsim.harness.model import trace as tr
from ctxsim.harness.model.trace import NoModelCalls, TraceError

FORMAT = "claude-code"
# record kinds that never reach the model (counted in the import summary, never silently dropped)
# (with the session's own metadata, none of it sent: "last-prompt", "permission-mode", "ai-title", "agent-name",
# "mode"; in 78, 40, 8, 19 and 0 files of the development population, 361, 59, 127, 2 and 9 of an outside sample;
# "teleported-from", a session brought over from Claude Code on the web, in 2 files of a second outside sample.
# A file of them alone is a session opened and left, not a foreign file)
IGNORED_TYPES = ("progress", "file-history-snapshot", "queue-operation", "summary", "custom-title", "tag",
                 "last-prompt", "permission-mode", "ai-title", "agent-name", "mode", "teleported-from")
# The records that say something to the model (or mark its conversation): one written again with a uuid the
# file already holds is skipped, counted (_read_record)
WRITTEN_AGAIN_TYPES = ("user", "assistant", "attachment", "system")
# The type every Claude Code record gives these fields where it writes them (null aside): no record of the
# development population and its two outside samples (issue 41, 300,362 records) nor of ../shared/traces/real
# gives another. A record that does is not Claude Code's writing (a damaged or hand-edited line) and is
# skipped whole, named, where a value read as its truthiness or its str() would have passed unseen.
ENVELOPE_TYPES: dict[str, type] = {
    "version": str, "sessionId": str, "timestamp": str, "uuid": str, "parentUuid": str, "requestId": str,
    "isSidechain": bool, "isMeta": bool, "isApiErrorMessage": bool, "isCompactSummary": bool, "isSnapshotUpdate": bool,
}
PARTIAL_OUTPUT_FROM = (2, 1)  # README of the real logs: 2.1.x output_tokens are streaming counts
MESSAGE_OVERHEAD_TOKENS = 4   # ctxsim.harness.provider.tokenizer.MESSAGE_OVERHEAD (kept in step)
# The windows Claude Code runs with: 200k by default, 1M where the model and plan offer it (peers.md)
WINDOWS = (200_000, 1_000_000)
# Auto-compact fires at window − min(max output, 20,000) − 13,000 (peers.md, "Verified against
# current sources": reported; the real transcripts here compact at preTokens 167,094–170,251 on 200k)
SUMMARY_OUTPUT_RESERVE = 20_000
AUTOCOMPACT_BUFFER = 13_000
COMPACT_COMMAND = "<command-name>/compact</command-name>"   # Claude Code's record of the /compact command
# A Task result that only says the sub-agent was started in the background (Claude Code 2.1.x, Task with
# run_in_background: toolUseResult {"isAsync": true, "status": "async_launched", "agentId": ...}; 20 logs of the
# development population and its outside samples). The agent's calls run after it, alongside the main
# context's: placed at the ack, they pushed every main call of that time past them (up to 409 s, 48 of one
# log's 66 main calls moved more than 30 s), making TTL expiries the log does not have.
ASYNC_STATUS = "async_launched"


def is_async_launch(tur: Any) -> bool:
    """Whether a Task result's ``toolUseResult`` is a background launch's acknowledgement (:data:`ASYNC_STATUS`)."""
    return isinstance(tur, dict) and (tur.get("isAsync") is True or tur.get("status") == ASYNC_STATUS)


def tools_loaded(content: Any) -> list[str]:
    """The tools a tool_result's ``tool_reference`` blocks load (Claude Code's ToolSearch), in order."""
    blocks = content if isinstance(content, list) else []
    return [str(b["tool_name"]) for b in blocks
            if isinstance(b, dict) and b.get("type") == "tool_reference" and isinstance(b.get("tool_name"), str)
            and b["tool_name"]]


WARMUP_PROMPT = "Warmup"   # the prompt of the start-up calls that warm sub-agents' caches (the population's 2.0-2.1 logs)
# What Claude Code writes when a conversation is resumed (a new launch on the same transcript; its source's
# conversationRecovery.ts, as read in a public port's gap table: deserializeMessages appends this
# assistant sentinel when the conversation ends on a user message, injects the meta message below to
# continue an interrupted turn, and copies the file-history snapshots again, copyFileHistoryForResume)
NO_RESPONSE_REQUESTED = "No response requested."
RESUME_CONTINUE = "Continue from where you left off."
TRIGGER_TOLERANCE = 0.05      # assumed: a preTokens this close to a window's trigger (share of it) names it
# A resumed conversation that Claude Code 1.0.x copied into a new session file: its calls' records are written
# at once, stamped within a millisecond (issue 41 populations: 36 such files, spread ≤ 0.001 s), where no two
# calls of a conversation, made one after the other, finish within this (assumed) spread
COPY_SPREAD_S = 0.05


def recorded_window(auto_pre_tokens: list[int], peak: int) -> tuple[int, str]:
    """The window the agent ran with, and the log's evidence: an auto-compaction's preTokens sits
    just past its window's trigger (167,094 ⇒ 200k); with none, a peak context over 200k means the
    1M window, else Claude Code's default 200k (a 1M setting that never filled past 200k cannot be
    told apart from it)."""
    if auto_pre_tokens:
        pre = max(auto_pre_tokens)
        window = next((w for w in WINDOWS if w > pre), WINDOWS[-1])
        trigger = window - SUMMARY_OUTPUT_RESERVE - AUTOCOMPACT_BUFFER
        ev = (f"auto-compaction at preTokens {pre:,}: Claude Code compacts at window − {SUMMARY_OUTPUT_RESERVE:,} − "
              f"{AUTOCOMPACT_BUFFER:,} (reported; {trigger:,} at {window:,})")
        if abs(pre - trigger) > TRIGGER_TOLERANCE * trigger:
            ev += f"; preTokens is {pre - trigger:+,} from that trigger (another version or an override): the smallest window above it"
        return window, ev
    if peak > WINDOWS[0]:
        window = next((w for w in WINDOWS if w >= peak), WINDOWS[-1])
        return window, f"no auto-compaction; peak context {peak:,} > {WINDOWS[0]:,}: the {window:,} window"
    return WINDOWS[0], (f"no auto-compaction; peak context {peak:,} ≤ {WINDOWS[0]:,}: Claude Code's default window "
                        "(a 1M setting that never filled past 200k cannot be told apart)")


def usage_of(u: dict[str, Any] | None, path: Path, line: int) -> tr.RecordedUsage | None:
    """Claude Code's usage dict, normalised (N-CACHE-5: the four input kinds are disjoint)."""
    if u is None or u == {}:
        return None
    split = u.get("cache_creation") if isinstance(u, dict) else None
    if not isinstance(u, dict) or not isinstance(split if split is not None else {}, dict):
        raise TraceError(path, line, "message.usage (and its cache_creation) must be an object of token counts")
    split = split or {}
    creation = count(u.get("cache_creation_input_tokens"), "usage.cache_creation_input_tokens", path, line)
    w1h = count(split.get("ephemeral_1h_input_tokens"), "usage.cache_creation.ephemeral_1h_input_tokens", path, line)
    w5m = count(split.get("ephemeral_5m_input_tokens"), "usage.cache_creation.ephemeral_5m_input_tokens", path, line)
    if w1h + w5m != creation:   # no split recorded (older logs): the 5-minute default
        w5m = max(0, creation - w1h)
    return tr.RecordedUsage(input=count(u.get("input_tokens"), "usage.input_tokens", path, line),
                            cache_write_5m=w5m, cache_write_1h=w1h,
                            cache_read=count(u.get("cache_read_input_tokens"), "usage.cache_read_input_tokens",
                                             path, line),
                            output=count(u.get("output_tokens"), "usage.output_tokens", path, line))


def merge_usage(earlier: tr.RecordedUsage, later: tr.RecordedUsage) -> tr.RecordedUsage:
    """Two lines' usage of one call: the later line's input counts (a snapshot that differs is the
    newer one), the larger output (2.1.x writes streaming counts)."""
    return later if later.output >= earlier.output else later.model_copy(update={"output": earlier.output})


def _version(v: str | None) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in (v or "").split("."))
    except ValueError:
        return ()


@dataclass
class _Call:
    key: str
    line: int
    t: float
    model: str | None
    blocks: list[Any] = field(default_factory=list)
    usage: tr.RecordedUsage | None = None
    request_id: str | None = None
    sidechain: bool = False
    copied: bool = False   # an earlier session's call that a resume copied in (mark_copied_calls)
    route: str | None = None   # who served it (route_of its ids)


@dataclass
class _Parsed:
    """One transcript file as an ordered list of items (calls placed at their first line)."""

    path: Path
    items: list[tuple[str, Any]] = field(default_factory=list)
    calls: dict[str, _Call] = field(default_factory=dict)
    ignored: Counter = field(default_factory=Counter)
    dropped_blocks: Counter = field(default_factory=Counter)
    unsent: Counter = field(default_factory=Counter)   # tool-use input keys the log holds, kept out of the requests
    todo_writes: dict[str, list[Any]] = field(default_factory=dict)   # TodoWrite id -> its todos, where the log records no attachment
    versions: Counter = field(default_factory=Counter)
    sessions: Counter = field(default_factory=Counter)
    routes: Counter = field(default_factory=Counter)   # route_of each call's ids
    unrequested: Counter = field(default_factory=Counter)   # of those, the calls with no request id, by route
    compact_summaries: int = 0
    hooks: dict[str, dict[str, str]] = field(default_factory=dict)  # tool_use_id -> hookEvent -> hookName
    session_hooks: dict[str, list[str]] = field(default_factory=dict)  # SessionStart source -> hook commands
    skipped: list[SkippedLine] = field(default_factory=list)   # lines that are not a JSON object
    uuids: dict[str, tuple[str, Any]] = field(default_factory=dict)   # the records' own ids -> (type, timestamp)
    message_keys: dict[str, str] = field(default_factory=dict)   # message.id -> the call it was keyed to (call_key)
    first_parent: tuple[int, str] | None = None    # (line, parentUuid) of the first message record, when it has one
    messages_seen: bool = False
    snapshots: set[str] = field(default_factory=set)   # messageIds of the file-history snapshots written so far
    main_versions: set[str] = field(default_factory=set)   # the Claude Code versions of the main context's records so far
    agent_progress: dict[str, str] = field(default_factory=dict)   # a Task call's tool_use id -> the agentId its progress names
    last_t: float | None = None   # the time of the last record that carried one

    def times(self) -> list[float]:
        """The times of its calls and of its other timed items (where a span of it begins and ends)."""
        return [c.t for c in self.calls.values()] + [i["t"] for _, i in self.items if isinstance(i, dict)]


# Input keys Claude Code writes into a tool use's logged input and strips before it sends the conversation to
# the API: from 2.0.54 on, ExitPlanMode's input gets the plan file's content ("plan"; 2.1.x also "planFilePath")
# when the message is stored, and the API normalisation takes them out again (read in the npm bundles: absent in
# 2.0.53, present in 2.0.54-2.0.74, 2.1.0 and 2.1.12 cli.js, and in 2.1.114's binary: normalizeToolInput adds
# them, normalizeToolInputForAPI removes them). The development population agrees: where the plan's tokens are
# counted, the replay's next call is larger than the log's by about them (e.g. +7,444 tokens for a
# 17,799-character plan, +2,420 for 6,539), across 2.0.74-2.1.143 logs
LOGGED_ONLY_INPUT = {"ExitPlanMode": ((2, 0, 54), ("plan", "planFilePath"))}
# From this version the log records Claude Code's attachments (``attachment`` records); before it, the todo
# list a TodoWrite changed, which the next request carries (attachments.TODO_CHANGED), is rebuilt from the
# call's input
TODO_ATTACHMENT_UNLOGGED_BEFORE = (2, 1, 105)


def _shown(v: Any) -> str:
    """A wrong value as an error names it: short, one line."""
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


def _content_block(b: dict[str, Any], p: _Parsed, line: int, version: str | None = None) -> Any | None:
    kind = b.get("type")
    if kind in ("text", "thinking"):
        v = b.get(kind, "")
        if not isinstance(v, str):   # str() would bill "True" or "5" as the block's text
            raise TraceError(p.path, line, f"a {kind} block whose {kind} is {type(v).__name__} {_shown(v)}, not a string")
        return tr.TextContent(text=v) if kind == "text" else tr.ThinkingContent(thinking=v)
    if kind == "redacted_thinking":
        p.dropped_blocks["redacted_thinking (kept as an empty thinking block)"] += 1
        return tr.ThinkingContent(thinking="")
    if kind == "tool_use":
        if not b.get("id") or not b.get("name"):
            raise TraceError(p.path, line, "tool_use block without id or name")
        inp = b.get("input")
        inp = inp if isinstance(inp, dict) else {"input": inp}
        since, keys = LOGGED_ONLY_INPUT.get(str(b["name"]), ((), ()))
        logged = {k: inp[k] for k in keys if k in inp} if since and _version(version) >= since else {}
        if logged:
            inp = {k: v for k, v in inp.items() if k not in logged}
            p.unsent[f"{b['name']} {'/'.join(logged)}"] += 1
        if b["name"] == "TodoWrite" and isinstance(inp.get("todos"), list) and inp["todos"] \
                and () < _version(version) < TODO_ATTACHMENT_UNLOGGED_BEFORE:
            p.todo_writes[str(b["id"])] = inp["todos"]
        return tr.ToolUseContent(id=str(b["id"]), name=str(b["name"]), input=inp, logged_only=logged)
    p.dropped_blocks[f"assistant {kind} block"] += 1
    return None


# Who served a call, from the ids the API gave it (issue 41: a proxy's usage is its own account, not
# a bill of Anthropic's prices). Anthropic's API: message ids "msg_01...", request ids "req_011C..."
# (every first-party log of the development population); Google Vertex: "msg_vrtx_01...",
# "req_vrtx_011C..." (seen there too); Amazon Bedrock: "msg_bdrk_01..." (Bedrock's InvokeModel
# responses, as ccusage users filter Bedrock calls by it). Anything else (a proxy's "msg_2026...",
# "chatcmpl-...") is a proxy: it answers in the Messages API's shape and reports its own usage.
ROUTE_PREFIXES = (("msg_vrtx_", "vertex"), ("req_vrtx_", "vertex"), ("msg_bdrk_", "bedrock"), ("msg_01", "anthropic"),
                  ("req_01", "anthropic"))


def route_of(message_id: Any, request_id: Any = None) -> str | None:
    """``anthropic``, ``vertex``, ``bedrock`` or ``proxy`` from a call's message and request ids
    (:data:`ROUTE_PREFIXES`); None when it has neither."""
    ids = [str(x) for x in (message_id, request_id) if isinstance(x, str) and x]
    if not ids:
        return None
    for i in ids:
        for prefix, route in ROUTE_PREFIXES:
            if i.startswith(prefix):
                return route
    return "proxy"


# A first-party answer carries the API's request id: Claude Code writes it (``requestId``) on the calls of
# Anthropic's API and Vertex (issue 41, development population: 30,075 of 30,094 calls; the 19 without are at
# most 5 in a file; outside sample: 6,133 of 6,133). A session whose first-party-shaped calls carry none went
# through a relay that passes Anthropic's answer on without its headers (one repository of each sample, 532
# and 598 calls, none with an id): its usage is the relay's account, not Anthropic's bill. One of them reads
# what the API would not: five-minute entries read whole after 5.5-30 minutes in 12 of 17 gaps, against 3 of
# 168 in first-party traffic. Route "relay".
RELAYED_ROUTES = ("anthropic", "vertex")
MIN_RELAYED_CALLS = 2   # assumed: one call without its id may be an accident (19 first-party calls lack one)


def _route(routes: Counter, unrequested: Counter | None = None) -> str | None:
    """The route that served most of the session's calls (None: no call had an id); ``relay`` where
    those are first-party-shaped and none carries a request id (:data:`RELAYED_ROUTES`)."""
    known = [(n, r) for r, n in routes.items() if r is not None]
    if not known:
        return None
    n, route = max(known)
    if route in RELAYED_ROUTES and n >= MIN_RELAYED_CALLS and (unrequested or {}).get(route, 0) == n:
        return "relay"
    return route


def parse_file(path: Path) -> _Parsed:
    """Read one transcript (main or sub-agent) into items, checking it is a Claude Code log. A line
    that is not a JSON object (a corrupt record, a last line cut off while the session was being
    written), or a record of a shape no Claude Code writes (a field of the wrong type, a block with no
    id), is skipped and kept in ``skipped``: Claude Code appends one record per line, so the others stand
    on their own. A file with no readable record, or none that says it is Claude Code's (a ``sessionId``
    or ``version``), fails at its first bad line."""
    p = _Parsed(path)
    bad: list[SkippedLine] = []
    for line, o in read_jsonl(path, p.skipped):
        try:
            before = len(p.items)
            _read_record(p, path, line, o)
            _version_mark(p, path, line, o, before)
        except TraceError as e:
            bad.append(SkippedLine(path, line, e.what))
        except SHAPE_ERRORS as e:
            bad.append(SkippedLine(path, line, shape_error("claude-code", e)))
    if bad and not ((p.sessions or p.versions) and (p.items or p.calls)):   # nothing of Claude Code's read
        raise TraceError(path, bad[0].line, bad[0].reason)
    p.skipped = sorted(p.skipped + bad, key=lambda sk: sk.line)
    seen_any = bool(p.items or p.calls or p.ignored or bad)
    _drop_queued_twins(p)
    if not seen_any:
        if p.skipped:
            first = p.skipped[0]
            raise TraceError(path, first.line, first.reason)
        # a session file created and never written (Claude Code opens it at start-up): no request, nothing billed
        raise NoModelCalls(path, None, "empty file: no records: nothing to replay")
    if not p.calls and not p.items:
        kinds = ", ".join(sorted(p.ignored)) or "none"
        if p.ignored and all(k.split("/")[0] in (*IGNORED_TYPES, "system", "attachment") for k in p.ignored):
            # Claude Code's own records (a file-history snapshot, a queued command) and nothing else: a session
            # opened and left before any request
            raise NoModelCalls(path, None, f"no user or assistant records (record types: {kinds}): nothing to replay")
        raise TraceError(path, 1, f"no user or assistant records (record types: {kinds}): not a Claude Code transcript")
    return p


def _version_mark(p: _Parsed, path: Path, line: int, o: dict[str, Any], at: int) -> None:
    """A main-context record (read whole; its items from ``at`` on) written by a Claude Code version
    no earlier main-context record of the file carries: a new launch wrote it, a resume (a running
    Claude Code writes its own version on every record and updates only on a restart). Marked before
    the record's own items. A version seen before stays unmarked (a 1.0.x log of the development
    population interleaves two versions' records call after call)."""
    v = o.get("version")
    if not isinstance(v, str) or not v or o.get("isSidechain"):
        return
    if p.main_versions and v not in p.main_versions:
        try:
            t = parse_time(o.get("timestamp"), path, line)
        except TraceError:
            t = p.last_t
        p.items.insert(at, ("resume", {"line": line, "t": t, "marker": "a record of a Claude Code version new to the file"}))
    p.main_versions.add(v)


def mark_copied_calls(p: _Parsed) -> int:
    """The calls at the head of a main transcript whose records were written at once (within
    :data:`COPY_SPREAD_S` of the first main call's, at least two of them) are copies: Claude Code
    1.0.x resumed the conversation into this new file by copying its records, each stamped with the
    time of the copy, request ids and usage kept (ccusage counts such calls once, by ``message.id:
    requestId``, ``data-loader.ts``). They are history this session starts from: marked ``copied``, and a
    resume mark follows the copy (the first call after it sends the conversation anew). Measured on
    the development population and two samples outside it (issue 41, 399 sessions): 1,721 calls in 36
    files, every one a 1.0.x log. Of the 1,128 calls whose request id and usage another file of the
    folder holds, the rule finds 1,111; the other 17 are originals that another file's copy is stamped
    before (15) and a copy in the middle of a 2.0.8 log (2), left as calls. Returns the number marked."""
    main = [c for c in p.calls.values() if not c.sidechain]   # in the order of their items
    if not main:
        return 0
    t0 = main[0].t
    run = []
    for c in main:
        if abs(c.t - t0) > COPY_SPREAD_S:
            break
        run.append(c)
    if len(run) < 2:
        return 0

    def at(item: tuple[str, Any]) -> float | None:
        kind, x = item
        return p.calls[x].t if kind == "call" else x.get("t") if isinstance(x, dict) else None

    end = p.items.index(("call", run[-1].key)) + 1   # the copy goes on to the last record written with it (results, messages, a sidechain's calls)
    while end < len(p.items) and (t := at(p.items[end])) is not None and t <= t0 + COPY_SPREAD_S and not (
            p.items[end][0] == "call" and not p.calls[p.items[end][1]].sidechain):
        end += 1
    copied = [p.calls[x] for k, x in p.items[:end] if k == "call" and abs(p.calls[x].t - t0) <= COPY_SPREAD_S]
    for c in copied:
        c.copied = True
    p.items.insert(end, ("resume", {"line": run[-1].line, "t": run[-1].t,
                                    "marker": "a conversation copied in from an earlier session (Claude Code 1.0.x)"}))
    return len(copied)


def call_key(p: _Parsed, request_id: Any, message_id: Any) -> str | None:
    """The call an assistant record belongs to: its request id, else its message id, where the lines of one
    answer (one message id) stay one call when some of them lack the request id. No log of the development
    population or its outside samples (68,170 calls) mixes the two within an answer; a damaged file that lost
    some request ids split its calls in two and billed them twice. A message id met first without a request id
    keeps that key; one met with a request id maps to it; a proxy that reuses a message id across requests with
    their own request ids keeps them apart."""
    rid = request_id if isinstance(request_id, str) and request_id else None
    mid = str(message_id) if isinstance(message_id, str | int) and not isinstance(message_id, bool) \
        and message_id != "" else None
    known = p.message_keys.get(mid) if mid else None
    key = known if known is not None and (rid is None or known == mid) else (rid or mid)
    if mid and key:
        p.message_keys.setdefault(mid, key)
    return key


def _read_record(p: _Parsed, path: Path, line: int, o: dict[str, Any]) -> None:
    """One record of a transcript into ``p``. A record that cannot be read raises before it adds an
    item or a call (its counters aside), so :func:`parse_file` can skip it whole."""
    kind = o.get("type")
    if not isinstance(kind, str):
        raise TraceError(path, line, "not a Claude Code transcript record (no \"type\")")
    for name, want in ENVELOPE_TYPES.items():
        v = o.get(name)
        if v is not None and not isinstance(v, want):
            raise TraceError(path, line, f"{name} is {type(v).__name__} {_shown(v)}, where Claude Code writes a "
                                         f"{'boolean' if want is bool else 'string'}")
    if o.get("version"):
        p.versions[o["version"]] += 1
    if isinstance(o.get("uuid"), str):   # any record's: a message's parent can be a progress or system record
        stamp = (kind, o.get("timestamp"))
        if kind in WRITTEN_AGAIN_TYPES and p.uuids.get(o["uuid"]) == stamp:
            # the same record written again: a run of an earlier chain's records copied, uuids and times kept,
            # into the middle of the file (issue 41: 106 records of one development-population session, 27 of
            # one outside it; no other file of either repeats a uuid). It is no new message and no new call. A
            # uuid repeated on a record of another kind or time is a damaged id, not a copy: the record stays.
            p.ignored[f"{kind} written again (a uuid the file already holds)"] += 1
            return
        p.uuids.setdefault(o["uuid"], stamp)
    if o.get("sessionId"):
        p.sessions[o["sessionId"]] += 1
    if kind in IGNORED_TYPES:
        p.ignored[kind] += 1
        data = o.get("data")
        mid = o.get("messageId")
        if kind == "file-history-snapshot" and isinstance(mid, str):
            if mid in p.snapshots and not o.get("isSnapshotUpdate"):   # copied again on a resume
                p.items.append(("resume", {"line": line, "t": p.last_t, "marker": "a file-history snapshot written again"}))
            p.snapshots.add(mid)
        if kind == "progress" and isinstance(data, dict) and data.get("type") == "hook_progress" and o.get("toolUseID"):
            p.hooks.setdefault(str(o["toolUseID"]), {}).setdefault(str(data.get("hookEvent")), str(data.get("hookName") or ""))
        if kind == "progress" and isinstance(data, dict) and data.get("type") == "agent_progress" \
                and isinstance(data.get("agentId"), str) and isinstance(o.get("parentToolUseID"), str):
            p.agent_progress.setdefault(o["parentToolUseID"], data["agentId"])
        if kind == "progress" and isinstance(data, dict) and data.get("hookEvent") == "SessionStart":
            source = str(data.get("hookName") or "SessionStart:?").partition(":")[2] or "?"
            cmds, cmd = p.session_hooks.setdefault(source, []), str(data.get("command") or "?")
            if cmd not in cmds:
                cmds.append(cmd)
            if source == "resume" and not o.get("isSidechain"):   # the hooks' "resume" source (code.claude.com/docs/en/hooks)
                p.items.append(("resume", {"line": line, "t": p.last_t, "marker": "a SessionStart hook run for a resume"}))
        return
    if kind == "system":
        if o.get("subtype") == "compact_boundary":
            meta = o.get("compactMetadata") or {}
            p.items.append(("compact", {"line": line, "t": parse_time(o.get("timestamp"), path, line),
                                        "trigger": meta.get("trigger", "auto"),
                                        "pre_tokens": count(meta.get("preTokens"), "compactMetadata.preTokens",
                                                            path, line) if meta.get("preTokens") is not None
                                        else None}))
        elif o.get("subtype") == "microcompact_boundary":
            # Claude Code cleared these old tool results' content (2.1.9+): from the next call on
            # the API receives a placeholder for each
            meta = o.get("microcompactMetadata") or {}
            ids = meta.get("compactedToolIds") or []
            p.items.append(("microcompact", {"line": line, "t": parse_time(o.get("timestamp"), path, line),
                                             "ids": [str(x) for x in ids] if isinstance(ids, list) else []}))
        else:
            p.ignored[f"system/{o.get('subtype') or '?'}"] += 1
        return
    if kind == "attachment":
        a = o.get("attachment")
        text, why = attachments.render(a) if isinstance(a, dict) else (None, "record without an attachment object")
        if text is None:
            p.ignored[f"attachment/{why}"] += 1
        else:
            prompt = a.get("prompt") if a["type"] == "queued_command" else None
            if attachments.content_blocks(prompt):   # a pasted image: a placeholder, counted as a user message's is
                prompt, dropped = flatten_content(prompt)
                p.dropped_blocks.update({f"attachment {k} block": v for k, v in dropped.items()})
            p.items.append(("attachment", {"line": line, "t": parse_time(o.get("timestamp"), path, line),
                                           "kind": str(a["type"]), "text": text, "side": bool(o.get("isSidechain")),
                                           "prompt": prompt, "path": attachments.file_path(a)}))
        return
    if kind not in ("assistant", "user"):
        p.ignored[kind] += 1
        return
    msg = o.get("message")
    if not isinstance(msg, dict):
        other = "" if p.sessions or p.versions else (
            ": not a Claude Code transcript (no record so far carries a sessionId or version: another agent's log?)")
        raise TraceError(path, line, f"{kind} record without a message object{other}")
    t = parse_time(o.get("timestamp"), path, line)
    p.last_t = t
    side = bool(o.get("isSidechain"))
    if p.first_parent is None and not p.messages_seen and isinstance(o.get("parentUuid"), str):
        p.first_parent = (line, o["parentUuid"])   # the file's first message record answers another
    p.messages_seen = True
    if kind == "assistant":
        key = call_key(p, o.get("requestId"), msg.get("id"))
        if not key and not any(msg.get(k) for k in ("content", "usage", "model")):
            # an answer's stub: no id, no model, no usage, nothing said (2.1.81 through the Agent SDK, where
            # the user interrupted before the answer began; seen outside the development population)
            p.ignored["assistant stub with no id, model, usage or content (no answer was made)"] += 1
            return
        if not key:
            raise TraceError(path, line, "assistant record with neither requestId nor message.id")
        if msg.get("model") == "<synthetic>":   # Claude Code's own error notices: no API call
            p.ignored["assistant/<synthetic> (no API call)"] += 1
            if not side and flatten_content(msg.get("content"))[0].startswith(NO_RESPONSE_REQUESTED):
                p.items.append(("resume", {"line": line, "t": t, "marker": f"the {NO_RESPONSE_REQUESTED!r} notice"}))
            return
        content = msg.get("content") or []
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list) or not all(isinstance(b, dict) for b in content):
            raise TraceError(path, line, "assistant message content is neither a string nor a list of blocks")
        version = o.get("version") if isinstance(o.get("version"), str) else None
        blocks = [cb for b in content if (cb := _content_block(b, p, line, version)) is not None]
        u = usage_of(msg.get("usage"), path, line)
        call = p.calls.get(str(key))
        if call is None:
            route = route_of(msg.get("id"), o.get("requestId"))
            call = p.calls[str(key)] = _Call(str(key), line, t, msg.get("model"), request_id=o.get("requestId"),
                                             sidechain=side, route=route)
            p.routes[route] += 1
            p.unrequested[route] += not o.get("requestId")
            p.items.append(("call", str(key)))
        call.blocks += blocks
        if u is not None and u.context_tokens + u.output == 0:
            # no API call reads 0 tokens: a placeholder (proxies write {input 0, output 0} on the
            # first lines of a streamed call), not a usage
            p.ignored["assistant line with an all-zero usage (a placeholder, not the call's usage)"] += 1
        elif u is not None:
            # the lines of one call repeat its input counts while output grows (2.1.x streaming
            # counts): the last line's input counts, the largest output
            call.usage = u if call.usage is None else merge_usage(call.usage, u)
        return
    # user
    if o.get("isCompactSummary") or unflagged_summary(o, msg.get("content")):
        text, dropped = flatten_content(msg.get("content"))
        p.compact_summaries += 1
        p.items.append(("summary", {"line": line, "t": t, "text": text, "flagged": bool(o.get("isCompactSummary"))}))
        return
    content = msg.get("content")
    if plan_restart(o, p):
        # plan mode's "clear context": the plan opens a new conversation root; the history before
        # it is gone, no summary call made (the next call reads only the system prefix)
        text, _ = flatten_content(content)
        p.items.append(("compact", {"line": line, "t": t, "trigger": "manual", "pre_tokens": None,
                                    "inferred": "a plan opening a new conversation root after ExitPlanMode "
                                                "(plan mode's clear context)", "no_call": True}))
        p.items.append(("summary", {"line": line, "t": t, "text": text}))
        return
    if (o.get("isMeta") and not side and isinstance(content, str | list)
            and flatten_content(content)[0].strip() == RESUME_CONTINUE):
        p.items.append(("resume", {"line": line, "t": t, "marker": f"the {RESUME_CONTINUE!r} message"}))
    if isinstance(content, str):
        p.items.append(("user", {"line": line, "t": t, "text": content, "meta": bool(o.get("isMeta")),
                                 "side": side, "cwd": o.get("cwd")}))
        return
    if not isinstance(content, list):
        raise TraceError(path, line, "user message content is neither a string nor a list")
    texts, results = [], []
    for b in content:
        if not isinstance(b, dict):
            raise TraceError(path, line, "user content block is not an object")
        if b.get("type") == "tool_result":
            text, dropped = flatten_content(b.get("content"))
            p.dropped_blocks.update({f"tool_result {k} block": v for k, v in dropped.items()})
            tur = o.get("toolUseResult")
            agent = tur.get("agentId") if isinstance(tur, dict) else None
            if not b.get("tool_use_id"):
                raise TraceError(path, line, "tool_result block without tool_use_id")
            results.append(("result", {"line": line, "t": t, "id": str(b["tool_use_id"]), "text": text,
                                       "is_error": bool(b.get("is_error")), "agent": agent, "side": side,
                                       "loads": tools_loaded(b.get("content")),
                                       "async": bool(agent) and is_async_launch(tur),
                                       "tool_use_result": tur if isinstance(tur, str) else None}))
        else:
            text, dropped = flatten_content([b])
            p.dropped_blocks.update({f"user {k} block": v for k, v in dropped.items()})
            texts.append(text)
    p.items += results
    for _, r in results:   # the changed todo list the next request carries, rebuilt (TODO_ATTACHMENT_UNLOGGED_BEFORE)
        todos = p.todo_writes.pop(r["id"], None)
        if todos is not None and not r["is_error"]:
            p.items.append(("attachment", {"line": line, "t": t, "kind": "todo", "text": attachments.todo_changed(todos),
                                           "side": side, "prompt": None, "path": None, "rebuilt": True}))
    if texts:
        p.items.append(("user", {"line": line, "t": t, "text": "\n".join(texts), "meta": bool(o.get("isMeta")),
                                 "side": side, "cwd": o.get("cwd")}))


def _drop_queued_twins(p: _Parsed) -> None:
    """A queued prompt (``queued_command`` attachment) that the log also holds as a user message was
    sent once, as that message (28 of the population's 81): its attachment item goes, counted."""
    users = [i["text"] for k, i in p.items if k == "user"]
    keep = []
    for k, i in p.items:
        if k == "attachment" and i["prompt"] and any(str(i["prompt"]) in u for u in users):
            p.ignored["attachment/queued_command also recorded as a user message"] += 1
            continue
        keep.append((k, i))
    p.items[:] = keep


# Claude Code's opening of a compaction summary (the user message that replaces the history;
# every flagged summary in the development population and the logs outside it begins so)
SUMMARY_OPENING = "This session is being continued from a previous conversation"


def unflagged_summary(o: dict[str, Any], content: Any) -> bool:
    """A compaction summary written without ``isCompactSummary``: a user message that opens a new
    conversation root (no ``parentUuid``) with :data:`SUMMARY_OPENING`. Claude Code 1.0.11 and
    1.0.17 logs outside the development population write their summaries so (after calls, the next
    call's context falls to the summary's size); 1.0.31 and later flag them."""
    if "parentUuid" not in o or o["parentUuid"] is not None:
        return False
    if isinstance(content, list):   # its first text block
        content = next((b.get("text") for b in content if isinstance(b, dict) and b.get("type") == "text"), None)
    return isinstance(content, str) and content.startswith(SUMMARY_OPENING)


PLAN_MIN_CHARS = 500   # assumed: a plan is a document (the population's are 10,000-20,000 characters); a short new root is not one


def plan_restart(o: dict[str, Any], p: _Parsed) -> bool:
    """Whether this user record is plan mode's "clear context and start with the plan": a main-thread
    record with no parent (``parentUuid: null``: a new root) after the file's first messages, holding
    a long text, right after an ``ExitPlanMode`` tool use (or carrying ``planContent``, 2.1.23+).
    The development population shows 9 such records; where the context was large it falls at the
    next call to the system prefix (145.9k -> 43.1k)."""
    if "parentUuid" not in o or o["parentUuid"] is not None or o.get("isSidechain") or o.get("isMeta") \
            or not p.calls:
        return False
    text, _ = flatten_content((o.get("message") or {}).get("content"))
    if len(text) < PLAN_MIN_CHARS:
        return False
    if o.get("planContent"):
        return True
    last = p.calls[next(reversed(p.calls))]
    return any(isinstance(b, tr.ToolUseContent) and b.name == "ExitPlanMode" for b in last.blocks)


def session_start_hooks(p: _Parsed) -> dict[str, list[str]]:
    """The SessionStart hooks the log shows running, by source (``startup``, ``compact``, ...):
    their output is hidden content (docs, hooks-guide: added to the context), and the docs say
    the ``compact`` ones run again after a compaction."""
    return {k: list(v) for k, v in sorted(p.session_hooks.items())}


def pretooluse_block(item: dict[str, Any], hooks: dict[str, str]) -> str | None:
    """The hook name (e.g. ``PreToolUse:Bash``) when this tool result is a PreToolUse hook's block:
    the tool never ran (its PreToolUse hooks did, no PostToolUse/PostToolUseFailure hook did) and
    the result is Claude Code's tool error ``"Error: " + text`` (not a user rejection, not the
    tool's own ``<tool_use_error>``, not a command's ``Exit code N``)."""
    text = item["text"]
    if not item["is_error"] or "PreToolUse" not in hooks or {"PostToolUse", "PostToolUseFailure"} & set(hooks):
        return None
    if item.get("tool_use_result") != f"Error: {text}" or text.startswith(("<tool_use_error>", "Exit code ")):
        return None
    return hooks["PreToolUse"] or "PreToolUse"


def blocking_reminder(hook_name: str, reason: str) -> str:
    """Claude Code's rendering of a hook_blocking_error attachment, without the (unrecorded) command."""
    return f"<system-reminder>\n{hook_name} hook blocking error from command: {reason}\n</system-reminder>"


@cache
def nested_spans_allowed() -> bool:
    """Does the trace checker accept a sub-agent span while the parent's Task tool_use is open
    (the true order of a Claude Code log)? Asked of the checker itself, on a four-event trace."""
    evs = [tr.UserEvent(t=0, text="go"),
           tr.AssistantEvent(t=0, content=[tr.ToolUseContent(id="p", name="Task")]),
           tr.SubtaskStart(t=0, id="s", isolated=True), tr.UserEvent(t=0, text="sub"),
           tr.AssistantEvent(t=0, content=[tr.TextContent(text="done")]), tr.SubtaskEnd(t=0, id="s"),
           tr.ToolResultEvent(t=0, tool_use_id="p", content="done")]
    try:
        tr.validate_events(tr.Header(name="probe"), evs)
    except TraceError:
        return False
    return True


def _min_cacheable(model: str | None) -> int:
    """The model's minimum cacheable prompt (models.toml), 1,024 when it is not priced."""
    from ctxsim.harness.provider.models import UnknownModelError, load_table

    try:
        return load_table().get(model).min_cacheable
    except UnknownModelError:
        return 1024


def _tokens(text: str) -> int:
    from ctxsim.harness.provider.tokenizer import get_tokenizer

    return get_tokenizer().count(text)


@dataclass
class _CompactCall:
    """One recorded compaction call (``agent-acompact-*.jsonl``) and the tool results its request
    held: the history as the API received it, so it can close a tool use the main transcript left
    open when the compaction cut it off."""

    t: float
    usage: tr.RecordedUsage
    file: str
    model: str | None
    results: dict[str, tuple[str, bool]] = field(default_factory=dict)   # tool_use_id -> (text, is_error)


@dataclass
class _Importer:
    src: Path
    b: TraceBuilder
    subagent_dir: Path | None
    ignored: Counter = field(default_factory=Counter)
    dropped: Counter = field(default_factory=Counter)
    unsent: Counter = field(default_factory=Counter)
    versions: Counter = field(default_factory=Counter)
    models: Counter = field(default_factory=Counter)
    subtasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    compact_calls: list[_CompactCall] = field(default_factory=list)
    used_subagents: set[str] = field(default_factory=set)
    first_call: dict[str, Any] | None = None
    _visible_before_first: int = 0
    _first_seen: bool = False
    counts: Counter = field(default_factory=Counter)
    deferred: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    # hidden content to put back: (t, text, source); timed ones wait for the first call after t
    hidden_timed: list[tuple[float, str, str]] = field(default_factory=list)
    hidden_next: list[tuple[float, str, str]] = field(default_factory=list)
    hidden_stats: Counter = field(default_factory=Counter)
    # @-mentioned files the log can rebuild (ctxsim.harness.model.mentions), by id of the prompt's item
    mentioned: dict[int, list[tuple[str, str]]] = field(default_factory=dict)
    mentions_next: list[tuple[float, str, str]] = field(default_factory=list)
    hooks_run: dict[str, list[str]] = field(default_factory=dict)   # SessionStart source -> commands
    project_agents: list[Path] = field(default_factory=list)   # project-level agent-*.jsonl of this session
    warmups: list[tuple[float, Path, _Parsed]] = field(default_factory=list)   # Warmup sub-agents not yet placed
    forks: list[tuple[float, Path, _Parsed]] = field(default_factory=list)     # forks not yet placed: their own part
    side_parsed: dict[Path, _Parsed | None] = field(default_factory=dict)      # side files read (parse_side_file)
    left_out: list[str] = field(default_factory=list)   # billed calls not in the trace, each said (a warning)
    # background sub-agents not yet placed: (time of their last record, agent id, the launch's result item, its
    # transcript, its file where the agent id does not name it: a Workflow's)
    background: list[tuple[float, str, dict[str, Any], _Parsed, Path | None]] = field(default_factory=list)
    skipped: list[SkippedLine] = field(default_factory=list)        # unreadable lines of every file read
    _compact_command: bool = False   # a /compact command came in since the last main call (1.0.x: manual)
    session: str | None = None       # the transcript's session id
    _resumed: bool = False           # a resume was emitted since the last main call (one per gap between calls)
    mixed_routes: bool = False       # the main transcript's calls went by more than one route: each call names its own

    def absorb(self, p: _Parsed) -> None:
        self.skipped += p.skipped
        self.ignored.update(p.ignored)
        self.dropped.update(p.dropped_blocks)
        self.unsent.update(p.unsent)
        self.versions.update(p.versions)

    def parse_side_file(self, f: Path) -> _Parsed | None:
        """A sub-agent's or compaction call's transcript, or None where it cannot be read (no readable
        record, or not a Claude Code record): the session imports without its calls, the loss a skipped
        line of that file (warned, exit 2), where a damaged side file used to cost the whole session. Each
        file is read once (a Task call's prompt is matched against transcripts the import reads again)."""
        if f in self.side_parsed:
            return self.side_parsed[f]
        try:
            p = parse_file(f)
        except NoModelCalls:
            p = None
        except TraceError as e:
            self.skipped.append(SkippedLine(f, e.line or 1, f"{e.what}: the file is not imported (its calls are "
                                                            "not in the trace)"))
            p = None
        self.side_parsed[f] = p
        return p

    def load_compaction_calls(self) -> None:
        """``agent-acompact-*.jsonl``: the compaction calls (one model call each)."""
        if not self.subagent_dir:
            return
        for f in sorted(self.subagent_dir.glob("agent-acompact*.jsonl")):
            p = self.parse_side_file(f)
            if p is None:
                continue
            self.absorb(p)
            results = {i["id"]: (i["text"], i["is_error"]) for k, i in p.items if k == "result"}
            for c in p.calls.values():
                if c.usage is not None:
                    self.compact_calls.append(_CompactCall(c.t, c.usage, f.name, c.model, results))
            # the meta messages before the compaction prompt: conversation content the main
            # transcript does not hold
            for kind, item in p.items:
                if kind == "attachment":
                    continue
                if kind != "user" or not item.get("meta"):
                    break
                self.hidden_timed.append((item["t"], item["text"], f"{f.name} (isMeta message of the compaction request)"))
        self.hidden_timed.sort(key=lambda h: h[0])

    def emit_file(self, p: _Parsed, span: str | None) -> None:
        """Emit a parsed file's items; ``span`` is the id of the sub-agent span they are in."""
        pending: dict[str, Any] | None = None
        side_run: str | None = None
        for kind, item in p.items:
            if kind == "resume":   # a process-level mark: no message of either context, no span opened or closed
                if span is None and side_run is None and self._first_seen and not self._resumed:
                    self._resumed = True
                    if self.deferred:
                        self.flush_deferred()
                    self.b.resume(item["t"], self.session or self.src.stem)
                    self.counts[f"resumes (a new launch on the conversation: {item['marker']})"] += 1
                continue
            if span is None:   # isSidechain runs inside a main file: a span each
                side = p.calls[item].sidechain if kind == "call" else bool(item.get("side")) if isinstance(item, dict) else False
                if side and side_run is None:
                    self.counts["sidechain spans"] += 1
                    side_run = f"sidechain-{self.counts['sidechain spans']}"
                    t = p.calls[item].t if kind == "call" else item["t"]
                    self.b.subtask_start(t, side_run, "isSidechain records of the main transcript", True)
                elif not side and side_run is not None:
                    self.b.subtask_end(None, side_run)
                    side_run = None
            if span is None and self.deferred and kind != "result":
                self.flush_deferred()
            if span is None and side_run is None and (self.warmups or self.background or self.forks):
                self.flush_warmups(p.calls[item].t if kind == "call" else item["t"])
            if span is None and side_run is None and kind in ("call", "user", "compact", "summary"):
                t_item = p.calls[item].t if kind == "call" else item["t"]
                self.flush_hidden(t_item if kind == "call" else None)
            if kind == "call":
                c = p.calls[item]
                model = c.model
                if span is None and side_run is None:
                    self._compact_command = self._resumed = False
                    if not c.copied:
                        self.models[model or "?"] += 1
                    if not self._first_seen:
                        self._first_seen = True
                        self.first_call = {"line": c.line, "usage": c.usage}
                elif span is not None and span in self.subtasks and "first_call_context" not in self.subtasks[span]:
                    st = self.subtasks[span]
                    st["model"] = model
                    if c.usage is not None:
                        st["first_call_context"] = c.usage.context_tokens
                        st["prefix_tokens"] = max(0, c.usage.context_tokens - st.pop("_visible", 0))
                blocks = c.blocks
                self.b.assistant(c.t, blocks, c.usage, model=model, request_id=c.request_id, copied=c.copied,
                                 **({"subagent": span or side_run} if (span or side_run) else {}),
                                 **({tr.ROUTE: c.route} if self.mixed_routes and c.route else {}))
            elif kind == "user":
                if span is None and side_run is None and COMPACT_COMMAND in item["text"]:
                    self._compact_command = True
                self.b.user(item["t"], item["text"], **({"meta_record": True} if item["meta"] else {}))
                self._count_visible(span, item["text"])
                if span is None and side_run is None:
                    self.mentions_next += [(item["t"], text, path) for path, text in self.mentioned.get(id(item), [])]
            elif kind == "attachment":
                source = (f"attachment {item['kind']} (rebuilt from TodoWrite's input: the log records no attachments)"
                          if item.get("rebuilt") else f"attachment {item['kind']} (the log's record of it, in an assumed frame)")
                self.b.user(item["t"], item["text"], meta_record=True, hidden=source, attachment=item["kind"],
                            **({"read_file": item["path"]} if item["path"] else {}))
                self._count_visible(span, item["text"])
                self.hidden_stats[source] += 1
                self.hidden_stats[f"{source} chars"] += len(item["text"])
            elif kind == "result":
                agent = item.get("agent")
                if agent and span is None and nested_spans_allowed():
                    if item.get("async"):
                        self.launch_background(agent, item)
                    else:
                        self.emit_subagent(agent, item)
                post = p.hooks.get(item["id"], {}).get("PostToolUse")   # its output reaches the model, unrecorded
                if self.b.tool_result(item["t"], item["id"], item["text"], item["is_error"],
                                      **({"post_hook": post} if post else {}),
                                      **({tr.TOOLS_LOADED: item["loads"]} if item.get("loads") else {})):
                    self._count_visible(span, item["text"])
                    hook = pretooluse_block(item, p.hooks.get(item["id"], {}))
                    if hook and span is None and side_run is None:
                        self.hidden_next.append((item["t"], blocking_reminder(hook, item["text"]),
                                                 f"{hook} blocking-error reminder (rebuilt from the tool result)"))
                if agent and span is None and not nested_spans_allowed():
                    self.deferred.append((agent, item))
            elif kind == "microcompact":
                if span is None and side_run is None:
                    n = self.b.mark_cleared(item["ids"], self.b.calls)
                    self.counts["tool results cleared at a microcompact_boundary"] += n
                    if n < len(item["ids"]):
                        self.counts["microcompact_boundary ids with no tool result in the trace"] += len(item["ids"]) - n
            elif kind == "compact":
                if pending is not None:
                    self.emit_compact(pending, None)
                pending = item
            elif kind == "summary":
                if pending is None and span is None and side_run is None and self._first_seen:
                    # Claude Code 1.0.x writes no compact_boundary: the summary record alone replaced
                    # the history (the next call's context falls to the summary's size)
                    self.emit_compact({"line": item["line"], "t": item["t"], "pre_tokens": None,
                                       "trigger": "manual" if self._compact_command else "auto",
                                       "inferred": "isCompactSummary with no compact_boundary (Claude Code 1.0.x)"
                                       if item.get("flagged", True) else "a summary opening a new conversation root, "
                                       "with no isCompactSummary and no compact_boundary (Claude Code before 1.0.31)"},
                                      item["text"])
                elif pending is None:   # a session that opens on an earlier one's summary: its first message
                    self.counts["isCompactSummary opening the session (an earlier session's summary, kept as a "
                                "user message)"] += 1
                    self.b.user(item["t"], item["text"], compact_summary=True)
                else:
                    self.emit_compact(pending, item["text"])
                    pending = None
            if pending is not None and kind not in ("compact",):
                self.emit_compact(pending, None)
                pending = None
        if pending is not None:
            self.emit_compact(pending, None)
        if span is None and self.deferred:
            self.flush_deferred()
        if side_run is not None:
            self.b.subtask_end(None, side_run)
        if span is None and (self.warmups or self.background or self.forks):   # none left unplaced at the end
            self.flush_warmups(None)
        if span is None:
            self.flush_hidden(None)

    def flush_hidden(self, before: float | None) -> None:
        """Put recovered hidden content back: the reminders of the last call's tool results, then
        the timed messages older than ``before`` (the next call's time; None: only the reminders)."""
        due = list(self.hidden_next)
        self.hidden_next.clear()
        while before is not None and self.hidden_timed and self.hidden_timed[0][0] <= before:
            due.append(self.hidden_timed.pop(0))
        for t, text, source in due:
            self.b.user(t, text, meta_record=True, hidden=source)
            self._count_visible(None, text)
            self.hidden_stats[source] += 1
            self.hidden_stats[f"{source} chars"] += len(text)
        source = "@-mentioned files (rebuilt from the log's reads, writes and edits of them)"
        for t, text, path in self.mentions_next:
            self.b.user(t, text, meta_record=True, hidden=source, read_file=path)
            self._count_visible(None, text)
            self.hidden_stats[source] += 1
            self.hidden_stats[f"{source} chars"] += len(text)
        self.mentions_next.clear()

    def flush_deferred(self) -> None:
        """Fallback placement (trace checker without nested spans): the spans of a call's Task
        results go after all of that call's results, re-timed to not go back (counted)."""
        for agent, item in self.deferred:
            self.emit_subagent(agent, item)
            self.counts["sub-agent spans placed after their Task result (trace checker lacks nested spans)"] += 1
        self.deferred.clear()

    def _count_visible(self, span: str | None, text: str) -> None:
        if span is None and not self._first_seen:
            self._visible_before_first += _tokens(text) + MESSAGE_OVERHEAD_TOKENS
        elif span is not None and span in self.subtasks and "first_call_context" not in self.subtasks[span]:
            self.subtasks[span]["_visible"] = self.subtasks[span].get("_visible", 0) + _tokens(text) + MESSAGE_OVERHEAD_TOKENS

    def emit_compact(self, item: dict[str, Any], summary: str | None) -> None:
        self._compact_command = False
        # the compaction call: the latest acompact call made before the boundary was written
        usage, meta = None, {"line": item["line"]}
        before = [c for c in self.compact_calls if c.t <= item["t"] + 1.0]
        call = max(before, key=lambda c: c.t) if before else None
        if call is not None:
            self.compact_calls.remove(call)
            usage = call.usage
            meta.update(call_file=call.file, call_model=call.model)
        if item.get("inferred"):
            meta["inferred"] = item["inferred"]
            self.counts[f"compactions inferred: {item['inferred']}"] += 1
        if item.get("no_call"):
            meta["no_call"] = True
        # a tool use the compaction cut off (its result never reached the main transcript): closed as
        # the compaction request shows it, else with a synthetic error result, before the compaction
        for tid in self.b.open_tool_uses():
            shown = call.results.get(tid) if call is not None else None
            if shown is not None:
                self.b.tool_result(item["t"], tid, shown[0], shown[1], from_compaction_request=call.file)
                self.counts["tool use cut off by a compaction, closed with the result its compaction request holds"] += 1
            else:
                self.b.close_open(item["t"], "tool use cut off by a compaction, closed with a synthetic error result "
                                  "(no compaction request holds its result)")
        if summary is None:
            self.counts["compact_boundary without its summary message"] += 1
        pre = item.get("pre_tokens")
        self.b.compact(item["t"], "manual" if item.get("trigger") == "manual" else "auto",
                       int(pre) if isinstance(pre, (int, float)) else None, summary, usage, **meta)

    def agent_file(self, agent: str) -> Path | None:
        """A sub-agent's transcript: ``<session>/subagents/agent-<id>.jsonl``, or (older layouts) the
        project folder's ``agent-<id>.jsonl`` of this session."""
        if self.subagent_dir and (self.subagent_dir / f"agent-{agent}.jsonl").exists():
            return self.subagent_dir / f"agent-{agent}.jsonl"
        return next((f for f in self.project_agents if f.name == f"agent-{agent}.jsonl"), None)

    def flush_warmups(self, before: float | None) -> None:
        """The Warmup sub-agents that started by ``before`` (None: all that are left), each as an
        isolated span at its time: billed calls of the session no Task result refers to; and the
        background sub-agents that finished by then (:meth:`launch_background`)."""
        while self.background and (before is None or self.background[0][0] <= before):
            _t, agent, item, parsed, f = self.background.pop(0)
            self.emit_subagent(agent, item, parsed, background=True, file=f)
        while self.forks and (before is None or self.forks[0][0] <= before):
            self.emit_fork(*self.forks.pop(0)[1:])
        while self.warmups and (before is None or self.warmups[0][0] <= before):
            _t, f, p = self.warmups.pop(0)
            span = f"warmup-{f.stem.removeprefix('agent-')}"
            times = p.times()
            self.absorb(p)
            self.used_subagents.add(f.name)
            self.subtasks[span] = {}
            self.b.subtask_start(min(times, default=None), span, WARMUP_PROMPT, True)
            self.emit_file(p, span)
            self.b.subtask_end(max(times, default=None), span)
            self.counts["warmup spans"] += 1

    def emit_fork(self, f: Path, own: _Parsed) -> None:
        """A fork of the main conversation (:func:`fork_part`) as a fork span at its time: its own messages and
        calls; the replay sends them after the main conversation as it then stands (harness/replay/fork.py)."""
        span = f.stem.removeprefix("agent-")
        times = own.times()
        self.used_subagents.add(f.name)
        self.b.subtask_start(min(times, default=None), span, "a fork of the main conversation", True, fork=True)
        self.emit_file(own, span)
        self.b.subtask_end(max(times, default=None), span)
        self.counts["fork spans"] += 1

    def launch_background(self, agent: str, result: dict[str, Any]) -> None:
        """A sub-agent started in the background (:func:`is_async_launch`): its span goes where its last
        record is in time, among the main context's records, not at the launch: the main calls made
        while it ran keep their times (its own calls are moved up to its end, a few seconds apart in
        the logs, where each main call moved by its whole run). One with no readable transcript is
        placed (and reported) at once."""
        f = self.agent_file(agent)
        if f is None or not f.exists() or f.name in self.used_subagents:
            self.emit_subagent(agent, result)   # said: a missing transcript, or one already imported
            return
        p = self.parse_side_file(f)
        if p is None:
            self.used_subagents.add(f.name)   # reported as skipped, not as unreferenced
            return
        times = p.times()
        self.background.append((max(times, default=result["t"]), agent, result, p, None))
        self.background.sort(key=lambda b: b[0])
        self.counts["background sub-agents placed at their last record's time"] += 1

    def place_unlaunched(self, f: Path, p: _Parsed, span: str) -> None:
        """A sub-agent transcript of this session that no Task call launches, no Warmup and no fork (a Workflow
        tool's background agents, ``subagents/workflows/<run>/agent-*.jsonl``, Claude Code 2.1.x; an agent whose
        launch the main transcript lacks): its calls were billed in this session. Placed as an isolated span at
        its last record's time, as a background agent is (:meth:`launch_background`); said in the notes."""
        t = max(p.times(), default=0.0)
        self.background.append((t, span, {"t": t, "text": ""}, p, f))
        self.background.sort(key=lambda b: b[0])
        self.counts["sub-agent files no Task call launches (a Workflow's agents, a launch the main transcript lacks), "
                    "placed as isolated spans at their last record's time"] += 1

    def emit_subagent(self, agent: str, result: dict[str, Any], parsed: _Parsed | None = None,
                      background: bool = False, file: Path | None = None) -> None:
        """The sub-agent ``agent`` (its transcript ``parsed`` if already read; its ``file`` where its id does
        not name it) as an isolated span ending at its Task ``result``, or, run in the ``background``, at its
        last record."""
        waiting = next((b for b in self.background if b[1] == agent), None)
        if waiting is not None:   # a Task result for it came before its background run was placed: here
            self.background.remove(waiting)
            parsed, file = waiting[3], waiting[4]
        f = file or self.agent_file(agent)
        if f is None or not f.exists():
            self.counts["sub-agent transcript missing (its calls are not in the trace)"] += 1
            self.notes.append(f"sub-agent {agent}: no transcript file; its calls are missing from the trace")
            return
        if f.name in self.used_subagents:   # a second Task result for one agent: its calls are billed once
            self.counts["sub-agent referenced again by a later Task result (its calls imported once)"] += 1
            return
        p = parsed or self.parse_side_file(f)
        if p is None:
            self.used_subagents.add(f.name)   # reported as skipped, not as unreferenced
            return
        self.absorb(p)
        self.used_subagents.add(f.name)
        times = p.times()
        self.subtasks[agent] = {}
        desc = next((str(i["text"])[:200] for k, i in p.items if k == "user"), "")
        self.b.subtask_start(min(times, default=result["t"]), agent, desc, True)
        self.emit_file(p, agent)
        self.b.subtask_end(max(times, default=result["t"]) if background else result["t"], agent,
                           conclusion=result["text"][:2000])
        self.counts["sub-agent spans"] += 1


def mark_logged_reattachments(events: list[Any]) -> None:
    """A compaction followed, before the next call, by the log's own re-attachments (file, plan,
    skills: attachments.REATTACH_KINDS) says so (``meta.reattached_in_log``): the replay sends those
    and models none of its own for it."""
    open_at = None
    for i, e in enumerate(events):
        if isinstance(e, tr.CompactEvent):
            open_at = i
        elif isinstance(e, tr.AssistantEvent):
            open_at = None
        elif open_at is not None and isinstance(e, tr.UserEvent) and e.meta.get("attachment") in attachments.REATTACH_KINDS:
            c = events[open_at]
            events[open_at] = c.model_copy(update={"meta": {**c.meta, "reattached_in_log": True}})
            open_at = None


def mark_turn_thinking(events: list[Any]) -> None:
    """Each user message of the main conversation says whether the first call after it thought
    (``meta.thinking``: a thinking block in its response): what the agent's thinking setting was
    for that turn, as the log shows it. A switch between turns is a request parameter that changes,
    and on models with a thinking budget it invalidates the messages' cache (strategies/recorded.py)."""
    depth, pending = 0, []
    for i, e in enumerate(events):
        if isinstance(e, tr.SubtaskStart) and e.isolated:
            depth += 1
        elif isinstance(e, tr.SubtaskEnd) and depth:
            depth -= 1
        elif depth:
            continue
        elif isinstance(e, tr.UserEvent) and not e.meta.get("meta_record") and not e.meta.get("hidden"):
            pending.append(i)
        elif isinstance(e, tr.AssistantEvent) and pending:
            thought = any(isinstance(c, tr.ThinkingContent) for c in e.content)
            for j in pending:
                events[j] = events[j].model_copy(update={"meta": {**events[j].meta, "thinking": thought}})
            pending = []


def session_of(path: Path) -> str | None:
    """The ``sessionId`` of a transcript's first record that has one (None if none in its first lines)."""
    return next((str(o["sessionId"]) for o in first_records(path) if o.get("sessionId")), None)


def project_agent_files(src: Path, session: str | None) -> list[Path]:
    """Sub-agent transcripts an older Claude Code wrote next to the sessions (``<project>/agent-<id>
    .jsonl``) that belong to this session (their records carry its ``sessionId``)."""
    if not session or src.name.startswith("agent-"):
        return []
    return [f for f in sorted(src.parent.glob("agent-*.jsonl")) if f.is_file() and session_of(f) == session]


def billed(p: _Parsed | None, held: Collection[str] = ()) -> int:
    """The model calls a parsed side file billed: neither a copy of another session's call nor one of the
    calls ``held`` (the keys of the main transcript's calls), which a fork copies into its file (:func:`fork_part`)."""
    return sum(1 for k, c in p.calls.items() if not c.copied and k not in held) if p is not None else 0


def fork_part(p: _Parsed, main: _Parsed) -> _Parsed | None:
    """A fork of the main conversation's own part, or None when ``p`` is no fork. Claude Code's forked agents (2.1.x:
    a side question, ``agent-aside_question-*``; a prompt suggestion, ``agent-aprompt_suggestion-*``) write the main
    conversation they send into their file, then their own prompt and answer (cli.js 2.1.72, ``KR``: the
    transcript records ``[...forkContextMessages, ...promptMessages]``, then the answer). Usage tools bill them so:
    Claudoscope's session parser skips a context-fork file's replay of its parent's calls by ``message.id``.
    A fork is told by the main transcript's calls it copies (with their request ids: its own part follows the last
    of them), else by its first message answering a record of the main transcript (``parentUuid``: a prompt
    suggestion of 2.1.23-2.1.29 copies only the last answer, or nothing; its own part begins at its first user
    message). A sub-agent a Task call launches begins a conversation of its own (no
    parent). The copied calls' results stay out. A file with no call of its own is no fork. On the development
    population: 29 forks in 5 sessions (11 side questions, 18 prompt suggestions); in an outside sample, 12 prompt
    suggestions that copy nothing."""
    copied = [i for i, (k, x) in enumerate(p.items) if k == "call" and x in main.calls]
    if copied:
        begin = copied[-1] + 1
    elif p.first_parent is not None and p.first_parent[1] in main.uuids:
        begin = next((i for i, (k, _) in enumerate(p.items) if k == "user"), None)
        if begin is None:
            return None
    else:
        return None
    theirs = {b.id for k, x in p.items[:begin] if k == "call"
              for b in p.calls[x].blocks if isinstance(b, tr.ToolUseContent)}
    own = [(k, x) for k, x in p.items[begin:] if not (k == "result" and x["id"] in theirs)]
    calls = {x: p.calls[x] for k, x in own if k == "call"}
    if all(c.copied for c in calls.values()):
        return None
    # all at the fork's start: it runs beside the main loop (a side question is answered while the main call
    # streams), and its records' own times would hold the main events after it back to its end
    t0 = min(min(c.t for c in calls.values()), min((x["t"] for _, x in own if isinstance(x, dict) and "t" in x),
                                                   default=math.inf))
    own = [(k, {**x, "t": t0} if isinstance(x, dict) and "t" in x else x) for k, x in own]
    return _Parsed(p.path, items=own, calls={k: replace(c, t=t0) for k, c in calls.items()}, hooks=p.hooks,
                   versions=p.versions)


def link_unnamed_agents(imp: _Importer, main: _Parsed) -> None:
    """A Task (2.1.x: Agent) call the user interrupted or rejected while its sub-agent ran gets a result
    that names no agent ("[Request interrupted by user for tool use]", "User rejected tool use": no
    ``toolUseResult.agentId``), or none at all (the user typed while it ran), yet the sub-agent ran and
    billed its calls. Its transcript is the one the call's ``agent_progress`` records name (``data.agentId``
    under ``parentToolUseID``, Claude Code 2.1.x up to about 2.1.100), else the one no other result names
    whose first message is the call's prompt, the first to start after the call. A result naming no agent
    gets it (the span ends there, at the interruption); a call with no result has it placed at its last
    record's time, as a background agent is. On the development population: 12 such sub-agents in 7
    sessions, 10 found by their progress records and 2 by their prompt (2.1.109, which writes no
    agent_progress)."""
    results = {i["id"]: i for k, i in main.items if k == "result" and not i.get("side")}
    uses = {b.id: (c.t, b.input.get("prompt")) for c in main.calls.values() if not c.sidechain for b in c.blocks
            if isinstance(b, tr.ToolUseContent) and isinstance(b.input.get("prompt"), str)}
    open_uses = [u for u in uses if u not in results or not results[u].get("agent")]
    if not open_uses:
        return
    named = {str(i["agent"]) for k, i in main.items if k == "result" and i.get("agent")}
    files = (sorted(imp.subagent_dir.glob("agent-*.jsonl")) if imp.subagent_dir else []) + imp.project_agents
    free = {f.stem.removeprefix("agent-"): f for f in files
            if not f.name.startswith("agent-acompact") and f.stem.removeprefix("agent-") not in named}
    prompts: dict[str, tuple[str, float] | None] = {}   # agent -> its transcript's first message and its time
    for use in open_uses:
        agent = main.agent_progress.get(use)
        how = "its agent_progress records"
        if agent not in free:
            at, prompt = uses[use]
            for a in free:
                if a not in prompts:
                    p = imp.parse_side_file(free[a])
                    first = next((i for k, i in p.items if k == "user"), None) if p is not None else None
                    prompts[a] = (str(first["text"]), first["t"]) if first is not None else None
            found = sorted((fp[1], a) for a, fp in prompts.items() if a in free and fp and fp[0] == prompt and fp[1] >= at)
            agent, how = (found[0][1], "its prompt") if found else (None, "")
        if agent is None:
            continue
        del free[agent]
        if use in results:
            results[use]["agent"] = agent
            imp.counts["sub-agents of an interrupted or rejected Task call (a result naming no agent), found by "
                       f"{how}"] += 1
            continue
        f = imp.agent_file(agent)
        p = imp.parse_side_file(f) if f is not None else None
        if p is None:
            continue
        imp.background.append((max(p.times(), default=uses[use][0]), agent, {"t": uses[use][0], "text": ""}, p, None))
        imp.background.sort(key=lambda b: b[0])
        imp.counts[f"sub-agents of a Task call with no result (the user typed while it ran), found by {how}, placed at "
                   "their last record's time"] += 1


def side_files(imp: _Importer, main: _Parsed) -> list[tuple[float, Path, _Parsed]]:
    """The sub-agent transcripts of this session that no Task result refers to. Returns those that open with
    the Warmup prompt, by their first time: Claude Code's start-up calls that warm its sub-agents' caches
    (2.0.x-2.1.x; billed, in no main record). The others go to :func:`side_file`: forks, and agents placed at
    their time."""
    referenced = {str(i.get("agent")) for k, i in main.items if k == "result" and i.get("agent")}
    referenced |= {b[1] for b in imp.background}   # placed already: a Task call's with no result (link_unnamed_agents)
    files = sorted(imp.subagent_dir.glob("agent-*.jsonl")) if imp.subagent_dir else []
    out = []
    for f in files + imp.project_agents:
        if f.name.startswith("agent-acompact") or f.stem.removeprefix("agent-") in referenced:
            continue
        p = imp.parse_side_file(f)
        if p is None:
            imp.used_subagents.add(f.name)
            continue
        first = next((i for k, i in p.items if k == "user"), None)
        if first is not None and str(first["text"]).strip() == WARMUP_PROMPT and p.calls:
            out.append((min(c.t for c in p.calls.values()), f, p))
        else:
            side_file(imp, main, f, p, f.stem.removeprefix("agent-"))
    # deeper: the agents a Workflow tool call ran in the background (subagents/workflows/<run>/agent-*.jsonl,
    # Claude Code 2.1.167 in an outside sample: one session's 42 files, 215 billed calls)
    for f in sorted(imp.subagent_dir.rglob("agent-*.jsonl")) if imp.subagent_dir else []:
        if f.parent == imp.subagent_dir:
            continue
        if (p := imp.parse_side_file(f)) is None:
            imp.used_subagents.add(f.name)   # reported as skipped, not as unreferenced
        else:
            side_file(imp, main, f, p, f"{f.parent.name}-{f.stem.removeprefix('agent-')}")
    imp.forks.sort(key=lambda w: w[0])
    return sorted(out, key=lambda w: w[0])


def side_file(imp: _Importer, main: _Parsed, f: Path, p: _Parsed, span: str) -> None:
    """A side transcript no Task result names and no Warmup: a fork (:func:`fork_part`), else, where it billed a
    call, an agent placed at its time (:meth:`_Importer.place_unlaunched`); one that billed none stays out, noted.
    A file that copies the main transcript's calls but has none of its own after them (a damaged fork: its lines
    out of order) is no agent either, its copies would be calls twice: the calls of its own are named as left out."""
    if (own := fork_part(p, main)) is not None:
        imp.skipped += p.skipped
        imp.forks.append((min(own.times()), f, own))
    elif any(k in main.calls for k in p.calls):
        imp.used_subagents.add(f.name)
        if n := billed(p, main.calls):
            imp.left_out.append(f"{f}: {n} model call{'s' * (n != 1)} of a fork of the main conversation whose own "
                                "part follows none of the calls it copies (lines out of order?): not in the trace")
    elif billed(p, main.calls):
        imp.place_unlaunched(f, p, span)


def import_claude_code(src: str | Path) -> ImportResult:
    """Import one Claude Code session transcript (and its ``subagents/`` directory if present)."""
    src = Path(src)
    if src.is_dir():
        raise TraceError(src, None, "expected a session .jsonl file, got a directory")
    main = parse_file(src)
    if not main.calls:
        if main.skipped:   # the skipped line may have been the call: say it, at its place
            sk = main.skipped[0]
            raise TraceError(src, sk.line, f"{sk.reason}; with the line skipped no assistant record is left: "
                             "nothing to replay")
        notices = main.ignored.get("assistant/<synthetic> (no API call)", 0)
        said = "record is Claude Code's own notice" if notices == 1 else "records are Claude Code's own notices"
        raise NoModelCalls(src, None, f"no model call: its {notices} assistant {said} (model <synthetic>: no API "
                           "call), nothing to replay" if notices else "no assistant records: nothing to replay")
    sub_dir = src.with_suffix("") / "subagents"
    imp = _Importer(src, TraceBuilder(str(src)), sub_dir if sub_dir.is_dir() else None)
    imp.absorb(main)
    copied = mark_copied_calls(main)
    if copied:
        imp.counts["calls copied in from an earlier session by a resume (history: no request sent, not billed here)"] = copied
    if any(k == "attachment" and i["kind"] == "file" for k, i in main.items):
        imp.notes.append("@-mentioned files: the log records them (file attachments); none rebuilt from its reads")
    else:
        imp.mentioned = mentions.recover(main.items, main.calls)
    imp.hooks_run = session_start_hooks(main)
    session = imp.session = main.sessions.most_common(1)[0][0] if main.sessions else None
    imp.project_agents = project_agent_files(src, session)
    imp.load_compaction_calls()
    link_unnamed_agents(imp, main)
    imp.warmups = side_files(imp, main)
    routes = {r: n for r, n in main.routes.items() if r is not None}
    served_by = _route(main.routes, main.unrequested)
    if served_by == "relay":
        imp.notes.append("served through a relay (route relay): the calls carry Anthropic's message ids but none the "
                         "API's request id, which Claude Code writes on every first-party call; the usage is the "
                         "relay's account, not Anthropic's bill")
    if len(routes) > 1:
        imp.mixed_routes = True
        imp.notes.append("calls served by more than one route (" + ", ".join(f"{r} {n}" for r, n in sorted(routes.items()))
                         + "): each call names its own (meta.route), and each route reads only what its own calls cached")
    imp.emit_file(main, None)
    for c in imp.compact_calls:
        imp.notes.append(f"compaction call {c.file} matched no compact_boundary")
    unreferenced = [f for f in (sorted(imp.subagent_dir.rglob("agent-*.jsonl")) if imp.subagent_dir else [])
                    + imp.project_agents if not f.name.startswith("agent-acompact") and f.name not in imp.used_subagents]
    for f in unreferenced:
        where = f.relative_to(imp.subagent_dir) if imp.subagent_dir and f.is_relative_to(imp.subagent_dir) else f.name
        imp.notes.append(f"sub-agent file {where} is referenced by no Task result and billed no call of its own: "
                         "not imported")

    b = imp.b
    if copied and not b.calls:
        said = (f"all {copied} model calls are copies of an earlier session's, which a resume copied in (Claude Code "
                "1.0.x, the records written in one millisecond")
        if imp.skipped:   # the skipped line may have been this session's own call: said, at its place
            sk = imp.skipped[0]
            raise TraceError(sk.path, sk.line, f"{sk.reason}; with the line skipped, {said}): nothing to replay")
        raise NoModelCalls(src, min(c.line for c in main.calls.values() if c.copied),
                           f"{said} from this line on): no call made here, nothing billed")
    b.finish()  # repair a call left open at the end before the summary counts repairs
    mark_turn_thinking(b.events)
    mark_logged_reattachments(b.events)
    version = max(imp.versions, key=lambda v: (_version(v), imp.versions[v])) if imp.versions else None
    partial = bool(version) and _version(version)[:2] >= PARTIAL_OUTPUT_FROM
    first = imp.first_call or {}
    fu: tr.RecordedUsage | None = first.get("usage")
    prefix = max(0, fu.context_tokens - imp._visible_before_first) if fu else 0
    model = imp.models.most_common(1)[0][0] if imp.models else None
    if model is None:   # only sidechain / sub-agent calls (a warm-up): the model they ran on, never a default
        side_models = Counter(e.model for e in b.events if isinstance(e, tr.AssistantEvent) and e.model)
        model = side_models.most_common(1)[0][0] if side_models else None
    spans = ("sub-agent spans", "sidechain spans", "warmup spans")
    repairs = Counter(b.counts) + Counter({k: v for k, v in imp.counts.items() if k not in (*spans, "fork spans")})
    extra = [f"Claude Code {version}" if version else "Claude Code (version not recorded)",
             "prefix_tokens = first call's recorded context − cl100k tokens of its visible messages (token scale 1)"]
    if partial:
        extra.append("output_tokens are partial streaming counts (2.1.x): the largest per call is kept; not the truth")
    if imp.dropped:
        extra.append("content blocks replaced by placeholders: " + ", ".join(f"{k} ×{v}" for k, v in sorted(imp.dropped.items())))
    if imp.unsent:
        extra.append("tool-use input the log holds and Claude Code does not send (LOGGED_ONLY_INPUT), kept out of the "
                     "requests: " + ", ".join(f"{k} ×{v}" for k, v in sorted(imp.unsent.items())))
    hs = imp.hidden_stats
    for source in sorted(k for k in hs if not k.endswith(" chars")):
        extra.append(f"hidden content recovered: {hs[source]} meta user message(s) from {source}, "
                     f"{hs[source + ' chars']} chars (meta.hidden)")
    for t, _text, source in imp.hidden_timed:
        extra.append(f"hidden content not placed (no main call after {t:.0f} s): {source}")
    if imp.counts.get("warmup spans"):
        extra.append(f"{imp.counts['warmup spans']} Warmup sub-agent(s) (start-up calls no Task result refers to) "
                     "attached as isolated spans at their time")
    if imp.counts.get("fork spans"):
        extra.append(f"{imp.counts['fork spans']} fork(s) of the main conversation (a side question's, a prompt "
                     "suggestion's) as fork spans at their time: the replay sends each after the main conversation as "
                     "it then stands (harness/replay/fork.py)")
    extra += imp.notes
    mid = main.first_parent if main.first_parent and main.first_parent[1] not in main.uuids else None
    mid_ev = (f"the log begins mid-conversation: its first message (line {mid[0]}) answers one ({mid[1][:8]}…) that is "
              f"not in the file, so the {prefix:,} tokens of the first call's context the file does not show count as the "
              "system prefix, the earlier conversation among them (a compaction in the replay keeps them, unless the log's "
              "first read after one tells the system prompt apart)") if mid else ""
    if mid_ev:
        extra.append(mid_ev)
    extra += [f"line skipped: {sk} (its record is not in the trace)" for sk in imp.skipped]
    tool_uses = sum(len(e.tool_uses()) for e in b.events if isinstance(e, tr.AssistantEvent))
    compactions = sum(1 for e in b.events if isinstance(e, tr.CompactEvent))
    sub_calls = sum(1 for e in b.events if isinstance(e, tr.AssistantEvent) and e.meta.get("subagent"))
    main_usages = [e.usage for e in b.events if isinstance(e, tr.AssistantEvent) and e.usage
                   and not e.meta.get("subagent")]
    window, window_ev = recorded_window(
        [e.pre_tokens for e in b.events if isinstance(e, tr.CompactEvent) and e.trigger == "auto" and e.pre_tokens],
        max((u.context_tokens for u in main_usages), default=0))
    ttl, ttl_ev = cache_ttl_of(main_usages or [e.usage for e in b.events if isinstance(e, tr.AssistantEvent) and e.usage])
    sub_ttl, sub_ttl_ev = cache_ttl_of([e.usage for e in b.events if isinstance(e, tr.AssistantEvent) and e.usage
                                        and e.meta.get("subagent")])
    if not main_usages or sub_ttl is None or sub_ttl == ttl:
        sub_ttl, sub_ttl_ev = None, ""
    all_usages = [e.usage for e in b.events if isinstance(e, tr.AssistantEvent) and e.usage]
    caching, caching_ev = caching_of(all_usages, _min_cacheable(model))
    uncached = uncached_models([(e.model, e.usage) for e in b.events if isinstance(e, tr.AssistantEvent) and e.usage],
                               _min_cacheable)
    if uncached:
        caching_ev = (f"{caching_ev}; " if caching_ev else "") + (
            f"no call on {', '.join(uncached)} read or wrote the cache while the others did: a route without caching")
    recorded = tr.RecordedSetting(models=models_by_role(b.events), window=window, window_evidence=window_ev,
                                  cache_ttl=ttl, cache_ttl_evidence=ttl_ev, subagent_cache_ttl=sub_ttl,
                                  subagent_cache_ttl_evidence=sub_ttl_ev, prompt_caching=caching,
                                  caching_evidence=caching_ev, uncached_models=uncached,
                                  agent_version=version if version and _version(version) else None)
    header = tr.Header(
        name=src.stem, model=model, prefix_tokens=prefix, usage="per_call", output_tokens_partial=partial,
        source={"format": FORMAT, "path": str(src), "version": version, "start": iso_time(b.t0),
                "session": main.sessions.most_common(1)[0][0] if main.sessions else None,
                "route": served_by},
        recorded=recorded,
        notes=notes_from(imp.ignored, repairs, extra),
        meta={"first_call_context": fu.context_tokens if fu else 0, "prefix_tokens_scale": 1.0,
              "subtasks": {k: v for k, v in imp.subtasks.items()},
              **({"session_start_hooks": imp.hooks_run} if imp.hooks_run else {}),
              **({"begins_mid_conversation": mid_ev} if mid_ev else {})},
    )
    summary = {
        "source": str(src), "format": FORMAT, "version": version, "model": model, "route": served_by,
        "calls": b.calls, "main_calls": b.calls - sub_calls, "subagent_calls": sub_calls,
        "tool_uses": tool_uses, "compactions": compactions,
        "subagent_spans": sum(imp.counts.get(k, 0) for k in spans),
        "warmup_spans": imp.counts.get("warmup spans", 0),
        "fork_spans": imp.counts.get("fork spans", 0),
        "prefix_tokens": prefix, "output_tokens_partial": partial,
        "hidden_messages": sum(v for k, v in imp.hidden_stats.items() if not k.endswith(" chars")),
        "ignored": dict(sorted(imp.ignored.items())), "repairs": dict(sorted(repairs.items())),
        "skipped_lines": len(imp.skipped),
    }
    if unreferenced:   # said in the summary too: the header's notes are not printed
        summary["subagent_files_not_imported"] = len(unreferenced)
    return finalize(header, b, summary, [f"{sk} (line skipped)" for sk in imp.skipped] + imp.left_out)
