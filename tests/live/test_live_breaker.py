"""A misbehaving live API stops the run loudly (issue #19): down, 500s, a garbage 200 or an
endpoint that hangs past the per-call timeout. After --llm-max-failures side calls failed in a
row the run exits 1 with one line saying why, writes no numbers, and never shows a traceback;
one failed call among good ones is a counted failed compaction, not the end of the run."""

from __future__ import annotations

import socket
import time

import pytest
from ctxsim.harness.model import trace as tr
from ctxsim.harness.synth import generate, load_preset
from loopback import Reply

from tests.fuzz.judge import run_cli

pytest.importorskip("ctxsim.strategies.novacode.strategy")

WINDOW = "60000"  # the short preset compacts on it (tests/live/test_live_engine.py)


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("live") / "short.jsonl"
    tr.write(generate(load_preset("short", ["calls=60"]), 0), p)   # compacts on 60k (as test_live_engine.py)
    return p


def _run(trace_file, tmp_path, *extra: str):
    out = tmp_path / "m.json"
    argv = ["run", str(trace_file), "-s", "novacode", "--set", "memory=false", "--window", WINDOW,
            "--llm", "live", "--json", str(out), "-q", *extra]
    t0 = time.monotonic()
    o = run_cli(argv, limit_s=120)
    return o, out, time.monotonic() - t0


def _stopped(o, out, n: int) -> None:
    assert o.exception == "" and o.status == 1, (o.exception, o.stderr[-400:])
    # (the loopback server's own thread reports the connections the client dropped on stderr too)
    lines = [ln for ln in o.error_lines if ln.startswith("ctxsim")]
    what = "a side call" if n == 1 else f"{n} side calls in a row"
    assert len(lines) == 1 and f"failed {what}" in lines[0], o.stderr
    assert not out.exists()   # no numbers computed on failures


def test_api_returning_500s_stops_the_run_with_exit_1(live_env, trace_file, tmp_path):
    live_env.script("messages", *[Reply.error(500, "internal error")] * 50)
    o, out, _ = _run(trace_file, tmp_path, "--llm-retries", "0", "--llm-max-failures", "3")
    _stopped(o, out, 3)
    assert len(live_env.bodies("messages")) == 3   # bounded: the breaker's 3 calls, no retries asked


def test_by_default_one_failed_side_call_stops_the_run(live_env, trace_file, tmp_path):
    live_env.script("messages", *[Reply.error(500, "internal error")] * 50)
    o, out, _ = _run(trace_file, tmp_path, "--llm-retries", "0")
    _stopped(o, out, 1)
    assert len(live_env.bodies("messages")) == 1


def test_api_down_stops_within_seconds(live_env, trace_file, tmp_path, monkeypatch):
    with socket.socket() as s:   # a port nothing listens on: connection refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{port}")
    o, out, took = _run(trace_file, tmp_path, "--llm-retries", "1", "--llm-max-failures", "2")
    _stopped(o, out, 2)
    assert took < 60


def test_garbage_200_is_a_failed_call_not_a_traceback(live_env, trace_file, tmp_path):
    live_env.answer = lambda endpoint, body: (200, {"not": "a message"}, {"request-id": "req_garbage"})
    o, out, _ = _run(trace_file, tmp_path, "--llm-retries", "0", "--llm-max-failures", "3")
    _stopped(o, out, 3)


def test_a_hanging_endpoint_times_out_per_call(live_env, trace_file, tmp_path):
    real = live_env.answer

    def slow(endpoint, body):
        time.sleep(1.0)
        return real(endpoint, body)

    live_env.answer = slow
    o, out, took = _run(trace_file, tmp_path, "--llm-timeout", "0.2", "--llm-retries", "1", "--llm-max-failures", "3")
    _stopped(o, out, 3)
    # the first call tries twice; after a timeout each call is sent once (no retries of a hang)
    assert len(live_env.received) == 2 + 1 + 1 and took < 30


def test_one_failure_among_answers_is_a_counted_failed_compaction(live_env, trace_file, tmp_path):
    live_env.script("messages", Reply.error(500, "internal error"))
    o, out, _ = _run(trace_file, tmp_path, "--llm-retries", "0", "--llm-max-failures", "3")   # the opt-in
    assert o.status == 0 and o.exception == "", o.stderr[-400:]
    import json

    comp = json.loads(out.read_text())["compactions"]
    assert comp["failed"] >= 1 and comp["succeeded"] >= 1   # the run went on after the failure


@pytest.mark.parametrize("flag,value", [("--llm-timeout", "0"), ("--llm-timeout", "nan"), ("--llm-retries", "-1"),
                                        ("--llm-max-failures", "0")])
def test_live_options_checked_before_the_run(live_env, trace_file, tmp_path, flag, value):
    o, out, _ = _run(trace_file, tmp_path, flag, value)
    assert o.status == 2 and flag in o.stderr and not out.exists()


def test_live_side_calls_on_an_imported_trace_send_what_it_has(live_env, tmp_path):
    """An imported log's system prompt is partly opaque (not in the log): the side calls send the
    text the trace has, are billed as simulated, and the result says so (no RenderError)."""
    import json
    from pathlib import Path

    src = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces" / "real" / "claude-code" / "codemie" \
        / "session-196820da.jsonl"
    if not src.exists():
        pytest.skip("the real logs (../shared/traces/real) are absent")
    imp = tmp_path / "imp.jsonl"
    assert run_cli(["import", "claude-code", str(src), "-o", str(imp), "--no-probes"]).status == 0
    o = run_cli(["run", str(imp), "-s", "novacode", "--window", "60000", "--llm", "live", "--json", "-", "-q"])
    assert o.status == 0 and o.exception == "", o.stderr[-400:]
    m = json.loads(o.stdout)
    sent = live_env.bodies("messages")
    opaque = m["provenance"]["summariser"]["opaque_prefix"]
    assert m["compactions"]["attempted"] >= 1 and opaque["calls"] == len(sent) >= 1
    assert opaque["tokens_not_sent"] > 0 and "simulated" in opaque["billing"]
