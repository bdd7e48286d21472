"""Issue 44, case 9: a run file (now a run row of results.sqlite) whose ``cost_usd`` is text ended in
pandas' traceback ("TypeError: agg function failed"). ``Store.results`` (harness/sweep/store.py) names
such a row as damaged, with its key and the field, and leaves it out; the report says so in its first
lines, and a store with no other row is one line, exit 2."""

from __future__ import annotations

import json
import sqlite3

from ctxsim.harness.model import trace as tr

from tests.fuzz.judge import run_cli
from tests.helpers_traces import Builder


def _swept(tmp_path, seeds=(0,), strategies=("append_only",), trace=None, traces=None):
    """A sweep of ``strategies`` on a small session written to ``trace`` (default t.jsonl); the sweep
    file names ``traces`` (default that file). Its folder."""
    b = Builder().user("fix the parser").call("reading", results=["def parse(): pass"]).call("done")
    t = trace if trace is not None else tmp_path / "t.jsonl"
    tr.write(b.build(), t)
    g = tmp_path / "g.toml"
    g.write_text(f'traces = ["{traces or t}"]\nseeds = {list(seeds)}\n'
                 + "".join(f'[[strategies]]\nname = "{s}"\n' for s in strategies))
    out = tmp_path / "sw"
    o = run_cli(["sweep", str(g), "--out", str(out), "--workers", "1", "--no-progress"])
    assert o.status == 0 and o.exception == "", (o.exception, o.stderr)
    return out


def _damage(out, field, value) -> str:
    """Set ``field`` of the first run's stored row to ``value``; its key."""
    db = sqlite3.connect(out / "results.sqlite")
    key, row = db.execute("SELECT key, row FROM runs ORDER BY key").fetchone()
    db.execute("UPDATE runs SET row = ? WHERE key = ?", (json.dumps({**json.loads(row), field: value}), key))
    db.commit()
    db.close()
    return key


def _report(out, tmp_path):
    return run_cli(["report", str(out), "--no-ledger", "--out", str(tmp_path / "rep")])


def test_a_text_typed_cost_is_never_a_traceback(tmp_path):
    out = _swept(tmp_path)
    _damage(out, "cost_usd", "0.33")
    o = _report(out, tmp_path)
    assert o.exception == "" and len(o.error_lines) == 1 and "Traceback" not in o.stderr, (o.exception, o.stderr)


def test_a_text_typed_cost_is_named_as_a_damaged_row(tmp_path):
    out = _swept(tmp_path)
    key = _damage(out, "cost_usd", "0.33")
    o = _report(out, tmp_path)
    assert o.status != 1 and key in o.stderr and "cost_usd" in o.stderr, o.stderr


def test_a_damaged_row_among_good_ones_is_left_out_and_named(tmp_path):
    out = _swept(tmp_path, seeds=(0, 1))
    key = _damage(out, "tokens.cache_read", [1, 2])
    o = _report(out, tmp_path)
    assert o.status == 0, o.stderr
    assert "1 run could not be read" in o.stderr and key in o.stderr and "tokens.cache_read is [1, 2]" in o.stderr


def test_bad_value_accepts_numbers_and_nulls_only_in_metric_fields():
    from ctxsim.harness.sweep.store import bad_value

    assert bad_value({"cost_usd": 0.5, "calls": 3, "retention.score": None, "strategy": "x", "error": ""}) is None
    assert bad_value({"cost_usd": "0.5"}) == 'cost_usd is "0.5", not a number'
    assert bad_value({"calls": True}) == "calls is true, not a number"
    assert bad_value({"by_kind.main.calls": "3"}) == 'by_kind.main.calls is "3", not a number'
    assert bad_value([1]) == "a list, not a run row"
    # a cost below 0 or not finite is no run's (the fresh hostile set: "novacode is cheapest at $-5.00")
    assert bad_value({"cost_usd": -5.0}) == "cost_usd is -5.0, not a finite number at least 0"
    assert bad_value({"latency_s.p50": float("nan")}) == "latency_s.p50 is nan, not a finite number at least 0"
    assert bad_value({"completed": ""}) == 'completed is "", not true or false'
    assert bad_value({"completed": False, "failed_at_call": 3}) is None


def test_a_list_valued_parameter_groups_like_any_setting(tmp_path):
    """gemini_cli's ``mcp_tools = []`` is a list in its runs' rows: make sweep ended after its 756
    runs in pandas' "unhashable type: 'list'" (the sweep's summary and the report group by settings)."""
    out = _swept(tmp_path, strategies=("gemini_cli", "append_only"))
    o = _report(out, tmp_path)
    assert o.status == 0 and o.exception == "", (o.exception, o.stderr)


def test_a_trace_whose_file_name_is_not_utf8_is_swept_and_reported(tmp_path):
    """The fresh hostile set of issue 44: a trace named ``bad\\xff.jsonl`` in a sweep's folder ended the
    sweep in pyarrow's UnicodeEncodeError, and every report after it."""
    import os

    folder = tmp_path / "w"
    folder.mkdir()
    out = _swept(tmp_path, trace=os.fsdecode(os.path.join(os.fsencode(folder), b"bad\xff.jsonl")), traces=folder)
    o = _report(out, tmp_path)
    assert o.status == 0 and o.exception == "", (o.exception, o.stderr)
