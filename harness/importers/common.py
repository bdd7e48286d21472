"""What every importer shares: reading a third-party log with line numbers, and building a valid
trace from its records.

An importer's job is to turn someone else's log into events the loader accepts, without inventing
anything and without losing anything silently. :class:`TraceBuilder` is where the repairs happen,
each one counted so it lands in the import summary and in ``header.notes``:

* a ``tool_use`` with no result before the next call (an interrupted tool) gets a synthetic
  ``is_error`` result (the API would reject the next request otherwise, N-TRANS-5);
* a result for an unknown or already answered ``tool_use`` is dropped;
* a timestamp earlier than the event before it is raised to that time (logs interleave streamed
  blocks and tool results; the trace's clock may not go backwards).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ctxsim.harness.model import trace as tr
from ctxsim.harness.model.trace import TraceError

SYNTHETIC_RESULT = "[ctxsim import: no tool_result was recorded for this call (interrupted tool)]"


# where the importer is reading (the last record read_jsonl gave it, or the node of a JSON
# document), so an unexpected value deep inside an importer is still refused at its place
_CURSOR: ContextVar[tuple[Path, int | None, Callable[[], tuple[int, int]] | None] | None] = \
    ContextVar("import_cursor", default=None)
MAX_EPOCH = 253402300799.0   # 9999-12-31T23:59:59Z: the last time an ISO-8601 timestamp can hold


def _truncated(b: bytes, pos: int, is_last: bool, ends_with_newline: bool, what: str = "") -> str:
    """The "(truncated file?)" hint, only where it is the likely cause: the file's last line, with no
    line break after it, fails at its very end or in a string left open."""
    cut = pos >= len(b.rstrip()) - 1 or "Unterminated string" in what
    return " (truncated file?)" if is_last and not ends_with_newline and cut else ""


# What reading a value of a shape an importer does not expect raises (a list where a log has an object, a
# string where it has a number, a structure nested past Python's limits): refused as bad input, never a traceback
SHAPE_ERRORS = (TypeError, AttributeError, KeyError, IndexError, ValueError, RecursionError, OverflowError)


def shape_error(fmt: str, e: BaseException) -> str:
    """The reason a record of an unexpected shape gives (one of :data:`SHAPE_ERRORS`)."""
    from pydantic import ValidationError

    if isinstance(e, ValidationError):
        why = tr._fmt_validation(e)
    elif isinstance(e, RecursionError):
        why = "nested too deeply"
    elif isinstance(e, KeyError):
        why = f"no {e.args[0]!r} key"
    else:
        why = str(e).split("\n")[0][:160]
    return f"a record of a shape this {fmt} importer cannot read ({why}); is the file damaged or of another format?"


@dataclass(frozen=True)
class SkippedLine:
    """A line of a log that is not a JSON object (a corrupt line, a last line cut off mid-write),
    skipped by a reader that may go on: where it is and why, for the warning and the notes."""

    path: Path
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


def read_jsonl(path: str | Path, skipped: list[SkippedLine] | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line; a line that is not a JSON object (bad bytes,
    NaN, a number of thousands of digits, deep nesting) fails with the path, line and column (a
    truncated last line says so; a UTF-8 byte-order mark is skipped). With ``skipped`` (a list),
    such a line is appended to it and reading goes on: a log written one record per line (Claude
    Code's) loses that record only, and the caller says so."""
    from ctxsim.harness.files import regular, strictjson

    path = Path(path)
    try:
        fh = regular.open_regular(path)   # a device or a fifo refused: /dev/zero never ends, a fifo blocks
    except OSError as e:
        raise TraceError(path, None, f"cannot read: {e.strerror or e}") from None
    # streamed line by line (issue 31): a 200 MB log is never held whole, nor split into a copy
    with fh:
        no = 0
        while True:
            try:
                b = fh.readline(regular.MAX_LINE_BYTES + 1)
            except OSError as e:
                raise TraceError(path, no + 1, f"cannot read: {e.strerror or e}") from None
            if len(b) > regular.MAX_LINE_BYTES:
                raise TraceError(path, no + 1, f"cannot read: a line longer than {regular.MAX_LINE_BYTES // 2 ** 20} "
                                 "MiB: not a line of a log (is it the right file?)")
            if not b:
                break
            no += 1
            if no == 1 and b.startswith(b"\xef\xbb\xbf"):
                b = b[3:]
            has_newline = b.endswith(b"\n")   # only a file's last line can lack one
            if has_newline:
                b = b[:-1]
            if not b.strip():
                continue
            try:
                text = tr.decode_line(b, path, no)
                try:
                    obj = strictjson.loads(text)
                except strictjson.BadJSON as e:
                    hint = _truncated(b, len(text[:e.pos].encode()), not has_newline, has_newline, e.what)
                    raise TraceError(path, no, f"{e.what} at column {e.pos + 1}{hint}") from None
                if not isinstance(obj, dict):
                    raise TraceError(path, no, f"expected a JSON object, got {type(obj).__name__}")
                obj = _repaired(text, obj, path, no)
            except TraceError as e:
                if skipped is None:
                    raise
                skipped.append(SkippedLine(path, no, e.what))
                continue
            _CURSOR.set((path, no, None))
            yield no, obj


def _repaired(text: str, obj: Any, path: Path, line: int | None, column: int | None = None) -> Any:
    """``obj`` with its lone surrogates replaced (a log that cut a string mid-emoji: the session is
    kept), said as a warning naming the file and line (issue 44: the whole session was dropped)."""
    from ctxsim.harness.files import strictjson

    obj, lone = strictjson.lone_surrogates(text, obj)
    if lone is not None:
        import warnings

        where = f"{path}:{line}" + (f":{column}" if line and column else "") if line else str(path)
        warnings.warn(f"{where}: {strictjson.surrogate_note(lone)}", strictjson.InputRepaired, stacklevel=3)
    return obj


class JsonDoc:
    """A whole-file JSON document and where its nodes are (for refusals at line:column)."""

    def __init__(self, path: Path, text: str, value: Any) -> None:
        self.path, self.text, self.value = path, text, value

    def at(self, *node: Any) -> tuple[int, int]:
        from ctxsim.harness.files import strictjson

        return strictjson.node_line_col(self.text, node)

    def error(self, node: tuple, what: str) -> TraceError:
        line, col = self.at(*node)
        return TraceError(self.path, line, what, col)

    def cursor(self, *node: Any) -> None:
        """The importer is now reading ``node``: an unexpected value below it is refused there."""
        _CURSOR.set((self.path, None, lambda: self.at(*node)))


def read_json_doc(path: str | Path) -> JsonDoc:
    """A whole-file JSON document; every refusal names the line and column."""
    from ctxsim.harness.files import regular, strictjson

    path = Path(path)
    try:
        data = regular.read_bytes(path, regular.MAX_DOCUMENT_BYTES)
    except OSError as e:
        raise TraceError(path, None, f"cannot read: {e.strerror or e}") from None
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line, col = strictjson.byte_line_col(data, e.start)
        raise TraceError(path, line, f"not UTF-8: {e.reason} (byte {data[e.start]:#04x})", col) from None
    if "\x00" in text:
        line, col = strictjson.line_col(text, text.index("\x00"))
        raise TraceError(path, line, "a NUL character (damaged bytes)", col)
    try:
        value = strictjson.loads(text)
    except strictjson.BadJSON as e:
        line, col = strictjson.line_col(text, e.pos)
        hint = " (truncated file?)" if e.pos >= len(text.rstrip()) - 1 else ""
        raise TraceError(path, line, f"{e.what}{hint}", col) from None
    m = strictjson.LONE_ESCAPE.search(text)
    if m is not None:
        line, col = strictjson.line_col(text, m.start())
        value = _repaired(text, value, path, line, col)
    doc = JsonDoc(path, text, value)
    doc.cursor()
    return doc


def read_json(path: str | Path) -> Any:
    """A whole-file JSON document (see :func:`read_json_doc`)."""
    return read_json_doc(path).value


def where() -> tuple[Path, int | None, int | None] | None:
    """(path, line, column) the importer was reading last (None outside an import)."""
    cur = _CURSOR.get()
    if cur is None:
        return None
    path, line, at = cur
    if at is not None:
        line, col = at()
        return path, line, col
    return path, line, None


def reset_cursor() -> None:
    _CURSOR.set(None)


def count(value: Any, what: str, path: str | Path, line: int | None, column: int | None = None) -> int:
    """A token count as a log states it: absent (None) is 0; anything but a whole number in
    0..MAX_TOKENS (a string, a list, a fraction, a negative, NaN, 1e308) is refused at its place,
    never read as 0 or as a number no API reported."""
    if value is None:
        return 0
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise TraceError(path, line, f"{what} is {_show(value)}: expected a whole number of tokens", column)
    if not 0 <= value <= tr.MAX_TOKENS:
        raise TraceError(path, line, f"{what} is {_show(value)}: a token count must be between 0 and "
                         f"{tr.MAX_TOKENS:,}", column)
    return value


def seconds(value: Any, what: str, path: str | Path, line: int | None, column: int | None = None) -> float:
    """A duration in seconds (absent: 0): finite, not negative, under the trace's time bound."""
    if value is None:
        return 0.0
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) \
            or not 0 <= value <= tr.MAX_T:
        raise TraceError(path, line, f"{what} is {_show(value)}: expected a number of seconds between 0 and "
                         f"{tr.MAX_T:g}", column)
    return float(value)


def _show(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 40 else s[:37] + "..."


def parse_time(value: Any, path: str | Path, line: int | None, column: int | None = None) -> float:
    """ISO-8601 timestamp (``Z`` or offset) or epoch seconds to epoch seconds; a time that cannot
    be real (not finite, before 1970, after 9999) is refused."""
    t: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        t = float(value)
    elif isinstance(value, str):
        try:
            t = datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except (ValueError, OverflowError):
            t = None
    if t is None or not math.isfinite(t) or not 0 <= t <= MAX_EPOCH:
        raise TraceError(path, line, f"bad timestamp {_show(value)}: expected an ISO-8601 time or epoch "
                         "seconds", column)
    return t


def iso_time(epoch: float | None) -> str | None:
    """Epoch seconds as an ISO-8601 UTC timestamp (a session's start, in ``header.source``)."""
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, tz=UTC).isoformat().replace("+00:00", "Z")


def flatten_content(content: Any) -> tuple[str, Counter]:
    """A tool_result's or message's content (string or list of blocks) as text. Non-text blocks
    (images, documents) become a bracketed placeholder; what was replaced is counted. A text block
    whose text is not a string raises TypeError (a record no agent writes: its reader skips it, named)."""
    dropped: Counter = Counter()
    if content is None:
        return "", dropped
    if isinstance(content, str):
        return content, dropped
    if isinstance(content, dict):
        content = [content]
    parts = []
    for b in content:
        if isinstance(b, str):
            parts.append(b)
        elif isinstance(b, dict) and b.get("type") == "text":
            text = b.get("text", "")
            if not isinstance(text, str):   # str() would count "True" or "5" as the block's text
                raise TypeError(f"a text block whose text is {type(text).__name__}, not a string")
            parts.append(text)
        elif isinstance(b, dict):
            kind = str(b.get("type", "unknown"))
            dropped[kind] += 1
            parts.append(f"[{kind} content not in the log]")
    return "\n".join(parts), dropped


@dataclass
class TraceBuilder:
    """Accumulates events in order, repairing what the loader would reject (each repair counted)."""

    source: str
    t0: float | None = None
    events: list[Any] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)   # repairs and drops
    _t: float = 0.0
    _open: dict[str, str] = field(default_factory=dict)       # open tool_use id -> tool name
    _answered: set[str] = field(default_factory=set)
    _stack: list[dict[str, str]] = field(default_factory=list)  # parents' open sets in spans
    _session: str | None = None   # the open session, once a resume opened the trace with one

    def rel(self, abs_t: float | None) -> float:
        """Seconds since the first record; never before the previous event (counted)."""
        if abs_t is None:
            return self._t
        if self.t0 is None:
            self.t0 = abs_t
        t = round(abs_t - self.t0, 3)
        if t < self._t:
            self.counts["timestamps raised to keep time monotonic"] += 1
            t = self._t
        self._t = t
        return t

    def _close_dangling(self, t: float, count: bool = True) -> None:
        for tid in list(self._open):
            self.events.append(tr.ToolResultEvent(t=t, tool_use_id=tid, content=SYNTHETIC_RESULT, is_error=True,
                                                  meta={"synthetic": True}))
            if count:
                self.counts["dangling tool_use repaired with a synthetic error result"] += 1
            self._answered.add(tid)
            del self._open[tid]

    def user(self, abs_t: float | None, text: str, **meta: Any) -> None:
        self.events.append(tr.UserEvent(t=self.rel(abs_t), text=text, meta=meta))

    def assistant(self, abs_t: float | None, content: list[Any], usage: tr.RecordedUsage | None,
                  model: str | None = None, request_id: str | None = None, copied: bool = False,
                  **meta: Any) -> None:
        t = self.rel(abs_t)
        self._close_dangling(t)
        blocks = []
        for c in content:
            if isinstance(c, tr.ToolUseContent):
                if c.id in self._answered or c.id in self._open or any(
                        isinstance(b, tr.ToolUseContent) and b.id == c.id for b in blocks):
                    self.counts["duplicate tool_use id dropped"] += 1
                    continue
                self._open[c.id] = c.name
            blocks.append(c)
        if not blocks:
            blocks = [tr.TextContent(text="")]
        self.events.append(tr.AssistantEvent(t=t, content=blocks, usage=usage, model=model,
                                             request_id=request_id, copied=copied, meta=meta))

    def tool_result(self, abs_t: float | None, tool_use_id: str, content: str, is_error: bool = False,
                    **meta: Any) -> bool:
        if tool_use_id not in self._open:
            what = "an already answered" if tool_use_id in self._answered else "an unknown"
            self.counts[f"tool_result for {what} tool_use dropped"] += 1
            return False
        del self._open[tool_use_id]
        self._answered.add(tool_use_id)
        self.events.append(tr.ToolResultEvent(t=self.rel(abs_t), tool_use_id=tool_use_id, content=content,
                                              is_error=is_error, meta=meta))
        return True

    def compact(self, abs_t: float | None, trigger: str, pre_tokens: int | None, summary: str | None,
                usage: tr.RecordedUsage | None, **meta: Any) -> None:
        self.events.append(tr.CompactEvent(t=self.rel(abs_t), trigger=trigger, pre_tokens=pre_tokens,
                                           summary=summary, usage=usage, meta=meta))

    def subtask_start(self, abs_t: float | None, id: str, description: str, isolated: bool = True,
                      fork: bool = False) -> None:
        self.events.append(tr.SubtaskStart(t=self.rel(abs_t), id=id, description=description, isolated=isolated,
                                           fork=fork))
        self._stack.append(self._open)
        self._open = {}

    def subtask_end(self, abs_t: float | None, id: str, conclusion: str = "") -> None:
        t = self.rel(abs_t)
        self._close_dangling(t)
        self.events.append(tr.SubtaskEnd(t=t, id=id, conclusion=conclusion))
        self._open = self._stack.pop()

    def resume(self, abs_t: float | None, session: str) -> None:
        """The agent was launched again on the same conversation: ``session_end`` then
        ``session_start(resume=True)``. The first resume opens the trace with the session it
        resumes (a ``session_start`` before the first event). A tool use still open is closed with a
        synthetic error result (the resumed agent drops it), counted."""
        t = self.rel(abs_t)
        n = len(self._open)
        if n:
            self._close_dangling(t, count=False)
            self.counts["tool use left open by a resumed launch, closed with a synthetic error result"] += n
        if self._session is None:
            self.events.insert(0, tr.SessionStart(t=self.events[0].t if self.events else t, session=session))
        else:
            session = self._session
        self._session = session
        self.events.append(tr.SessionEnd(t=t, session=session))
        self.events.append(tr.SessionStart(t=t, session=session, resume=True))

    def mark_cleared(self, ids: list[str], call: int, **meta: Any) -> int:
        """Mark the tool results of ``ids`` cleared from call ``call`` on (0-based over the trace's
        model calls: ``meta.cleared_at_call``); returns how many were found."""
        want, n = set(ids), 0
        for i, e in enumerate(self.events):
            if isinstance(e, tr.ToolResultEvent) and e.tool_use_id in want and "cleared_at_call" not in e.meta:
                self.events[i] = e.model_copy(update={"meta": {**e.meta, "cleared_at_call": call, **meta}})
                n += 1
        return n

    def open_tool_uses(self) -> list[str]:
        """The ids of the tool uses of the current context still waiting for their result."""
        return list(self._open)

    def close_open(self, abs_t: float | None, why: str) -> None:
        """Close every open tool use with a synthetic error result now, counted under ``why``."""
        n = len(self._open)
        if n:
            self._close_dangling(self.rel(abs_t), count=False)
            self.counts[why] += n

    def finish(self) -> None:
        """Repair a dangling call at the very end too: a replay may stop there."""
        if self._open:
            self._close_dangling(self._t)

    @property
    def calls(self) -> int:
        return sum(1 for e in self.events if tr.is_call(e))


def models_by_role(events: list[Any]) -> dict[str, dict[str, int]]:
    """Calls per model and role: ``main``, ``subagent`` (assistant events in a sub-agent span or
    marked ``meta.subagent``) and ``compaction`` (the recorded compaction calls)."""
    out: dict[str, Counter] = {}
    depth = 0
    for e in events:
        if isinstance(e, tr.SubtaskStart) and e.isolated:
            depth += 1
        elif isinstance(e, tr.SubtaskEnd) and depth:
            depth -= 1
        elif tr.is_call(e):
            role = "subagent" if depth or e.meta.get("subagent") else "main"
            out.setdefault(e.model or "?", Counter())[role] += 1
        elif isinstance(e, tr.CompactEvent) and e.usage is not None:
            out.setdefault(str(e.meta.get("call_model") or "?"), Counter())["compaction"] += 1
    return {m: dict(sorted(c.items())) for m, c in sorted(out.items())}


def cache_ttl_of(usages: list[tr.RecordedUsage]) -> tuple[str | None, str]:
    """The TTL the agent's cache writes used, from Anthropic's usage split (``cache_creation.
    ephemeral_5m_input_tokens`` / ``ephemeral_1h_input_tokens``), and what it was read from."""
    w5 = sum(u.cache_write_5m for u in usages)
    w1 = sum(u.cache_write_1h for u in usages)
    if not w5 and not w1:
        return None, f"no cache write in {len(usages)} calls"
    ttl = "1h" if w1 > w5 else "5m"
    return ttl, (f"cache_creation over {len(usages)} calls: ephemeral_1h_input_tokens {w1:,}, "
                 f"ephemeral_5m_input_tokens {w5:,}")


CACHING_OFF_MIN_CALLS = 5   # assumed: fewer calls without a cache read could be chance; five in a row are not


def caching_of(usages: list[tr.RecordedUsage], min_cacheable: int = 1024) -> tuple[bool, str]:
    """Whether the agent ran with prompt caching, from its calls' usage: off when no call of at
    least :data:`CACHING_OFF_MIN_CALLS` that could be cached (input at least ``min_cacheable``,
    the model's minimum) read or wrote a cache entry."""
    eligible = [u for u in usages if u.context_tokens >= min_cacheable]
    if any(u.cache_read or u.cache_write_5m or u.cache_write_1h for u in usages):
        return True, ""
    if len(eligible) < CACHING_OFF_MIN_CALLS:
        return True, f"no cache read or write, but only {len(eligible)} cacheable calls: caching assumed on"
    return False, (f"no cache read and no cache write in any of {len(usages)} calls ({len(eligible)} of them at least "
                   f"{min_cacheable:,} input tokens long): the agent ran without prompt caching")


def uncached_models(calls: list[tuple[str | None, tr.RecordedUsage]], min_cacheable) -> list[str]:
    """Model ids whose calls (at least 2 that could be cached, assumed: one could be chance) never read
    or wrote the cache while other calls of the log did: they went by a route without caching."""
    by: dict[str, list[tr.RecordedUsage]] = {}
    for m, u in calls:
        by.setdefault(m or "?", []).append(u)
    cached = {m for m, us in by.items() if any(u.cache_read or u.cache_write_5m or u.cache_write_1h for u in us)}
    if not cached:
        return []
    out = []
    for m, us in sorted(by.items()):
        if m not in cached and m != "?" and sum(u.context_tokens >= min_cacheable(m) for u in us) >= 2:
            out.append(m)
    return out


@dataclass
class ImportResult:
    """A trace plus the import summary (what was read, what was ignored, what was repaired)."""

    trace: tr.Trace
    summary: dict[str, Any]
    # what was lost on the way, one line each naming file and line (a skipped corrupt line): the
    # CLI prints them as warnings and exits 2, the trace is still written
    warnings: list[str] = field(default_factory=list)

    def summary_lines(self) -> list[str]:
        out = []
        for k, v in self.summary.items():
            if isinstance(v, dict):
                inner = ", ".join(f"{kk}: {vv}" for kk, vv in v.items()) or "none"
                out.append(f"{k}: {inner}")
            else:
                out.append(f"{k}: {v}")
        return out


def notes_from(ignored: Counter, repairs: Counter, extra: list[str] | None = None) -> list[str]:
    """The header notes: every ignored record kind and every repair, with its count."""
    notes = list(extra or [])
    if ignored:
        notes.append("ignored records: " + ", ".join(f"{k} ×{v}" for k, v in sorted(ignored.items())))
    for k, v in sorted(repairs.items()):
        notes.append(f"{k}: {v}")
    return notes


def finalize(header: tr.Header, builder: TraceBuilder, summary: dict[str, Any],
             warnings: list[str] | None = None) -> ImportResult:
    """Validate the built events as the loader would (an importer bug fails here, not at replay)."""
    builder.finish()
    trace = tr.validate_events(header, builder.events, name=builder.source)
    return ImportResult(trace, summary, list(warnings or []))


def first_records(path: Path, lines: int = 20) -> Iterator[dict[str, Any]]:
    """The JSON objects among a log's first ``lines`` lines (a line that is not one is passed over;
    an unreadable file gives none): where a session names its id."""
    import json

    try:
        with Path(path).open("rb") as fh:
            for _, raw in zip(range(lines), fh):
                try:
                    o = json.loads(raw)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    continue
                if isinstance(o, dict):
                    yield o
    except OSError:
        return
