"""What Claude Code re-attaches after a compaction, rebuilt from what a log holds.

Claude Code is closed source; reported (../shared/peers.md, "Verified against current sources";
readings of ``src/services/compact/compact.ts``): after the summary it re-attaches the most recently
read files — at most 5 (``POST_COMPACT_MAX_FILES_TO_RESTORE``), at most 5,000 tokens each
(``POST_COMPACT_MAX_TOKENS_PER_FILE``), 50,000 in all (``POST_COMPACT_TOKEN_BUDGET``), counted
with its rough estimate of 4 characters per token —, the plan (plan mode), the skills invoked in
the session (5,000 tokens each, 25,000 in all, most recent first) and the todo list; then the
SessionStart hooks' output (not in the log: left out, so it stays a measured residual).

What the log holds is what the agent saw: the file as its latest Read returned it (Claude Code
re-reads the file from disk; an edit since then or a partial read makes the log's text differ), the
body of a skill (the meta message after the Skill tool's result), the latest TodoWrite and
ExitPlanMode inputs. The file tracking and the budgets are NovaCode's restore logic
(:mod:`strategies.novacode.restore`, N-COMP-11 uses the same reported caps); the rendering is
Claude Code's (a Read call and its result per file, as ``<system-reminder>`` meta messages).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from harness.conversation import Message
from strategies.novacode.restore import (
    RESTORE_FILE_TOKENS,
    RESTORE_MAX_FILES,
    RESTORE_SKILL_TOKENS,
    RESTORE_TOTAL_TOKENS,
    ReadTracker,
)

SKILL_TOKENS_EACH = 5_000   # POST_COMPACT_MAX_TOKENS_PER_SKILL (reported, compact.ts)
CHARS_PER_TOKEN = 4.0       # roughTokenCountEstimation: content.length / 4 (reported, Claude Code)
TODO_TOOLS = ("TodoWrite",)
PLAN_TOOLS = ("ExitPlanMode",)


@dataclass(frozen=True)
class ReattachCaps:
    max_files: int = RESTORE_MAX_FILES
    file_tokens: int = RESTORE_FILE_TOKENS
    total_tokens: int = RESTORE_TOTAL_TOKENS
    skill_tokens: int = SKILL_TOKENS_EACH
    skills_total_tokens: int = RESTORE_SKILL_TOKENS
    chars_per_token: float = CHARS_PER_TOKEN


@dataclass
class ReattachTracker:
    """Files read, skills invoked (with their bodies), the latest todo list and plan, as the
    conversation goes (main context only: the caller skips sub-agent spans)."""

    reads: ReadTracker = field(default_factory=ReadTracker)
    todo: Any = None
    plan: str | None = None
    _skill_pending: str | None = None   # a Skill result came: its body is the next meta message

    def on_assistant(self, message: Message) -> None:
        self.reads.on_assistant(message)
        for b in message.blocks:
            if b.type != "tool_use":
                continue
            if b.name in TODO_TOOLS and isinstance(b.input, dict) and "todos" in b.input:
                self.todo = b.input["todos"]
            elif b.name in PLAN_TOOLS and isinstance(b.input, dict) and isinstance(b.input.get("plan"), str):
                self.plan = b.input["plan"]

    def on_results(self, message: Message, index: int) -> None:
        pending = [self.reads._pending.get(b.id) for b in message.blocks if b.type == "tool_result"]
        self.reads.on_results(message, index)
        skills = [key for kind, key in filter(None, pending) if kind == "skill"]
        self._skill_pending = skills[-1] if skills else None

    def on_user(self, message: Message) -> None:
        if self._skill_pending and message.meta.get("meta_record"):
            name = self._skill_pending
            self.reads.skills.pop(name, None)
            self.reads.skills[name] = message.text   # the skill's body, what the model read
        self._skill_pending = None


def _clip(text: str, max_chars: int) -> str:
    return text if len(text) <= max_chars else text[:max_chars] + "\n[... truncated]"


def reattachments(tracker: ReattachTracker, caps: ReattachCaps = ReattachCaps()) -> list[Message]:
    """The meta user messages Claude Code adds after the summary, in its order: files, plan,
    skills, todo list (each message's ``reattached`` meta says which). Sizes are budgeted in
    estimated tokens (``caps.chars_per_token``)."""
    out: list[Message] = []
    per_file = int(caps.file_tokens * caps.chars_per_token)
    budget = int(caps.total_tokens * caps.chars_per_token)
    used = 0
    for path, (text, _i) in list(reversed(tracker.reads.files.items()))[:caps.max_files]:
        kept = _clip(text, per_file)
        if used + len(kept) > budget:
            break
        used += len(kept)
        call = json.dumps({"file_path": path}, ensure_ascii=False)
        out.append(Message.user(f"<system-reminder>\nCalled the Read tool with the following input: {call}\n"
                                f"</system-reminder>\n<system-reminder>\nResult of calling the Read tool:\n{kept}\n"
                                "</system-reminder>", origin="reattach", reattached="file", meta_record=True))
    if tracker.plan:
        out.append(Message.user(f"<system-reminder>\nA plan exists for this session:\n{tracker.plan}\n</system-reminder>",
                                origin="reattach", reattached="plan", meta_record=True))
    left = int(caps.skills_total_tokens * caps.chars_per_token)
    each = int(caps.skill_tokens * caps.chars_per_token)
    skills = []
    for name, body in reversed(tracker.reads.skills.items()):
        if left <= 0:
            break
        kept = _clip(body, min(each, left))
        left -= len(kept)
        skills.append(f"### Skill: {name}\n{kept}")
    if skills:
        out.append(Message.user("<system-reminder>\nThe following skills were invoked in this session:\n\n"
                                + "\n\n".join(skills) + "\n</system-reminder>", origin="reattach", reattached="skills",
                                meta_record=True))
    if tracker.todo:
        out.append(Message.user("<system-reminder>\nYour todo list:\n" + json.dumps(tracker.todo, ensure_ascii=False)
                                + "\n</system-reminder>", origin="reattach", reattached="todo", meta_record=True))
    return out
