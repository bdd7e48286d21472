"""Session transcripts: NovaCode's third memory layer, "where did we stop" (N-TRANS-1…6).

Every launch gets a directory ``<root>/<session_id>/`` holding the conversation as JSONL, one
record appended (and flushed) per message, so a crash loses at most the record being written, and
a separate ``meta.json`` (N-TRANS-1). Records are provider-independent (N-TRANS-2): blocks are
``text`` / ``tool_call`` / ``tool_result`` with their ids inline, not any one API's wire format, so a
session can resume on another provider. Thinking blocks are dropped before writing (N-TRANS-3):
their signatures only mean something inside the tool loop that produced them.

A compaction writes a ``compact_boundary`` record holding the summary (N-TRANS-4). Resume replays
only what follows the last boundary, preceded by that summary; the raw prefix stays on disk for
audit. Resume then repairs the protocol (N-TRANS-5): a ``tool_use`` whose result was never recorded
(the agent died mid tool call) gets a synthetic error result, and a result whose call is not in the
replayed part is dropped, so the first request after resume is not a 400.

The clock is injected: ``time.time`` for a real agent, the simulator's clock inside a replay.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ctxsim.harness.files import atomic, confined
from ctxsim.harness.model.conversation import Block, Message

TRANSCRIPT_FILE = "transcript.jsonl"  # N-TRANS-1: the conversation, appended record by record
META_FILE = "meta.json"  # N-TRANS-1: metadata, stored separately
# the thinking of the newest answer that called tools, outside the transcript (N-TRANS-3 keeps it out
# of the records): a resume that continues that answer's tool loop sends it back, as the API requires
# when thinking is on (docs.claude.com, "Extended thinking": the final assistant turn of a tool loop
# starts with its thinking block, unmodified); any other answer's thinking is not kept
OPEN_LOOP_FILE = "open_loop_thinking.json"
META_EVERY = 64  # records between meta.json rewrites (a rewrite per record cost ~30% of a replay)
RECORD_VERSION = 1
# N-TRANS-5: the text of the result that completes a tool call the crashed session never answered.
SYNTHETIC_RESULT_TEXT = (
    "[tool call interrupted: the session ended before this tool returned; no result was recorded. "
    "Re-run the tool if its output is still needed.]"
)


class TranscriptError(ValueError):
    """A transcript that cannot be read back (names the file and line)."""


# --- records (provider-independent form, N-TRANS-2) ---------------------------------------------

def _jsonable(meta: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a meta mapping that survives JSON (strategy bookkeeping such as an origin or a
    spill path); anything else is bookkeeping of a live object and is not persisted."""
    out: dict[str, Any] = {}
    for k, v in meta.items():
        try:
            json.dumps(v)
        except (TypeError, ValueError):
            continue
        out[str(k)] = v
    return out


def block_record(b: Block) -> dict[str, Any] | None:
    """One block in provider-independent form, or None for a thinking block (N-TRANS-3)."""
    if b.type == "thinking":
        return None
    if b.type == "text":
        d: dict[str, Any] = {"type": "text", "text": b.text}
    elif b.type == "tool_use":
        d = {"type": "tool_call", "id": b.id, "name": b.name, "input": dict(b.input or {})}
    else:
        d = {"type": "tool_result", "id": b.id, "content": b.text}
        if b.is_error:
            d["is_error"] = True
    meta = _jsonable(b.meta)
    if meta:
        d["meta"] = meta
    return d


def block_from_record(d: Mapping[str, Any]) -> Block:
    meta = d.get("meta") or {}
    kind = d.get("type")
    if kind == "text":
        return Block.text_block(d["text"], **meta)
    if kind == "tool_call":
        return Block("tool_use", id=d["id"], name=d["name"], input=dict(d.get("input") or {}))
    if kind == "tool_result":
        return Block.tool_result(d["id"], d.get("content", ""), bool(d.get("is_error", False)), **meta)
    raise ValueError(f"unknown block type {kind!r}")


def message_record(m: Message, t: float) -> dict[str, Any] | None:
    """A message as a transcript record; None when nothing is left once thinking is dropped."""
    blocks = [r for r in (block_record(b) for b in m.blocks) if r is not None]
    if not blocks:
        return None
    rec: dict[str, Any] = {"type": "message", "t": t, "role": m.role, "content": blocks}
    meta = _jsonable(m.meta)
    if meta:
        rec["meta"] = meta
    return rec


def message_from_record(rec: Mapping[str, Any]) -> Message:
    role = rec.get("role")
    if role not in ("user", "assistant"):
        raise ValueError(f"bad role {role!r}")
    return Message(role, tuple(block_from_record(b) for b in rec["content"]), rec.get("meta") or {})


# --- resume: what to replay, and the protocol repair ----------------------------------------------

def _leading_thinking(m: Message) -> list[Block]:
    out = []
    for b in m.blocks:
        if b.type != "thinking":
            break
        out.append(b)
    return out


def with_open_loop_thinking(msgs: list[Message], path: Path) -> list[Message]:
    """The newest answer gets back the thinking kept for it (OPEN_LOOP_FILE) when it is the one
    that made those calls: the resumed request continues its tool loop. An unreadable file is no
    thinking (what is lost is a 400 the next request may meet, not the session)."""
    i = next((k for k in range(len(msgs) - 1, -1, -1) if msgs[k].role == "assistant"), -1)
    if i < 0 or not msgs[i].has_tool_use or _leading_thinking(msgs[i]):
        return msgs
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
        ids, thinking = list(kept["tool_use_ids"]), [str(t) for t in kept["thinking"]]
    except (OSError, ValueError, KeyError, TypeError):
        return msgs
    if ids != msgs[i].tool_use_ids() or not thinking:
        return msgs
    m = msgs[i]
    out = list(msgs)
    out[i] = Message(m.role, (*(Block("thinking", t) for t in thinking), *m.blocks), m.meta)
    return out


def read_records(path: Path) -> list[dict[str, Any]]:
    """All records of a transcript. A torn final line (the process died while writing it) is
    ignored; a bad line anywhere else is an error naming the line."""
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except OSError as e:
        raise TranscriptError(f"{path}: cannot read: {e.strerror or e}") from None
    while lines and not lines[-1].strip():
        lines.pop()
    out: list[dict[str, Any]] = []
    for no, raw in enumerate(lines, 1):
        try:
            rec = json.loads(raw)
            if not isinstance(rec, dict):
                raise ValueError("not an object")
        except ValueError as e:
            if no == len(lines):
                break  # torn tail: the record being written when the process died
            raise TranscriptError(f"{path}:{no}: bad record: {e}") from None
        out.append(rec)
    return out


def replay_messages(records: Iterable[Mapping[str, Any]]) -> list[Message]:
    """The messages a resume starts from (N-TRANS-4): the last boundary's summary, then every
    message recorded after that boundary."""
    msgs: list[Message] = []
    for rec in records:
        kind = rec.get("type")
        if kind == "compact_boundary":
            msgs = []
            if rec.get("summary"):
                msgs.append(Message.user(rec["summary"], origin="summary"))
        elif kind == "message":
            msgs.append(message_from_record(rec))
    return msgs


def last_context(records: Iterable[Mapping[str, Any]]) -> dict[str, int] | None:
    """The ``context`` of the last record carrying one (see :meth:`Transcript.append`), or None."""
    last = None
    for rec in records:
        ctx = rec.get("context")
        if isinstance(ctx, dict) and isinstance(ctx.get("tokens"), int) and isinstance(ctx.get("chars"), int):
            last = ctx
    return last


def repair_pairing(messages: list[Message]) -> tuple[list[Message], int, int]:
    """Make the messages valid for the API again (N-TRANS-5).

    Every ``tool_use`` must be answered in the user message right after its assistant message: a
    missing answer gets a synthetic error result (added to that user message, or in a new user
    message when the next one is not a user message or there is none). A ``tool_result`` whose
    call is not in the replayed part (the boundary cut it off) is dropped. Returns the repaired
    messages and the counts (synthetic results added, orphan results dropped).
    """
    out: list[Message] = []
    added = dropped = 0
    open_ids: list[str] = []  # tool_use ids of the last assistant message, unanswered so far
    i = 0
    while i < len(messages):
        m = messages[i]
        if m.role == "assistant":
            if open_ids:  # previous assistant's calls never answered and no user message between
                out.append(_synthetic(open_ids))
                added += len(open_ids)
            out.append(m)
            open_ids = m.tool_use_ids()
            i += 1
            continue
        # a user message: keep results that answer the open calls, drop orphans
        kept: list[Block] = []
        for b in m.blocks:
            if b.type == "tool_result":
                if b.id in open_ids:
                    open_ids.remove(b.id)
                    kept.append(b)
                else:
                    dropped += 1
            else:
                kept.append(b)
        if open_ids:
            synth = [Block.tool_result(tid, SYNTHETIC_RESULT_TEXT, True, synthetic=True) for tid in open_ids]
            added += len(open_ids)
            # results first: the API wants tool_result blocks at the start of the user turn
            results = [b for b in kept if b.type == "tool_result"]
            others = [b for b in kept if b.type != "tool_result"]
            kept = results + synth + others
            open_ids = []
        if kept:
            out.append(Message("user", tuple(kept), m.meta))
        open_ids = []
        i += 1
    if open_ids:
        out.append(_synthetic(open_ids))
        added += len(open_ids)
    return out, added, dropped


def _synthetic(ids: list[str]) -> Message:
    return Message("user", tuple(Block.tool_result(t, SYNTHETIC_RESULT_TEXT, True, synthetic=True)
                                 for t in ids), {"origin": "synthetic_result"})


def _cut_torn_tail(path: Path) -> int:
    """Drop a half-written last record (a crash while appending) before appending again, so the
    next record starts on its own line. Returns the bytes discarded."""
    with path.open("rb+") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        if size == 0:
            return 0
        fh.seek(max(0, size - 1))
        if fh.read(1) == b"\n":
            return 0
        fh.seek(0)
        data = fh.read()
        keep = data.rfind(b"\n") + 1
        fh.truncate(keep)
        return size - keep


# --- the transcript of one launch -----------------------------------------------------------------

class Transcript:
    """The transcript of one launch: ``root/<session_id>/transcript.jsonl`` plus ``meta.json``."""

    def __init__(self, root: Path, session_id: str, clock: Callable[[], float], *,
                 fsync: bool = False, open_loop_thinking: bool = True) -> None:
        if not session_id or "/" in session_id or session_id in (".", ".."):
            raise ValueError(f"bad session id {session_id!r}: it names a directory under {root}")
        self.root = Path(root)
        self.session_id = session_id
        self.clock = clock
        self.fsync = fsync
        # not in the seed (N-TRANS-3 writes no thinking to disk): keep the open tool loop's thinking
        # in OPEN_LOOP_FILE; False: the seed, literally (a resume then sends that answer without it)
        self.open_loop_thinking = open_loop_thinking
        self.dir = self.root / session_id
        confined.guard(self.dir / TRANSCRIPT_FILE)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / TRANSCRIPT_FILE
        self._path_str = str(self.path)
        self.meta_path = self.dir / META_FILE
        # whether OPEN_LOOP_FILE may exist: this object writes it, or an earlier launch left it
        # (an answer without thinking then clears it; with none there, nothing to unlink)
        self._open_loop_path = self.dir / OPEN_LOOP_FILE   # written or cleared at each answer: one Path
        self._open_loop_kept = self._open_loop_path.exists()
        self.resumed_context: dict[str, int] | None = None  # set by resume (last_context)
        self.path.touch(exist_ok=True)
        self.meta: dict[str, Any] = self._read_meta() or {
            "version": RECORD_VERSION, "session_id": session_id, "created": clock(),
            "launches": [], "records": 0, "messages": 0, "boundaries": 0, "thinking_dropped": 0,
        }
        self.meta["launches"].append(clock())
        torn = _cut_torn_tail(self.path)
        if torn:
            self.meta["torn_bytes_discarded"] = self.meta.get("torn_bytes_discarded", 0) + torn
        self._write_meta()

    # --- writing ------------------------------------------------------------------------------
    def append(self, message: Message, context: Mapping[str, int] | None = None) -> None:
        """Append one message as a record (thinking dropped, N-TRANS-3); flushed at once.
        ``context`` (an answer's record): the size of the request it answered as the API counted it
        and in characters, ``{"tokens": n, "chars": c}``, so a later launch knows this conversation's
        characters per token (accounting.py) before its first usage arrives."""
        dropped = sum(1 for b in message.blocks if b.type == "thinking")
        if message.role == "assistant" and message.has_tool_use and self.open_loop_thinking:
            self._keep_open_loop(message)
        rec = message_record(message, self.clock())
        self.meta["thinking_dropped"] += dropped
        if rec is None:
            return
        if context:
            rec["context"] = dict(context)
        self.meta["messages"] += 1
        self._write(rec)

    def extend(self, messages: Iterable[Message]) -> None:
        for m in messages:
            self.append(m)

    def compact_boundary(self, pre_tokens: int | None, summary: str,
                         tail: Iterable[Message] = ()) -> None:
        """Record a compaction (N-TRANS-4). ``tail`` is what the compacted history keeps after the
        summary (restore attachment, verbatim tail): it is re-recorded after the boundary so that a
        resume rebuilds the compacted history, not just the summary."""
        self._write({"type": "compact_boundary", "t": self.clock(), "pre_tokens": pre_tokens,
                     "summary": summary})
        self.meta["boundaries"] += 1
        self.extend(tail)
        self._write_meta()

    def close(self) -> None:
        """Bring meta.json up to date (it is rewritten at launch, at each boundary, every
        META_EVERY records and here — not on every record: it is derived, the JSONL is the truth)."""
        self._write_meta()

    def _write(self, rec: Mapping[str, Any]) -> None:
        data = (json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
        # one append of the whole record, unbuffered (what open("a") + write + flush did, at a third
        # of the cost: no text layer built per record); a full disk names the file
        with atomic.naming(self.path):
            confined.guard(self._path_str)
            fd = os.open(self._path_str, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                if self.fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)
        self.meta["records"] += 1
        self.meta["updated"] = rec["t"]
        if self.meta["records"] % META_EVERY == 0:
            self._write_meta()

    def _keep_open_loop(self, message: Message) -> None:
        """Write (or clear) the open tool loop's thinking: this answer's leading thinking blocks
        and the ids of its calls."""
        path = self._open_loop_path
        thinking = [b.text for b in _leading_thinking(message)]
        if not thinking:
            if self._open_loop_kept:
                path.unlink(missing_ok=True)
                self._open_loop_kept = False
            return
        self._open_loop_kept = True
        confined.guard(path)
        atomic.write_text(path, json.dumps({"tool_use_ids": message.tool_use_ids(), "thinking": thinking},
                                           ensure_ascii=False))

    def _read_meta(self) -> dict[str, Any] | None:
        if not self.meta_path.exists():
            return None
        try:
            meta = json.loads(self.meta_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None  # metadata is derived; a torn meta.json is rebuilt, never fatal
        return meta if isinstance(meta, dict) and isinstance(meta.get("launches"), list) else None

    def _write_meta(self) -> None:
        # atomic: a reader never sees half a meta.json
        confined.guard(self.meta_path)
        atomic.write_text(self.meta_path, json.dumps(self.meta, ensure_ascii=False, indent=1))

    # --- reading ------------------------------------------------------------------------------
    def records(self) -> list[dict[str, Any]]:
        return read_records(self.path)

    @classmethod
    def resume(cls, root: Path, session_id: str, clock: Callable[[], float], *,
               new_session_id: str | None = None, fsync: bool = False, open_loop_thinking: bool = True
               ) -> tuple[Transcript, list[Message]]:
        """Reopen a session (N-TRANS-4/5, N-TRANS-6: transcripts load only on resume).

        Returns the transcript to keep appending to and the messages to start from: the last
        boundary's summary and what followed it, repaired so every tool_use has a result. With
        ``new_session_id`` the launch gets its own directory (N-TRANS-1) seeded with the replayed
        messages, and its metadata names the session it resumed.
        """
        src = Path(root) / session_id / TRANSCRIPT_FILE
        if not src.exists():
            raise TranscriptError(f"{src}: no transcript for session {session_id!r}")
        records = read_records(src)
        msgs, added, dropped = repair_pairing(replay_messages(records))
        if open_loop_thinking:
            msgs = with_open_loop_thinking(msgs, src.parent / OPEN_LOOP_FILE)
        if new_session_id is None or new_session_id == session_id:
            tr = cls(root, session_id, clock, fsync=fsync, open_loop_thinking=open_loop_thinking)
            # a crash mid tool call leaves the dangling call last: its synthetic result is recorded
            # so the file is valid from here on (repairs earlier in the file are redone, identically,
            # by every resume: the raw record is never rewritten)
            if msgs and msgs[-1].meta.get("origin") == "synthetic_result":
                tr.append(msgs[-1])
        else:
            tr = cls(root, new_session_id, clock, fsync=fsync, open_loop_thinking=open_loop_thinking)
            tr.meta["resumed_from"] = session_id
            tr.extend(msgs)
        tr.meta.setdefault("repairs", []).append({"t": clock(), "synthetic_results": added,
                                                  "orphan_results_dropped": dropped})
        tr._write_meta()
        tr.resumed_context = last_context(records)
        return tr, msgs
