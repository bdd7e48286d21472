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


def test_sessions_of_several_releases_and_models_are_one_configuration_each_strategy(tmp_path, capsys):
    """A folder of real logs: Claude Code 2.0.76 on Sonnet 4.5, 2.1.12 on Opus 4.6 (one of them with no cache
    write, so no TTL in its log). claude_code reads its release (and every strategy its cache TTL) from each
    session's log, and each session runs on its own model: those are the sessions' own, not settings
    compared. Keyed by them, claude_code was one row per release, novacode one for the sessions with a TTL
    and one for the rest, and the report's retention section paired two configurations over different
    sessions and stopped with "zip() argument 2 is shorter than argument 1". Now one row per strategy over
    the three sessions, the release kept in the runs as ``log.release``."""
    import pandas as pd

    from tests.helpers_claude_code import asst, result, text, user, write

    # s3 wrote no cache entry: no TTL in its log, so a strategy runs it at its default TTL
    for sid, version, model, w in (("s1", "2.0.76", "claude-sonnet-4-5-20250929", 9_000), ("s2", "2.1.12", "claude-opus-4-6", 9_000),
                                   ("s3", "2.1.12", "claude-opus-4-6", 0)):
        write(tmp_path / "logs" / "-p" / f"{sid}.jsonl", [
            user(0, "fix the parser in src/parse.py", session=sid, version=version),
            asst(1, f"{sid}-r1", {"type": "tool_use", "id": f"{sid}t1", "name": "Read", "input": {"file_path": "src/parse.py"}},
                 w5m=w, inp=3 if w else 9_003, model=model, session=sid, version=version),
            result(2, f"{sid}t1", "def parse(x):\n    return x\n", session=sid, version=version),
            asst(3, f"{sid}-r2", text("fixed src/parse.py"), w5m=60 if w else 0, read=w, inp=3 if w else 9_063,
                 model=model, session=sid, version=version)])
    assert main(["import", "claude-code", str(tmp_path / "logs"), "-o", str(tmp_path / "traces")]) == 0
    capsys.readouterr()
    rc = main(["compare", str(tmp_path / "traces"), "--strategies", "claude_code,novacode,append_only", "--report",
               str(tmp_path / "rep")])
    out = capsys.readouterr().out
    assert rc == 0
    rows = [ln.split()[0] for ln in out.splitlines() if ln.startswith(("claude_code", "novacode", "append_only"))]
    assert sorted(rows) == ["append_only", "claude_code", "novacode"]
    runs = pd.read_parquet(tmp_path / "rep" / "runs.parquet")
    cc = runs[runs["label"] == "claude_code"]
    assert sorted(cc["log.release"]) == ["2.0.76", "2.1.12", "2.1.12"] and "param.release" not in runs
    assert not [c for c in runs.columns if c.startswith("param.")]   # nothing set: every strategy at its defaults
    assert set(runs["model_setting"]) == {""} and (tmp_path / "rep" / "report.md").is_file()


def test_two_configurations_are_paired_on_the_sessions_both_ran():
    """The retention difference of two configurations pairs their blocks by trace: a configuration that ran
    on sessions a and b against one that ran on b and c is compared on b alone."""
    import numpy as np
    from ctxsim.harness.sweep.uncertainty import Block, difference, paired

    def block(trace, score):
        return Block(np.array([[score]]), np.array([1.0]), (0,), trace)

    a, b = [block("a", 1.0), block("b", 0.75)], [block("b", 0.25), block("c", 0.0)]
    pa, pb = paired(a, b)
    assert [x.trace for x in pa] == [y.trace for y in pb] == ["b"]
    assert difference(a, b)[0] == pytest.approx(0.5)
