"""An imported trace records the tokenizer its token scale was fitted with, and a run under another
tokenizer says so (issue 44 fresh, case 32). Before: ``ctxsim --tokenizer claude import`` wrote a
scale fitted on claude counts with the evidence "Σ cl100k growth" and no field naming the tokenizer;
a run under cl100k applied it silently (README: "import and run with the same tokenizer")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ctxsim.harness.model import trace as tr

from tests.fuzz.judge import run_cli
from tests.helpers_claude_code import asst, result, text, user, write

WORDS = "parse the token stream and report every malformed header with its byte offset".split()


def _log(path: Path) -> Path:
    """Ten calls on Sonnet 4.5, each after a tool result of ~1,200 characters: the recorded context
    grows by 400 tokens a call (3 input + 400 written + what the previous call held, read)."""
    recs = [user(0, "fix the parser")]
    context = 3_000
    for k in range(10):
        tid = f"t{k}"
        recs.append(asst(2 * k + 1, f"r{k}", {"type": "tool_use", "id": tid, "name": "Read",
                                               "input": {"file_path": f"src/m{k}.py"}},
                         inp=3, w5m=400 if k else context, read=context - 3 if k else 0, model="claude-sonnet-4-5"))
        body = " ".join(WORDS[(k + i) % len(WORDS)] + str(i % 7) for i in range(150))
        recs.append(result(2 * k + 2, tid, body))
        context += 400 if k else 0
    recs.append(asst(30, "r-end", text("done"), inp=3, w5m=50, read=context, model="claude-sonnet-4-5"))
    return write(path, recs)


def _import(tmp_path: Path, tokenizer: str, monkeypatch) -> tuple[Path, dict]:
    monkeypatch.setenv("CTXSIM_TOKENIZER", "cl100k")   # main() sets it from --tokenizer; monkeypatch restores it
    out = tmp_path / f"{tokenizer}.jsonl"
    o = run_cli(["--tokenizer", tokenizer, "import", "claude-code", str(_log(tmp_path / "s.jsonl")), "-o", str(out),
                 "--no-probes"])
    assert o.exception == "" and o.status == 0, (o.exception, o.stderr)
    return out, json.loads(out.read_text().splitlines()[0])


@pytest.mark.parametrize("tokenizer", ["claude", "cl100k"])
def test_the_trace_records_the_tokenizer_of_its_fit(tmp_path, monkeypatch, tokenizer):
    out, header = _import(tmp_path, tokenizer, monkeypatch)
    rec = tr.load(out).header.recorded
    assert rec.token_scale is not None and rec.tokenizer == tokenizer
    assert f"Σ {tokenizer} growth" in rec.token_scale_evidence
    # the default is left out of the file: a cl100k import writes the header it wrote before
    assert ("tokenizer" in header["recorded"]) == (tokenizer != "cl100k")


def test_a_run_under_another_tokenizer_says_so_in_one_line(tmp_path, monkeypatch):
    out, _ = _import(tmp_path, "claude", monkeypatch)
    monkeypatch.setenv("CTXSIM_TOKENIZER", "cl100k")
    o = run_cli(["run", str(out), "-s", "recorded", "-q"])
    assert o.status == 0, o.stderr
    warned = [x for x in o.stderr.splitlines() if ": warning: " in x]
    assert len(warned) == 1 and "claude" in warned[0] and "cl100k" in warned[0] and str(out) in warned[0], o.stderr
    o = run_cli(["--tokenizer", "claude", "run", str(out), "-s", "recorded", "-q"])
    assert o.status == 0 and "tokenizer" not in o.stderr, o.stderr


def test_a_cl100k_trace_run_under_claude_says_so(tmp_path, monkeypatch):
    out, _ = _import(tmp_path, "cl100k", monkeypatch)
    o = run_cli(["--tokenizer", "claude", "run", str(out), "-s", "recorded", "-q"])
    assert o.status == 0, o.stderr
    assert "fitted with the cl100k tokenizer" in o.stderr, o.stderr
    monkeypatch.setenv("CTXSIM_TOKENIZER", "cl100k")
    o = run_cli(["run", str(out), "-s", "recorded", "-q"])
    assert o.status == 0 and "tokenizer" not in o.stderr, o.stderr
