"""@-mentioned files (ctxsim.harness.model.mentions): which paths a prompt mentions, the file's text
rebuilt from the log's reads, writes and edits, and the importer putting it back after the prompt
(visible content, no longer part of the first call's opaque prefix)."""

from __future__ import annotations

from ctxsim.harness.importers import import_file
from ctxsim.harness.model import trace as tr
from ctxsim.harness.model.mentions import _Op, mentioned_paths, read_content, rebuild, render, resolve

from tests.helpers_claude_code import asst, result, text, user, write


def numbered(*lines: str) -> str:
    return "\n".join(f"{i:6d}\u2192{x}" for i, x in enumerate(lines, 1))


def test_mentioned_paths_leave_out_urls_mcp_resources_and_emails():
    p = 'Explain @src/a.py, then @"docs/my file.md" and @./b.txt; see https://x.org/@c @srv:res/x me@host.org'
    assert mentioned_paths(p) == ["src/a.py", "docs/my file.md", "./b.txt"]
    assert mentioned_paths("@a.md and @a.md again") == ["a.md"]


def test_read_content_and_render_round_trip():
    assert read_content(numbered("x = 1", "", "y = 2")) == "x = 1\n\ny = 2"
    assert read_content("File does not exist.") is None
    r = render("/r/a.py", "x = 1\ny = 2")
    assert r.endswith("Result of calling the Read tool:\n     1\u2192x = 1\n     2\u2192y = 2\n</system-reminder>")
    assert 'input: {"file_path": "/r/a.py"}' in r


def test_rebuild_from_a_read_before_with_the_edits_since_or_a_read_after_with_the_edits_undone():
    read = _Op(1, "Read", "/r/a.py", {"file_path": "/r/a.py"}, numbered("a = 1", "b = 2"))
    edit = _Op(3, "Edit", "/r/a.py", {"old_string": "b = 2", "new_string": "b = 3"}, None)
    later = _Op(5, "Read", "/r/a.py", {"file_path": "/r/a.py"}, numbered("a = 1", "b = 3"))
    assert rebuild([read, edit, later], "/r/a.py", 4) == "a = 1\nb = 3"    # read, then the edit applied
    assert rebuild([edit, later], "/r/a.py", 2) == "a = 1\nb = 2"          # read after, the edit undone
    # a partial read is not the whole text; a Write after replaced what the mention saw: unknown
    part = _Op(5, "Read", "/r/a.py", {"file_path": "/r/a.py", "offset": 2}, numbered("b = 3"))
    assert rebuild([part], "/r/a.py", 2) is None
    assert rebuild([_Op(5, "Write", "/r/a.py", {"content": "new"}, None)], "/r/a.py", 2) is None
    # an edit whose text is not in the known file cannot be placed: unknown, never guessed
    bad = _Op(3, "Edit", "/r/a.py", {"old_string": "zzz", "new_string": "q"}, None)
    assert rebuild([read, bad], "/r/a.py", 4) is None


def test_import_puts_a_mentioned_file_after_its_prompt(tmp_path):
    """The prompt mentions @src/a.py; the log reads /r/src/a.py later (2 lines): the file comes back
    as a hidden meta message after the prompt, so the first call sees it as content."""
    body = numbered("def f():", "    return 1")
    recs = [user(0, "Explain @src/a.py"),
            asst(1, "1", {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/r/src/a.py"}}),
            result(2, "t1", body),
            asst(3, "2", text("done"))]
    t = import_file("claude-code", write(tmp_path / "s.jsonl", recs)).trace
    users = [e for e in t.events if isinstance(e, tr.UserEvent)]
    assert [u.text for u in users][0] == "Explain @src/a.py"
    assert users[1].text == render("/r/src/a.py", "def f():\n    return 1")
    assert users[1].meta.get("read_file") == "/r/src/a.py" and users[1].meta.get("meta_record")
    first_call = next(i for i, e in enumerate(t.events) if isinstance(e, tr.AssistantEvent))
    assert t.events.index(users[1]) < first_call
    # a mention no file operation matches stays hidden (nothing added)
    t = import_file("claude-code", write(tmp_path / "u.jsonl", [user(0, "Explain @other.py"), asst(1, "1", text("ok"))])).trace
    assert [e.text for e in t.events if isinstance(e, tr.UserEvent)] == ["Explain @other.py"]


def test_a_mention_is_the_file_it_names_from_the_working_directory(tmp_path):
    """Claude Code reads ``@x`` at ``cwd/x``. A bare name whose file the log reads deeper in the tree
    (``/r/docs/guide/page.md`` for ``@page.md``) was not attached: nothing is put back; ``@docs/guide/page.md``
    from ``/r`` is, and so is an absolute path."""
    body = numbered("# Page", "text")

    def session(prompt: str):
        recs = [user(0, prompt, cwd="/r"),
                asst(1, "1", {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/r/docs/guide/page.md"}}),
                result(2, "t1", body, cwd="/r"),
                asst(3, "2", text("done"))]
        t = import_file("claude-code", write(tmp_path / f"{len(prompt)}.jsonl", recs)).trace
        return [e.meta.get("read_file") for e in t.events if isinstance(e, tr.UserEvent)]
    assert session("fix the names in @page.md") == [None]
    assert session("fix the names in @docs/guide/page.md") == [None, "/r/docs/guide/page.md"]
    assert session("fix @./docs/../docs/guide/page.md") == [None, "/r/docs/guide/page.md"]
    assert session("fix @/r/docs/guide/page.md") == [None, "/r/docs/guide/page.md"]


def test_resolve_follows_the_working_directory_s_path_rules():
    assert resolve("a.md", "/r/x") == "/r/x/a.md"
    assert resolve("../a.md", "/r/x") == "/r/a.md"
    assert resolve("/etc/a.md", "/r/x") == "/etc/a.md"
    assert resolve("src\\a.py", "C:\\repo") == "C:\\repo\\src\\a.py"
    assert resolve("a.md", None) is None
