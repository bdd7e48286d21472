"""Claude Code's ``attachment`` records (2.1.105+ logs): content the agent sent the model beside the
conversation, as meta user messages (``<system-reminder>`` blocks), that the log holds as data.

The log records what each attachment carried (a skill listing, a file's text, a plan, a skill body,
an edited file's snippet, the deferred tools added) but not the words Claude Code wraps it in. This
module turns one record into the text the model received: the recorded content verbatim, in a short
frame. The frames are assumed (a few dozen tokens each, close to the wording the logs' summaries
quote); the content is what carries the size. Kinds whose text the log does not hold at all (plan
mode's and auto mode's fixed reminders, permissions) are named by :func:`render` so the importer
counts them instead of guessing.

Measured on the development population before these were imported: the 48 sessions with attachment
records fitted a median token scale of 1.73 (the others 1.19): the scale was standing in for this
content (skill listings alone 3.3M characters in 486 records).
"""

from __future__ import annotations

import json
from typing import Any

from ctxsim.harness.importers.common import flatten_content

# the kinds Claude Code adds after a compaction in place of the files, plan and skills it had: where
# the log records them, the replay takes the log's instead of modelling its own (strategies/reattach.py)
REATTACH_KINDS = ("file", "compact_file_reference", "plan_file_reference", "invoked_skills")
# kinds whose reminder is a fixed text of Claude Code's that the log does not hold (counted, not sent)
UNRECORDED_TEXT = ("plan_mode", "plan_mode_exit", "plan_mode_reentry", "auto_mode", "auto_mode_exit",
                   "command_permissions")
# Claude Code 1.0.51-2.1.12 (cli.js, read): when the agent's todo file changed since the last request,
# the next one carries a "todo" attachment (context "file-watch") with the whole list as JSON.stringify
# writes it. TodoWrite writes that file, so its step sends the list twice: in the call's input and in this
# reminder. Logs before 2.1.105 record no attachments: the importer rebuilds it from TodoWrite's input
# (claude_code.TODO_ATTACHMENT_UNLOGGED_BEFORE). Measured on the development population (1.0.80-2.1.15):
# a step that adds one TodoWrite result grew the context beyond its counted content by a median 0.86x
# this reminder's size (938 steps; 65% within 0.6-1.3x, 17% under 0.3x: no reminder, cause not found);
# second outside sample 0.79x (311 steps)
TODO_CHANGED = ("Your todo list has changed. DO NOT mention this explicitly to the user. Here are the latest "
                "contents of your todo list:\n\n{}. Continue on with the tasks at hand if applicable.")
READ_LINE = "{n:>6}\u2192{line}"   # the Read tool's line numbering, as the logs' Read results show it


def _reminder(text: str) -> str:
    return f"<system-reminder>\n{text}\n</system-reminder>"


def _numbered(text: str, start: int) -> str:
    return "\n".join(READ_LINE.format(n=start + i, line=line) for i, line in enumerate(text.split("\n")))


def _s(v: Any) -> str:
    return v if isinstance(v, str) else "" if v is None else json.dumps(v, ensure_ascii=False)


def todo_changed(todos: list[Any]) -> str:
    """The reminder a changed todo list is sent in (:data:`TODO_CHANGED`)."""
    return _reminder(TODO_CHANGED.format(json.dumps(todos, ensure_ascii=False, separators=(",", ":"))))


def content_blocks(v: Any) -> bool:
    """Whether ``v`` is message content as blocks (a list of ``{"type": ...}`` objects), as a queued
    prompt with a pasted image is: its text is taken block by block, never its JSON."""
    return isinstance(v, list) and any(isinstance(b, dict) and "type" in b for b in v)


def _content(v: Any) -> str:
    """A field that may hold message content: blocks flattened as a user message's are (an image
    becomes a placeholder, importers.common.flatten_content), anything else as :func:`_s` gives it."""
    return flatten_content(v)[0] if content_blocks(v) else _s(v)


def _file_parts(a: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A ``file`` attachment's ``content`` and ``content.file`` objects ({} where absent)."""
    c = a.get("content") if isinstance(a.get("content"), dict) else {}
    return c, c.get("file") if isinstance(c.get("file"), dict) else {}


def file_path(a: dict[str, Any]) -> str | None:
    """The path a ``file`` attachment holds the text of (what the agent counts as read), else None."""
    if a.get("type") != "file":
        return None
    path = _file_parts(a)[1].get("filePath") or a.get("filename")
    return path if isinstance(path, str) and path else None


def render(a: dict[str, Any]) -> tuple[str | None, str]:
    """(text the model received, or None; why not, when None) for one ``attachment`` object."""
    kind = str(a.get("type") or "?")
    if kind == "skill_listing":
        return _reminder("The following skills are available for use with the Skill tool:\n\n" + _s(a.get("content"))), ""
    if kind == "file":
        c, f = _file_parts(a)
        if c.get("type") != "text" or not isinstance(f.get("content"), str):
            return None, f"file attachment of type {c.get('type')!r} (no text in the log)"
        path = _s(f.get("filePath") or a.get("filename"))
        start = f.get("startLine") if isinstance(f.get("startLine"), int) else 1
        return (_reminder("Called the Read tool with the following input: " + json.dumps({"file_path": path}))
                + "\n" + _reminder("Result of calling the Read tool:\n" + _numbered(f["content"], start))), ""
    if kind == "compact_file_reference":
        return _reminder(f"Note: {_s(a.get('filename'))} was read before the last conversation was summarized, but "
                         "the contents are too large to include. Use Read tool if you need to access it."), ""
    if kind == "plan_file_reference":
        return _reminder(f"A plan file exists from plan mode at: {_s(a.get('planFilePath'))}\n\nPlan contents:\n\n"
                         + _s(a.get("planContent"))), ""
    if kind == "invoked_skills":
        skills = a.get("skills") if isinstance(a.get("skills"), list) else []
        body = "\n\n---\n\n".join(f"### Skill: {_s(s.get('name'))}\nPath: {_s(s.get('path'))}\n\n{_s(s.get('content'))}"
                                  for s in skills if isinstance(s, dict))
        return _reminder("The following skills were invoked in this session. Continue to follow these "
                         "guidelines:\n\n" + body), ""
    if kind == "edited_text_file":
        return _reminder(f"Note: {_s(a.get('filename'))} was modified, either by the user or by a linter. Here are "
                         "the relevant changes (shown with line numbers):\n" + _s(a.get("snippet"))), ""
    if kind == "task_reminder":
        items = a.get("content") if isinstance(a.get("content"), list) else []
        listed = ("\n\nHere are the existing tasks:\n\n" + "\n".join(_s(i) for i in items)) if items else ""
        return _reminder("The task tools haven't been used recently. If you're working on tasks that would benefit "
                         "from tracking progress, consider using them." + listed), ""
    if kind == "deferred_tools_delta":
        added = [_s(x) for x in a.get("addedLines") or [] if x]
        removed = [_s(x) for x in a.get("removedNames") or [] if x]
        parts = (["The following deferred tools are now available via ToolSearch:\n" + "\n".join(added)] if added else []) + \
                (["The following deferred tools are no longer available:\n" + "\n".join(removed)] if removed else [])
        return (_reminder("\n\n".join(parts)), "") if parts else (None, "deferred_tools_delta with no change")
    if kind == "queued_command":
        return _reminder("The user sent the following message:\n" + _content(a.get("prompt"))), ""
    if kind == "todo":
        items = a.get("content")
        if not isinstance(items, list) or not items:
            return None, ("todo attachment without a list of items (an empty list is Claude Code's fixed reminder, "
                          "not in the log)")
        return todo_changed(items), ""
    if kind == "date_change":
        return _reminder(f"The date has changed. Today's date is now {_s(a.get('newDate'))}."), ""
    if kind in UNRECORDED_TEXT:
        return None, f"{kind} (Claude Code's fixed reminder text, not in the log)"
    return None, f"{kind} (an attachment kind ctxsim does not know)"
