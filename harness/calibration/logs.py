"""The logs a calibration fits on: raw Claude Code logs or traces imported from them, each read or
skipped with a warning (a bad log never aborts the work done on the others), copies of one
conversation under several session ids told apart, and each log's provenance.

* A file whose first line is a ctxsim trace header is read as a trace (``ctxsim import`` made it); any
  other ``.jsonl`` is imported as a Claude Code log (``--models`` prices models the table lacks).
* Copies: Claude Code writes a resumed or forked conversation again under a new session id, its earlier
  messages (and their tool-use ids) repeated. A compaction is keyed by its summary (a model's own text:
  the same summary twice is one compaction), or without one by the tool-use ids of the last
  ``KEY_USES`` main-context tool uses before it: the same key in two logs is one compaction, counted
  once (in the log that holds the most calls).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KEY_USES = 5   # tool uses before a compaction that identify it (assumed: ids are unique per API call)


@dataclass
class Log:
    path: Path
    name: str                 # relative to the folder it was found in
    trace: Any
    provenance: dict[str, Any]

    @property
    def session(self) -> str:
        """What names the session in a committed file: its digest (never its path or id)."""
        return self.provenance["digest"]

    @property
    def label(self) -> str:
        """The log's own name when it is not a population log (repository unknown), else its digest."""
        return self.name if self.provenance.get("repo") is None else f"{self.provenance['repo']}@{self.session}"


def files(items: Sequence[str]) -> list[tuple[Path, Path]]:
    """(log file, root it is named relative to): files as given, folders searched for ``*.jsonl``
    outside ``subagents/``. A missing item is bad input (the caller says so)."""
    out = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            out += [(f, p) for f in sorted(p.rglob("*.jsonl")) if "subagents" not in f.parts]
        elif p.is_file():
            out.append((p, p.parent))
        else:
            raise FileNotFoundError(f"{item}: no such file or folder")
    return out


def is_trace(path: Path) -> bool:
    try:
        with path.open("r", encoding="utf-8") as fh:
            head = json.loads(fh.readline() or "{}")
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    return isinstance(head, dict) and head.get("type") == "header" and head.get("format") == "ctxsim-trace"


def read(path: Path, models_file: str | None = None):
    """The trace of one log (imported when raw)."""
    from ctxsim.harness.model import trace as tr

    if is_trace(path):
        return tr.load(path)
    from ctxsim.harness.importers import import_file

    return import_file("claude-code", path, models_file=models_file).trace


def load(items: Sequence[str], models_file: str | None = None, warn: Callable[[str], Any] | None = None,
         keep: Callable[[Any], bool] | None = None) -> Iterator[Log]:
    """Each readable log of ``items`` (with ``keep``: only those it accepts); an unreadable one is
    named in one line through ``warn`` and skipped."""
    from ctxsim.harness.calibration import provenance as pv

    tsv = pv.default_tsv()
    for path, root in files(items):
        try:
            t = read(path, models_file)
        except Exception as e:  # noqa: BLE001  (any failure of one log: named, skipped, the rest go on)
            if warn is not None:
                msg = str(e).splitlines()[0] if str(e) else type(e).__name__
                warn(f"{path}: skipped ({msg})")
            continue
        if keep is not None and not keep(t):
            continue
        src = (t.header.source or {}).get("path")
        raw = Path(src) if src and Path(src).is_file() else path
        yield Log(path, str(path.relative_to(root)), t, pv.provenance(raw, tsv))


def compaction_keys(trace) -> list[str]:
    """One key per main-context compaction of ``trace``, in order (see the module docstring)."""
    from ctxsim.harness.model import trace as tr
    from ctxsim.harness.retention.probes import _main_context

    main = _main_context(trace.events)
    ids: list[str] = []
    out = []
    for i, ev in enumerate(trace.events):
        if not main[i]:
            continue
        if isinstance(ev, tr.AssistantEvent):
            ids += [c.id for c in ev.tool_uses()]
        elif isinstance(ev, tr.CompactEvent):
            basis = ("summary\x00" + ev.summary) if ev.summary else ("uses\x00" + "\n".join(ids[-KEY_USES:]))
            h = hashlib.sha256(basis.encode()).hexdigest()[:16]
            out.append(h)
    return out


def distinct(logs: Sequence[Log]) -> dict[int, set[int]]:
    """Per log (its index), the indices of its compactions that count: a compaction seen in several
    logs counts in the one with the most calls (ties: the first)."""
    owner: dict[str, tuple[int, int]] = {}   # key -> (log index, its calls)
    keys = [compaction_keys(lg.trace) for lg in logs]
    for i, ks in enumerate(keys):
        for k in ks:
            got = owner.get(k)
            if got is None or logs[i].trace.calls > got[1]:
                owner[k] = (i, logs[i].trace.calls)
    return {i: {j for j, k in enumerate(ks) if owner[k][0] == i} for i, ks in enumerate(keys)}
