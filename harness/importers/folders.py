"""Folders of logs: which session files ``ctxsim import FORMAT SRC`` reads, and where each trace goes.

* ``claude-code``: SRC is a session file (``<session>.jsonl``), a project folder
  (``~/.claude/projects/<project>/``: every ``*.jsonl`` directly in it is a session; its
  ``<session>/subagents/`` folder belongs to that session, not a session of its own, and so does an
  ``agent-<id>.jsonl`` beside it whose records carry the session's id) or the
  projects root (``~/.claude/projects/``: every project folder in it). A project folder's
  sessions go to ``OUT/<session>.jsonl``, the root's to ``OUT/<project>/<session>.jsonl``.
  A projects root may also hold session files directly (one copied there): they are read too, each
  to ``OUT/<session>.jsonl``, beside the project folders, never instead of them.
* ``codex``: SRC is a rollout file or a folder searched at any depth for ``rollout-*.jsonl``
  (``~/.codex/sessions/YYYY/MM/DD/``); each goes to ``OUT/<rollout name>.jsonl``, except rollouts
  that share a file name (a copied or archived tree: two day folders holding the same name), which
  go to ``OUT/<their folder under SRC>/<rollout name>.jsonl``: every session its own trace.
* the other formats: SRC is one file.

One session is read once: a file reached twice (a symlinked folder) by its real path, and two
copies of one session (Codex's ``archived_sessions/`` beside ``sessions/``; a Claude Code
``<session id>.jsonl`` copied into another folder) by its id: Codex's ``session_meta.id``,
Claude Code's file name (Claude Code names each transcript by its session id; a resumed session's
first records carry the id it resumed, so those are not the key). The longest copy is read (the
first found if they are the same size) and each other is named in a warning.

A session's start is its first timestamp (``--since`` / ``--until`` filter on its UTC date before
the session is imported).
"""

from __future__ import annotations

import filecmp
import json
import os
from collections import Counter
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from ctxsim.harness.importers.common import first_records, parse_time
from ctxsim.harness.model.trace import TraceError


@dataclass(frozen=True)
class SessionFile:
    path: Path
    project: str      # the project folder's name (Claude Code) or the session's parent folder
    out: Path         # where its trace goes, relative to OUT (a folder of sessions) or OUT itself


def _claude_sessions(folder: Path) -> list[Path]:
    """The session files of a project folder. An older Claude Code wrote sub-agent transcripts next
    to the sessions (``agent-<id>.jsonl``): one whose ``sessionId`` is a session here belongs to that
    session (its importer attaches it), not a session of its own."""
    files = sorted(p for p in folder.glob("*.jsonl") if p.is_file())
    stems = {p.stem for p in files if not p.name.startswith("agent-")}
    if len(stems) == len(files):
        return files
    from ctxsim.harness.importers.claude_code import session_of

    return [p for p in files if not p.name.startswith("agent-") or session_of(p) not in stems]


@dataclass(frozen=True)
class Found:
    """What ``ctxsim import`` reads under SRC: the sessions, whether SRC is a folder of them, and
    one warning per file not read: a session already read (a link, a copy), or a ``.jsonl`` name that is
    no readable file (a link to nothing)."""
    sessions: list[SessionFile]
    folder: bool
    duplicates: list[str]
    orphans: list[str] = field(default_factory=list)   # sub-agent folders whose session transcript is absent: named, not read


def discover(fmt: str, src: str | Path) -> tuple[list[SessionFile], bool]:
    """The session files under ``src`` and whether ``src`` is a folder of them (then OUT is a
    folder). A missing path or a folder holding no session is a :class:`TraceError`."""
    found = find(fmt, src)
    return found.sessions, found.folder


def find(fmt: str, src: str | Path) -> Found:
    """:func:`discover`, with the duplicates it left out, one warning each."""
    src = Path(src)
    if not src.exists():
        raise TraceError(src, None, "no such file or folder")
    if not src.is_file() and not src.is_dir():   # a device or a fifo: never read (/dev/zero never ends)
        from ctxsim.harness.files import regular

        raise TraceError(src, None, f"cannot read: {regular.not_regular(src, src.stat().st_mode).strerror}")
    if src.is_file():
        return Found([SessionFile(src, src.parent.name, Path(src.name))], False, [])
    if fmt == "claude-code":
        direct = _claude_sessions(src)
        own = {p.stem for p in direct}   # <session>/ beside <session>.jsonl: its subagents, not a project
        nested = [SessionFile(p, proj.name, Path(proj.name) / p.name)
                  for proj in sorted(d for d in src.iterdir() if d.is_dir() and d.name not in own)
                  for p in _claude_sessions(proj)]
        projects = [src, *(d for d in sorted(src.iterdir()) if d.is_dir() and d.name not in own)]
        orphans = [o for d in projects for o in orphaned_subagents(d)]
        if not direct and not nested:
            raise TraceError(src, None, "no Claude Code session here: expected <session>.jsonl files (a project "
                             "folder) or folders of them (~/.claude/projects)" + _deeper(src)
                             + "".join(f"; {o}" for o in orphans))
        # project folders first: of two copies of one session, the one in its project is read
        found = _once(src, nested + [SessionFile(p, src.name, Path(p.name)) for p in direct], lambda p: p.stem)
        unread = [f"{p}: not a readable file ({'a folder' if p.is_dir() else 'a link to nothing' if p.is_symlink() else 'not a regular file'}): not read"
                  for d in projects for p in sorted(d.glob("*.jsonl")) if not p.is_file()]
        return Found(found.sessions, True, found.duplicates + unread, orphans)
    if fmt == "codex":
        found = [p for p in sorted(src.rglob("rollout-*.jsonl"), key=_archived_last) if p.is_file()]
        if not found:
            raise TraceError(src, None, "no Codex rollout here: expected rollout-*.jsonl files (~/.codex/sessions/YYYY/MM/DD/)")
        names = Counter(p.name for p in found)
        return _once(src, [SessionFile(p, p.parent.name, Path(p.name) if names[p.name] == 1 else p.relative_to(src))
                           for p in found], rollout_id)
    raise TraceError(src, None, f"{fmt}: expected a log file, got a folder")


def orphaned_subagents(folder: Path) -> list[str]:
    """One warning per ``<session>/subagents/`` folder in ``folder`` whose session transcript
    (``<session>.jsonl`` beside it) is absent: its sub-agents' calls were billed, but a sub-agent is read
    with the session that launched it, so they are not imported, and said with how many calls they made
    (seen in two outside repositories whose large transcripts were left out of a copy)."""
    out = []
    for d in sorted(x for x in folder.iterdir() if x.is_dir() and (x / "subagents").is_dir()):
        if (folder / f"{d.name}.jsonl").exists():
            continue
        files = sorted(p for p in (d / "subagents").rglob("agent-*.jsonl") if p.is_file())
        if files:
            calls = sum(_billed_calls(p) for p in files)
            out.append(f"{d}/subagents: {len(files)} sub-agent transcript{'s' * (len(files) > 1)} ({calls} model "
                       f"call{'s' * (calls != 1)} with usage) of session {d.name}, whose transcript {d.name}.jsonl is "
                       "not in this folder: not imported (a sub-agent is read with the session that launched it)")
    return out


def _billed_calls(path: Path) -> int:
    """The calls with usage a sub-agent transcript records, read as the importer reads it (copies of another
    session's calls and Claude Code's own notices left out); a file it cannot read counts nothing."""
    from ctxsim.harness.importers.claude_code import parse_file

    try:
        p = parse_file(path)
    except TraceError:
        return 0
    return sum(1 for c in p.calls.values() if c.usage is not None and not c.copied)


DEEPER_SHOWN = 3          # folders named in the error (assumed: enough to see the layout)
DEEPER_LOOKED = 10_000    # folders walked at most before giving up (assumed: a home folder given by mistake)


def _deeper(src: Path) -> str:
    """Where session-like files lie deeper under ``src`` than Claude Code puts them (a backup tool's own
    layout, ``<project>/sessions/<session>.jsonl``): named, not read. Which folder is a project there, and
    where a session's sub-agents went, is that tool's choice: the user points ctxsim at the folders."""
    holding: list[str] = []
    looked = 0
    for root, dirs, files in os.walk(src):
        dirs.sort()
        looked += 1
        if looked > DEEPER_LOOKED or len(holding) >= DEEPER_SHOWN:
            break
        if Path(root) != src and any(f.endswith(".jsonl") and not f.startswith("agent-") for f in files) \
                and "subagents" not in Path(root).relative_to(src).parts:
            holding.append(os.path.relpath(root, src))
    if not holding:
        return ""
    return (f"; .jsonl files lie deeper, in {', '.join(holding)}{' ...' if len(holding) == DEEPER_SHOWN else ''}: "
            "give one such folder, or lay the sessions out as <project>/<session>.jsonl")


def _archived_last(p: Path) -> tuple[bool, Path]:
    """Codex moves a finished session to ``archived_sessions/``: its live copy comes first."""
    return "archived_sessions" in p.parts, p


def _once(src: Path, sessions: list[SessionFile], key) -> Found:
    """``sessions`` with each session once: by real path (a link to a file read already), then by
    ``key(path)``, its id (None: none known, never merged); of one session's copies the largest file
    is read (the first of equal ones). Each file left out is named in a warning."""
    notes: list[str] = []
    by_path: dict[Path, SessionFile] = {}
    for s in sessions:
        real = s.path.resolve()
        if real in by_path:
            notes.append(f"{s.path}: the same file as {by_path[real].path} (reached through a link): read once")
        else:
            by_path[real] = s
    unique = list(by_path.values())
    groups: dict[object, list[SessionFile]] = {}
    for s in unique:
        groups.setdefault(key(s.path) or ("no id", s.path), []).append(s)
    dropped: set[Path] = set()
    for ident, copies in groups.items():
        if len(copies) < 2:
            continue
        size = {c.path: c.path.stat().st_size for c in copies}
        read = max(copies, key=lambda c: size[c.path])   # max keeps the first of equal sizes
        for c in copies:
            if c is not read:
                how = ("an identical copy" if size[c.path] == size[read.path] and filecmp.cmp(c.path, read.path, shallow=False)
                       else "a shorter copy" if size[c.path] < size[read.path] else "a copy of the same size")
                notes.append(f"{c.path}: the same session (id {ident}) as {read.path} ({how}): not read again")
                dropped.add(c.path)
    return Found(_distinct(src, [s for s in unique if s.path not in dropped]), True, notes)


def rollout_id(path: Path) -> str | None:
    """The session id a Codex rollout's ``session_meta`` names (None if its first lines name none)."""
    for o in first_records(path):
        if o.get("type") == "session_meta" and isinstance(o.get("payload"), dict):
            sid = o["payload"].get("id")
            return str(sid) if isinstance(sid, str | int) and str(sid) else None
    return None


def _distinct(src: Path, sessions: list[SessionFile]) -> list[SessionFile]:
    """``sessions``, checked to write distinct traces (no trace is another's folder either): one
    session never overwrites another's trace."""
    outs = {s.out for s in sessions}
    if len(outs) < len(sessions) or any(parent in outs for o in outs for parent in o.parents):
        raise TraceError(src, None, "two sessions would be written to one trace: rename one of the logs")
    return sessions


def session_start(path: Path) -> float | None:
    """Epoch seconds of the first timestamp in a JSONL log (None if it has none that parses)."""
    try:
        with path.open("rb") as fh:
            for no, raw in enumerate(fh, 1):
                try:
                    obj = json.loads(raw)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    continue
                ts = obj.get("timestamp") if isinstance(obj, dict) else None
                if ts is not None:
                    try:
                        return parse_time(ts, path, no)
                    except TraceError:
                        continue
    except OSError:
        return None
    return None


def in_range(start: float | None, since: date | None, until: date | None) -> bool:
    """Whether a session that started at ``start`` (epoch s) falls in [since, until] (UTC dates,
    both inclusive). A session with no timestamp is kept: the import will say what is wrong."""
    if start is None or (since is None and until is None):
        return True
    from datetime import UTC, datetime

    d = datetime.fromtimestamp(start, tz=UTC).date()
    return (since is None or d >= since) and (until is None or d <= until)
