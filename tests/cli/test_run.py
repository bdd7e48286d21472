"""ctxsim run: a registered name or MODULE:CLASS, JSON and per-call rows, clear errors."""

import json

import pandas as pd
from ctxsim.harness.cli import main
from ctxsim.harness.model import trace as tr

from tests.helpers_traces import Builder


def test_run_by_name_and_by_module_class(tmp_path, capsys):
    t = tmp_path / "t.jsonl"
    tr.write(Builder().user("go").call("look", ["x" * 100]).call("done").build(), t)
    assert main(["run", str(t), "-s", "append_only", "--json", str(tmp_path / "a.json"),
                 "--calls", str(tmp_path / "a.parquet"), "-q"]) == 0
    assert main(["run", str(t), "-s", "ctxsim.strategies.append_only:AppendOnly", "--json", str(tmp_path / "b.json"), "-q"]) == 0
    a, b = (json.loads((tmp_path / f"{x}.json").read_text()) for x in "ab")
    assert a["cost_usd"] == b["cost_usd"] and a["calls"] == 2
    for key in ("strategy", "trace", "model", "window", "calls", "cost_usd", "tokens", "cache_hit_rate", "latency_s",
                "compactions", "overflows", "pairing_violations", "spills", "readbacks", "peak_context_tokens",
                "estimator", "retention"):
        assert key in a, key
    rows = pd.read_parquet(tmp_path / "a.parquet")
    assert len(rows) == 2 and {"kind", "context_tokens", "cost_usd", "overflow", "pairing_violation", "compaction"} <= set(rows)


def test_run_bad_input_exits_2(tmp_path, capsys):
    t = tmp_path / "t.jsonl"
    tr.write(Builder().user("go").call("done").build(), t)
    assert main(["run", str(t), "-s", "no_such_strategy"]) == 2
    assert "valid: " in capsys.readouterr().err
    assert main(["run", str(t), "-s", "append_only", "--set", "nope=1"]) == 2
    assert main(["run", str(t), "-s", "append_only", "--calls", str(tmp_path / "x.txt")]) == 2
    assert main(["run", str(t), "-s", "append_only", "--model", "gpt-9"]) == 2
    assert main(["run", str(t), "-s", "no.module:Thing"]) == 2
