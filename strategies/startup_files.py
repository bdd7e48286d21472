"""The instruction files and auto-memory index Claude Code loads before the first prompt, read from
the run's simulated home and project (a synthetic trace's ``header.meta.files``).

Source: code.claude.com/docs/en/context-window (read 2026-12): "Before you type anything: CLAUDE.md,
auto memory, MCP tool names, and skill descriptions all load into context"; its table "What survives
compaction": the project-root CLAUDE.md and unscoped rules, and auto memory, are "re-injected from
disk" (third-party re-readings of the table agree, e.g. dev.to/jgravelle "What survives /compact in
Claude Code", read 2026-10-19). code.claude.com/docs/en/memory: auto memory loads "the first 200 lines
or 25KB" of ``MEMORY.md``.

A run reads only its own session (issue 44): a file is read only when its real path (symlinks
resolved) is inside the home or project folder it was looked for in, and at most MAX_FILE_CHARS of
it (the memory index, at most its 25,000-byte head), so a symlink planted in the run directory
never brings a file of the machine into a request, and a 300 MB file is never read whole.

A synthetic trace names its files for NovaCode (``project/NOVACODE.md``, ``home/.novacode/NOVACODE.md``,
``.novacode/memory/MEMORY.md``); they play the same roles, so a file is taken under Claude Code's name
when it exists (``CLAUDE.md``, ``~/.claude/CLAUDE.md``) and under the trace's otherwise. An imported log
has no files here: its startup content is part of the recorded prompt's opaque size and needs none.
"""

from __future__ import annotations

from pathlib import Path

MEMORY_INDEX_MAX_LINES = 200  # code.claude.com/docs/en/memory: the first 200 lines of MEMORY.md
MEMORY_INDEX_MAX_BYTES = 25_000  # same page: "or 25KB" (read as 25,000 bytes)
MAX_FILE_CHARS = 200_000  # a safety cap on one instruction file (not Claude Code's: NovaCode's loader has the same)
PROJECT_FILES = ("CLAUDE.md", "NOVACODE.md")  # Claude Code's name first, then the synthetic trace's
USER_FILES = (".claude/CLAUDE.md", ".novacode/NOVACODE.md")
MEMORY_INDEXES = (".claude/memory/MEMORY.md", ".novacode/memory/MEMORY.md")
HEADER = ("<system-reminder>\nAs you answer the user's questions, you can use the following context:\n"
          "# claudeMd\nCodebase and user instructions are shown below. Be sure to adhere to these instructions.")
FOOTER = "</system-reminder>"


def _first(root: Path | None, names: tuple[str, ...]) -> Path | None:
    """The first of ``names`` under ``root`` that is a file whose real path is inside ``root``."""
    if root is None:
        return None
    real = root.resolve()
    for n in names:
        p = root / n
        if p.is_file():
            r = p.resolve()
            if real in r.parents:
                return p
    return None


def _head(path: Path, limit: int = MAX_FILE_CHARS) -> str:
    """The first ``limit`` characters of a file, reading no further."""
    with path.open("r", encoding="utf-8", errors="replace") as fh:
        return fh.read(limit)


def _index(text: str) -> str:
    """The head of a memory index Claude Code loads: 200 lines, then 25,000 bytes."""
    head = "\n".join(text.split("\n")[:MEMORY_INDEX_MAX_LINES])
    raw = head.encode("utf-8")
    return raw[:MEMORY_INDEX_MAX_BYTES].decode("utf-8", "ignore") if len(raw) > MEMORY_INDEX_MAX_BYTES else head


def startup_text(home: Path | None, project: Path | None) -> str | None:
    """The startup block (user instructions, project-root instructions, auto-memory index), as Claude
    Code renders it in a ``<system-reminder>``; None when there is none of them."""
    parts = []
    user = _first(home, USER_FILES)
    if user is not None:
        parts.append(f"Contents of {user} (user's private global instructions for all projects):\n\n"
                     + _head(user))
    proj = _first(project, PROJECT_FILES)
    if proj is not None:
        parts.append(f"Contents of {proj} (project instructions, checked into the codebase):\n\n"
                     + _head(proj))
    for root in (project, home):
        idx = _first(root, MEMORY_INDEXES)
        if idx is not None:
            parts.append(f"Contents of {idx} (user's auto-memory, persists across conversations):\n\n"
                         + _index(_head(idx, MEMORY_INDEX_MAX_BYTES)))
    if not parts:
        return None
    return "\n\n".join([HEADER, *parts, FOOTER])
