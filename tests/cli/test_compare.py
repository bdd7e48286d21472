"""ctxsim compare: several strategies on one or more traces, one table, JSON rows, per-strategy --set."""

from __future__ import annotations

import json

import pytest
from ctxsim.harness.cli import BadInput, main
from ctxsim.harness.cli.compare import parse_strategy_sets
from ctxsim.harness.model import trace as tr

from tests.helpers_traces import Builder


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory):
    b = Builder().user("tidy the module")
    for i in range(30):
        b.call(f"step {i}", [f"out {i}\n" + "row\n" * 300])
    t = b.call("done").build()
    path = tmp_path_factory.mktemp("cmp") / "t.jsonl"
    tr.write(t, path)
    return path


def test_parse_strategy_sets():
    assert parse_strategy_sets(["codex.max_retries=2", "truncate.max_lines=100"], ["codex", "truncate"]) == {
        "codex": {"max_retries": "2"}, "truncate": {"max_lines": "100"}}
    with pytest.raises(BadInput, match="not among --strategies"):
        parse_strategy_sets(["gemini_cli.threshold=0.7"], ["codex"])
    with pytest.raises(BadInput, match="NAME.KEY=VALUE"):
        parse_strategy_sets(["max_retries=2"], ["codex"])


def test_compare_writes_one_row_per_strategy_and_trace(trace_file, tmp_path, capsys):
    out = tmp_path / "rows.json"
    rc = main(["compare", str(trace_file), str(trace_file), "--strategies", "append_only,truncate,observation_masking",
               "--set", "truncate.max_lines=100", "--set", "truncate.head_lines=50", "--set", "truncate.tail_lines=50",
               "--window", "50000", "--no-cache", "--json", str(out)])
    assert rc == 0
    rows = json.loads(out.read_text())
    assert [r["strategy"] for r in rows] == ["append_only", "truncate", "observation_masking"] * 2
    assert all(r["tokens"]["cache_read"] == 0 for r in rows)  # --no-cache applies to every run
    shown = capsys.readouterr().out
    assert "3 strategies on 2 traces" in shown and "no prompt caching" in shown
    # truncate with 100 lines cuts each 301-line result: fewer input tokens than append-only
    assert rows[1]["tokens"]["input_uncached"] < rows[0]["tokens"]["input_uncached"]


def test_compare_bad_input_exits_2(trace_file, capsys):
    assert main(["compare", str(trace_file), "--strategies", "nope"]) == 2
    assert "unknown strategy 'nope'" in capsys.readouterr().err
    assert main(["compare", str(trace_file), "--strategies", "codex", "--set", "codex.bogus=1"]) == 2
    assert main(["compare", str(trace_file), "--strategies", "codex,codex"]) == 2


def test_compare_report(trace_file, tmp_path):
    pytest.importorskip("ctxsim.harness.report.build")
    rc = main(["compare", str(trace_file), "--strategies", "append_only,truncate", "-q", "--report", str(tmp_path / "rep")])
    assert rc == 0
    assert any((tmp_path / "rep").iterdir())
