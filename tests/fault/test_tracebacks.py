"""Tracebacks and messages (issue 44, cases 9 and 10): a lone UTF-16 surrogate (valid JSON: a log
cut mid-emoji), a custom strategy that raises, SIGTERM, and the wording of three messages. Each is
one line (a traceback only under ``--debug``), and a surrogate is repaired with a warning naming
the file and the line, never a crash or a dropped session."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from ctxsim.harness.files.strictjson import InputRepaired, surrogate_note
from ctxsim.harness.model import trace as tr

from tests.fuzz.judge import run_cli
from tests.helpers_claude_code import asst, text, user, write
from tests.helpers_traces import Builder

REPO = Path(__file__).resolve().parents[2]


def _trace(tmp_path: Path) -> Path:
    b = Builder().user("fix the parser").call("reading", results=["def parse(): pass"]).call("done")
    p = tmp_path / "t.jsonl"
    tr.write(b.build(), p)
    return p


def _with_surrogate(tmp_path: Path) -> Path:
    """The trace with a lone high surrogate (written as the JSON escape \\ud800) in line 2's text."""
    lines = _trace(tmp_path).read_text().splitlines()
    ev = json.loads(lines[1])
    ev["text"] = "fix the parser \ud83d"          # an emoji cut after its first half
    lines[1] = json.dumps(ev)                       # ensure_ascii: "\ud83d", valid JSON
    p = tmp_path / "s.jsonl"
    p.write_text("\n".join(lines) + "\n")
    return p


# --- a lone surrogate -----------------------------------------------------------------------------


def _one_line_naming(o, *parts: str) -> None:
    """An internal error said in one line (exit 1, no traceback) naming each of ``parts`` and ``--debug``."""
    assert o.exception == "" and o.status == 1, (o.exception, o.stderr)
    assert len(o.error_lines) == 1 and "Traceback" not in o.stderr, o.stderr
    line = o.error_lines[0]
    assert all(p in line for p in (*parts, "--debug")), line

def test_validate_reads_a_lone_surrogate_and_says_where_it_was_replaced(tmp_path):
    """Before: UnicodeEncodeError in the trace hash, a traceback."""
    p = _with_surrogate(tmp_path)
    o = run_cli(["validate", str(p)])
    assert o.exception == "" and o.status == 0, (o.exception, o.stderr)
    assert f"{p}:2" in o.stderr and "surrogate" in o.stderr and "warning" in o.stderr
    with pytest.warns(InputRepaired, match=r"s.jsonl:2: a lone UTF-16 surrogate \(\\ud83d"):
        t = tr.load(p)
    assert t.events[0].text == "fix the parser \ufffd" and t.repairs == [f"{p}:2: {surrogate_note(chr(0xD83D))}"]


def test_run_replays_a_trace_with_a_lone_surrogate(tmp_path):
    p = _with_surrogate(tmp_path)
    for strategy in ("novacode", "rag_memory", "structured_state"):
        o = run_cli(["run", str(p), "-s", strategy, "-q", "--json", str(tmp_path / f"{strategy}.json")])
        assert o.exception == "" and o.status == 0, (strategy, o.exception, o.stderr[-600:])
        assert f"{p}:2" in o.stderr


def test_the_hash_of_a_repaired_trace_is_that_of_the_repaired_text(tmp_path):
    p = _with_surrogate(tmp_path)
    with pytest.warns(InputRepaired):
        t = tr.load(p)
    q = tmp_path / "rewritten.jsonl"
    tr.write(t, q)
    assert tr.load(q).content_hash == t.content_hash and not tr.load(q).repairs


def test_import_keeps_a_session_with_a_lone_surrogate(tmp_path):
    """Before: the session was dropped whole ("surrogates not allowed"), exit 2."""
    proj = tmp_path / "projects" / "-home-u-alpha"
    recs = [user(0, "fix the parser \ud83d"), asst(1, "r1", text("on it \udc00 done"))]
    log = proj / "aaaa.jsonl"
    write(log, recs)   # json.dumps escapes the lone surrogates: valid JSON
    out = tmp_path / "traces"
    o = run_cli(["import", "claude-code", str(tmp_path / "projects"), "-o", str(out), "--no-probes", "--json"])
    assert o.exception == "" and o.status == 0, (o.exception, o.stderr)
    rows = json.loads(o.stdout)["sessions"]
    assert len(rows) == 1
    t = tr.load(rows[0]["trace"])
    assert "\ufffd" in t.events[0].text and not t.repairs
    assert f"{log}:1" in o.stderr and f"{log}:2" in o.stderr and "surrogate" in o.stderr


def test_a_single_log_import_says_it_too(tmp_path):
    log = write(tmp_path / "aaaa.jsonl", [user(0, "fix \ud83d"), asst(1, "r1", text("ok"))])
    o = run_cli(["import", "claude-code", str(log), "-o", str(tmp_path / "t.jsonl"), "--no-probes"])
    assert o.status == 0 and f"{log}:1" in o.stderr and "surrogate" in o.stderr, o.stderr


# --- a custom strategy that raises ----------------------------------------------------------------

STRATEGY = '''
from ctxsim.strategies.base import Strategy, StrategyConfig


class Boom(Strategy):
    name = "boom"
    summary = "raises at its fourth call"
    Config = StrategyConfig

    def build_request(self, call):
        if call.index == 1:
            return self._helper()
        return super().build_request(call)

    def _helper(self):
        return {}["missing"]
'''


def _boom(tmp_path: Path, monkeypatch) -> None:
    d = tmp_path / "mine"
    d.mkdir()
    (d / "boom_strategy.py").write_text(STRATEGY)
    monkeypatch.syspath_prepend(str(d))


def test_a_custom_strategys_exception_is_one_line_naming_it_and_its_site(tmp_path, monkeypatch):
    """Before: the whole traceback, engine frames first."""
    _boom(tmp_path, monkeypatch)
    p = _trace(tmp_path)
    o = run_cli(["run", str(p), "-s", "boom_strategy:Boom", "-q"])
    _one_line_naming(o, "boom_strategy:Boom", "KeyError: 'missing'", "boom_strategy.py:16", "_helper")


def test_debug_prints_the_traceback(tmp_path, monkeypatch):
    _boom(tmp_path, monkeypatch)
    p = _trace(tmp_path)
    o = run_cli(["--debug", "run", str(p), "-s", "boom_strategy:Boom", "-q"])
    assert "KeyError" in o.exception or "Traceback" in o.stderr, (o.exception, o.stderr)


def test_compare_names_the_strategy_that_raised(tmp_path, monkeypatch):
    _boom(tmp_path, monkeypatch)
    p = _trace(tmp_path)
    o = run_cli(["compare", str(p), "--strategies", "append_only,boom_strategy:Boom", "--seeds", "1", "-q"])
    assert o.exception == "" and o.status == 1 and len(o.error_lines) == 1, (o.exception, o.stderr)
    assert "boom_strategy:Boom" in o.stderr and "boom_strategy.py:16" in o.stderr


@pytest.mark.parametrize("body,words", [
    ("    def build_request(self, call):\n        return None\n", "build_request returned NoneType, not a Request"),
    ("    def build_request(self, call):\n        raise SystemExit(0)\n", "raised SystemExit"),
    ("    def __init__(self, config, env):\n        super().__init__(config, env)\n        raise RuntimeError('no file')\n",
     "raised RuntimeError: no file"),
])
def test_other_strategy_bugs_are_one_line_naming_the_strategy(tmp_path, monkeypatch, body, words):
    """Found by the fresh hostile set: a build_request returning None was blamed on the engine
    ("AttributeError ... at engine.py"), and one calling sys.exit(0) ended the run with exit 0 and
    no word."""
    d = tmp_path / "mine"
    d.mkdir()
    mod = f"odd_strategy_{abs(hash(body)) % 10**8}"   # one module per case: an imported one is cached
    (d / f"{mod}.py").write_text("from ctxsim.strategies.base import Strategy, StrategyConfig\n\n\n"
                                       "class Odd(Strategy):\n    name = 'odd'\n    summary = 'odd'\n"
                                       "    Config = StrategyConfig\n\n" + body)
    monkeypatch.syspath_prepend(str(d))
    o = run_cli(["run", str(_trace(tmp_path)), "-s", f"{mod}:Odd", "-q", "--json", str(tmp_path / "o.json")])
    assert o.exception == "" and o.status == 1 and len(o.error_lines) == 1, (o.exception, o.stderr)
    assert f"{mod}:Odd" in o.stderr and words in o.stderr, o.stderr
    assert not (tmp_path / "o.json").exists()


# --- SIGTERM --------------------------------------------------------------------------------------

SLOW = '''
import time
from pathlib import Path

from ctxsim.strategies.base import Strategy, StrategyConfig


class Slow(Strategy):
    name = "slow"
    summary = "waits at its first call"
    Config = StrategyConfig

    def build_request(self, call):
        Path(__import__("os").environ["CTXSIM_TEST_STARTED"]).write_text("started")
        time.sleep(60)
        return super().build_request(call)
'''


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX signals")
def test_sigterm_says_one_line_and_exits_143(tmp_path):
    """Before: exit 143 and nothing on stderr."""
    (tmp_path / "slow_strategy.py").write_text(SLOW)
    p = _trace(tmp_path)
    started = tmp_path / "started"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}", "CTXSIM_TEST_STARTED": str(started)}
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from ctxsim.harness.cli import main; sys.exit(main())",
                             "run", str(p), "-s", "slow_strategy:Slow", "-q"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        t0 = time.monotonic()
        while not started.exists() and time.monotonic() - t0 < 60:
            time.sleep(0.1)
        assert started.exists(), proc.stderr.read() if proc.poll() is not None else "never started"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and "SIGTERM" in lines[0] and lines[0].startswith("ctxsim run:"), err


# --- messages -------------------------------------------------------------------------------------

def test_a_result_answering_a_tool_use_twice_reads_well(tmp_path):
    """Before: "tool_result for answered twice tool_use id 'tu_1'"."""
    lines = _trace(tmp_path).read_text().splitlines()
    res = next(x for x in lines if '"tool_result"' in x)
    bad = tmp_path / "twice.jsonl"
    i = lines.index(res)
    bad.write_text("\n".join([*lines[:i + 1], res, *lines[i + 1:]]) + "\n")
    o = run_cli(["validate", str(bad)])
    assert o.status == 2 and "answered twice" not in o.stderr and "already answered" in o.stderr, o.stderr
    assert f"{bad}:{i + 2}" in o.stderr


def test_an_unterminated_string_is_not_at_at(tmp_path):
    """Before: "Unterminated string starting at at column 9"."""
    p = tmp_path / "t.jsonl"
    p.write_text('{"type": "header", "name": "x\n')
    o = run_cli(["validate", str(p)])
    assert o.status == 2 and "at at" not in o.stderr and "column" in o.stderr, o.stderr
    lines = textwrap.dedent('''{"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta", "payload": {"cwd": "/x
    ''')
    log = tmp_path / "rollout-x.jsonl"
    log.write_text(lines)
    o = run_cli(["import", "codex", str(log), "-o", str(tmp_path / "o.jsonl")])
    assert o.status == 2 and "at at" not in o.stderr, o.stderr


# --- a custom strategy raising a BaseException (issue 44 fresh, case 21) -------------------------

WEIRD = '''
from ctxsim.strategies.base import Strategy, StrategyConfig


class Weird(BaseException):
    """Not an Exception: what ``except Exception`` lets through."""


class Odd(Strategy):
    name = "odd"
    summary = "raises a BaseException at its second call"
    Config = StrategyConfig

    def build_request(self, call):
        if call.index == 1:
            raise Weird("not an exception")
        return super().build_request(call)
'''


def _weird(tmp_path: Path, monkeypatch, mod: str) -> None:
    d = tmp_path / "mine"
    d.mkdir()
    (d / f"{mod}.py").write_text(WEIRD)
    monkeypatch.syspath_prepend(str(d))


def test_a_strategys_base_exception_is_one_line_naming_it_and_its_site(tmp_path, monkeypatch):
    """Before: a 27-line traceback without --debug."""
    _weird(tmp_path, monkeypatch, "weird_strategy_run")
    o = run_cli(["run", str(_trace(tmp_path)), "-s", "weird_strategy_run:Odd", "-q"])
    _one_line_naming(o, "weird_strategy_run:Odd", "Weird: not an exception", "weird_strategy_run.py:16", "build_request")


def test_a_base_exception_in_a_sweep_run_is_that_runs_failure(tmp_path, monkeypatch):
    """Before, with --workers 1: a 43-line traceback, the sweep ended, 0 of 6 runs stored
    (append_only's lost too). Now the failing strategy's runs are failed rows naming it, the
    others are stored, and the sweep exits 1 with the count, as for an Exception."""
    _weird(tmp_path, monkeypatch, "weird_strategy_sweep")
    t = _trace(tmp_path)
    cfg = tmp_path / "s.toml"
    cfg.write_text(f'traces = ["{t}"]\nwindows = [200000]\nseeds = [0, 1]\n\n[[strategies]]\nname = "append_only"\n\n'
                   '[[strategies]]\nname = "weird_strategy_sweep:Odd"\n')
    out = tmp_path / "o"
    o = run_cli(["sweep", str(cfg), "--out", str(out), "--workers", "1", "--no-progress"])
    assert o.exception == "" and o.status == 1, (o.exception, o.stderr[-800:])
    assert "Traceback" not in o.stderr and "2 of 4 runs failed (first: Weird: not an exception)" in o.stderr, o.stderr
    import sqlite3

    with sqlite3.connect(out / "results.sqlite") as db:
        rows = [json.loads(r) for (r,) in db.execute("SELECT row FROM runs")]
    by = sorted((r["strategy"], r["error"].split("\n")[0]) for r in rows)
    assert by == [("append_only", ""), ("append_only", ""),
                  ("weird_strategy_sweep:Odd", "Weird: not an exception"), ("weird_strategy_sweep:Odd", "Weird: not an exception")]


def test_a_multi_line_message_is_one_line(tmp_path, monkeypatch):
    """Before: ValueError("line one\\nline two\\n" + 5000 x) printed whole over 3 lines."""
    d = tmp_path / "mine"
    d.mkdir()
    (d / "multi_strategy.py").write_text(STRATEGY.replace('return {}["missing"]',
                                                          'raise ValueError("line one\\nline two\\n" + "x" * 5000)'))
    monkeypatch.syspath_prepend(str(d))
    o = run_cli(["run", str(_trace(tmp_path)), "-s", "multi_strategy:Boom", "-q"])
    assert o.exception == "" and o.status == 1, (o.exception, o.stderr)
    assert len(o.error_lines) == 1 and len(o.stderr) < 1000, o.stderr
    assert "ValueError: line one" in o.error_lines[0] and "multi_strategy.py:16" in o.error_lines[0]


def test_a_reader_that_stops_reading_still_gets_the_files_asked_for(tmp_path):
    """``ctxsim compare ... --report DIR | head``: the reader leaves after a few lines. Before, the broken pipe
    stopped the command where it printed, with exit 0 and no report; now the lines nobody reads are dropped, the
    report and the JSON are written, exit 0 and nothing on stderr but the command's own notes."""
    p = _trace(tmp_path)
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from ctxsim.harness.cli import main; sys.exit(main())",
                             "compare", str(p), "--strategies", "append_only,truncate", "--report",
                             str(tmp_path / "rep"), "--json", str(tmp_path / "rows.json")],
                            cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()   # the reader is gone before the first line
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 0, err
    assert (tmp_path / "rep" / "report.md").is_file() and json.loads((tmp_path / "rows.json").read_text())
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err
