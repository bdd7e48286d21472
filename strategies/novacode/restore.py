"""The restore attachment, the second part of a compaction's product (N-COMP-9, N-COMP-11).

Four sections, in order: the contents of the most recently read files (5 by the seed), the
standard procedures of the activated skills, the list of currently available tools, and a notice
that this is reconstructed context. The seed gives the file count only; the size caps are the
values reported for Claude Code (peers.md: 5 files, a 50,000-token budget, 5,000 tokens per file;
skills 25,000 tokens) and are parameters.

:class:`ReadTracker` watches tool calls as they happen (which calls read a file, which activate a
skill) so the attachment can be rebuilt at any compaction; :func:`render_restore` is pure.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxsim.harness.model.conversation import Message, ToolSet

RESTORE_MAX_FILES = 5  # N-COMP-11: "最近读过的 5 个文件内容"
RESTORE_FILE_TOKENS = 5_000  # peers.md, Claude Code (reported): per-file cap
RESTORE_TOTAL_TOKENS = 50_000  # peers.md, Claude Code (reported): budget for all restored files
RESTORE_SKILL_TOKENS = 25_000  # peers.md, Claude Code (reported): skills budget
RESTORE_NOTICE = (  # N-COMP-11: the fourth section
    "The above is reconstructed context; re-read originals when exact text is needed."
)

# tool names that read a file, and the input keys that name it (Claude Code, SWE-agent, OpenHands,
# Codex and the synthetic presets' spellings)
READ_TOOLS = ("Read", "read_file", "view", "View", "ReadFile", "open", "cat")
PATH_KEYS = ("file_path", "path", "filename", "file", "absolute_path")
SKILL_TOOLS = ("Skill",)  # Claude Code's skill activation tool
SKILL_KEYS = ("skill", "command", "name")


def _first(input: Mapping[str, Any] | None, keys: Sequence[str]) -> str | None:
    for k in keys:
        v = (input or {}).get(k)
        if isinstance(v, str) and v:
            return v
    return None


@dataclass
class ReadTracker:
    """Files read and skills activated so far, most recent last, with the index of the history
    message that holds the result (so files still in the verbatim tail are not restored twice)."""

    read_tools: tuple[str, ...] = READ_TOOLS
    skill_tools: tuple[str, ...] = SKILL_TOOLS
    files: OrderedDict[str, tuple[str, int]] = field(default_factory=OrderedDict)
    skills: OrderedDict[str, str] = field(default_factory=OrderedDict)
    _pending: dict[str, tuple[str, str]] = field(default_factory=dict)  # tool_use id -> (kind, key)

    def on_assistant(self, message: Message) -> None:
        for b in message.blocks:
            if b.type != "tool_use" or b.id is None:
                continue
            if b.name in self.read_tools:
                path = _first(b.input, PATH_KEYS)
                if path:
                    self._pending[b.id] = ("file", path)
            elif b.name in self.skill_tools:
                name = _first(b.input, SKILL_KEYS)
                if name:
                    self._pending[b.id] = ("skill", name)

    def on_results(self, message: Message, index: int, originals: Mapping[str, str] | None = None) -> None:
        """``index``: where this message sits in history. ``originals`` maps tool_use ids to the
        full text of results that were spilled (the attachment restores file contents, not the
        placeholder)."""
        for b in message.blocks:
            if b.type != "tool_result" or b.id not in self._pending:
                continue
            kind, key = self._pending.pop(b.id)
            if b.is_error:
                continue
            text = (originals or {}).get(b.id, b.text)
            if kind == "file":
                self.files.pop(key, None)
                self.files[key] = (text, index)
            else:
                self.skills.pop(key, None)
                self.skills[key] = text

    def reindex(self, mapping: Mapping[int, int]) -> None:
        """After a compaction: old history index -> new index (files read in the summarised part
        get -1: they are no longer verbatim anywhere)."""
        for k, (text, i) in list(self.files.items()):
            self.files[k] = (text, mapping.get(i, -1))

    def reset(self) -> None:
        self.files.clear()
        self.skills.clear()
        self._pending.clear()


def _clip(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    return text[:max_chars] + f"\n[... truncated: {len(text) - max_chars:,} more characters; read the file for the rest]"


def render_restore(
    files: Iterable[tuple[str, str]],
    skills: Iterable[tuple[str, str]],
    tools: Iterable[tuple[str, str]],
    *,
    max_files: int = RESTORE_MAX_FILES,
    file_tokens: int = RESTORE_FILE_TOKENS,
    total_tokens: int = RESTORE_TOTAL_TOKENS,
    skill_tokens: int = RESTORE_SKILL_TOKENS,
    chars_per_token: float = 3.5,
) -> str:
    """The attachment text (N-COMP-11). ``files`` and ``skills`` come most recent first.

    Files: at most ``max_files``, each clipped to ``file_tokens``, stopping before the total would
    pass ``total_tokens`` (sizes in estimated tokens, the strategy's only measure). Skills: in
    order until ``skill_tokens`` is spent, the last one clipped to what is left.
    """
    file_cap = int(file_tokens * chars_per_token)
    total_cap = int(total_tokens * chars_per_token)
    parts = ["<restored-context>", "## Recently read files"]
    used, nfiles = 0, 0
    for path, content in files:
        if nfiles >= max_files:
            break
        kept = min(len(content), file_cap)  # budgets count the file's own characters kept
        if used + kept > total_cap:
            break
        parts.append(f"### {path}\n{_clip(content, file_cap)}")
        used += kept
        nfiles += 1
    if nfiles == 0:
        parts.append("(none)")
    parts.append("## Activated skills")
    left = int(skill_tokens * chars_per_token)
    nskills = 0
    for name, text in skills:
        if left <= 0:
            break
        parts.append(f"### {name}\n{_clip(text, left)}")
        left -= min(len(text), left)
        nskills += 1
    if nskills == 0:
        parts.append("(none)")
    parts.append("## Available tools")
    tool_lines = [f"- {name}: {desc.strip().splitlines()[0]}" if desc.strip() else f"- {name}"
                  for name, desc in tools]
    parts.append("\n".join(tool_lines) if tool_lines else "(none)")
    parts.append("## Notice")
    parts.append(RESTORE_NOTICE)
    parts.append("</restored-context>")
    return "\n\n".join(parts)


def restore_attachment(tracker: ReadTracker, tools: ToolSet, tail_start: int, *, skip_in_tail: bool = False,
                       **caps: Any) -> Message:
    """The attachment message (meta ``origin="restore"``).

    N-COMP-11 literally: the 5 most recently read files, whether or not their latest read is still
    in the verbatim tail. ``skip_in_tail`` is the labelled alternative (not in the seed): files whose
    latest read sits in the tail (history index >= ``tail_start``) are skipped, since they are already
    in the window, and the next most recent take their places."""
    files = [(p, text) for p, (text, i) in reversed(tracker.files.items()) if not skip_in_tail or i < tail_start]
    skills = list(reversed(tracker.skills.items()))
    tool_list = [(t.name, t.description) for t in tools.tools]
    return Message.user(render_restore(files, skills, tool_list, **caps), origin="restore")
