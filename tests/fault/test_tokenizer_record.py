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


def test_a_trace_fitted_with_its_tool_calls_as_json_is_fitted_anew_and_a_run_says_so(tmp_path, monkeypatch):
    """Issue 41: a Claude model reads a tool call in its function-call format, an OpenAI model as JSON
    (tokenizer.TOOL_FORMAT). The import records how its fit counted them (``tool_calls``: xml for this
    Sonnet 4.5 log); a trace fitted before that (the field absent: json) is fitted anew by fidelity, and
    a run on it says why its scale is off, in one line; priced on an OpenAI model it counts them as
    JSON, as fitted, and says nothing of it."""
    from ctxsim.harness.fidelity.compare import run_fidelity

    out, header = _import(tmp_path, "cl100k", monkeypatch)
    t = tr.load(out)
    assert t.header.recorded.tool_calls == "xml" and header["recorded"]["tool_calls"] == "xml"
    fitted = run_fidelity(t).report["token_scale"]
    body = out.read_text().splitlines()[1:]
    header["recorded"]["token_scale"] = 2.0   # a scale fidelity would use as it is
    kept = tmp_path / "kept.jsonl"
    kept.write_text("\n".join([json.dumps(header), *body]) + "\n")
    assert run_fidelity(tr.load(kept)).report["token_scale"] == 2.0 != fitted
    header["recorded"].pop("tool_calls")   # as imported before: fitted on the JSON counts
    old = tmp_path / "old.jsonl"
    old.write_text("\n".join([json.dumps(header), *body]) + "\n")
    assert tr.load(old).header.recorded.tool_calls == "json"
    assert run_fidelity(tr.load(old)).report["token_scale"] == fitted   # fitted anew, as the import does now
    o = run_cli(["run", str(old), "-s", "recorded", "-q"])
    warned = [x for x in o.stderr.splitlines() if ": warning: " in x and "tool calls" in x]   # (and its scale's cost)
    assert o.status == 0 and len(warned) == 1 and "counted as json" in warned[0] and "as xml" in warned[0], o.stderr
    o = run_cli(["run", str(out), "-s", "recorded", "-q"])
    assert o.status == 0 and "tool calls" not in o.stderr, o.stderr
    o = run_cli(["run", str(old), "-s", "recorded", "-q", "--model", "gpt-5.2"])
    assert o.status == 0 and "--model gpt-5.2" in o.stderr and "tool calls" not in o.stderr, o.stderr
