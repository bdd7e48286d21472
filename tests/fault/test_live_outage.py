"""A live run during an API outage (issue 31, case 2): on a trace that makes a single side call,
every kind of outage (down, 429, 529, 500, a garbage 200, a dropped connection, a hang) fails
the run: exit 1, one line, no ``--json`` / ``--calls`` written. Counting failed calls as failed
compactions is an opt-in (``--llm-max-failures N``)."""

from __future__ import annotations

import json
import socket
import time

import pytest
from ctxsim.harness.llm import live
from ctxsim.harness.model import trace as tr
from ctxsim.harness.synth import generate, load_preset

from tests.fuzz.judge import run_cli
from tests.live.loopback import Loopback, Reply

pytest.importorskip("ctxsim.strategies.novacode.strategy")
pytest.importorskip("anthropic")

WINDOW = "60000"   # the short preset compacts once on it with 40 calls


@pytest.fixture
def server(monkeypatch):
    s = Loopback()
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-dummy")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", s.url)
    for var in ("CTXSIM_LIVE_MAX_RETRIES", "CTXSIM_LIVE_TIMEOUT", "CTXSIM_LIVE_MODEL", "CTXSIM_LIVE_MAX_FAILURES",
                "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    yield s
    s.close()


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("outage") / "short.jsonl"
    tr.write(generate(load_preset("short", ["calls=40"]), 0), p)
    return p


def _run(trace_file, tmp_path, *extra: str):
    out, calls = tmp_path / "m.json", tmp_path / "calls.csv"
    argv = ["run", str(trace_file), "-s", "novacode", "--set", "memory=false", "--window", WINDOW, "--llm", "live",
            "--json", str(out), "--calls", str(calls), "-q", "--llm-retries", "0", *extra]
    t0 = time.monotonic()
    o = run_cli(argv, limit_s=120)
    return o, (out, calls), time.monotonic() - t0


def test_the_trace_makes_fewer_than_three_side_calls(server, trace_file, tmp_path):
    o, (out, _), _ = _run(trace_file, tmp_path)
    assert o.status == 0, o.stderr
    assert 1 <= len(server.bodies("messages")) < 3     # below the old breaker's 3: the outage went unnoticed
    assert json.loads(out.read_text())["compactions"]["succeeded"] >= 1


def _closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def _drop(endpoint, body):
    raise ConnectionAbortedError("the loopback drops the connection")


def _hang(endpoint, body):
    time.sleep(2.0)
    return 200, {}, {}


OUTAGES = {
    "down": None,
    "429": [Reply.error(429, "rate limited")] * 5,
    "529": [Reply.error(529, "Overloaded")] * 5,
    "500": [Reply.error(500, "internal error")] * 5,
    "garbage": lambda endpoint, body: (200, {"not": "a message"}, {"request-id": "req_garbage"}),
    "connection-close": _drop,
    "hang": _hang,
}


@pytest.mark.parametrize("case", list(OUTAGES))
def test_an_outage_fails_the_run_with_one_line_and_writes_nothing(server, trace_file, tmp_path, monkeypatch, case):
    what = OUTAGES[case]
    extra: list[str] = []
    if what is None:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", _closed_port())
    elif isinstance(what, list):
        server.script("messages", *what)
    else:
        server.answer = what
    if case == "hang":
        extra = ["--llm-timeout", "0.5"]
    o, outs, took = _run(trace_file, tmp_path, *extra)
    assert o.exception == "" and o.status == 1, (o.exception, o.stderr[-400:])
    lines = [ln for ln in o.error_lines if ln.startswith("ctxsim")]
    assert len(lines) == 1 and "the live API failed a side call" in lines[0], o.stderr
    assert not any(p.exists() for p in outs)


def test_counting_failures_is_an_opt_in(server, trace_file, tmp_path):
    server.script("messages", Reply.error(500, "internal error"))
    o, (out, _), _ = _run(trace_file, tmp_path, "--llm-max-failures", "3")
    assert o.status == 0, o.stderr
    assert json.loads(out.read_text())["compactions"]["failed"] == 1


def test_the_defaults_bound_a_hung_call_under_a_minute():
    """timeout × attempts + the SDK's back-off between them (0.5 s · 2^n, at most 8 s)."""
    attempts = 1 + live.DEFAULT_MAX_RETRIES
    backoff = sum(min(0.5 * 2 ** i, 8.0) for i in range(live.DEFAULT_MAX_RETRIES))
    assert live.DEFAULT_MAX_FAILURES == 1
    assert live.DEFAULT_TIMEOUT_S * attempts + backoff <= 60


@pytest.mark.skipif(__import__("os").environ.get("HYPOTHESIS_PROFILE") != "deep", reason="deep profile only (~55 s)")
def test_a_hung_api_fails_within_a_minute_with_the_defaults(server, trace_file, tmp_path):
    def hang(endpoint, body):
        time.sleep(120)
        return 200, {}, {}

    server.answer = hang
    out = tmp_path / "m.json"
    t0 = time.monotonic()
    o = run_cli(["run", str(trace_file), "-s", "novacode", "--set", "memory=false", "--window", WINDOW, "--llm",
                 "live", "--json", str(out), "-q"], limit_s=120)
    assert o.status == 1 and not out.exists(), o.stderr
    assert time.monotonic() - t0 <= 60
