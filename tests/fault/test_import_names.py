"""A folder import writes one trace per session and its table says what exists (issue 44, case 3),
and never writes into the folder it reads (case 10: refused only when the output did not exist yet)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fuzz.judge import run_cli


def _line(ts: int, kind: str, payload: dict) -> str:
    return json.dumps({"timestamp": f"2026-01-01T00:00:{ts:02d}Z", "type": kind, "payload": payload}) + "\n"


def _rollout(path: Path, turns: int, cwd: str = "/home/u/repos/parser", sid: str | None = None) -> Path:
    """A Codex rollout with ``turns`` calls, each billed 1,000 input / 10 output tokens (its
    session_meta names the session id ``sid``, if given, as Codex does)."""
    body = _line(0, "session_meta", {**({"id": sid} if sid else {}), "cwd": cwd,
                                     "base_instructions": {"text": "You are Codex."}})
    body += _line(0, "turn_context", {"model": "gpt-5.5", "cwd": cwd})
    body += _line(1, "response_item", {"type": "message", "role": "user",
                                       "content": [{"type": "input_text", "text": "fix the parser"}]})
    u = {"input_tokens": 1000, "cached_input_tokens": 0, "output_tokens": 10}
    for k in range(turns):
        ts = 2 + 2 * k
        body += _line(ts, "response_item", {"type": "message", "role": "assistant",
                                            "content": [{"type": "output_text", "text": f"step {k}"}]})
        body += _line(ts, "event_msg", {"type": "token_count", "info": {"total_token_usage": {"total_tokens": k + 1},
                                                                         "last_token_usage": u}})
        if k + 1 < turns:
            body += _line(ts + 1, "response_item", {"type": "message", "role": "user",
                                                    "content": [{"type": "input_text", "text": f"go on {k}"}]})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    return path


NAME = "rollout-2026-01-01T00-00-00-0000.jsonl"


def test_rollouts_with_one_name_in_two_day_folders_each_get_their_own_trace(tmp_path):
    """Before: "2 sessions, 5 calls", one trace on disk (the second overwrote the first), exit 0."""
    src = tmp_path / "sessions"
    _rollout(src / "2026" / "01" / "01" / NAME, 2)
    _rollout(src / "2026" / "01" / "02" / NAME, 3)
    _rollout(src / "2026" / "01" / "02" / "rollout-2026-01-02T00-00-00-0001.jsonl", 1)
    out = tmp_path / "traces"
    o = run_cli(["import", "codex", str(src), "-o", str(out), "--json", "--no-probes"])
    assert o.status == 0, o.stderr
    rows = json.loads(o.stdout)["sessions"]
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.jsonl"))
    assert len(written) == len(rows) == 3
    assert sorted(Path(r["trace"]).relative_to(out).as_posix() for r in rows) == written
    assert written == ["2026/01/01/" + NAME, "2026/01/02/" + NAME, "rollout-2026-01-02T00-00-00-0001.jsonl"]
    by_trace = {Path(r["trace"]).relative_to(out).as_posix(): r["calls"] for r in rows}
    assert by_trace == {"2026/01/01/" + NAME: 2, "2026/01/02/" + NAME: 3, "rollout-2026-01-02T00-00-00-0001.jsonl": 1}


def test_the_text_table_counts_what_was_written(tmp_path):
    src = tmp_path / "sessions"
    _rollout(src / "a" / NAME, 2)
    _rollout(src / "b" / NAME, 3)
    out = tmp_path / "traces"
    o = run_cli(["import", "codex", str(src), "-o", str(out), "--no-probes"])
    assert o.status == 0 and "2 sessions, 5 calls" in o.stdout, o.stdout
    assert len(list(out.rglob("*.jsonl"))) == 2


@pytest.mark.parametrize("exists", [False, True])
def test_an_output_inside_the_input_folder_is_refused_whether_or_not_it_exists(tmp_path, exists):
    """Before: refused only when it did not exist yet; an existing one got the traces written among
    the logs (read again as sessions by the next import)."""
    src = tmp_path / "sessions"
    _rollout(src / "2026" / "01" / "01" / NAME, 2)
    out = src / "traces"
    if exists:
        out.mkdir()
    o = run_cli(["import", "codex", str(src), "-o", str(out), "--no-probes"])
    assert o.exception == "" and o.status == 2 and len(o.error_lines) == 1, o.stderr
    assert "input of this command" in o.stderr
    assert not out.exists() or not list(out.rglob("*.jsonl"))


# --- issue 44 fresh, case 4: a session file directly in the projects root ------------------------

def _cc_session(path: Path, sid: str, turns: int = 1) -> Path:
    """A Claude Code session of ``turns`` calls, each 3 input + 100 written (5 min) + 5 output tokens
    (request ids of its own, as every API call has: a folder counts a request once)."""
    from tests.helpers_claude_code import asst, text, user, write

    recs = [user(0, "fix the parser", session=sid)]
    for k in range(turns):
        if k:
            recs.append(user(2 * k, f"go on {k}", session=sid))
        recs.append(asst(2 * k + 1, f"{sid}-r{k}", text(f"step {k}"), session=sid))
    return write(path, recs)


def _two_projects(tmp_path: Path) -> Path:
    """A projects folder of two projects: aaaa (2 calls) in -home-u-p1, bbbb (3 calls) in -home-u-p2."""
    root = tmp_path / "projects"
    _cc_session(root / "-home-u-p1" / "aaaa.jsonl", "aaaa", 2)
    _cc_session(root / "-home-u-p2" / "bbbb.jsonl", "bbbb", 3)
    return root


def test_a_session_beside_the_project_folders_does_not_hide_them(tmp_path):
    """Before: the root was read as one project folder (its one session), -p1 and -p2 never read:
    "1 sessions", exit 0. Now every session is read: the stray one at the root and each project's."""
    root = _two_projects(tmp_path)
    _cc_session(root / "cccc.jsonl", "cccc", 1)
    out = tmp_path / "traces"
    o = run_cli(["import", "claude-code", str(root), "-o", str(out), "--json", "--no-probes"])
    assert o.exception == "" and o.status == 0, (o.exception, o.stderr)
    rows = json.loads(o.stdout)["sessions"]
    got = sorted((Path(r["trace"]).relative_to(out).as_posix(), r["calls"]) for r in rows)
    assert got == [("-home-u-p1/aaaa.jsonl", 2), ("-home-u-p2/bbbb.jsonl", 3), ("cccc.jsonl", 1)]
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*.jsonl")) == [g for g, _ in got]


def test_a_stray_non_session_beside_the_project_folders_still_lets_them_import(tmp_path):
    """Before: "1 of 1 sessions failed" (todo.jsonl), the two projects never named. Now the projects
    import and todo.jsonl is the one failure, named with its file."""
    root = _two_projects(tmp_path)
    (root / "todo.jsonl").write_text('{"todo": "buy milk"}\n')
    out = tmp_path / "traces"
    o = run_cli(["import", "claude-code", str(root), "-o", str(out), "--json", "--no-probes"])
    assert o.exception == "" and o.status == 2, (o.exception, o.stderr)
    rep = json.loads(o.stdout)
    assert sorted(r["session"] for r in rep["sessions"]) == ["aaaa", "bbbb"]
    assert [f["source"] for f in rep["failed"]] == [str(root / "todo.jsonl")]
    assert "1 of 3 sessions failed" in o.stderr


def test_a_sessions_own_folder_beside_it_is_not_a_project(tmp_path):
    """A project folder holds ``<session>/subagents/``: that folder is the session's, not a project. Its one
    agent file billed a call no Task result refers to: the session imports with it, a span at its time."""
    proj = tmp_path / "-home-u-p1"
    _cc_session(proj / "aaaa.jsonl", "aaaa", 2)
    from tests.helpers_claude_code import asst, text, user, write

    write(proj / "aaaa" / "subagents" / "agent-x1.jsonl",   # its own request id: a copy of a main call is no loss
          [user(0, "look around", session="aaaa"), asst(1, "x1-r0", text("found"), session="aaaa")])
    out = tmp_path / "traces"
    o = run_cli(["import", "claude-code", str(proj), "-o", str(out), "--json", "--no-probes"])
    assert o.exception == "" and o.status == 0, (o.exception, o.stderr)
    (row,) = json.loads(o.stdout)["sessions"]
    assert row["session"] == "aaaa" and row["calls"] == 3


# --- issue 44 fresh, case 5: one session reached twice -----------------------------------------

def test_a_rollout_archived_beside_its_live_copy_is_one_session(tmp_path):
    """Before: "2 sessions", cost doubled, two identical traces, exit 0. Now one session (Codex's
    own session id), the copy named in one warning, exit 0."""
    src = tmp_path / "codex"
    name = "rollout-2026-01-01T00-00-00-0199aaaa.jsonl"
    live = _rollout(src / "sessions" / "2026" / "01" / "01" / name, 2, sid="0199aaaa")
    arch = src / "archived_sessions" / name
    arch.parent.mkdir(parents=True)
    arch.write_bytes(live.read_bytes())
    _rollout(src / "sessions" / "2026" / "01" / "02" / "rollout-2026-01-02T00-00-00-0199bbbb.jsonl", 3, sid="0199bbbb")
    out = tmp_path / "traces"
    o = run_cli(["import", "codex", str(src), "-o", str(out), "--json", "--no-probes"])
    assert o.exception == "" and o.status == 0, (o.exception, o.stderr)
    rows = json.loads(o.stdout)["sessions"]
    assert sorted((Path(r["source"]), r["calls"]) for r in rows) == [
        (live, 2), (src / "sessions" / "2026" / "01" / "02" / "rollout-2026-01-02T00-00-00-0199bbbb.jsonl", 3)]
    assert len(list(out.rglob("*.jsonl"))) == 2
    warned = [x for x in o.stderr.splitlines() if ": warning: " in x]
    assert len(warned) == 1 and str(arch) in warned[0] and str(live) in warned[0] and "0199aaaa" in warned[0], o.stderr
    assert o.error_lines == []
    o = run_cli(["import", "codex", str(src), "-o", str(tmp_path / "t2"), "--no-probes"])
    assert "2 sessions, 5 calls" in o.stdout, o.stdout


def test_the_longer_of_two_copies_of_one_rollout_is_read(tmp_path):
    """A copy taken mid-session: the same id, fewer lines. The complete one is read."""
    src = tmp_path / "codex"
    name = "rollout-2026-01-01T00-00-00-0199aaaa.jsonl"
    short = _rollout(src / "archived_sessions" / name, 1, sid="0199aaaa")
    full = _rollout(src / "sessions" / "2026" / "01" / "01" / name, 3, sid="0199aaaa")
    o = run_cli(["import", "codex", str(src), "-o", str(tmp_path / "t"), "--json", "--no-probes"])
    assert o.exception == "" and o.status == 0, (o.exception, o.stderr)
    assert [(r["source"], r["calls"]) for r in json.loads(o.stdout)["sessions"]] == [(str(full), 3)]
    assert str(short) in o.stderr and "warning" in o.stderr


def test_a_symlinked_project_folder_is_read_once(tmp_path):
    """Before: "3 sessions", aaaa imported twice (once through the link), exit 0."""
    root = _two_projects(tmp_path)
    (root / "-home-u-p1-link").symlink_to("-home-u-p1")
    out = tmp_path / "traces"
    o = run_cli(["import", "claude-code", str(root), "-o", str(out), "--json", "--no-probes"])
    assert o.exception == "" and o.status == 0, (o.exception, o.stderr)
    rows = json.loads(o.stdout)["sessions"]
    assert sorted((r["project"], r["session"]) for r in rows) == [("-home-u-p1", "aaaa"), ("-home-u-p2", "bbbb")]
    warned = [x for x in o.stderr.splitlines() if ": warning: " in x]
    assert len(warned) == 1 and str(root / "-home-u-p1-link" / "aaaa.jsonl") in warned[0], o.stderr


def test_one_claude_code_session_copied_into_two_projects_is_read_once(tmp_path):
    """Claude Code names a session's file by its id: the same <id>.jsonl in two places is one session."""
    root = tmp_path / "projects"
    a = _cc_session(root / "-home-u-p1" / "aaaa.jsonl", "aaaa", 2)
    _cc_session(root / "-home-u-p2" / "bbbb.jsonl", "bbbb", 3)
    (root / "aaaa.jsonl").write_bytes(a.read_bytes())
    o = run_cli(["import", "claude-code", str(root), "-o", str(tmp_path / "t"), "--json", "--no-probes"])
    assert o.exception == "" and o.status == 0, (o.exception, o.stderr)
    assert sorted(r["source"] for r in json.loads(o.stdout)["sessions"]) == [str(a), str(root / "-home-u-p2" / "bbbb.jsonl")]
    assert str(root / "aaaa.jsonl") in o.stderr and "warning" in o.stderr


def test_rollouts_without_an_id_are_never_merged(tmp_path):
    """Two rollouts of one file name and no session id are two sessions (as before)."""
    src = tmp_path / "sessions"
    _rollout(src / "a" / NAME, 2)
    _rollout(src / "b" / NAME, 2)
    o = run_cli(["import", "codex", str(src), "-o", str(tmp_path / "t"), "--no-probes"])
    assert o.status == 0 and "2 sessions, 4 calls" in o.stdout, o.stdout
