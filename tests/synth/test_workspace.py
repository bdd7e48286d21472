"""The workspace: tool outputs computed from the files, in the formats of the real Claude Code logs,
checked on a hand-made three-file corpus (numbers worked out by hand)."""

import pytest
from ctxsim.harness.synth.corpus import parse
from ctxsim.harness.synth.workspace import Workspace, numbered

SRC = "import os\n\n\ndef size(path):\n    if path is None:\n        return 0\n    return os.path.getsize(path)\n"
TEST = "from pkg import size\n\n\ndef test_none():\n    assert size(None) == 0\n"
RUN_FAIL = {"cmd": "python -m pytest tests/test_pkg.py -x -q", "exit": 1,
            "out": "F\nE       assert None == 0\nFAILED tests/test_pkg.py::test_none - assert None == 0\n1 failed in 0.01s"}
RUN_OK = {"cmd": "python -m pytest tests/test_pkg.py -q", "exit": 0, "out": ".\n1 passed in 0.01s"}
MUT = {"path": "src/pkg.py", "line": 5, "old": "    if path is None:", "new": "    if path is not None:", "op": "is -> is not"}


def corpus():
    return parse({
        "project": "pkg", "version": "1", "files": {"src/pkg.py": SRC, "tests/test_pkg.py": TEST, "CHANGES.rst": "Changes\n"},
        "blocks": {"src/pkg.py": [[4, 7, 0, "def", "size"]], "tests/test_pkg.py": [[4, 5, 0, "def", "test_none"]]},
        "segments": {"src/pkg.py": [[1, 1, 0], [2, 7, 0]], "tests/test_pkg.py": [[1, 1, 0], [2, 5, 0]]},
        "clean": {"suite_q": RUN_OK, "suite_v": RUN_OK, "modules": {"tests/test_pkg.py": {"q": RUN_OK, "v": RUN_OK}}},
        "mutations": [dict(MUT, id="m001", function="size", failing=["tests/test_pkg.py::test_none"],
                           module="tests/test_pkg.py", runs={"x": RUN_FAIL, "short": RUN_FAIL, "test": RUN_FAIL,
                                                              "suite": RUN_FAIL}, wrong=[])],
    })


@pytest.fixture
def ws():
    return Workspace(corpus())


def test_read_numbers_lines_like_claude_code_and_honours_offset_and_limit(ws):
    assert numbered(["a", "b"], 9) == "     9\u2192a\n    10\u2192b"
    full = ws.read("src/pkg.py").text
    assert full.split("\n")[3] == "     4\u2192def size(path):" and full.count("\n") == 6   # 7 lines, final newline not a line
    assert ws.read("src/pkg.py", 5, 2).text == "     5\u2192    if path is None:\n     6\u2192        return 0"
    # the size the window chooser uses: characters of the lines + 8 per line ("{n:>6}→" and the newline) - 1
    assert ws.read_size("src/pkg.py", 5, 6) == len(ws.read("src/pkg.py", 5, 2).text)


def test_a_bug_arrives_committed_the_fix_is_an_edit_and_reads_and_git_see_it(ws):
    m = ws.c.mutations[0]
    out = ws.pull(m)
    assert "Fast-forward\n src/pkg.py | 2 +-\n 1 file changed, 1 insertion(+), 1 deletion(-)" in out
    assert "if path is not None:" in ws.read("src/pkg.py").text
    assert ws.git_status().endswith("nothing to commit, working tree clean")   # the bug is in HEAD
    cmd, run = ws.pytest("x")
    assert run.exit == 1 and "assert None == 0" in run.out
    old, new = ws.fix((1, 1))
    assert old == "def size(path):\n    if path is not None:\n        return 0"
    assert new == "def size(path):\n    if path is None:\n        return 0"
    assert "     5\u2192    if path is None:" in ws.read("src/pkg.py").text
    assert ws.pytest("x", "tests/test_pkg.py")[1].exit == 0      # the clean tree's recorded run
    assert ws.pytest("x") is None                                # no bug, no module: nothing to run
    diff = ws.git_diff()
    # one hunk: 3 lines of context each side of line 5 -> lines 2..7 (the file has 7), git's funcname rule
    assert "@@ -2,6 +2,6 @@ import os\n" in diff
    assert "\n-    if path is not None:\n+    if path is None:\n" in diff
    assert ws.commit("Fix size").startswith("[main ") and ws.modified() == []


def test_grep_content_and_files_modes_and_misses(ws):
    # one file: no path prefix; "size" is also in "getsize" (a literal match, as ripgrep does)
    assert ws.grep("size", "src/pkg.py").text == "4:def size(path):\n7:    return os.path.getsize(path)"
    assert ws.grep("def size", None).text == "src/pkg.py:4:def size(path):"
    assert ws.grep("assert size", "tests").text == "tests/test_pkg.py:5:    assert size(None) == 0"
    assert ws.grep("size", None, mode="files_with_matches").text == "Found 2 files\nsrc/pkg.py\ntests/test_pkg.py"
    assert ws.grep("nothing_here", None).text == "No matches found"
    assert ws.grep("getsize|None", "src/pkg.py").text == "5:    if path is None:\n7:    return os.path.getsize(path)"
    ctx = ws.grep("return 0", "src/pkg.py", context=1).text
    assert ctx == "5-    if path is None:\n6:        return 0\n7-    return os.path.getsize(path)"


def test_edits_of_any_file_and_the_diff_of_an_insertion(ws):
    assert ws.replace("CHANGES.rst", "Changes\n", "Changes\n\n-   Fix size.\n")
    assert not ws.replace("CHANGES.rst", "absent", "x")
    assert ws.read("CHANGES.rst").text == "     1\u2192Changes\n     2\u2192\n     3\u2192-   Fix size."
    assert ws.git_diff() .endswith("@@ -1 +1,3 @@\n Changes\n+\n+-   Fix size.")
    assert ws.glob("**/*.rst").text == "/workspace/project/CHANGES.rst"


def test_shell_helpers(ws):
    assert ws.cat("src/pkg.py", 4, 5) == "def size(path):\n    if path is None:"
    assert ws.wc_l(["src/pkg.py", "tests/test_pkg.py"]) == "  7 src/pkg.py\n  5 tests/test_pkg.py\n 12 total"
    assert ws.ls("src") == "pkg.py"
