"""What a run's numbers rest on is written into its metrics (harness/replay/provenance.py)."""

from ctxsim.harness.provider.models import load_table
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.harness.replay.provenance import prices, trace_source

from tests.helpers_traces import Builder, header


def test_trace_source_synthetic_imported_hand_built():
    synth = header(meta={"generator": "ctxsim synth", "preset": "long-200k", "seed": 1, "calls": 400, "sessions": 1})
    assert trace_source(synth) == {"kind": "synthetic", "generator": "ctxsim synth", "preset": "long-200k", "seed": 1,
                                   "calls": 400, "sessions": 1}
    imported = header(source={"format": "claude-code", "path": "/logs/s.jsonl", "version": "2.1"})
    assert trace_source(imported) == {"kind": "imported", "format": "claude-code", "path": "/logs/s.jsonl"}
    assert trace_source(header(name="x")) == {"kind": "hand-built", "name": "x"}


def test_prices_come_from_the_table_with_their_date_and_source():
    p = prices(load_table(), ["claude-sonnet-4-6", "claude-sonnet-4-6"])["models"]
    assert list(p) == ["claude-sonnet-4-6"]
    row = p["claude-sonnet-4-6"]
    assert {k: row[k] for k in ("input", "output", "cache_write_5m", "cache_write_1h", "cache_read")} == {
        "input": 3.0, "output": 15.0, "cache_write_5m": 3.75, "cache_write_1h": 6.0, "cache_read": 0.3}
    assert row["as_of"] == "2026-12-01" and row["source"].startswith("platform.claude.com")


def test_a_run_records_its_provenance():
    t = Builder().user("go").call("a", ["x"]).call("done").build()
    m = replay(t, "append_only", None, RunConfig(retention={"summary_fidelity": 0.8}, max_attempts=3)).metrics
    pv = m["provenance"]
    assert pv["trace"]["kind"] == "hand-built" and pv["summariser"]["kind"] == "simulated"
    assert pv["summariser"]["calibration"] is None and pv["retention"]["summary_fidelity"] == 0.8
    assert pv["max_attempts_per_call"] == 3 and list(pv["prices"]["models"]) == ["claude-sonnet-4-6"]
