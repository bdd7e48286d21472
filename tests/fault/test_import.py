"""Imports of logs the fuzz measure does not reach (issue 31, cases 4 and 8): 64,000-character
tool results, a log too big to hold twice, a replay that does not line up with the log, an
absurd fitted token scale (the table's scale instead, said in the trace). Exit 0 or one line naming
the input (exit 2); nothing left behind."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from tests.fuzz.judge import run_cli

REAL = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces" / "real" / "claude-code" / "codemie" \
    / "session-196820da.jsonl"
needs_real = pytest.mark.skipif(not REAL.exists(), reason="the real logs (../shared/traces/real) are absent")


def _padded(tmp_path: Path, chars: int = 64_000) -> Path:
    """The real log with every tool result repeated to about ``chars`` characters."""
    out = []
    for ln in REAL.read_text(encoding="utf-8").splitlines():
        o = json.loads(ln)
        m = o.get("message")
        if isinstance(m, dict) and isinstance(m.get("content"), list):
            for b in m["content"]:
                if isinstance(b, dict) and b.get("type") == "tool_result":
                    c = b.get("content")
                    if isinstance(c, str):
                        b["content"] = (c + " ") * (chars // (len(c) + 1) + 1)
                    elif isinstance(c, list):
                        for x in c:
                            if isinstance(x, dict) and x.get("type") == "text":
                                x["text"] = (x["text"] + " ") * (chars // (len(x["text"]) + 1) + 1)
        out.append(json.dumps(o))
    p = tmp_path / "padded.jsonl"
    p.write_text("\n".join(out) + "\n", encoding="utf-8")
    return p


@needs_real
def test_64k_tool_results_are_no_runtime_error(tmp_path):
    """The raw replay used to stop at its first call over the window (7 rows for 47 calls): a
    RuntimeError. Now the replay runs; the usage no longer fits the inflated content, so no scale
    fits it: the session imports on the model table's scale, and the trace says why (issue 41: a
    proxy's usage that does not follow the content is still a user's traffic)."""
    from ctxsim.harness.model import trace as tr

    src = _padded(tmp_path)
    out = tmp_path / "t.jsonl"
    o = run_cli(["import", "claude-code", str(src), "-o", str(out), "--no-probes"])
    assert o.exception == "" and o.status == 0, (o.exception, o.stderr[-500:])
    rec = tr.load(out).header.recorded
    assert rec.token_scale == 1.2 and "outside 0.1-10.0" in rec.token_scale_evidence   # Sonnet 4.5's table scale


@needs_real
def test_an_absurd_fitted_scale_falls_back_to_the_table_and_says_so(tmp_path, monkeypatch):
    from ctxsim.harness.fidelity import compare as fidelity
    from ctxsim.harness.model import trace as tr

    monkeypatch.setattr(fidelity, "fit_token_scale", lambda *a, **k: 16.9)
    out = tmp_path / "t.jsonl"
    o = run_cli(["import", "claude-code", str(REAL), "-o", str(out), "--no-probes"])
    assert o.exception == "" and o.status == 0, o.stderr
    rec = tr.load(out).header.recorded
    assert rec.token_scale == 1.2 and "gave 16.9, outside 0.1-10.0" in rec.token_scale_evidence


@needs_real
def test_a_replay_that_does_not_line_up_is_reported_not_asserted(tmp_path, monkeypatch):
    from ctxsim.harness.fidelity import measured

    real = measured.sim_rows
    monkeypatch.setattr(measured, "sim_rows", lambda df: real(df).iloc[:-1])   # one row short
    out = tmp_path / "t.jsonl"
    o = run_cli(["import", "claude-code", str(REAL), "-o", str(out), "--no-probes"])
    assert o.exception == "" and o.status == 2, o.stderr
    assert len(o.error_lines) == 1 and "the replay of the recorded agent made" in o.stderr
    assert not out.exists()


def test_reading_a_log_streams_it(tmp_path):
    """20 MB of JSONL read with a traced peak well under the file's size (the whole-file read
    held the bytes and their split copy: twice the file)."""
    from ctxsim.harness.importers.common import read_jsonl

    line = json.dumps({"type": "user", "message": {"content": "x" * 2_000}}) + "\n"
    p = tmp_path / "big.jsonl"
    with p.open("w") as fh:
        for _ in range(10_000):
            fh.write(line)
    size = p.stat().st_size
    tracemalloc.start()
    try:
        n = sum(1 for _ in read_jsonl(p))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert n == 10_000 and size > 20_000_000
    assert peak < size / 20


def test_a_truncated_last_line_still_says_so(tmp_path):
    from ctxsim.harness.importers.common import read_jsonl
    from ctxsim.harness.model.trace import TraceError

    p = tmp_path / "cut.jsonl"
    p.write_bytes(b'\xef\xbb\xbf{"type": "user"}\n{"type": "user", "a":')
    got = []
    with pytest.raises(TraceError, match=r"cut.jsonl:2: .*\(truncated file\?\)"):
        for no, o in read_jsonl(p):
            got.append((no, o))
    assert got == [(1, {"type": "user"})]   # the byte-order mark skipped
    p.write_bytes(b'{"type": "us\n{"type": "user"}\n')   # not the last line: no hint
    with pytest.raises(TraceError) as e:
        list(read_jsonl(p))
    assert "cut.jsonl:1:" in str(e.value) and "truncated file?" not in str(e.value)
