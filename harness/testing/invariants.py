"""The invariants every context strategy must keep, as plain functions.

Each invariant has a name (the ``invariant`` of a :class:`Violation`) and a reason:

``pairing``        every request is pairing-valid: a split tool_use/tool_result pair is a 400, and
                   every later request of the session is a 400 too until the history is repaired.
``window``         no main-line request exceeds the window, for a strategy that claims to manage
                   it (``Strategy.manages_window``): an overflow is a 400 ("prompt is too long").
                   Excused: the request right after a side call that failed by injection (a
                   strategy cannot summarise without its model; a summary request the API refused
                   as too long is no excuse, that is the strategy's own doing).
``stable_prefix``  the bytes before each cache breakpoint of a request are unchanged in the next
                   request of the same conversation, unless the strategy declared a rewrite at that
                   call (``Request.rewrite``): an undeclared change silently multiplies the bill.
``path_back``      nothing leaves the window without a summary or a path back (NovaCode's principle,
                   spec/novacode.md): a tool result replaced on its way in names a file that holds
                   it whole (N-SPILL-1, N-SPILL-5); a message dropped from the window is covered by a
                   summary made at that rewrite, or by a file named in the request that holds it.
``no_respill``     a spill is never spilled again (N-SPILL-3): the result of a call that reads back
                   a spilled file enters the window as it is.
``boundary_pairs`` a compaction boundary never splits a pair: after a declared rewrite, every
                   tool_use in the request has its tool_result in it and vice versa (N-COMP-7).
``resume_pairing`` a resumed transcript sends a pairing-valid first request (N-TRANS-5): the
                   calls a crash left unanswered are completed before the next request.

Use :func:`check` on a :class:`~harness.testing.recording.Recording` (from ``record`` or a
``Stepper``), or :class:`Checker` to check entries as they come. Each check is also a function of
one or two requests (:func:`pairing_violation`, :func:`prefix_change`, :func:`split_pairs`) usable on
hand-built requests.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from harness import protocol
from harness.conversation import Block, Breakpoint, Message, Request
from harness.testing.recording import Mark, Recording, Sent

INVARIANTS = ("pairing", "window", "stable_prefix", "path_back", "no_respill", "boundary_pairs",
              "resume_pairing")


@dataclass(frozen=True)
class Violation:
    invariant: str
    call: int      # row of RunResult.calls (the engine's call index)
    kind: str      # kind of the request (main, readback, subagent, summary...)
    detail: str

    def __str__(self) -> str:
        return f"[{self.invariant}] call {self.call} ({self.kind}): {self.detail}"


class InvariantViolation(AssertionError):
    """Raised by :func:`assert_holds`; carries the violations."""

    def __init__(self, violations: list[Violation]) -> None:
        self.violations = violations
        super().__init__("\n".join(str(v) for v in violations))


def promises(cls) -> frozenset[str]:
    """The invariants a strategy class is held to. Every strategy keeps pairing, stable prefixes,
    pair-safe boundaries, pairing on resume and never re-spills; ``window`` holds a strategy that
    sets ``manages_window``; ``path_back`` one that sets ``keeps_path_back`` (NovaCode does)."""
    out = {"pairing", "stable_prefix", "no_respill", "boundary_pairs", "resume_pairing"}
    if getattr(cls, "manages_window", False):
        out.add("window")
    if getattr(cls, "keeps_path_back", False):
        out.add("path_back")
    return frozenset(out)


# --- one-request and two-request checks ------------------------------------------------------------

def pairing_violation(request: Request) -> str:
    """The API's complaint about unpaired tool_use/tool_result blocks, or ``""``."""
    return protocol.pairing_error(request)


def _short(text: str, n: int = 60) -> str:
    text = text.replace("\n", "⏎")
    return text if len(text) <= n else text[:n] + f"…({len(text):,} chars)"


def _blocks_through(req: Request, last_message: int) -> list[tuple[str, Block]]:
    out = []
    for m in req.messages[: last_message + 1]:
        out.extend((m.role, b) for b in m.blocks)
    return out


def _first_difference(before: list[tuple[str, Block]], after: list[tuple[str, Block]]) -> str:
    for k, ((r0, b0), (r1, b1)) in enumerate(zip(before, after)):
        if r0 != r1 or b0.digest != b1.digest:
            return (f"block {k} ({r0} {b0.type}) changed: {_short(b0.payload)!r} -> "
                    f"({r1} {b1.type}) {_short(b1.payload)!r}")
    if len(after) < len(before):
        return f"the request holds {len(after)} blocks where the cached prefix had {len(before)}"
    return ""


def prefix_change(before: Request, after: Request) -> str:
    """How ``after`` changed the bytes before one of ``before``'s cache breakpoints, or ``""``.

    Compared in the API's prefix order (tools, system, messages) and block by block, so a message
    that only gained blocks after the breakpoint, or consecutive messages of one role split or
    merged differently, are not changes: the API sees the same bytes.
    """
    bps: tuple[Breakpoint, ...] = before.breakpoints
    if not bps:
        return ""
    if before.tools.digest != after.tools.digest:
        return "the tools array changed"
    if any(b.at != "tools" for b in bps) and before.system.digest != after.system.digest:
        return "the system prompt changed"
    at = [b.at for b in bps if isinstance(b.at, int)]
    if not at:
        return ""
    i = max(at)
    if i < len(after.messages) and after.messages.prefix_digest(i) == before.messages.prefix_digest(i):
        return ""
    old = _blocks_through(before, i)
    new: list[tuple[str, Block]] = []
    for m in after.messages:
        if len(new) >= len(old):
            break
        new.extend((m.role, b) for b in m.blocks)
    diff = _first_difference(old, new[: len(old)])
    return f"before the breakpoint at message {i}: {diff}" if diff else ""


def split_pairs(request: Request) -> str:
    """A tool_use without its tool_result in the request, or a tool_result without its tool_use."""
    uses: set[str] = set()
    results: set[str] = set()
    for m in request.messages:
        for b in m.blocks:
            if b.type == "tool_use" and b.id:
                uses.add(b.id)
            elif b.type == "tool_result" and b.id:
                results.add(b.id)
    orphans = sorted(results - uses)
    if orphans:
        return f"tool_result {', '.join(orphans)} kept but its tool_use dropped"
    dangling = sorted(uses - results)
    if dangling:
        return f"tool_use {', '.join(dangling)} kept but its tool_result dropped"
    return ""


# --- files named in a request (paths back) ---------------------------------------------------------

_PATHS = re.compile(r"(?:[A-Za-z]:)?[\w.~-]*(?:[\\/][\w.\-~+@=,]+)+")


def _json_strings(value) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _json_strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _json_strings(v)


class Files:
    """Reads the files a request names; a JSONL file (a transcript) is also searched through the
    strings it holds, so text stored JSON-escaped is found."""

    def __init__(self, session_dir: Path | None) -> None:
        self.session_dir = session_dir
        self._cache: dict[Path, tuple[float, int, str]] = {}

    def resolve(self, name: str) -> Path | None:
        p = Path(name)
        candidates = [p] if p.is_absolute() else ([self.session_dir / p] if self.session_dir else [])
        for c in candidates:
            try:
                if c.is_file():
                    return c
            except OSError:
                continue
        return None

    def text(self, path: Path) -> str:
        st = path.stat()
        hit = self._cache.get(path)
        if hit and hit[0] == st.st_mtime and hit[1] == st.st_size:
            return hit[2]
        raw = path.read_text(encoding="utf-8", errors="surrogatepass")
        text = raw
        if path.suffix == ".jsonl" or raw.startswith("{"):
            parts = [raw]
            for line in raw.splitlines():
                try:
                    parts.extend(_json_strings(json.loads(line)))
                except (json.JSONDecodeError, ValueError):
                    continue
            text = "\n".join(parts)
        self._cache[path] = (st.st_mtime, st.st_size, text)
        return text

    def named_in(self, text: str) -> list[Path]:
        out = []
        for m in _PATHS.finditer(text):
            p = self.resolve(m.group(0).rstrip(".,;:)"))
            if p is not None and p not in out:
                out.append(p)
        return out

    def holding(self, content: str, paths: Iterable[Path]) -> Path | None:
        for p in paths:
            try:
                if content in self.text(p):
                    return p
            except OSError:
                continue
        return None


# --- the checker -----------------------------------------------------------------------------------

@dataclass
class Checker:
    """Checks entries in order and keeps what the checks compare across requests.

    ``originals`` maps a tool_use id to the result the trace fed the strategy (a live mapping: a
    state machine adds to it as it goes). ``spills`` collects the files found to hold a replaced
    result (path -> tool_use id): the state machine reads them back.
    """

    promised: frozenset[str]
    originals: Mapping[str, str]
    session_dir: Path | None = None
    violations: list[Violation] = field(default_factory=list)
    spills: dict[str, str] = field(default_factory=dict)
    _prev: dict[str, Sent] = field(default_factory=dict)
    _entered: set[str] = field(default_factory=set)  # tool results seen entering the window
    _spans: list[bool] = field(default_factory=list)  # open sub-task spans: isolated or not
    _resumed: bool = False
    _side_failed: bool = False  # a side call failed by injection since the last main-line request
    _files: Files | None = None

    def __post_init__(self) -> None:
        self._files = Files(self.session_dir)

    def feed(self, entries: Iterable[Sent | Mark]) -> list[Violation]:
        """Check ``entries``; returns the violations they add (also kept in ``violations``)."""
        new: list[Violation] = []
        for e in entries:
            if isinstance(e, Mark):
                self._mark(e)
            else:
                new.extend(self._sent(e))
        self.violations.extend(new)
        return new

    def _stream(self, s: Sent) -> str:
        """Which conversation a main-line request belongs to: the main one, or a sub-agent's.
        Inside a span the engine ran isolated, every call is the sub-agent's whatever its kind label
        (so a strategy that labels them "main" is still compared fairly); inside any span, a call a
        strategy labels "subagent" is its own sub-agent's (a strategy may isolate spans itself)."""
        depth = len(self._spans)
        if depth and (any(self._spans) or s.kind == "subagent"):
            return f"subagent:{depth}"
        return "main"

    def _mark(self, m: Mark) -> None:
        if m.what == "session_start":
            if not m.resume:
                self._prev.clear()  # a new launch: a new conversation, nothing to compare with
                self._spans.clear()
            self._resumed = m.resume
        elif m.what == "subtask_start":
            self._spans.append(m.isolated)
            self._prev.pop(f"subagent:{len(self._spans)}", None)
        elif m.what == "subtask_end" and self._spans:
            self._prev.pop(f"subagent:{len(self._spans)}", None)
            self._spans.pop()

    def _sent(self, s: Sent) -> list[Violation]:
        out: list[Violation] = []
        req = s.request

        def v(name: str, detail: str) -> None:
            if name in self.promised:
                out.append(Violation(name, s.call, s.kind, detail))

        err = pairing_violation(req)
        if err:
            v("pairing", err)
        if not s.main_line:
            if s.rejected and s.error.startswith("injected"):
                self._side_failed = True
            return out
        stream = self._stream(s)
        if self._resumed and stream == "main":
            self._resumed = False
            if err:
                v("resume_pairing", f"first request after resume: {err}")
        if s.tokens > s.window and not self._side_failed:
            v("window", f"{s.tokens:,} tokens > window {s.window:,}")
        self._side_failed = False
        prev = self._prev.get(stream)
        if prev is not None and not req.rewrite:
            change = prefix_change(prev.request, req)
            if change:
                v("stable_prefix", f"undeclared change since call {prev.call}: {change}")
        if req.rewrite:
            split = split_pairs(req)
            if split:
                v("boundary_pairs", split)
        if "path_back" in self.promised or "no_respill" in self.promised:
            for name, detail in self._spill_checks(prev.request if prev else None, req):
                v(name, detail)
            if prev is not None and "path_back" in self.promised:
                for detail in self._left_window(prev.request, req):
                    v("path_back", detail)
        self._prev[stream] = s
        return out

    # --- spills and read-backs ------------------------------------------------------------------
    def _new_blocks(self, prev: Request | None, req: Request) -> Iterable[tuple[Message, Block]]:
        start = 0
        if prev is not None:
            n = min(len(prev.messages), len(req.messages))
            # longest common message prefix (prefix digests chain, so equality is monotone)
            lo, hi = 0, n
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if req.messages.prefix_digest(mid - 1) == prev.messages.prefix_digest(mid - 1):
                    lo = mid
                else:
                    hi = mid - 1
            start = lo
        for m in req.messages[start:]:
            for b in m.blocks:
                yield m, b

    def _spill_checks(self, prev: Request | None, req: Request) -> list[tuple[str, str]]:
        out = []
        inputs = {b.id: b.input for m in req.messages for b in m.blocks if b.type == "tool_use"}
        for _m, b in self._new_blocks(prev, req):
            if b.type != "tool_result" or b.id not in self.originals or b.id in self._entered:
                continue
            self._entered.add(b.id)  # judged as it enters; a later rewrite is a departure (_left_window)
            original = self.originals[b.id]
            if b.text == original:
                continue
            spilled_from = self._reads_spill(inputs.get(b.id))
            if spilled_from is not None:
                out.append(("no_respill", f"tool_result {b.id} reads back spilled file {spilled_from} "
                                          f"but entered the window replaced ({len(original):,} -> {len(b.text):,} chars): "
                                          f"{_short(b.text)!r}"))
            holder = self._files.holding(original, self._files.named_in(b.text))
            if holder is not None:
                self.spills[str(holder)] = b.id
            else:
                out.append(("path_back", f"tool_result {b.id} replaced ({len(original):,} -> {len(b.text):,} chars) "
                                         f"and no file it names holds the original: {_short(b.text)!r}"))
        return out

    def _reads_spill(self, tool_input) -> str | None:
        if not tool_input or not self.spills:
            return None
        for s in _json_strings(dict(tool_input)):
            for path in self.spills:
                p = Path(path)
                tail = f"{p.parent.name}/{p.name}"
                if s == path or s.replace("\\", "/").endswith(tail):
                    return path
        return None

    # --- what left the window ----------------------------------------------------------------------
    def _left_window(self, prev: Request, req: Request) -> list[str]:
        n = len(prev.messages)
        if n == 0 or (len(req.messages) >= n and req.messages.prefix_digest(n - 1) == prev.messages.prefix_digest(n - 1)):
            return []  # the previous request is a prefix of this one: nothing left
        now = {b.digest for m in req.messages for b in m.blocks}
        before = {m.digest for m in prev.messages}
        summary_new = any(m.meta.get("origin") == "summary" and m.digest not in before for m in req.messages)
        if summary_new:
            return []
        named: list[Path] | None = None
        out = []
        for m in prev.messages:
            for b in m.blocks:
                if b.digest in now or b.type not in ("text", "tool_result") or not b.text.strip():
                    continue
                if named is None:
                    named = []
                    for rm in req.messages:
                        for rb in rm.blocks:
                            if rb.type in ("text", "tool_result"):
                                named.extend(p for p in self._files.named_in(rb.text) if p not in named)
                if self._files.holding(b.text, named) is None:
                    out.append(f"{m.role} {b.type} {_short(b.text)!r} left the window with no summary "
                               "and no file named in the request holding it")
                    if len(out) >= 3:
                        return out
        return out


def check(recording: Recording, promised: Iterable[str] | None = None) -> list[Violation]:
    """Every violation in a recording, in order. ``promised`` defaults to the strategy's
    :func:`promises`."""
    c = Checker(frozenset(promised) if promised is not None else promises(recording.strategy),
                recording.originals, recording.session_dir)
    c.feed(recording.entries)
    return c.violations


def assert_holds(recording: Recording, promised: Iterable[str] | None = None) -> None:
    """Raise :class:`InvariantViolation` listing every violation, if any."""
    found = check(recording, promised)
    if found:
        raise InvariantViolation(found)
