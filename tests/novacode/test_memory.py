"""Auto memory on real temporary directories (N-MEM-1…7, the pure parts and the file operations)."""

from __future__ import annotations

import os

import pytest
from ctxsim.harness.model.conversation import Block, Message
from ctxsim.strategies.novacode.memory import (
    INDEX_FILE,
    INDEX_MAX_BYTES,
    INDEX_MAX_LINES,
    ConsolidationState,
    ExtractionScheduler,
    Memory,
    MemoryDirs,
    MemoryFormatError,
    apply_consolidation,
    consolidation_gate,
    ends_turn,
    load_memories,
    local_consolidate,
    local_extract,
    local_select,
    parse_consolidation,
    parse_memory,
    parse_memory_blocks,
    parse_selection,
    read_index,
    render_index,
    render_injection,
    scan_manifests,
    truncate_index,
    write_memory,
)
from hypothesis import given, settings
from hypothesis import strategies as st


@pytest.fixture
def dirs(tmp_path) -> MemoryDirs:
    return MemoryDirs(tmp_path / "home", tmp_path / "project")


def mem(name: str, type: str = "feedback", body: str = "", desc: str = "") -> Memory:
    return Memory(name, desc or f"about {name}", type, body or f"body of {name}")


# --- N-MEM-1 / N-MEM-2 ---------------------------------------------------------------------------

def test_n_mem_1_routing_by_type(dirs, tmp_path):
    """N-MEM-1: user/feedback under ~/.novacode/memory, project/reference under the project."""
    paths = {t: write_memory(dirs, mem(f"m-{t}", t), 10.0) for t in ("user", "feedback", "project", "reference")}
    rel = {t: p.relative_to(tmp_path).as_posix() for t, p in paths.items()}
    assert rel == {"user": "home/.novacode/memory/m-user.md", "feedback": "home/.novacode/memory/m-feedback.md",
                   "project": "project/.novacode/memory/m-project.md",
                   "reference": "project/.novacode/memory/m-reference.md"}
    assert (tmp_path / "home/.novacode/memory" / INDEX_FILE).exists()
    assert (tmp_path / "project/.novacode/memory" / INDEX_FILE).exists()


def test_n_mem_1_missing_root_is_clear_error(tmp_path):
    with pytest.raises(ValueError, match="no project directory for a project memory"):
        write_memory(MemoryDirs(tmp_path, None), mem("x", "project"), 0.0)


def test_n_mem_2_one_file_with_frontmatter(dirs):
    """N-MEM-2: the seed's own example, written and read back."""
    m = Memory("prefers-small-commits", "用户偏好原子提交，一次提交只做一件事", "feedback",
               "提交前先把改动按主题拆分，每个 commit 单一职责。")
    p = write_memory(dirs, m, 5.0)
    text = p.read_text()
    assert text.startswith("---\nname: prefers-small-commits\ndescription: 用户偏好原子提交")
    assert "type: feedback\n---\n提交前" in text
    back = parse_memory(text, p)
    assert (back.name, back.description, back.type, back.body) == (m.name, m.description, m.type, m.body)
    assert os.stat(p).st_mtime == 5.0  # mtime from the injected clock


@pytest.mark.parametrize("text,msg", [
    ("no frontmatter", "no frontmatter"),
    ("---\nname: a\ntype: user\n---\nx", "lacks description"),
    ("---\nname: a\ndescription: d\ntype: opinion\n---\nx", "not one of"),
])
def test_n_mem_2_bad_files_rejected(text, msg):
    with pytest.raises(MemoryFormatError, match=msg):
        parse_memory(text)


# --- N-MEM-3 -------------------------------------------------------------------------------------

def test_n_mem_3_index_is_table_of_contents(dirs):
    """N-MEM-3: one line per memory, no memory content in the index."""
    write_memory(dirs, mem("a", body="SECRET BODY A"), 1.0)
    write_memory(dirs, mem("b", "user", body="SECRET BODY B"), 2.0)
    idx = (dirs.user_dir / INDEX_FILE).read_text()
    assert "- [a](a.md) — about a" in idx and "- [b](b.md) — about b" in idx
    assert "SECRET" not in idx
    r = render_index(dirs)
    assert f"]({(dirs.user_dir / 'a.md').resolve()})" in r  # absolute links for the resident block


def test_n_mem_3_index_at_200_lines_not_cut_201_cut():
    """N-MEM-3: 200 lines load whole; 201 lines are cut to 200 with a warning."""
    text200 = "".join(f"- [m{i}](m{i}.md) — d\n" for i in range(200))
    v = truncate_index(text200)
    assert not v.truncated and v.warning is None and v.text == text200
    text201 = text200 + "- [m200](m200.md) — d\n"
    v = truncate_index(text201)
    assert v.truncated and v.lines == 201
    assert v.text == text200 and v.text.count("\n") == INDEX_MAX_LINES
    assert "201 lines (limit 200)" in v.warning


def test_n_mem_3_index_at_25kb_plus_one_byte(tmp_path):
    """N-MEM-3: 25,000 bytes load whole; 25,001 bytes are cut at a line boundary with a warning.
    100 lines of 249 chars + newline = 25,000 bytes; one more byte makes 25,001."""
    d = tmp_path / "mem"
    d.mkdir()
    line = "x" * 249 + "\n"
    exact = line * 100
    assert len(exact.encode()) == INDEX_MAX_BYTES == 25_000
    (d / INDEX_FILE).write_text(exact)
    v = read_index(d)
    assert not v.truncated and v.bytes == 25_000
    (d / INDEX_FILE).write_text(exact + "y")
    v = read_index(d)
    assert v.truncated and v.bytes == 25_001
    assert v.text == exact  # the partial last line ("y") is dropped, every whole line kept
    assert "25,001 bytes (limit 25,000)" in v.warning


def test_n_mem_3_byte_cut_after_line_cut():
    """Both limits: 201 lines of 200 bytes: 200 lines = 40,000 bytes > 25,000 → 125 lines kept
    (125 × 200 = 25,000)."""
    text = ("z" * 199 + "\n") * 201
    v = truncate_index(text)
    assert v.text.count("\n") == 125 and len(v.text.encode()) == 25_000
    assert "201 lines" in v.warning and "40,200 bytes" in v.warning


def test_n_mem_3_truncation_warning_in_resident_block(dirs):
    write_memory(dirs, mem("a"), 1.0)
    idx = dirs.user_dir / INDEX_FILE
    idx.write_text(idx.read_text() + "".join(f"- filler {i}\n" for i in range(300)))
    r = render_index(dirs)
    assert "WARNING" in r and "limit 200" in r


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet="ab é\t-", max_size=300), max_size=400),
       st.integers(1, 300), st.integers(10, 30_000))
def test_n_mem_3_truncation_property(lines, max_lines, max_bytes):
    """N-MEM-3 property: the loaded index is a line-prefix of the file within both limits, and it is
    cut (with a warning) exactly when the file exceeds a limit."""
    text = "".join(line + "\n" for line in lines)
    v = truncate_index(text, max_lines, max_bytes)
    over = len(text.splitlines()) > max_lines or len(text.encode()) > max_bytes
    assert v.truncated == over == (v.warning is not None)
    if over:
        assert text.startswith(v.text)
        assert v.text.count("\n") <= max_lines and len(v.text.encode()) <= max_bytes


# --- N-MEM-4 -------------------------------------------------------------------------------------

def test_n_mem_4_back_to_back_extractions_one_runs_one_trails():
    """N-MEM-4: the first trigger at t=100 starts a run of 3 s; a trigger at t=101 (still running)
    does not start a second one but marks the trailing run, which is due once t >= 103."""
    s = ExtractionScheduler()
    assert s.trigger(100.0)
    s.start(100.0, 3.0)
    assert not s.trigger(101.0) and s.trailing
    assert not s.trigger(102.0)  # a third trigger: still one trailing run, not a queue
    assert s.trailed == 1
    assert not s.due_trailing(102.9)
    assert s.due_trailing(103.0)
    s.start(103.0, 2.0)
    assert not s.trailing and s.started == 2
    assert s.trigger(105.0)  # idle again: the next trigger starts at once


def test_n_mem_4_triggered_only_on_turns_without_tool_calls():
    assert ends_turn(Message("assistant", (Block.text_block("done"),)))
    assert not ends_turn(Message("assistant", (Block.text_block("x"), Block.tool_use("t", "Read", {}))))
    assert ends_turn(Message("assistant", (Block("thinking", "hmm"),)))  # no tool call: the turn ended
    assert not ends_turn(Message.user("a user message is not a turn's end"))


def test_n_mem_4_parse_fixed_format_blocks():
    text = ("Here:\n<memory>\n---\nname: tabs\ndescription: uses tabs\ntype: user\n---\nI prefer tabs.\n</memory>\n"
            "<memory>\n---\nname: bad\ntype: user\n---\nx\n</memory>")
    mems, bad = parse_memory_blocks(text)
    assert [(m.name, m.type, m.body) for m in mems] == [("tabs", "user", "I prefer tabs.")] and bad == 1
    assert parse_memory_blocks("NO_MEMORIES") == ([], 0)
    assert parse_memory_blocks("(memory_extract) acknowledged") is None
    assert parse_memory_blocks("acknowledged: Write each memory ..., or answer NO_MEMORIES:\n<memory>") is None
    assert parse_memory_blocks("<memory>\n---\nname: x\n---\n</memory>") is None  # only malformed


def test_n_mem_4_local_extract_keeps_user_words():
    """The fallback keeps the user's preference/correction sentences verbatim, typed, once."""
    msgs = [Message.user("Please fix the parser. I prefer pytest over unittest for every new test."),
            Message("assistant", (Block.text_block("Always happy to help."),)),
            Message.user("Don't reformat files you did not touch. We decided to keep Python 3.11."),
            Message.user("I prefer pytest over unittest for every new test.")]
    got = local_extract(msgs, [])
    assert [(m.type, m.body) for m in got] == [
        ("user", "I prefer pytest over unittest for every new test."),
        ("feedback", "Don't reformat files you did not touch."),
        ("project", "We decided to keep Python 3.11.")]


# --- N-MEM-5 -------------------------------------------------------------------------------------

def test_n_mem_5_scan_at_most_200_newest(dirs):
    """N-MEM-5: 205 files in the two directories, the newest 200 by mtime are scanned."""
    for i in range(205):
        write_memory(dirs, mem(f"m{i:03d}", "user" if i % 2 else "project"), float(i))
    r = scan_manifests(dirs.all())
    assert r.files == 205 and len(r.manifests) == 200
    names = {m.name for m in r.manifests}
    assert names == {f"m{i:03d}" for i in range(5, 205)}
    assert r.manifests[0].name == "m204"  # newest first


def test_n_mem_5_only_first_30_lines_read(dirs, tmp_path):
    """N-MEM-5: frontmatter must close within the first 30 lines; a 29-key frontmatter (31 lines
    with its two fences) is not parsed, a 28-key one (30 lines) is."""
    d = dirs.user_dir
    d.mkdir(parents=True)
    keys = "".join(f"k{i}: v\n" for i in range(26))  # + name, description, type = 29 keys
    (d / "long.md").write_text(f"---\nname: long\ndescription: d\n{keys}type: user\n---\nbody\n")
    keys = "".join(f"k{i}: v\n" for i in range(25))  # 28 keys: lines 1..30
    (d / "ok.md").write_text(f"---\nname: ok\ndescription: d\n{keys}type: user\n---\nbody\n")
    r = scan_manifests([d])
    assert [m.name for m in r.manifests] == ["ok"] and r.skipped == 1


def test_n_mem_5_selection_parsed_capped_at_5():
    cands = [f"m{i}.md" for i in range(8)]
    assert parse_selection('["m1.md", "m9.md", "m1.md", "m2.md"]', cands) == ["m1.md", "m2.md"]
    assert parse_selection('Sure: ["m0.md","m1.md","m2.md","m3.md","m4.md","m5.md"]', cands) == [
        "m0.md", "m1.md", "m2.md", "m3.md", "m4.md"]
    assert parse_selection("[]", cands) == [] and parse_selection("NONE", cands) == []
    assert parse_selection("m3.md\nm4.md", cands) == ["m3.md", "m4.md"]
    assert parse_selection("(memory_select) acknowledged: Query", cands) is None
    assert parse_selection("acknowledged: Query: x\nAvailable memories:\n- m1.md [user] a: b", cands) is None
    assert parse_selection("- `m1.md`\n* m2.md", cands) == ["m1.md", "m2.md"]


def test_n_mem_5_local_select(dirs):
    """Fallback selector: relevant ones first; user/feedback always eligible; at most 5."""
    write_memory(dirs, mem("db-choice", "project", desc="we chose postgres for the orders database"), 1.0)
    write_memory(dirs, mem("ci-link", "reference", desc="CI dashboard url"), 2.0)
    write_memory(dirs, mem("tabs", "user", desc="user prefers tabs"), 3.0)
    ms = scan_manifests(dirs.all()).manifests
    assert local_select("why is the orders database slow?", ms) == ["db-choice.md", "tabs.md"]
    for i in range(6):
        write_memory(dirs, mem(f"pref{i}", "feedback"), 10.0 + i)
    assert len(local_select("anything", scan_manifests(dirs.all()).manifests)) == 5


def test_n_mem_5_injection_block_from_files(dirs):
    p = write_memory(dirs, mem("tabs", "user", body="I prefer tabs."), 1.0)
    m = render_injection(load_memories([dirs.user_dir]))
    assert m.meta["origin"] == "memory" and "I prefer tabs." in m.text and str(p) in m.text


# --- N-MEM-7 -------------------------------------------------------------------------------------

DAY = 24 * 3600.0


def test_n_mem_7_gates():
    """N-MEM-7: 24 h since last, then the 10-minute scan throttle, then 5 sessions."""
    st_ = ConsolidationState(last_consolidated_at=0.0, sessions=["a", "b", "c", "d", "e"])
    assert consolidation_gate(st_, DAY - 1).reason == "interval"        # 86,399 s < 24 h
    g = consolidation_gate(st_, DAY)
    assert g.open and g.scanned
    st_.last_scan_at = DAY
    assert consolidation_gate(st_, DAY + 599).reason == "throttled"     # 599 s < 10 min
    assert consolidation_gate(st_, DAY + 600).open
    few = ConsolidationState(last_consolidated_at=0.0, sessions=["a", "b", "c", "d", "d"])
    g = consolidation_gate(few, 2 * DAY)
    assert not g.open and g.reason == "sessions" and g.scanned          # 4 distinct sessions < 5
    assert consolidation_gate(ConsolidationState(sessions=list("abcde")), 10.0).open  # never consolidated


def test_n_mem_7_state_round_trip(tmp_path):
    p = tmp_path / "s.json"
    ConsolidationState(5.0, 6.0, ["x"]).save(p, 7.0)
    assert ConsolidationState.load(p) == ConsolidationState(5.0, 6.0, ["x"])
    assert ConsolidationState.load(tmp_path / "none.json") == ConsolidationState()


def test_n_mem_7_consolidation_plans(dirs):
    """Merge and delete as the model answers; the local fallback drops exact duplicates only."""
    write_memory(dirs, mem("a", body="Use tabs."), 1.0)
    write_memory(dirs, mem("b", body="use   TABS."), 2.0)
    write_memory(dirs, mem("c", body="Old note."), 3.0)
    mems = load_memories(dirs.all())
    by = {m.path.name: m for m in mems}
    assert local_consolidate(mems).delete == ["b.md"]
    plan = parse_consolidation("MERGE a.md b.md\n<memory>\n---\nname: a\ndescription: tabs\ntype: user\n---\n"
                               "Use tabs.\n</memory>\nDELETE c.md x.md", list(by))
    assert plan.delete == ["c.md"] and plan.merge[0][0] == ["a.md", "b.md"]
    assert apply_consolidation(plan, by, dirs, 9.0) == (1, 2)  # a+b → a (1 net), c deleted (1)
    assert sorted(p.name for p in dirs.user_dir.glob("*.md")) == [INDEX_FILE, "a.md"]
    assert parse_consolidation("NO_CHANGES", list(by)).delete == []
    assert parse_consolidation("acknowledged", list(by)) is None
