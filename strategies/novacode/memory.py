"""Auto memory: NovaCode's second memory layer, "what does the user prefer, what did we conclude
last time" (N-MEM-1…7), on real files.

One memory is one Markdown file with a ``name`` / ``description`` / ``type`` frontmatter (N-MEM-2),
routed by type (N-MEM-1): ``user`` and ``feedback`` memories follow the user across projects, under
``~/.novacode/memory/``; ``project`` and ``reference`` memories stay with the project, under
``<project>/.novacode/memory/``. Each directory has an index ``MEMORY.md``: a table of contents,
read with a 200-line / 25 KB limit and a warning when cut (N-MEM-3); what is injected comes from
the memory files themselves.

The pieces here are pure functions and small file operations; :mod:`memory_layer` wires them into
the strategy, and the side calls go through the LLM services:

* extraction (N-MEM-4): a turn without tool calls triggers it; :class:`ExtractionScheduler` never
  lets two run at once and marks one trailing run instead;
* recall (N-MEM-5): :func:`scan_manifests` reads at most 200 files, only their first 30 lines, and
  the model picks at most 5 (:func:`selection_prompt`, :func:`parse_selection`), rendered as one
  injection block (:func:`render_injection`);
* consolidation (N-MEM-7): :func:`consolidation_gate` checks 24 h, 5 sessions and the 10-minute scan
  throttle; the lock is :class:`ctxsim.strategies.novacode.lock.LockFile`.

The model's answers are parsed strictly. When an answer does not parse (a backend that does not know
the format), :func:`local_extract`, :func:`local_select` and :func:`local_consolidate` decide
instead: deterministic stand-ins, documented where they are defined, and counted by the caller.

Every file write sets the file's mtime from the injected clock (``os.utime``): a real agent passes
``time.time`` and nothing changes; a replay passes the simulated clock, so the newest-first order
of the manifest scan is the simulated one and a run is deterministic.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import islice
from pathlib import Path

from ctxsim.harness.files import confined
from ctxsim.harness.model.conversation import Message

MEMORY_TYPES = ("user", "feedback", "project", "reference")   # N-MEM-1, N-MEM-2
HOME_TYPES = frozenset({"user", "feedback"})                  # N-MEM-1: follow the user
MEMORY_SUBDIR = Path(".novacode") / "memory"                  # N-MEM-1: ~/… and <project>/…
INDEX_FILE = "MEMORY.md"                                      # N-MEM-3
INDEX_MAX_LINES = 200                                         # N-MEM-3
# N-MEM-3 "25 KB". reading: 25,000 bytes (SI kilobytes, as Claude Code's memory index limit is
# usually quoted); alternative: 25,600 (KiB). A parameter of MemoryParams.
INDEX_MAX_BYTES = 25_000
MANIFEST_MAX_FILES = 200                                      # N-MEM-5
MANIFEST_HEAD_LINES = 30                                      # N-MEM-5
RECALL_MAX = 5                                                # N-MEM-5
RECALL_TIMEOUT_S = 8.0                                        # N-MEM-6
CONSOLIDATE_MIN_INTERVAL_S = 24 * 3600.0                      # N-MEM-7: 24 h
CONSOLIDATE_MIN_SESSIONS = 5                                  # N-MEM-7
CONSOLIDATE_SCAN_THROTTLE_S = 10 * 60.0                       # N-MEM-7: 10 minutes
STATE_FILE = ".consolidation.json"                            # gate state, beside the user index
LOCK_FILE = ".consolidate.lock"                               # N-MEM-7 lock, beside the user index


class MemoryFormatError(ValueError):
    """A memory file or block that does not follow N-MEM-2."""


# --- one memory (N-MEM-2) --------------------------------------------------------------------------

@dataclass(frozen=True)
class Memory:
    name: str
    description: str
    type: str
    body: str
    path: Path | None = None

    def __post_init__(self) -> None:
        for f in ("name", "description"):
            v = getattr(self, f)
            if not v.strip() or "\n" in v:
                raise MemoryFormatError(f"memory {f} must be one non-empty line, got {v!r}")
        if self.type not in MEMORY_TYPES:
            raise MemoryFormatError(f"memory type {self.type!r} is not one of {', '.join(MEMORY_TYPES)}")

    def render(self) -> str:
        return (f"---\nname: {self.name.strip()}\ndescription: {self.description.strip()}\n"
                f"type: {self.type}\n---\n{self.body.strip()}\n")


def parse_frontmatter(lines: Sequence[str]) -> tuple[dict[str, str], int] | None:
    """``key: value`` pairs between a leading ``---`` and the next ``---``, and the index of the
    line after it; None when there is no complete frontmatter in ``lines``."""
    if not lines or lines[0].strip() != "---":
        return None
    out: dict[str, str] = {}
    for i, line in enumerate(lines[1:], 1):
        if line.strip() == "---":
            return out, i + 1
        key, sep, value = line.partition(":")
        if sep and key.strip():
            out[key.strip().lower()] = value.strip().strip("\"'")
    return None


def parse_memory(text: str, path: Path | None = None) -> Memory:
    lines = text.split("\n")
    fm = parse_frontmatter(lines)
    where = f"{path}: " if path else ""
    if fm is None:
        raise MemoryFormatError(f"{where}no frontmatter (--- name/description/type ---)")
    meta, start = fm
    missing = [k for k in ("name", "description", "type") if not meta.get(k)]
    if missing:
        raise MemoryFormatError(f"{where}frontmatter lacks {', '.join(missing)}")
    try:
        return Memory(meta["name"], meta["description"], meta["type"].lower(),
                      "\n".join(lines[start:]).strip(), path)
    except MemoryFormatError as e:
        raise MemoryFormatError(f"{where}{e}") from None


def slug(name: str) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return (s[:60].rstrip("-") or "memory")


# --- where memories live (N-MEM-1) ---------------------------------------------------------------

@dataclass(frozen=True)
class MemoryDirs:
    home: Path | None
    project: Path | None

    # built once: recall and the index look them up thousands of times a session (as dict keys of
    # the head cache, where an equal but new Path costs a pathlib comparison each)
    @cached_property
    def user_dir(self) -> Path | None:
        return None if self.home is None else Path(self.home) / MEMORY_SUBDIR

    @cached_property
    def project_dir(self) -> Path | None:
        return None if self.project is None else Path(self.project) / MEMORY_SUBDIR

    def for_type(self, type: str) -> Path:
        """N-MEM-1: user/feedback under the home, project/reference under the project."""
        if type not in MEMORY_TYPES:
            raise MemoryFormatError(f"memory type {type!r} is not one of {', '.join(MEMORY_TYPES)}")
        d = self.user_dir if type in HOME_TYPES else self.project_dir
        if d is None:
            raise ValueError(f"no {'home' if type in HOME_TYPES else 'project'} directory for a {type} memory")
        return d

    def all(self) -> list[Path]:
        return [d for d in (self.user_dir, self.project_dir) if d is not None]


def _set_mtime(path: Path, t: float) -> None:
    os.utime(path, (t, t))


def _atomic_write(path: Path, text: str, t: float, heads: HeadCache | None = None) -> None:
    confined.guard(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    confined.guard(tmp)
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    _set_mtime(path, t)
    if heads is not None:
        heads.forget(path)


def write_memory(dirs: MemoryDirs, memory: Memory, now: float, heads: HeadCache | None = None) -> Path:
    """Write (or overwrite, same name) a memory in its type's directory and refresh that index."""
    d = dirs.for_type(memory.type)
    path = d / f"{slug(memory.name)}.md"
    _atomic_write(path, memory.render(), now, heads)
    write_index(d, now, heads)
    return path


def _listing(d: Path, heads: HeadCache | None = None) -> list[tuple[Path, os.stat_result]]:
    """The memory files of one directory (every ``*.md`` but the index, following links as
    ``Path.is_file`` does), by name, each with its ``stat``: one directory read and one ``stat`` a
    file."""
    try:
        with os.scandir(d) as it:
            entries = [e for e in it if e.name.endswith(".md") and e.name != INDEX_FILE and e.is_file()]
    except (FileNotFoundError, NotADirectoryError, PermissionError):  # as Path.is_dir / glob: none
        return []
    entries.sort(key=lambda e: e.name)
    if heads is None:
        return [(d / e.name, e.stat()) for e in entries]
    return [(heads.path(d, e.name), e.stat()) for e in entries]


def memory_files(d: Path) -> list[Path]:
    """The memory files of one directory (every ``*.md`` but the index), by name."""
    return [p for p, _ in _listing(d)]


class HeadCache:
    """The first lines of memory files, and what is parsed from them, read once per version of a
    file: recall scans every memory at each user turn (N-MEM-5) and each write rebuilds the index
    from every file (N-MEM-3), so re-reading them all each time made a long session quadratic.

    Not stale by construction: the writes of the run that owns the cache (``write_memory``,
    ``apply_consolidation``) drop the entries of the files they touch, and any other writer (a test,
    a user editing a memory between sessions) is caught by the file's ``stat``: an entry is used only
    while inode, size, mtime and ctime (in ns) are all what they were when it was read (an atomic
    rewrite is a new inode; an in-place edit moves ctime, which ``utime`` cannot set back)."""

    def __init__(self) -> None:
        self._paths: dict[tuple[Path, str], Path] = {}
        self._heads: dict[tuple[Path, int], tuple[tuple[int, int, int, int], list[str], dict[str, object]]] = {}

    def path(self, d: Path, name: str) -> Path:
        """``d / name``, the same object each time (its hash and string are then computed once)."""
        p = self._paths.get((d, name))
        if p is None:
            p = self._paths[(d, name)] = d / name
        return p

    def _entry(self, path: Path, st: os.stat_result, n: int) -> tuple[list[str], dict[str, object]]:
        sig = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        got = self._heads.get((path, n))
        if got is None or got[0] != sig:
            got = self._heads[(path, n)] = (sig, read_head(path, n), {})
        return got[1], got[2]

    def manifest(self, path: Path, st: os.stat_result, n: int) -> Manifest | None:
        """The file's manifest from its first ``n`` lines; None without a valid frontmatter."""
        lines, parsed = self._entry(path, st, n)
        if "manifest" not in parsed:
            parsed["manifest"] = _manifest(path, lines, st.st_mtime)
        return parsed["manifest"]  # type: ignore[return-value]

    def memory(self, path: Path, st: os.stat_result, n: int) -> Memory | MemoryFormatError:
        """``parse_memory`` of the file's first ``n`` lines, or the error it raised."""
        lines, parsed = self._entry(path, st, n)
        if "memory" not in parsed:
            try:
                parsed["memory"] = parse_memory("\n".join(lines), path)
            except MemoryFormatError as e:
                parsed["memory"] = e
        return parsed["memory"]  # type: ignore[return-value]

    def forget(self, path: Path) -> None:
        for key in [k for k in self._heads if k[0] == path]:
            del self._heads[key]


# --- the index (N-MEM-3) -------------------------------------------------------------------------

def index_line(m: Memory, file_name: str) -> str:
    return f"- [{m.name}]({file_name}) — {m.description}"


def write_index(d: Path, now: float, heads: HeadCache | None = None) -> Path:
    """Rebuild ``MEMORY.md`` from the files: one line per memory, grouped by type. The index holds
    no memory content (N-MEM-3), so rebuilding it loses nothing."""
    heads = heads if heads is not None else HeadCache()
    entries: dict[str, list[str]] = {t: [] for t in MEMORY_TYPES}
    for p, st in _listing(d, heads):
        try:
            m = heads.memory(p, st, MANIFEST_HEAD_LINES)
        except OSError:
            continue
        if isinstance(m, MemoryFormatError):
            continue
        entries[m.type].append(index_line(m, p.name))
    lines = ["# Memory index", ""]
    for t in MEMORY_TYPES:
        if entries[t]:
            lines += [f"## {t}", *entries[t], ""]
    path = d / INDEX_FILE
    _atomic_write(path, "\n".join(lines).rstrip("\n") + "\n", now)
    return path


@dataclass(frozen=True)
class IndexView:
    """The index as loaded: possibly cut, with the warning that says so (N-MEM-3)."""

    text: str
    lines: int          # lines in the file
    bytes: int          # bytes in the file
    truncated: bool
    warning: str | None


def truncate_index(text: str, max_lines: int = INDEX_MAX_LINES, max_bytes: int = INDEX_MAX_BYTES,
                   name: str = INDEX_FILE) -> IndexView:
    """Cut the index to ``max_lines`` lines, then to ``max_bytes`` bytes at a line boundary (N-MEM-3).
    A file of exactly the limits is not cut."""
    lines = text.splitlines()
    size = len(text.encode("utf-8"))
    over_lines, over_bytes = len(lines) > max_lines, size > max_bytes
    if not over_lines and not over_bytes:
        return IndexView(text, len(lines), size, False, None)
    data = ("\n".join(lines[:max_lines]) + "\n").encode("utf-8")
    if len(data) > max_bytes:
        head = data[:max_bytes]
        nl = head.rfind(b"\n")
        data = head[: nl + 1] if nl >= 0 else head
    kept = data.decode("utf-8", errors="ignore")
    why = []
    if over_lines:
        why.append(f"{len(lines)} lines (limit {max_lines})")
    if over_bytes:
        why.append(f"{size:,} bytes (limit {max_bytes:,})")
    warning = (f"WARNING: {name} is {' and '.join(why)}; only the first {kept.count(chr(10))} lines were "
               f"loaded. Keep the index to one short line per memory and move details into the memory files.")
    return IndexView(kept, len(lines), size, True, warning)


def read_index(d: Path, max_lines: int = INDEX_MAX_LINES, max_bytes: int = INDEX_MAX_BYTES) -> IndexView | None:
    path = d / INDEX_FILE
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except (FileNotFoundError, NotADirectoryError):
        return None
    return truncate_index(text, max_lines, max_bytes, str(path))


_LINK = re.compile(r"\]\(([^)/\s][^)\s]*\.md)\)")


def render_index(dirs: MemoryDirs, max_lines: int = INDEX_MAX_LINES, max_bytes: int = INDEX_MAX_BYTES) -> str:
    """The indexes of both directories for the resident block, links made absolute so the model
    (and retention) can follow them to the files; empty when there is no memory."""
    parts: list[str] = []
    for label, d in (("User memory", dirs.user_dir), ("Project memory", dirs.project_dir)):
        if d is None:
            continue
        view = read_index(d, max_lines, max_bytes)
        if view is None or not memory_files(d):
            continue
        body = _LINK.sub(lambda m, d=d: f"]({(d / m.group(1)).resolve()})", view.text.strip())
        parts.append(f"{label} ({(d / INDEX_FILE).resolve()}):\n{body}")
        if view.warning:
            parts.append(f"> {view.warning}")
    if not parts:
        return ""
    return ("<memory-index>\nAuto memory from earlier sessions: a table of contents. Read a file "
            "when it matters; relevant memories are also recalled automatically.\n\n"
            + "\n\n".join(parts) + "\n</memory-index>")


# --- manifests (N-MEM-5) -----------------------------------------------------------------------

def read_head(path: Path, n: int = MANIFEST_HEAD_LINES) -> list[str]:
    """The first ``n`` lines of a file, reading no further (N-MEM-5)."""
    with path.open("r", encoding="utf-8", errors="replace") as fh:
        return [line.rstrip("\n") for line in islice(fh, n)]


@dataclass(frozen=True)
class Manifest:
    path: Path
    name: str
    description: str
    type: str
    mtime: float


@dataclass
class ScanResult:
    manifests: list[Manifest] = field(default_factory=list)
    files: int = 0        # memory files found in all directories
    skipped: int = 0      # files without a valid frontmatter in their first lines


def scan_manifests(dirs: Iterable[Path], max_files: int = MANIFEST_MAX_FILES,
                   head_lines: int = MANIFEST_HEAD_LINES, heads: HeadCache | None = None) -> ScanResult:
    """The newest ``max_files`` memory files of both directories, frontmatter only (N-MEM-5).
    ``heads``: a file read by an earlier scan and unchanged since is not read again."""
    heads = heads if heads is not None else HeadCache()
    found: list[tuple[float, str, Path, os.stat_result]] = []
    for d in dirs:
        for p, st in _listing(d, heads):
            found.append((st.st_mtime, p.name, p, st))
    found.sort(key=lambda x: (-x[0], x[1], str(x[2])))
    out = ScanResult(files=len(found))
    for _, _, p, st in found[:max_files]:
        m = heads.manifest(p, st, head_lines)
        if m is None:
            out.skipped += 1
        else:
            out.manifests.append(m)
    return out


def _manifest(p: Path, head: list[str], mtime: float) -> Manifest | None:
    fm = parse_frontmatter(head)
    meta = fm[0] if fm else {}
    if not all(meta.get(k) for k in ("name", "description", "type")) or meta["type"].lower() not in MEMORY_TYPES:
        return None
    return Manifest(p, meta["name"], meta["description"], meta["type"].lower(), mtime)


# --- recall: selection and injection (N-MEM-5, N-MEM-6) ---------------------------------------

SELECT_SYSTEM = (
    "You select memories for a coding agent. Given the user's message and a list of memory files "
    "(file name, type, name, description), return the file names of the memories that will clearly "
    "help answer it, at most {k}. Preferences and feedback of the user apply to any task."
)
SELECT_INSTRUCTIONS = "Answer with a JSON array of file names only, [] when none applies."


def selection_prompt(query: str, manifests: Sequence[Manifest], k: int = RECALL_MAX) -> str:
    lines = [f"Query:\n{query.strip()[:4000]}", "", "Available memories:"]
    lines += [f"- {m.path.name} [{m.type}] {m.name}: {m.description}" for m in manifests]
    return "\n".join(lines)


def parse_selection(text: str, candidates: Sequence[str], k: int = RECALL_MAX) -> list[str] | None:
    """The chosen file names, known candidates only, in the model's order, at most ``k``; None when
    the answer is not a selection at all (neither a JSON array nor lines naming files)."""
    names = set(candidates)
    if text.strip().upper() in ("NONE", "NONE."):
        return []
    picked: list[str] | None = None
    m = re.search(r"\[[^\[\]]*\]", text)
    if m:
        try:
            arr = json.loads(m.group(0))
            if isinstance(arr, list):
                picked = [str(x).strip() for x in arr]
        except ValueError:
            picked = None
    if picked is None:  # else: one bare file name per line (bulleted or not), nothing more
        lines = [ln.strip().lstrip("-*• ").strip("`\"' ") for ln in text.splitlines() if ln.strip()]
        if not lines or not all(re.fullmatch(r"[\w.\-]+\.md", ln) for ln in lines):
            return None
        picked = lines
    out: list[str] = []
    for p in picked:
        p = Path(p).name
        if p in names and p not in out:
            out.append(p)
    return out[:k]


_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("a an the and or of to in on for with is are be it this that as at by from we you i "
                  "my our your me do not no yes can will should would could please use using".split())


def _terms(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 1]


def local_select(query: str, manifests: Sequence[Manifest], k: int = RECALL_MAX) -> list[str]:
    """Deterministic stand-in for the selector (used only when its answer does not parse).

    Relevance is BM25 (k1=1.5, b=0.75) of the query's terms over each manifest's name and
    description (what the real selector sees). A memory is chosen when it is relevant (score > 0)
    or when it is a ``user``/``feedback`` memory (assumption: a user's standing preferences apply to
    any request, as the selector prompt says). Order: score, then user/feedback first, then newest.
    """
    if not manifests:
        return []
    docs = [_terms(f"{m.name} {m.description}") for m in manifests]
    q = set(_terms(query))
    n = len(docs)
    avg = sum(len(d) for d in docs) / n or 1.0
    df = Counter(t for d in docs for t in set(d))
    scores = []
    for d in docs:
        tf = Counter(d)
        s = 0.0
        for t in q:
            if tf[t]:
                idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                s += idf * tf[t] * 2.5 / (tf[t] + 1.5 * (0.25 + 0.75 * len(d) / avg))
        scores.append(s)
    ranked = sorted(range(n), key=lambda i: (-scores[i], manifests[i].type not in HOME_TYPES,
                                             -manifests[i].mtime, manifests[i].path.name))
    chosen = [i for i in ranked if scores[i] > 0 or manifests[i].type in HOME_TYPES]
    return [manifests[i].path.name for i in chosen[:k]]


def render_injection(memories: Sequence[Memory]) -> Message:
    """The injection block (N-MEM-5): the chosen memory files' content, each with its path."""
    parts = ["<recalled-memories>",
             "Memories recalled for this request (auto memory; they may be stale: verify against the "
             "code before relying on them)."]
    for m in memories:
        parts.append(f"\n## {m.name} ({m.type}) — {m.path}\n{m.description}\n\n{m.body.strip()}")
    parts.append("</recalled-memories>")
    return Message.user("\n".join(parts), origin="memory",
                        memories=[str(m.path) for m in memories])


# --- extraction (N-MEM-4) ----------------------------------------------------------------------

class ExtractionScheduler:
    """Never two extractions at once (N-MEM-4): a trigger while one runs marks a trailing run (one
    flag, not a queue: the trailing run covers everything said since the running one started).

    Time is the caller's clock; a run occupies ``[start, start + duration)``.
    """

    def __init__(self) -> None:
        self.running_until: float | None = None
        self.trailing = False
        self.started = 0
        self.trailed = 0

    def running(self, now: float) -> bool:
        return self.running_until is not None and now < self.running_until

    def trigger(self, now: float) -> bool:
        """A turn without tool calls ended: True if an extraction starts now, else it trails."""
        if self.running(now):
            if not self.trailing:
                self.trailed += 1
            self.trailing = True
            return False
        return True

    def start(self, now: float, duration: float) -> None:
        self.running_until = now + max(0.0, duration)
        self.trailing = False
        self.started += 1

    def due_trailing(self, now: float) -> bool:
        """True when the running extraction has finished and a trailing run is marked."""
        return self.trailing and not self.running(now)


def ends_turn(message: Message) -> bool:
    """N-MEM-4: extraction runs on turns without tool calls (the model answered, the turn ended)."""
    return message.role == "assistant" and not message.has_tool_use


EXTRACT_SYSTEM = (
    "You maintain a coding agent's long-term memory. Read the dialogue and write down only what will "
    "matter in a future session: the user's preferences and working style (type user), corrections "
    "or confirmations the user gave about how to work (type feedback), project decisions, conclusions "
    "and constraints not derivable from the code (type project), and pointers to external resources "
    "(type reference). Skip what is already in the existing memories, and anything transient."
)

EXTRACT_INSTRUCTIONS = (
    "Write each memory as one block in exactly this format, or answer NO_MEMORIES:\n"
    "<memory>\n---\nname: short-kebab-case-name\ndescription: one line saying what it is and when it "
    "matters\ntype: user|feedback|project|reference\n---\nThe memory itself, keeping the user's exact "
    "words for preferences and feedback.\n</memory>"
)


def render_dialogue(messages: Sequence[Message], max_chars: int = 60_000) -> str:
    """The dialogue as plain text (tool calls named, tool results left out): what extraction
    condenses. The newest part is kept when it is longer than ``max_chars``."""
    lines: list[str] = []
    for m in messages:
        who = "User" if m.role == "user" else "Assistant"
        for b in m.blocks:
            if b.type == "text" and b.text.strip():
                lines.append(f"{who}: {b.text.strip()}")
            elif b.type == "tool_use":
                arg = next((v for v in (b.input or {}).values() if isinstance(v, str)), "")
                lines.append(f"{who}: [tool {b.name} {arg[:120]}]".rstrip())
    text = "\n".join(lines)
    return text[-max_chars:]


def extraction_prompt(dialogue: str, existing: Sequence[Manifest]) -> str:
    known = "\n".join(f"- [{m.type}] {m.name}: {m.description}" for m in existing) or "(none)"
    return f"<dialogue>\n{dialogue}\n</dialogue>\n\nExisting memories:\n{known}"


_BLOCK = re.compile(r"<memory>\s*(.*?)\s*</memory>", re.S)


def parse_memory_blocks(text: str) -> tuple[list[Memory], int] | None:
    """The memories of an extraction answer and how many blocks were malformed; None when the answer
    is in no known form (no valid block, and no ``NO_MEMORIES`` line: an echo of the instructions
    that merely mentions the word is not an answer)."""
    blocks = _BLOCK.findall(text)
    if not blocks:
        return ([], 0) if re.search(r"^\s*NO_MEMORIES\s*$", text, re.M) else None
    out: list[Memory] = []
    bad = 0
    for b in blocks:
        try:
            out.append(parse_memory(b))
        except MemoryFormatError:
            bad += 1
    return (out, bad) if out else None  # only malformed blocks: not an answer in the format


_PREF = re.compile(
    r"\b(prefer|prefers|preferred|preference|i (?:really )?(?:like|want|need|hate|dislike)|i'd (?:rather|like)|"
    r"please (?:always|never|don't|do not|keep|avoid|use|make)|from now on|going forward|"
    r"in (?:the )?future|always|never|don't|do not|stop|avoid|instead of|make sure)\b", re.I)
_CORRECTION = re.compile(r"\b(feedback|don't|do not|never|stop|avoid|instead|wrong|not like that|no,)\b", re.I)
_PROJECT = re.compile(r"\b(we decided|decision|decided to|conclusion|root cause|turns out|agreed|"
                      r"must not|must|constraint|deadline)\b", re.I)
_SENT = re.compile(r"(?<=[.!?])\s+|\n+")


def local_extract(messages: Sequence[Message], existing: Sequence[Manifest], max_new: int = 5) -> list[Memory]:
    """Deterministic stand-in for the extraction model (used only when its answer does not parse).

    It keeps the user's own sentences that state a standing preference or a correction (cue words
    such as "prefer", "always", "never", "don't", "from now on") as ``user`` / ``feedback``
    memories, and sentences of either side stating a decision, conclusion or constraint ("we
    decided", "decision", "must", "root cause") as ``project`` memories, verbatim, skipping ones
    already remembered. This is a modelling assumption, cruder than a model: it never infers, and it
    misses what is said without such cue words.
    """
    known = {m.description.strip().lower() for m in existing}
    out: list[Memory] = []
    seen: set[str] = set()
    for m in messages:
        if m.meta.get("origin"):
            continue  # the strategy's own additions (summaries, recalled memories) are not dialogue
        for b in m.blocks:
            if b.type != "text":
                continue
            for sent in _SENT.split(b.text):
                s = " ".join(sent.split())
                if not (12 <= len(s) <= 400):
                    continue
                if m.role == "user" and _PREF.search(s):
                    kind = "feedback" if _CORRECTION.search(s) else "user"
                elif _PROJECT.search(s):
                    kind = "project"
                else:
                    continue
                desc = s if len(s) <= 150 else s[:147].rstrip() + "..."
                key = desc.lower()
                if key in known or key in seen:
                    continue
                seen.add(key)
                name = slug(" ".join(_terms(s)[:6]) or s)
                out.append(Memory(name, desc, kind, s))
                if len(out) >= max_new:
                    return out
    return out


# --- consolidation (N-MEM-7) -------------------------------------------------------------------

@dataclass
class ConsolidationState:
    """What the gates remember between sessions (a JSON file beside the user index)."""

    last_consolidated_at: float | None = None
    last_scan_at: float | None = None
    sessions: list[str] = field(default_factory=list)   # sessions ended since the last consolidation

    @staticmethod
    def load(path: Path) -> ConsolidationState:
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
            return ConsolidationState(d.get("last_consolidated_at"), d.get("last_scan_at"),
                                      [str(s) for s in d.get("sessions", [])])
        except (OSError, ValueError, AttributeError):
            return ConsolidationState()

    def save(self, path: Path, now: float) -> None:
        _atomic_write(path, json.dumps({"last_consolidated_at": self.last_consolidated_at,
                                        "last_scan_at": self.last_scan_at,
                                        "sessions": self.sessions}, indent=1), now)


@dataclass(frozen=True)
class GateDecision:
    open: bool
    reason: str     # "open", "interval", "throttled", "sessions"
    scanned: bool   # the session scan ran (and its throttle restarts)


def consolidation_gate(state: ConsolidationState, now: float, *,
                       min_interval_s: float = CONSOLIDATE_MIN_INTERVAL_S,
                       min_sessions: int = CONSOLIDATE_MIN_SESSIONS,
                       scan_throttle_s: float = CONSOLIDATE_SCAN_THROTTLE_S) -> GateDecision:
    """N-MEM-7, the cheap gates in order: time since the last consolidation (≥ 24 h; a store never
    consolidated passes), then the scan throttle (the session scan runs at most once per 10
    minutes), then the sessions since the last consolidation (≥ 5). The lock comes last, in the
    caller, only when these pass."""
    if state.last_consolidated_at is not None and now - state.last_consolidated_at < min_interval_s:
        return GateDecision(False, "interval", False)
    if state.last_scan_at is not None and now - state.last_scan_at < scan_throttle_s:
        return GateDecision(False, "throttled", False)
    if len(set(state.sessions)) < min_sessions:
        return GateDecision(False, "sessions", True)
    return GateDecision(True, "open", True)


CONSOLIDATE_SYSTEM = (
    "You tidy a coding agent's memory files. Merge memories that say the same thing and delete ones "
    "that are stale or contradicted by newer ones. Keep the user's exact words for preferences."
)

CONSOLIDATE_INSTRUCTIONS = (
    "Answer with lines `DELETE <file>` and/or `MERGE <file> <file> ...` each MERGE followed by one "
    "<memory> block (the merged memory, written in place of the first file), or NO_CHANGES."
)


def consolidation_prompt(memories: Sequence[Memory]) -> str:
    return "\n\n".join(f'<file name="{m.path.name if m.path else "?"}" type="{m.type}">\n{m.render()}</file>'
                       for m in memories)


@dataclass
class ConsolidationPlan:
    delete: list[str] = field(default_factory=list)                     # file names
    merge: list[tuple[list[str], Memory]] = field(default_factory=list)  # (files, merged memory)


def parse_consolidation(text: str, files: Sequence[str]) -> ConsolidationPlan | None:
    """The model's plan, known files only; None when the answer is in no known form."""
    known = set(files)
    plan = ConsolidationPlan()
    if re.fullmatch(r"\s*NO_CHANGES\s*", text):
        return plan
    lines = text.split("\n")
    recognised = False
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("DELETE "):
            recognised = True
            plan.delete += [f for f in line.split()[1:] if f in known]
        elif line.startswith("MERGE "):
            recognised = True
            names = [f for f in line.split()[1:] if f in known]
            rest = "\n".join(lines[i + 1:])
            m = _BLOCK.search(rest)
            if m and len(names) >= 2:
                try:
                    plan.merge.append((names, parse_memory(m.group(1))))
                except MemoryFormatError:
                    pass
        i += 1
    return plan if recognised else None


def local_consolidate(memories: Sequence[Memory]) -> ConsolidationPlan:
    """Deterministic stand-in for the consolidation model (used only when its answer does not parse):
    memories of the same type whose bodies are equal once case and spacing are normalised are
    duplicates; the first by file name is kept, the others deleted. Nothing is judged stale: that
    needs a model."""
    plan = ConsolidationPlan()
    first: dict[tuple[str, str], str] = {}
    for m in sorted(memories, key=lambda m: m.path.name if m.path else ""):
        key = (m.type, " ".join(m.body.lower().split()))
        name = m.path.name if m.path else ""
        if key in first:
            plan.delete.append(name)
        else:
            first[key] = name
    return plan


def apply_consolidation(plan: ConsolidationPlan, by_name: dict[str, Memory], dirs: MemoryDirs,
                        now: float, heads: HeadCache | None = None) -> tuple[int, int]:
    """Carry out a plan on the files: (merged groups written, files deleted)."""
    merged = deleted = 0
    for names, mem in plan.merge:
        olds = [by_name[n] for n in names if n in by_name and by_name[n].path is not None]
        if len(olds) < 2:
            continue
        for old in olds:
            old.path.unlink(missing_ok=True)  # type: ignore[union-attr]
            if heads is not None:
                heads.forget(old.path)  # type: ignore[arg-type]
        write_memory(dirs, mem, now, heads)
        merged += 1
        deleted += len(olds) - 1  # n files became one
    for n in plan.delete:
        m = by_name.get(n)
        if m is not None and m.path is not None and m.path.exists():
            m.path.unlink()
            if heads is not None:
                heads.forget(m.path)
            deleted += 1
    for d in dirs.all():
        if d.is_dir():
            write_index(d, now, heads)
    return merged, deleted


def load_memories(dirs: Iterable[Path]) -> list[Memory]:
    """Every valid memory of the directories (full content; consolidation reads them whole)."""
    out = []
    for d in dirs:
        for p in memory_files(d):
            try:
                out.append(parse_memory(p.read_text(encoding="utf-8", errors="replace"), p))
            except (MemoryFormatError, OSError):
                continue
    return out
