"""The restore attachment (N-COMP-9, N-COMP-11)."""

from __future__ import annotations

from ctxsim.harness.model.conversation import Block, Message, ToolDef, ToolSet
from ctxsim.strategies.novacode.restore import (
    RESTORE_FILE_TOKENS,
    RESTORE_MAX_FILES,
    RESTORE_NOTICE,
    RESTORE_SKILL_TOKENS,
    RESTORE_TOTAL_TOKENS,
    ReadTracker,
    render_restore,
    restore_attachment,
)

TOOLS = ToolSet((ToolDef("Read", "Read a file.\nMore lines."), ToolDef("Bash", "Run a command"), ToolDef("Skill")))


def read_call(tid: str, path: str, tool: str = "Read") -> Message:
    return Message("assistant", (Block.tool_use(tid, tool, {"file_path": path}),))


def result(tid: str, text: str, is_error: bool = False) -> Message:
    return Message("user", (Block.tool_result(tid, text, is_error),))


def test_defaults_are_the_reported_claude_code_values():
    assert (RESTORE_MAX_FILES, RESTORE_FILE_TOKENS, RESTORE_TOTAL_TOKENS, RESTORE_SKILL_TOKENS) == (
        5, 5_000, 50_000, 25_000)


def test_n_comp_11_four_sections_in_order():
    text = render_restore([("a.py", "A")], [("deploy", "step 1")], [("Read", "Read a file.")])
    i_files = text.index("## Recently read files")
    i_skills = text.index("## Activated skills")
    i_tools = text.index("## Available tools")
    i_notice = text.index(RESTORE_NOTICE)
    assert i_files < i_skills < i_tools < i_notice
    assert "### a.py\nA" in text and "### deploy\nstep 1" in text and "- Read: Read a file." in text
    assert RESTORE_NOTICE == "The above is reconstructed context; re-read originals when exact text is needed."


def test_n_comp_11_five_most_recent_files_most_recent_first():
    tr = ReadTracker()
    for i in range(7):
        tr.on_assistant(read_call(f"t{i}", f"/src/f{i}.py"))
        tr.on_results(result(f"t{i}", f"content {i}"), index=2 * i + 1)
    # f2 is read again last: it moves to the front
    tr.on_assistant(read_call("t9", "/src/f2.py"))
    tr.on_results(result("t9", "content 2 v2"), index=20)
    msg = restore_attachment(tr, TOOLS, tail_start=100)
    assert msg.meta["origin"] == "restore" and msg.role == "user"
    text = msg.text
    shown = [p for p in ("f2", "f6", "f5", "f4", "f3", "f1", "f0") if f"### /src/{p}.py" in text]
    assert shown == ["f2", "f6", "f5", "f4", "f3"]
    assert text.index("/src/f2.py") < text.index("/src/f6.py") < text.index("/src/f3.py")
    assert "content 2 v2" in text and "content 2\n" not in text


def test_n_comp_11_the_5_most_recently_read_literally_even_when_still_in_the_tail():
    """N-COMP-11 as the seed says it ("最近读过的 5 个文件内容"): /b.py was read at index 7, inside a
    tail starting at 5; it is restored all the same, most recent first."""
    tr = ReadTracker()
    tr.on_assistant(read_call("t1", "/a.py"))
    tr.on_results(result("t1", "A"), index=3)
    tr.on_assistant(read_call("t2", "/b.py"))
    tr.on_results(result("t2", "B"), index=7)
    text = restore_attachment(tr, TOOLS, tail_start=5).text
    assert "### /b.py\nB" in text and "### /a.py\nA" in text
    assert text.index("### /b.py") < text.index("### /a.py")


def test_n_comp_11_skip_in_tail_alternative_restores_the_next_most_recent_instead():
    """The labelled alternative: six files read at indices 1..11 (odd), the tail starts at 10, so f5
    (index 11) is in the window already; skipped, the five before it are restored."""
    tr = ReadTracker()
    for i in range(6):
        tr.on_assistant(read_call(f"t{i}", f"/f{i}.py"))
        tr.on_results(result(f"t{i}", f"content {i}"), index=2 * i + 1)
    text = restore_attachment(tr, TOOLS, tail_start=10, skip_in_tail=True).text
    assert [i for i in range(6) if f"### /f{i}.py" in text] == [0, 1, 2, 3, 4]
    literal = restore_attachment(tr, TOOLS, tail_start=10).text
    assert [i for i in range(6) if f"### /f{i}.py" in literal] == [1, 2, 3, 4, 5]


def test_n_comp_11_failed_reads_and_other_tools_are_ignored():
    tr = ReadTracker()
    tr.on_assistant(Message("assistant", (Block.tool_use("t1", "Bash", {"command": "ls"}),)))
    tr.on_results(result("t1", "x"), 1)
    tr.on_assistant(read_call("t2", "/missing.py"))
    tr.on_results(result("t2", "No such file", is_error=True), 3)
    assert not tr.files
    assert "## Recently read files\n\n(none)" in restore_attachment(tr, TOOLS, 10).text


def test_n_comp_11_spilled_read_restores_the_original_content():
    tr = ReadTracker()
    tr.on_assistant(read_call("t1", "/big.py"))
    tr.on_results(result("t1", "<persisted-output>..."), 1, originals={"t1": "def f(): pass"})
    assert tr.files["/big.py"] == ("def f(): pass", 1)


def test_n_comp_11_skills_section():
    tr = ReadTracker()
    tr.on_assistant(Message("assistant", (Block.tool_use("s1", "Skill", {"skill": "release"}),)))
    tr.on_results(result("s1", "1. bump version\n2. tag"), 1)
    text = restore_attachment(tr, TOOLS, 10).text
    assert "### release\n1. bump version\n2. tag" in text


def test_file_caps_per_file_and_total():
    """chars_per_token 1 for round numbers: per-file cap 10 chars, total 25 chars. Files of 30, 30,
    30 chars: each clipped to 10 (plus a truncation note, not counted); 10 + 10 = 20, a third would
    make 30 > 25: two files."""
    files = [(f"f{i}", "x" * 30) for i in range(3)]
    text = render_restore(files, [], [], file_tokens=10, total_tokens=25, chars_per_token=1.0)
    assert "### f0" in text and "### f1" in text and "### f2" not in text
    text = render_restore(files, [], [], file_tokens=10, total_tokens=200, chars_per_token=1.0, max_files=2)
    assert "### f1" in text and "### f2" not in text
    assert "x" * 11 not in text and "20 more characters" in text


def test_skill_budget():
    text = render_restore([], [("a", "y" * 30), ("b", "z" * 30)], [], skill_tokens=40, chars_per_token=1.0)
    assert "y" * 30 in text and "z" * 10 in text and "z" * 11 not in text


def test_reindex_after_compaction():
    tr = ReadTracker()
    tr.on_assistant(read_call("t1", "/a.py"))
    tr.on_results(result("t1", "A"), 3)
    tr.on_assistant(read_call("t2", "/b.py"))
    tr.on_results(result("t2", "B"), 9)
    tr.reindex({9: 4})
    assert tr.files["/a.py"] == ("A", -1) and tr.files["/b.py"] == ("B", 4)
