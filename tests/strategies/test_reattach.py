"""ctxsim.strategies.reattach: a file rebuilt as the log last showed it, and which files come back
(docs, context-window "What survives compaction": the most recently modified first)."""

from __future__ import annotations

from ctxsim.strategies.reattach import FileView, ReattachTracker


def numbered(lines: dict[int, str]) -> str:
    return "\n".join(f"{n:6d}\u2192{t}" for n, t in sorted(lines.items()))


def test_file_view_partial_reads_edits_and_writes():
    v = FileView()
    v.read(numbered({1: "a", 2: "b", 3: "c"}), partial=False)
    v.read(numbered({5: "e"}), partial=True)              # line 4 never shown: not invented
    assert v.lines == {1: "a", 2: "b", 3: "c", 5: "e"}
    v.edit("b\nc", "B")                                   # 2 lines become 1: line 5 moves to 4
    assert v.lines == {1: "a", 2: "B", 4: "e"}
    assert v.text() == "     1\u2192a\n     2\u2192B\n     4\u2192e"
    v.edit("zzz", "q")                                    # not in the known lines: counted, not guessed
    assert v.edits_not_placed == 1 and v.lines == {1: "a", 2: "B", 4: "e"}
    v.read("File unchanged since last read", partial=False)   # a stub never replaces the text
    assert v.lines == {1: "a", 2: "B", 4: "e"}
    v.write("one\ntwo")
    assert v.lines == {1: "one", 2: "two"}
    v.edit("", "created")                                 # an empty old_string creates the file
    assert v.lines == {1: "created"}


def test_recent_files_modified_first_then_read_by_latest_read():
    tr = ReattachTracker()
    tr.file_event("Read", "f1", {}, numbered({1: "x"}))
    tr.file_event("Read", "f2", {}, numbered({1: "y"}))
    tr.file_event("Edit", "f2", {"old_string": "y", "new_string": "z"})
    tr.file_event("Read", "f3", {}, numbered({1: "w"}))
    tr.file_event("Read", "f1", {}, numbered({1: "x"}))
    assert [p for p, _ in tr.recent_files()] == ["f2", "f1", "f3"]           # f2 edited: modified most recently
    assert [p for p, _ in tr.recent_files("read")] == ["f1", "f3", "f2"]     # by last access
    assert tr.files["f2"].lines == {1: "z"}
