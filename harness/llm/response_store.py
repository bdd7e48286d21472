"""Recorded live responses, so a live run can be replayed with no network.

Every request a live backend sends is recorded with what came back (text and usage, or the error
it was refused with) under a stable key: the SHA-256 of the request's parameters in canonical JSON
after the volatile parts are taken out. Replay mode computes the same key for the request the
replay makes and serves the recorded answer; a request the store does not hold is an error that
names it (:class:`StoreMiss`), never a silent fallback to the simulated summariser.

Format (JSONL, one record per line, appended as calls happen; also in ``docs/response-store.md``)::

    {"v": 1, "key": "<64 hex>", "endpoint": "messages" | "count_tokens", "kind": "summary",
     "model": "claude-sonnet-4-6", "request": {"messages": 41, "chars": 612345,
     "final_user_text": "<first 300 characters of the instruction>"},
     "placeholders": {"<tmp:0>": "/tmp/tmpab12cd"},
     "response": {"text": "...", "stop_reason": "end_turn",
                  "usage": {"input_tokens": 12, "cache_creation_input_tokens": 0,
                            "cache_read_input_tokens": 150000, "output_tokens": 1800,
                            "cache_creation": {"ephemeral_5m_input_tokens": 0,
                                               "ephemeral_1h_input_tokens": 0}}},
     "error": null, "duration_s": 21.4, "recorded_at": "2026-11-30T03:10:00Z"}

``response`` is ``{"input_tokens": n}`` for ``count_tokens``. A refused request has
``"response": null`` and ``"error": {"reason": "prompt_too_long", "status": 400, "message": ...}``
(``reason`` as in :class:`ctxsim.harness.llm.services.SideCallFailed`), so a replay fails where the live run failed.

What is volatile, and so not part of the key:

* request fields that do not change the answer: ``metadata``, ``stream``, ``timeout`` and the SDK's
  ``extra_*`` options are dropped;
* paths of the run's own temporary directories (its session directory: spill files, transcripts,
  memory files). Each distinct one is replaced, in order of first appearance, by ``<tmp:0>``,
  ``<tmp:1>``... both in the key material and in the recorded response text; replay maps the
  placeholders back to the *current* run's paths, so a summary that cites the transcript path cites
  the replaying run's transcript. Which paths are volatile: any given explicitly (e.g. a session
  dir the caller chose) and the run directories of :data:`RUN_DIR_PATTERN` (the engine's
  ``/tmp/ctxsim<uid>/run-NNNNNN``, and ``ctxsim-run-*`` / ``tmp*`` directories of the temp root).

The same request can be sent more than once (an identical retry); the answers are kept in order
and served in order, the last one repeating, so a replay reproduces the live run call for call.
"""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ctxsim.harness.files import regular

STORE_VERSION = 1
VOLATILE_FIELDS = ("metadata", "stream", "timeout", "extra_headers", "extra_query", "extra_body")
PREVIEW_CHARS = 300


class StoreError(ValueError):
    """A store file that cannot be read (the message names the file and line)."""


class StoreMiss(LookupError):
    """Replay mode asked for a request the store does not hold."""


_SEG = r"[^/\s\"'<>`]"
_ROOTS = sorted({"/tmp", str(Path(tempfile.gettempdir()))}, key=len, reverse=True)
#: A run directory: the engine's (``/tmp/ctxsim000000/run-000042``), an older engine's
#: (``ctxsim-run-XXXX``) or any :func:`tempfile.mkdtemp` one (``tmpXXXX``), under the temp root.
RUN_DIR_PATTERN = ("(?:" + "|".join(re.escape(r) for r in _ROOTS) + ")/(?:ctxsim(?:-runs|\\d{6})/run-" + _SEG + "+|ctxsim-run-"
                   + _SEG + "+|tmp" + _SEG + "*)")


def _tmp_pattern(extra: Iterable[str]) -> re.Pattern[str]:
    alts = [re.escape(str(Path(p))) for p in sorted({str(p) for p in extra if str(p)}, key=len, reverse=True)]
    alts.append(RUN_DIR_PATTERN)
    return re.compile("|".join(alts))


@dataclass
class Volatile:
    """Finds the run's volatile paths and swaps them with numbered placeholders."""

    paths: Sequence[str] = ()
    _re: re.Pattern[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._re = _tmp_pattern(self.paths)

    def normalise(self, obj: Any) -> tuple[Any, dict[str, str]]:
        """``obj`` with every volatile path replaced by ``<tmp:N>``, and the mapping used."""
        found: dict[str, str] = {}

        def sub(m: re.Match[str]) -> str:
            p = m.group(0)
            if p not in found:
                found[p] = f"<tmp:{len(found)}>"
            return found[p]

        def walk(x: Any) -> Any:
            if isinstance(x, str):
                return self._re.sub(sub, x)
            if isinstance(x, Mapping):
                return {k: walk(v) for k, v in x.items()}
            if isinstance(x, list | tuple):
                return [walk(v) for v in x]
            return x

        out = walk(obj)
        return out, {ph: p for p, ph in found.items()}

    def normalise_text(self, text: str, mapping: Mapping[str, str]) -> str:
        """Replace the paths of ``mapping`` (placeholder -> path) in a response text."""
        for ph, p in sorted(mapping.items(), key=lambda kv: len(kv[1]), reverse=True):
            text = text.replace(p, ph)
        return text


def restore_text(text: str, mapping: Mapping[str, str]) -> str:
    """Placeholders back to paths (the current run's)."""
    if not mapping:
        return text
    return re.sub(r"<tmp:\d+>", lambda m: mapping.get(m.group(0), m.group(0)), text)


def canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def request_key(endpoint: str, params: Mapping[str, Any], volatile: Volatile | None = None) -> tuple[str, dict[str, str]]:
    """The stable key of a request, and the placeholder mapping of its volatile paths."""
    body = {k: v for k, v in params.items() if k not in VOLATILE_FIELDS}
    body, mapping = (volatile or Volatile()).normalise(body)
    digest = hashlib.sha256(canonical({"endpoint": endpoint, "params": body}).encode("utf-8")).hexdigest()
    return digest, mapping


def describe(params: Mapping[str, Any]) -> dict[str, Any]:
    """A short description of a request (what a miss names; what the record keeps of it)."""
    messages = params.get("messages", [])
    chars = 0
    final = ""
    for turn in messages:
        for b in turn.get("content", []):
            t = b.get("text") or b.get("content") or ""
            chars += len(t) if isinstance(t, str) else 0
    if messages and messages[-1].get("role") == "user":
        texts = [b.get("text", "") for b in messages[-1].get("content", []) if b.get("type") == "text"]
        final = texts[-1] if texts else ""
    return {"messages": len(messages), "chars": chars, "final_user_text": final[:PREVIEW_CHARS]}


@dataclass
class Record:
    key: str
    endpoint: str
    kind: str
    model: str
    request: dict[str, Any]
    placeholders: dict[str, str]
    response: dict[str, Any] | None
    error: dict[str, Any] | None = None
    duration_s: float | None = None
    recorded_at: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"v": STORE_VERSION, "key": self.key, "endpoint": self.endpoint, "kind": self.kind,
                "model": self.model, "request": self.request, "placeholders": self.placeholders,
                "response": self.response, "error": self.error, "duration_s": self.duration_s,
                "recorded_at": self.recorded_at}

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> Record:
        return Record(d["key"], d["endpoint"], d.get("kind", ""), d.get("model", ""), d.get("request", {}),
                      d.get("placeholders", {}), d.get("response"), d.get("error"), d.get("duration_s"),
                      d.get("recorded_at", ""))


_REQUIRED = ("key", "endpoint")


class ResponseStore:
    """A JSONL file of :class:`Record` s, indexed by key. Appends are flushed line by line, so a run
    that dies half way keeps what it paid for."""

    def __init__(self, path: str | Path, volatile_paths: Sequence[str] = ()) -> None:
        self.path = Path(path)
        self.volatile = Volatile(tuple(str(p) for p in volatile_paths))
        self._by_key: dict[str, list[Record]] = {}
        self._served: dict[str, int] = {}
        if self.path.exists():
            self._load()

    def _load(self) -> None:
        try:
            fh = regular.open_regular(self.path)   # a device or a fifo refused before a byte is read
        except OSError as e:
            raise StoreError(f"{self.path}: cannot read: {e.strerror or e}") from None
        with fh:
            for no, raw in enumerate(self._lines(fh), 1):
                try:
                    raw = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise StoreError(f"{self.path}:{no}: not UTF-8: {e.reason} at byte {e.start + 1}") from None
                if not raw.strip():
                    continue
                try:
                    d = json.loads(raw)
                except json.JSONDecodeError as e:
                    raise StoreError(f"{self.path}:{no}: not JSON: {e.msg}") from None
                if not isinstance(d, dict) or any(k not in d for k in _REQUIRED):
                    raise StoreError(f"{self.path}:{no}: not a response-store record (needs {', '.join(_REQUIRED)})")
                if d.get("v") != STORE_VERSION:
                    raise StoreError(f"{self.path}:{no}: store version {d.get('v')!r}, this ctxsim reads {STORE_VERSION}")
                rec = Record.from_json(d)
                self._by_key.setdefault(rec.key, []).append(rec)

    def _lines(self, fh) -> Iterable[bytes]:
        """The store's lines, one longer than ``regular.MAX_LINE_BYTES`` refused at its place."""
        try:
            yield from regular.lines(fh, self.path)
        except regular.InputFileError as e:
            raise StoreError(f"{self.path}:{e.line}: cannot read: {e.strerror}") from None

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_key.values())

    def records(self) -> list[Record]:
        return [r for rs in self._by_key.values() for r in rs]

    def key(self, endpoint: str, params: Mapping[str, Any]) -> tuple[str, dict[str, str]]:
        return request_key(endpoint, params, self.volatile)

    def append(self, endpoint: str, kind: str, params: Mapping[str, Any], response: dict[str, Any] | None,
               error: dict[str, Any] | None = None, duration_s: float | None = None) -> Record:
        key, mapping = self.key(endpoint, params)
        if response is not None and "text" in response:
            response = {**response, "text": self.volatile.normalise_text(response["text"], mapping)}
        desc, _ = self.volatile.normalise(describe(params))
        rec = Record(key, endpoint, kind, str(params.get("model", "")), desc, mapping, response, error,
                     None if duration_s is None else round(duration_s, 3),
                     datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(rec.to_json(), ensure_ascii=False) + "\n")
        self._by_key.setdefault(key, []).append(rec)
        return rec

    def lookup(self, endpoint: str, kind: str, params: Mapping[str, Any]) -> tuple[Record, dict[str, str]]:
        """The recorded answer to this request (the n-th answer for its n-th occurrence), and the
        placeholder mapping of the *current* request (to restore paths in the text)."""
        key, mapping = self.key(endpoint, params)
        recs = self._by_key.get(key)
        if not recs:
            d, _ = self.volatile.normalise(describe(params))
            kinds = sorted({r.kind for r in self.records()})
            models = sorted({r.model for r in self.records()})
            raise StoreMiss(
                f"replay: no recorded response for {endpoint} request {key[:16]} (kind {kind!r}, model "
                f"{params.get('model')!r}, {d['messages']} messages, {d['chars']} characters, final user "
                f"text {d['final_user_text'][:80]!r}) in {self.path} ({len(self)} records; kinds "
                f"{', '.join(kinds) or '-'}; models {', '.join(models) or '-'}). Record it with --llm live "
                "--llm-store on the same trace, strategy, parameters and model.")
        n = self._served.get(key, 0)
        self._served[key] = n + 1
        return recs[min(n, len(recs) - 1)], mapping
