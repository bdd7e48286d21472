"""Files a Claude Code prompt @-mentions, rebuilt from the same log.

Claude Code's docs (code.claude.com/docs/en/common-workflows, "Reference files and directories"):
``> Explain the logic in @src/utils/auth.js`` — "This includes the full content of the file in the
conversation". The transcript keeps the prompt's text only, so the file is hidden content of that
turn: it lands in the first call's opaque prefix and would be taken for startup content (the
codemie session 624a4a58 opens with an @-mention of a 1,388-line design document).

Where the log holds the file's whole text — a full Read or a Write of the path the mention names
(against the prompt's working directory: :func:`resolve`), before the mention (the Edits between
applied) or after it (the Edits between undone, no Write between) — the importer puts it back
where it was sent, rendered as Claude Code renders a file it attaches (the
Read call and its numbered result, as in the post-compaction attachments), so it is visible
content, summarised away at a compaction like the rest of the turn. A mention the log cannot rebuild
exactly (no whole text, an Edit whose text is not found once, a path matching no file operation or
several) is left hidden: it stays in its call's hidden-content delta (``ctxsim fidelity``). A change
made outside the tools (a shell command, another program) is not in the log: the rebuilt text then
differs from what was sent, which no log can tell.
"""

from __future__ import annotations

import json
import ntpath
import posixpath
import re
from dataclasses import dataclass
from typing import Any

from ctxsim.harness.model import trace as tr

# "@path" at the start or after whitespace; quoted paths with spaces; trailing punctuation is not part of it
MENTION = re.compile(r'(?:^|(?<=\s))@("[^"]+"|[^\s"]+)')
TRAILING = ",.;:!?)]}'"
NUMBERED_LINE = re.compile(r"^ *(\d+)\u2192(.*)$")   # Claude Code's Read result, one line each
FILE_TOOLS = ("Read", "Write", "Edit", "MultiEdit")
WINDOWS_PATH = re.compile(r"^[A-Za-z]:[\\/]")   # a cwd such as C:\\repo: Windows path rules


def _paths(cwd: str) -> Any:
    return ntpath if WINDOWS_PATH.match(cwd) else posixpath


def _norm(path: str, cwd: str) -> str:
    return _paths(cwd).normpath(path)


def resolve(mention: str, cwd: str | None) -> str | None:
    """The file Claude Code reads for an @-mention: an absolute path as it is, any other one against
    the working directory the prompt's record names (``isAbsolute(p) ? resolve(p) : resolve(cwd(), p)``
    in @anthropic-ai/claude-code 1.0.30 cli.js, the prompt's mentions read through it). A bare file name
    is the file of that name in the working directory, not one deeper in the tree. None without a cwd."""
    if not isinstance(cwd, str) or not cwd:
        return None
    paths = _paths(cwd)
    return paths.normpath(mention if paths.isabs(mention) else paths.join(cwd, mention))


def mentioned_paths(text: str) -> list[str]:
    """The @-mentioned paths of a prompt, in order (URLs and MCP resources left out)."""
    out = []
    for m in MENTION.finditer(text):
        p = m.group(1).strip('"').rstrip(TRAILING)
        if p and "://" not in p and not re.match(r"^[\w-]+:", p) and p not in out:
            out.append(p)
    return out


def read_content(result: str) -> str | None:
    """The file text of a whole-file Read result (its numbered lines, numbers removed)."""
    lines = [m.group(2) for m in map(NUMBERED_LINE.match, result.split("\n")) if m]
    return "\n".join(lines) if lines else None


def read_attachment(path: str, result: str) -> str:
    """A file Claude Code attaches (an @-mention, a re-attachment after a compaction), as the model
    reads it: the Read call and its result, as two ``<system-reminder>`` parts."""
    return (f"<system-reminder>\nCalled the Read tool with the following input: "
            f"{json.dumps({'file_path': path}, ensure_ascii=False)}\n</system-reminder>\n"
            f"<system-reminder>\nResult of calling the Read tool:\n{result}\n</system-reminder>")


def render(path: str, content: str) -> str:
    """:func:`read_attachment` of a file's whole text, numbered as Claude Code's Read numbers it."""
    return read_attachment(path, "\n".join(f"{i:6d}\u2192{line}" for i, line in enumerate(content.split("\n"), 1)))


@dataclass(frozen=True)
class _Op:
    pos: int            # index of the item the op's outcome is known at
    tool: str
    path: str
    input: dict[str, Any]
    result: str | None  # a Read's result text


def edits_of(tool: str, inp: dict[str, Any]) -> list[dict[str, Any]]:
    """The well-formed {old_string, new_string[, replace_all]} edits of an Edit or MultiEdit input."""
    edits = inp.get("edits") if tool == "MultiEdit" else [inp]
    return [e for e in edits if isinstance(e, dict) and isinstance(e.get("old_string"), str)
            and isinstance(e.get("new_string"), str)] if isinstance(edits, list) else []


def _apply(content: str, e: dict[str, Any], undo: bool) -> str | None:
    old, new = (e["new_string"], e["old_string"]) if undo else (e["old_string"], e["new_string"])
    n = content.count(old) if old else 0
    if n == 0 or (n > 1 and not e.get("replace_all")):
        return None
    return content.replace(old, new)


def _file_ops(items: list[tuple[str, Any]], calls: dict[str, Any]) -> list[_Op]:
    """The main context's successful Read/Write/Edit operations, in the order they took effect."""
    uses: dict[str, tr.ToolUseContent] = {}
    out = []
    for pos, (kind, item) in enumerate(items):
        if kind == "call" and not calls[item].sidechain:
            for b in calls[item].blocks:
                if isinstance(b, tr.ToolUseContent) and b.name in FILE_TOOLS and isinstance(b.input.get("file_path"), str):
                    uses[b.id] = b
        elif kind == "result" and not item.get("side") and item["id"] in uses and not item["is_error"]:
            b = uses.pop(item["id"])
            out.append(_Op(pos, b.name, b.input["file_path"], dict(b.input), item["text"]))
    return out


def _whole(op: _Op) -> str | None:
    if op.tool == "Write":
        c = op.input.get("content")
        return c if isinstance(c, str) else None
    if op.tool == "Read" and "offset" not in op.input and "limit" not in op.input:
        return read_content(op.result or "")
    return None


def rebuild(ops: list[_Op], path: str, at: int) -> str | None:
    """The text of ``path`` as it was at item ``at``, from the log's operations on it."""
    mine = [o for o in ops if o.path == path]
    before = [o for o in mine if o.pos < at]
    base = next(((i, w) for i in range(len(before) - 1, -1, -1) if (w := _whole(before[i])) is not None), None)
    if base is not None:   # the latest whole text before, then the edits since
        content = base[1]
        for o in before[base[0] + 1:]:
            for e in edits_of(o.tool, o.input):
                content = _apply(content, e, undo=False)
                if content is None:
                    return None
        return content
    after = [o for o in mine if o.pos > at]
    for i, o in enumerate(after):   # the earliest whole text after, the edits between undone
        if o.tool == "Write":
            return None            # what it replaced is not in the log
        w = _whole(o)
        if w is None:
            continue
        content: str | None = w
        for between in reversed(after[:i]):
            for e in reversed(edits_of(between.tool, between.input)):
                content = _apply(content, e, undo=True) if content is not None else None
        return content
    return None


def recover(items: list[tuple[str, Any]], calls: dict[str, Any]) -> dict[int, list[tuple[str, str]]]:
    """For each main-context prompt (by ``id`` of its item) that @-mentions a file the log can
    rebuild: ``[(absolute path, rendered attachment)]``. A mention is the file :func:`resolve` names
    against the prompt's ``cwd``; a record with no ``cwd`` matches the one path of the log's file
    operations that ends with the mention."""
    ops = _file_ops(items, calls)
    paths = sorted({o.path for o in ops})
    out: dict[int, list[tuple[str, str]]] = {}
    for pos, (kind, item) in enumerate(items):
        if kind != "user" or item.get("meta") or item.get("side"):
            continue
        for m in mentioned_paths(item["text"]):
            at = resolve(m, item.get("cwd"))
            if at is not None:
                hits = [p for p in paths if _norm(p, item["cwd"]) == at]
            else:
                rel = m
                while rel.startswith("./"):   # "./a" is "a"; "../a", ".env" and ".github/x" keep their dots
                    rel = rel[2:]
                hits = [p for p in paths if p == m or p.endswith("/" + rel)]
            if len(hits) != 1:
                continue
            content = rebuild(ops, hits[0], pos)
            if content is not None:
                out.setdefault(id(item), []).append((hits[0], render(hits[0], content)))
    return out
