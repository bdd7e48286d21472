"""A folder import writes one trace per session and its table says what exists (issue 44, case 3),
and never writes into the folder it reads (case 10: refused only when the output did not exist yet)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fuzz.judge import run_cli


def _line(ts: int, kind: str, payload: dict) -> str:
    return json.dumps({"timestamp": f"2026-01-01T00:00:{ts:02d}Z", "type": kind, "payload": payload}) + "\n"


def _rollout(path: Path, turns: int, cwd: str = "/home/u/repos/parser") -> Path:
    """A Codex rollout with ``turns`` calls, each billed 1,000 input / 10 output tokens."""
    body = _line(0, "session_meta", {"cwd": cwd, "base_instructions": {"text": "You are Codex."}})
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
