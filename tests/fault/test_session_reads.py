"""A run reads only its own session (issue 44, case 2 and case 4's second half): instruction includes
resolve inside the session's tree (no absolute path outside it, no /proc, no symlink out), each read
at most up to the cap; nothing of the machine (its environment, a git repository above the run
directory) enters a request; a symlink planted in the run directory is never followed by a write."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest
from ctxsim.harness.model import trace as tr

from tests.fuzz.judge import run_cli
from tests.helpers_traces import Builder

BIG = 60_000   # over NovaCode's spill threshold (N-SPILL-1: 50,000 characters)


def _trace(tmp_path: Path, files: dict[str, str], name: str = "t.jsonl", big: bool = False) -> Path:
    b = Builder(meta={"files": files}).user("fix the parser")
    b.call("reading", results=["x" * BIG if big else "def parse(): pass"], tool="Read",
           inputs=[{"file_path": "/src/parse.py"}])
    b.call("done")
    p = tmp_path / name
    tr.write(b.build(), p)
    return p


def _metrics(argv: list[str]) -> dict:
    o = run_cli([*argv, "-q", "--json", "-"])
    assert o.status == 0 and o.exception == "", (o.exception, o.stderr[-800:])
    return json.loads(o.stdout)


def _cost(m: dict) -> tuple:
    return m["cost_usd"], tuple(m["tokens"].values())


# --- includes -------------------------------------------------------------------------------------

def test_an_include_of_proc_self_environ_leaves_the_request_alone(tmp_path, monkeypatch):
    """Before: the environment was included, so the cost moved with an environment variable (and in
    live mode the environment, API keys included, went into a request body)."""
    p = _trace(tmp_path, {"project/NOVACODE.md": "Rules: @/proc/self/environ"})
    monkeypatch.setenv("CTXSIM_TEST_SECRET", "s")
    short = _metrics(["run", str(p), "-s", "novacode"])
    monkeypatch.setenv("CTXSIM_TEST_SECRET", "s" * 5000)
    long = _metrics(["run", str(p), "-s", "novacode"])
    assert _cost(short) == _cost(long)
    assert short["strategy_counters"].get("instruction_includes", 0) == 0


def _tree(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A run directory as seed_files lays it out: run/home, run/project (a git root)."""
    run = tmp_path / "run"
    home, project = run / "home", run / "project"
    (project / ".git").mkdir(parents=True)
    home.mkdir()
    return run, home, project


@pytest.mark.parametrize("ref", ["/proc/self/environ", "/etc/hostname", "../../outside.md", "~/../../outside.md",
                                 "./link.md", "./linkdir/x.md"])
def test_includes_outside_the_session_are_not_read(tmp_path, ref):
    from ctxsim.strategies.novacode.instructions import load

    run, home, project = _tree(tmp_path)
    (tmp_path / "outside.md").write_text("OUTSIDE TEXT")
    (project / "link.md").symlink_to(tmp_path / "outside.md")
    (project / "linkdir").symlink_to(tmp_path, target_is_directory=True)
    (tmp_path / "x.md").write_text("OUTSIDE TEXT")
    (project / "NOVACODE.md").write_text(f"rules @{ref} end")
    s = load(home, project, top=run)
    assert "OUTSIDE" not in s.text and s.included == []
    assert f"@{ref}" in s.text   # left as written
    assert any("outside the session" in w for w in s.warnings), s.warnings


def test_includes_inside_the_session_still_expand(tmp_path):
    from ctxsim.strategies.novacode.instructions import load

    run, home, project = _tree(tmp_path)
    (project / "docs").mkdir()
    (project / "docs" / "style.md").write_text("USE TABS")
    (home / "mine.md").write_text("MY WAY")
    (project / "inside.md").symlink_to(project / "docs" / "style.md")   # a link that stays inside
    (project / "NOVACODE.md").write_text("a @./docs/style.md b @~/mine.md")
    (project / "NOVACODE.local.md").write_text("c @./inside.md")
    s = load(home, project, top=run)
    assert "a USE TABS b MY WAY" in s.text
    assert "c @./inside.md" in s.text   # the same file again: de-duplicated, as before


def _sparse(path: Path, size: int) -> Path:
    with path.open("wb") as fh:
        fh.truncate(size)   # no disk used; a whole read would still allocate it all
    return path


def test_a_huge_include_is_read_only_up_to_the_cap(tmp_path):
    """Before: a 300 MB include was read whole and cut after (685 MB peak)."""
    from ctxsim.strategies.novacode.instructions import MAX_FILE_CHARS, load

    run, home, project = _tree(tmp_path)
    _sparse(project / "huge.md", 300_000_000)
    _sparse(project / "NOVACODE.local.md", 300_000_000)
    (project / "NOVACODE.md").write_text("see @./huge.md")
    tracemalloc.start()
    try:
        s = load(home, project, top=run)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20 * MAX_FILE_CHARS   # a few copies of the cap, never the file
    assert len(s.files[0].text) <= MAX_FILE_CHARS + 20 and len(s.files[1].text) == MAX_FILE_CHARS


def test_startup_files_are_read_inside_their_roots_and_up_to_the_cap(tmp_path):
    from ctxsim.strategies.startup_files import MAX_FILE_CHARS, startup_text

    run, home, project = _tree(tmp_path)
    (tmp_path / "outside.md").write_text("OUTSIDE TEXT")
    (project / "CLAUDE.md").symlink_to(tmp_path / "outside.md")
    (home / ".claude").mkdir()
    _sparse(home / ".claude" / "CLAUDE.md", 300_000_000)
    tracemalloc.start()
    try:
        text = startup_text(home, project)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert text is not None and "OUTSIDE" not in text
    assert peak < 20 * MAX_FILE_CHARS and len(text) < MAX_FILE_CHARS + 1000


def test_a_run_does_not_depend_on_a_git_repository_above_its_session_dir(tmp_path):
    """Before: NovaCode walked up from the run's project folder to the nearest .git anywhere on the
    machine, read every NOVACODE.md on the way and its branch: a --session-dir inside a checkout
    cost more than one in /tmp."""
    p = _trace(tmp_path, {"project/NOVACODE.md": "be brief"})
    repo = tmp_path / "repo"
    argv = ["run", str(p), "-s", "novacode", "--session-dir", str(repo / "sess")]   # the same path: the same tokens
    plain = _metrics(argv)
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/a-branch-name-of-the-machine\n")
    (repo / "NOVACODE.md").write_text("RULES OF THE MACHINE " * 200)
    inside = _metrics(argv)
    assert _cost(plain) == _cost(inside)


def test_a_seeded_git_root_inside_the_run_directory_is_still_found(tmp_path):
    from ctxsim.strategies.novacode.environment import git_state
    from ctxsim.strategies.novacode.instructions import discover

    run, home, project = _tree(tmp_path)
    (project / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (project / "NOVACODE.md").write_text("R")
    assert git_state(project, top=run) == (True, "main")
    assert [p.name for p, _ in discover(home, project, top=run)] == ["NOVACODE.md"]
    (tmp_path / ".git").mkdir()                          # above the run directory: never looked at
    (tmp_path / "NOVACODE.md").write_text("MACHINE")
    (project / ".git" / "HEAD").unlink()
    (project / ".git").rmdir()
    assert git_state(project, top=run) == (False, None)
    assert [p for p, _ in discover(home, project, top=run)] == [(project / "NOVACODE.md").resolve()]


# --- planted symlinks -----------------------------------------------------------------------------

def test_a_symlink_planted_in_the_run_directory_is_not_followed_by_a_write(tmp_path, monkeypatch):
    """Before: a symlink put in the run directory while the run was going sent spill files (and
    transcripts, memories) to wherever it pointed."""
    from ctxsim.harness.replay import run_setup
    from ctxsim.harness.replay.engine import RunConfig, replay

    outside = tmp_path / "outside"
    outside.mkdir()
    seed = run_setup.seed_files

    def planted(session_dir: Path, files):   # what another process does once the run has started
        home, project = seed(session_dir, files)
        for name in ("launches", "transcripts", "tool-results"):
            (session_dir / name).symlink_to(outside, target_is_directory=True)
        return home, project

    monkeypatch.setattr(run_setup, "seed_files", planted)
    p = _trace(tmp_path, {"project/NOVACODE.md": "be brief"}, big=True)
    with pytest.raises(Exception) as e:
        replay(tr.load(p), "novacode", None, RunConfig(session_dir=tmp_path / "sess"))
    assert "symbolic link" in str(e.value) and type(e.value).__name__ == "WriteError"
    assert list(outside.iterdir()) == []


def test_a_planted_symlink_is_one_line_at_the_command_line(tmp_path, monkeypatch):
    from ctxsim.harness.replay import run_setup

    outside = tmp_path / "outside"
    outside.mkdir()
    seed = run_setup.seed_files

    def planted(session_dir: Path, files):
        home, project = seed(session_dir, files)
        (session_dir / "transcripts").symlink_to(outside, target_is_directory=True)
        return home, project

    monkeypatch.setattr(run_setup, "seed_files", planted)
    p = _trace(tmp_path, {}, big=True)
    o = run_cli(["run", str(p), "-s", "novacode", "-q", "--session-dir", str(tmp_path / "sess")])
    assert o.exception == "" and o.status == 2 and len(o.error_lines) == 1, (o.exception, o.stderr)
    assert "symbolic link" in o.stderr and list(outside.iterdir()) == []


def test_a_write_outside_the_run_directory_is_refused_while_a_run_is_on(tmp_path):
    from ctxsim.harness.files import confined
    from ctxsim.harness.files.atomic import WriteError

    run = tmp_path / "run"
    run.mkdir()
    with confined.inside(run):
        confined.guard(run / "a" / "b.txt")                      # inside: fine
        with pytest.raises(WriteError, match="outside the run directory"):
            confined.guard(run / ".." / "x.txt")
        (run / "a").symlink_to(tmp_path, target_is_directory=True)
        with pytest.raises(WriteError, match="symbolic link"):
            confined.guard(run / "a" / "b.txt")
        (run / "f.txt").symlink_to(tmp_path / "x.txt")
        with pytest.raises(WriteError, match="symbolic link"):
            confined.guard(run / "f.txt")
    confined.guard(run / "a" / "b.txt")                          # no run on: nothing is checked


# --- the session directory's marker -----------------------------------------------------------------

@pytest.mark.parametrize("marker", [b"", b"a ctxsim run's files: the next run in this folder clears it\n",
                                    b"ctxsim session folder\ntoken 0123\n"])
def test_a_session_dir_whose_marker_ctxsim_did_not_write_is_refused_not_emptied(tmp_path, marker):
    """Before: an empty ``.ctxsim-session`` was enough for ``--session-dir`` to delete the folder's
    contents, user files included."""
    p = _trace(tmp_path, {})
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("the user's own file")
    (mine / ".ctxsim-session").write_bytes(marker)
    o = run_cli(["run", str(p), "-s", "append_only", "-q", "--session-dir", str(mine)])
    assert o.exception == "" and o.status == 2 and len(o.error_lines) == 1, (o.exception, o.stderr)
    assert "--session-dir" in o.stderr and "marker" in o.stderr
    assert (mine / "thesis.tex").read_text() == "the user's own file"


def test_a_marker_copied_from_another_session_dir_is_refused(tmp_path):
    p = _trace(tmp_path, {})
    first = tmp_path / "first"
    assert run_cli(["run", str(p), "-s", "append_only", "-q", "--session-dir", str(first)]).status == 0
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.md").write_text("keep me")
    (mine / ".ctxsim-session").write_bytes((first / ".ctxsim-session").read_bytes())
    o = run_cli(["run", str(p), "-s", "append_only", "-q", "--session-dir", str(mine)])
    assert o.status == 2 and (mine / "notes.md").read_text() == "keep me", o.stderr


def test_a_session_dir_ctxsim_wrote_is_still_reused(tmp_path):
    p = _trace(tmp_path, {}, big=True)
    sd = tmp_path / "sess"
    for _ in range(2):
        o = run_cli(["run", str(p), "-s", "novacode", "-q", "--session-dir", str(sd)])
        assert o.status == 0, o.stderr
    assert (sd / ".ctxsim-session").read_text().startswith("ctxsim session folder")


def test_the_session_dir_check_does_not_follow_a_marker_symlink(tmp_path):
    from ctxsim.harness.replay import rundirs

    p = _trace(tmp_path, {})
    sd = tmp_path / "sess"
    assert run_cli(["run", str(p), "-s", "append_only", "-q", "--session-dir", str(sd)]).status == 0
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.md").write_text("keep me")
    (mine / rundirs.SESSION_MARK).symlink_to(sd / rundirs.SESSION_MARK)
    with pytest.raises(ValueError, match="marker"):
        rundirs.clean_session_dir(mine)
    assert (mine / "notes.md").exists()


# --- retention's pointers -------------------------------------------------------------------------

@pytest.mark.parametrize("form", ["dotdot", "sibling", "link"])
def test_a_pointer_that_leaves_the_run_directory_is_not_read(tmp_path, form):
    """A path in the conversation (a trace's own text can hold one) is a pointer only when its real
    path is inside the run directory: ``run/../elsewhere``, a sibling ``run-2`` that shares the
    prefix, or a symlink out of the run were read back into the request before."""
    import numpy as np
    from ctxsim.harness.model.conversation import Message, Request, SystemPrompt, ToolSet
    from ctxsim.harness.model.trace import FactEvent, ProbeEvent
    from ctxsim.harness.retention.scoring import RetentionModel, RetentionParams

    fact = FactEvent(t=0, id="f", category="file", text="UPLOAD_RETRY_MS = 100074")
    run = tmp_path / "run"
    run.mkdir()
    elsewhere = tmp_path / "run-2" if form == "sibling" else tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "notes.txt").write_text(fact.text)
    if form == "link":
        (run / "l").symlink_to(elsewhere, target_is_directory=True)
    path = {"dotdot": f"{run}/../elsewhere/notes.txt", "sibling": f"{elsewhere}/notes.txt",
            "link": f"{run}/l/notes.txt"}[form]
    model = RetentionModel({"f": fact}, RetentionParams(recover_probability=1.0), np.random.default_rng(0),
                           session_dir=run)
    req = Request(SystemPrompt.of("s"), ToolSet(()), (Message.user(f"read {path}"),))
    [s] = model.score(ProbeEvent(t=0, id="p", needs=["f"]), req, lambda i: 0, 10)
    assert s.where == "lost" and s.pointer is None


def test_a_session_dir_holding_the_trace_or_an_output_is_refused_and_nothing_removed(tmp_path):
    """The fresh hostile set of issue 44: a trace copied into a session folder ctxsim had used was
    deleted by the run that read it (exit 0); an earlier --json output there too."""
    sd = tmp_path / "sess"
    assert run_cli(["run", str(_trace(tmp_path, {})), "-s", "append_only", "-q", "--session-dir", str(sd)]).status == 0
    inner = _trace(sd, {}, name="t.jsonl")
    o = run_cli(["run", str(inner), "-s", "append_only", "-q", "--session-dir", str(sd)])
    assert o.status == 2 and len(o.error_lines) == 1 and "holds the trace" in o.stderr, o.stderr
    assert inner.is_file()
    o = run_cli(["run", str(_trace(tmp_path, {})), "-s", "append_only", "-q", "--session-dir", str(sd),
                 "--json", str(sd / "m.json")])
    assert o.status == 2 and "holds --json" in o.stderr, o.stderr


def test_a_session_dir_in_use_by_another_run_is_refused(tmp_path):
    """Two runs in one session folder at once interleaved their files (and their costs)."""
    from ctxsim.harness.replay import rundirs

    sd = tmp_path / "sess"
    p = _trace(tmp_path, {})
    with rundirs.session_dir(sd):
        with pytest.raises(rundirs.SessionDirInUse, match="in use by another run"):
            with rundirs.session_dir(sd):
                pass
        o = run_cli(["run", str(p), "-s", "append_only", "-q", "--session-dir", str(sd)])
        assert o.status == 2 and len(o.error_lines) == 1 and "in use by another run" in o.stderr, o.stderr
    with rundirs.session_dir(sd) as d:   # released on exit: the folder is usable again
        assert d == sd


def test_whole_repo_reads_no_pseudo_file_system_and_no_link_fifo_or_huge_file(tmp_path):
    """The fresh hostile set of issue 44: ``whole_repo --set corpus=/proc/self`` packed the process's
    environment into every request; a 300 MB file in the corpus was read whole."""
    import os

    from ctxsim.strategies import whole_repo

    o = run_cli(["run", str(_trace(tmp_path, {})), "-s", "whole_repo", "-q", "--set", "corpus=/proc/self"])
    assert o.status == 2 and len(o.error_lines) == 1 and "proc file system" in o.stderr, o.stderr
    outside = tmp_path / "secret.env"
    outside.write_text("API_KEY=sk-not-for-requests")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.py").write_text("x = 1\n")
    (corpus / "link.py").symlink_to(outside)
    os.mkfifo(corpus / "pipe.py")
    with open(corpus / "big.py", "wb") as f:
        f.truncate(whole_repo.MAX_FILE_BYTES + 1)
    assert whole_repo.corpus_files(str(corpus)) == [("a.py", "x = 1\n")]
