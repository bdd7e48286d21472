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


def test_each_release_reattaches_what_its_bundle_did():
    """The post-compact restore as the published bundles hold it (reattach.RELEASE_CAPS): no cap but
    the Read tool's 25,000 tokens to 1.0.22; 10,000 a file (over it, its first 100 lines, 2,000 from
    1.0.53) and 50,000 in all from 1.0.23; 5,000 and a path reference from 1.0.85; read time orders the
    files to 1.0.113, the file's mtime from 1.0.114 (the docs' "modified most recently")."""
    from ctxsim.strategies.reattach import caps_for

    def caps(v):
        c = caps_for(v)
        return c.max_files, c.file_tokens, c.total_tokens, c.over_cap, c.order, c.head_lines

    assert caps((1, 0, 17)) == (5, 25_000, 10_000_000, "none", "read", 100)
    assert caps((1, 0, 23)) == caps((1, 0, 51)) == (5, 10_000, 50_000, "head", "read", 100)
    assert caps((1, 0, 53)) == caps((1, 0, 84)) == (5, 10_000, 50_000, "head", "read", 2_000)
    assert caps((1, 0, 85)) == caps((1, 0, 113)) == (5, 5_000, 50_000, "reference", "read", 2_000)
    assert caps((1, 0, 114)) == caps((2, 1, 39)) == (5, 5_000, 50_000, "reference", "modified", 2_000)
    assert caps_for((1, 0, 33), file_tokens=800, total_tokens=None).file_tokens == 800   # a run's own setting wins


def big(n_lines: int, width: int) -> str:
    """``n_lines`` numbered lines of ``width`` characters, ``width / 2`` cl100k tokens each (" x" words)."""
    return numbered({i: " x" * (width // 2) for i in range(1, n_lines + 1)})


def test_a_file_over_the_cap_comes_back_as_its_release_sent_it():
    """A file of 300 lines of 200 characters (62,399 with the numbering, 30,000 cl100k tokens: over 10,000): to
    1.0.51 its first 100 lines (10,000 tokens: not over the cap), from 1.0.53 to 1.0.84 nothing (its first
    2,000 lines are all 300, 30,000 tokens: the re-read fails the same check), from 1.0.85 its path, to
    1.0.22 nothing (600 such lines, 60,000 tokens, are over the Read tool's 25,000 and it is not re-read).
    A file of 3,000 lines of " x x x x" (four words, counted one token a word: 12,000 in all, 8,000 in its
    first 2,000 lines) comes back from 1.0.53 as its first 2,000 lines."""
    from ctxsim.strategies.reattach import caps_for, reattachments

    tr = ReattachTracker()
    tr.file_event("Read", "big.py", {}, big(300, 200))
    head = reattachments(tr, caps_for((1, 0, 33)))
    assert [m.meta["reattached"] for m in head] == ["file"]
    assert "   100\u2192" in head[0].text and "   101\u2192" not in head[0].text
    assert [m.meta["reattached"] for m in reattachments(tr, caps_for((1, 0, 85)))] == ["file_reference"]
    again = ReattachTracker()
    again.file_event("Read", "big.py", {}, big(300, 200))
    assert reattachments(again, caps_for((1, 0, 81))) == []
    long = ReattachTracker()
    long.file_event("Read", "long.py", {}, big(3_000, 8))
    (head2k,) = reattachments(long, caps_for((1, 0, 81)), lambda s: len(s.split()))
    assert "  2000\u2192" in head2k.text and "  2001\u2192" not in head2k.text
    small = ReattachTracker()
    small.file_event("Read", "huge.py", {}, big(600, 200))   # 60,000 tokens: over 25,000
    assert reattachments(small, caps_for((1, 0, 17))) == []


def test_a_file_that_does_not_fit_the_budget_is_skipped_and_the_next_one_tried():
    """The bundles keep each file while the total fits (a filter, not a stop). Budget 50,000 tokens at 4
    characters: 200,000 characters. Files read in this order: c (100 lines of 1,000 characters, about
    101,000), b (the same), a (50 lines of 100, about 5,400); most recently read first: a, b, c. With
    no per-file cap: a and b fit (about 106,000), c would pass 200,000 and is skipped."""
    from ctxsim.strategies.reattach import ReattachCaps, reattachments

    tr = ReattachTracker()
    tr.file_event("Read", "c", {}, big(100, 1_000))
    tr.file_event("Read", "small", {}, big(1, 10))
    tr.file_event("Read", "b", {}, big(100, 1_000))
    tr.file_event("Read", "a", {}, big(50, 100))
    caps = ReattachCaps(file_tokens=1_000_000, total_tokens=50_000, order="read")
    files = [m.text.split('"file_path": "')[1].split('"')[0] for m in reattachments(tr, caps)]
    assert files == ["a", "b", "small"]   # c skipped; the small file, read before b, still fits


def test_a_resumed_launch_knows_the_files_its_release_rebuilt():
    """readFileState is process memory. From 2.0.59 a resumed REPL rebuilds it from the conversation's
    full Reads and Writes; before, it began empty (bundles 2.0.58 / 2.0.59). What the log showed of a
    file is kept either way: an Edit after the resume brings the file back with it."""
    from ctxsim.strategies.reattach import caps_for

    def resumed(rebuilds):
        tr = ReattachTracker()
        tr.file_event("Read", "whole.py", {}, numbered({1: "a = 1"}))
        tr.file_event("Read", "part.py", {"offset": 10}, numbered({10: "def f():", 11: "    return 1"}))
        tr.file_event("Edit", "edited.py", {"old_string": "x", "new_string": "y"})
        tr.new_launch(rebuilds)
        return tr

    assert (caps_for((2, 0, 58)).resume_rebuilds, caps_for((2, 0, 59)).resume_rebuilds) == (False, True)
    assert [p for p, _ in resumed(True).recent_files()] == ["whole.py"]   # a partial read, an Edit: not rebuilt
    tr = resumed(False)
    assert tr.recent_files() == []
    tr.file_event("Edit", "part.py", {"old_string": "return 1", "new_string": "return 2"})
    assert [(p, v.text()) for p, v in tr.recent_files()] == [("part.py", "    10\u2192def f():\n    11\u2192    return 2")]


def test_after_a_compaction_only_the_files_it_reattached_can_come_back_again():
    """The compact routine clears readFileState and re-reads what it re-attaches; a path reference is
    not read. Caps of 1.0.85 on: small.py (one line) comes back whole, big.py (over 5,000 tokens) as
    its path; the next compaction chooses from small.py and what was read since."""
    from ctxsim.strategies.reattach import caps_for, reattachments

    tr = ReattachTracker()
    tr.file_event("Read", "big.py", {}, big(300, 200))
    tr.file_event("Read", "small.py", {}, numbered({1: "x = 1"}))
    assert [m.meta["reattached"] for m in reattachments(tr, caps_for((2, 1, 39)))] == ["file", "file_reference"]
    assert [p for p, _ in tr.recent_files()] == ["small.py"]
    tr.file_event("Read", "next.py", {}, numbered({1: "y = 2"}))
    assert [m.meta.get("path") for m in reattachments(tr, caps_for((2, 1, 39)))] == ["next.py", "small.py"]


def test_the_size_check_counts_a_file_once_its_estimate_passes_a_quarter_of_the_cap():
    """The Read tool's check (1.0.30 cli.js): the estimate, length / 4, clears a file at a quarter of the
    limit or less; past it the API's count of the content decides (StrategyEnv.count_tokens; here one
    token a word). Cap 5,000 tokens."""
    from ctxsim.strategies.reattach import ReattachCaps

    caps = ReattachCaps(file_tokens=5_000)
    words = lambda s: len(s.split())  # noqa: E731
    assert caps.over(" x" * 5_001, words)          # 10,002 characters, an estimate of 2,500: 5,001 tokens, over
    assert not caps.over(" x" * 4_999, words)      # 4,999 tokens
    assert not caps.over("x" * 20_001, words)      # an estimate of 5,000.25, but one token: it comes back whole
    assert caps.over("x" * 20_001)                 # with no count to ask for, the estimate decides
    # an estimate of 1,200 (at most 1,250, a quarter of the cap): never counted
    assert not caps.over(" x" * 2_400, lambda s: 10 * words(s))
    assert caps.over(" x" * 4_000, lambda s: 3 * words(s) // 2)              # 6,000 tokens
    assert not caps.over(" x" * 4_000, lambda s: 6 * words(s) // 5)          # 4,800
