"""Instruction files on real temporary directories (N-INST-1…3)."""

from __future__ import annotations

from pathlib import Path

from ctxsim.strategies.novacode.instructions import MAX_INCLUDE_DEPTH, discover, find_git_root, load
from hypothesis import given, settings
from hypothesis import strategies as st


def w(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def tree(tmp_path: Path) -> tuple[Path, Path, Path]:
    """home/, repo/ (a git root) and repo/pkg/sub (the working directory)."""
    home, repo = tmp_path / "home", tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    cwd = repo / "pkg" / "sub"
    cwd.mkdir(parents=True)
    home.mkdir()
    return home, repo, cwd


def test_n_inst_1_priority_order_from_git_root_down_to_cwd(tmp_path):
    """N-INST-1: user global, then every level root → cwd, then the local override."""
    home, repo, cwd = tree(tmp_path)
    w(home / ".novacode" / "NOVACODE.md", "USER RULE")
    w(repo / "NOVACODE.md", "ROOT RULE")
    w(repo / "pkg" / "NOVACODE.md", "PKG RULE")
    w(cwd / "NOVACODE.md", "SUB RULE")
    w(cwd / "NOVACODE.local.md", "LOCAL RULE")
    w(tmp_path / "NOVACODE.md", "ABOVE THE GIT ROOT")  # outside the project: never read
    found = discover(home, cwd)
    assert [(p.relative_to(tmp_path).as_posix(), s) for p, s in found] == [
        ("home/.novacode/NOVACODE.md", "user"), ("repo/NOVACODE.md", "project"),
        ("repo/pkg/NOVACODE.md", "project"), ("repo/pkg/sub/NOVACODE.md", "project"),
        ("repo/pkg/sub/NOVACODE.local.md", "local")]
    text = load(home, cwd).text
    order = [text.index(x) for x in ("USER RULE", "ROOT RULE", "PKG RULE", "SUB RULE", "LOCAL RULE")]
    assert order == sorted(order)
    assert "ABOVE THE GIT ROOT" not in text


def test_n_inst_1_git_root_found_by_walking_up(tmp_path):
    home, repo, cwd = tree(tmp_path)
    assert find_git_root(cwd) == repo.resolve()
    assert find_git_root(tmp_path / "home") is None or find_git_root(tmp_path / "home") != repo


def test_n_inst_1_without_git_root_only_cwd(tmp_path):
    """No .git above: only the working directory's own files (walking to / would read strangers')."""
    cwd = tmp_path / "a" / "b"
    w(tmp_path / "a" / "NOVACODE.md", "PARENT")
    w(cwd / "NOVACODE.md", "HERE")
    if find_git_root(cwd) is None:
        assert [p.name for p, _ in discover(None, cwd)] == ["NOVACODE.md"]
        assert "PARENT" not in load(None, cwd).text


def test_n_inst_2_include_expanded_inline(tmp_path):
    home, repo, cwd = tree(tmp_path)
    w(repo / "NOVACODE.md", "before @./docs/style.md after")
    w(repo / "docs" / "style.md", "USE TABS")
    s = load(home, repo)
    assert "before USE TABS after" in s.text
    assert s.included == [(repo / "docs" / "style.md").resolve()]


def test_n_inst_2_include_cycle_terminates(tmp_path):
    """N-INST-2: a.md → b.md → a.md: de-duplicated by absolute path, each expanded once."""
    home, repo, cwd = tree(tmp_path)
    w(repo / "NOVACODE.md", "ROOT @./a.md")
    w(repo / "a.md", "A-TEXT @./sub/../b.md")
    w(repo / "b.md", "B-TEXT @./a.md @./NOVACODE.md")
    s = load(home, repo)
    assert s.text.count("A-TEXT") == 1 and s.text.count("B-TEXT") == 1 and s.text.count("ROOT") == 1
    assert len(s.included) == 2
    assert sum("already included" in x for x in s.warnings) == 2  # b's refs to a and to the root


def test_n_inst_2_sixth_level_include_not_expanded(tmp_path):
    """N-INST-2: root → L1 → … → L5 expanded (5 levels); L5's reference to L6 stays as written."""
    home, repo, cwd = tree(tmp_path)
    w(repo / "NOVACODE.md", "L0 @./l1.md")
    for i in range(1, 7):
        w(repo / f"l{i}.md", f"L{i}-TEXT" + (f" @./l{i + 1}.md" if i < 7 else ""))
    s = load(home, repo)
    assert MAX_INCLUDE_DEPTH == 5
    for i in range(1, 6):
        assert f"L{i}-TEXT" in s.text
    assert "L6-TEXT" not in s.text and "@./l6.md" in s.text
    assert any("deeper than 5 levels" in x for x in s.warnings)


def test_n_inst_2_include_inside_fence_not_expanded(tmp_path):
    """N-INST-2: inside ``` (or ~~~) fences and inline code spans the reference is literal."""
    home, repo, cwd = tree(tmp_path)
    w(repo / "x.md", "SECRET")
    w(repo / "NOVACODE.md", "```sh\ncat @./x.md\n```\n~~~~\n@./x.md\n~~~~\nspan `@./x.md` here\nreal @./x.md")
    s = load(home, repo)
    assert s.text.count("SECRET") == 1
    assert "cat @./x.md" in s.text and "`@./x.md`" in s.text and "real SECRET" in s.text


def test_n_inst_2_fence_needs_matching_close(tmp_path):
    """A ```` fence is not closed by ``` (CommonMark): the reference after ``` is still fenced."""
    home, repo, cwd = tree(tmp_path)
    w(repo / "x.md", "SECRET")
    w(repo / "NOVACODE.md", "````\n```\n@./x.md\n````\n@./x.md")
    assert load(home, repo).text.count("SECRET") == 1


def test_n_inst_2_home_and_missing_and_email(tmp_path):
    home, repo, cwd = tree(tmp_path)
    w(home / "shared.md", "FROM HOME")
    w(repo / "NOVACODE.md", "@~/shared.md and @./missing.md and mail me@example.com")
    s = load(home, repo)
    assert "FROM HOME" in s.text and "@./missing.md" in s.text and "me@example.com" in s.text
    assert any("no such file" in x for x in s.warnings)


def test_n_inst_3_resident_message(tmp_path):
    """N-INST-3: one user message (origin=instructions) naming each file; none when no files."""
    home, repo, cwd = tree(tmp_path)
    assert load(home, cwd).message() is None
    w(repo / "NOVACODE.md", "RULE")
    m = load(home, cwd).message()
    assert m.role == "user" and m.meta["origin"] == "instructions"
    assert str((repo / "NOVACODE.md").resolve()) in m.text and "RULE" in m.text


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.integers(0, 7), max_size=4), min_size=8, max_size=8))
def test_n_inst_2_any_include_graph_terminates_each_file_once(tmp_path_factory, edges):
    """N-INST-2 property: whatever the include graph (cycles, self-includes, diamonds), loading
    terminates, every file's text appears at most once, and only files reachable from the root
    within 5 levels appear."""
    repo = tmp_path_factory.mktemp("g")
    (repo / ".git").mkdir()
    for i, outs in enumerate(edges):
        name = "NOVACODE.md" if i == 0 else f"f{i}.md"
        refs = " ".join("@./NOVACODE.md" if j == 0 else f"@./f{j}.md" for j in outs)
        w(repo / name, f"<F{i}> {refs}")
    text = load(None, repo).text
    # reachable within 5 include levels (breadth-first distances from the root)
    dist = {0: 0}
    frontier = [0]
    while frontier:
        nxt = []
        for a in frontier:
            for b in edges[a]:
                if b not in dist:
                    dist[b] = dist[a] + 1
                    nxt.append(b)
        frontier = nxt
    for i in range(8):
        n = text.count(f"<F{i}>")
        assert n <= 1
        if n:
            assert i in dist and dist[i] <= MAX_INCLUDE_DEPTH
    assert text.count("<F0>") == 1
