"""Numbers that look like results (issue 44, case 8): a price no model has, a retention constant that
is not a number, a strategy parameter larger than the window. Each is refused where it enters (exit
2, one line naming the option, file or parameter), and no JSON output holds Infinity or NaN."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from ctxsim.harness.model import trace as tr

from tests.fuzz.judge import run_cli
from tests.helpers_traces import Builder

ROW = {"provider": '"anthropic"', "window": 200000, "max_output": 32000, "input": 3.0, "output": 15.0,
       "cache_read": 0.3, "cache_write_5m": 3.75, "cache_write_1h": 6.0}


def _trace(tmp_path: Path) -> Path:
    b = Builder().user("fix the parser").call("reading", results=["def parse(): pass"]).call("done")
    p = tmp_path / "t.jsonl"
    tr.write(b.build(), p)
    return p


def _table(tmp_path: Path, **fields) -> Path:
    row = {**ROW, **fields}
    p = tmp_path / "m.toml"
    p.write_text('[models."my-model"]\n' + "\n".join(f"{k} = {v}" for k, v in row.items()) + "\n")
    return p


def _refused(o, *words: str) -> None:
    assert o.exception == "" and o.status == 2, (o.status, o.exception, o.stderr[-600:])
    assert len(o.error_lines) == 1, o.stderr
    for w in words:
        assert w in o.stderr, o.stderr


# --- prices ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("field,value", [("input", "1.7e308"), ("output", "1e300"), ("cache_read", "50000"),
                                         ("cache_write_1h", "1e20"), ("decode_tok_s", "1e308"),
                                         ("decode_tok_s", "1e-9"),
                                         ("ttft_base_s", "1e308"), ("prefill_s_per_tok", "1e10"),
                                         ("token_scale", "1e6"), ("bedrock_regional_premium", "1e300"),
                                         ("cache_ttl_s", "1e308"), ("window", "10000000000000"),
                                         ("max_output", "300000"), ("min_cacheable", "900000")])
def test_a_price_table_with_a_number_no_model_has_is_refused(tmp_path, field, value):
    """Before: input = 1.7e308 ran: cost $ inf in the table and "cost_usd": Infinity in the JSON, exit 0."""
    p = _trace(tmp_path)
    m = _table(tmp_path, **{field: value})
    out = tmp_path / "o.json"
    o = run_cli(["run", str(p), "-s", "append_only", "--models", str(m), "--model", "my-model", "-q", "--json", str(out)])
    _refused(o, field, str(m))
    assert not out.exists()


def test_the_same_checks_hold_for_ctxsim_models(tmp_path, monkeypatch):
    p = _trace(tmp_path)
    m = _table(tmp_path, input="1.7e308")
    monkeypatch.setenv("CTXSIM_MODELS", str(m))
    from ctxsim.harness.provider.models import load_table

    load_table.cache_clear()
    try:
        o = run_cli(["run", str(p), "-s", "append_only", "--model", "my-model", "-q"])
    finally:
        load_table.cache_clear()
    _refused(o, "input", f"CTXSIM_MODELS={m}")   # before: said "--models", which the user never gave


@pytest.mark.parametrize("argv", [["validate", "{p}", "--models", "{m}"], ["import", "codex", "{r}", "-o", "{o}",
                                                                        "--models", "{m}"]])
def test_every_command_taking_a_price_table_refuses_it_in_one_line(tmp_path, argv):
    p = _trace(tmp_path)
    m = _table(tmp_path, output="1e300")
    r = tmp_path / "rollout-x.jsonl"
    r.write_text("{}\n")
    o = run_cli([a.format(p=p, m=m, r=r, o=tmp_path / "o.jsonl") for a in argv])
    _refused(o, f"--models {m}", "output")


def test_a_long_context_rate_no_model_has_is_refused(tmp_path):
    p = _trace(tmp_path)
    m = tmp_path / "m.toml"
    m.write_text('[models."my-model"]\n' + "\n".join(f"{k} = {v}" for k, v in ROW.items())
                 + '\n[models."my-model".long_context]\nthreshold = 100000\ninput = 1e300\noutput = 30.0\n')
    o = run_cli(["run", str(p), "-s", "append_only", "--models", str(m), "--model", "my-model", "-q"])
    _refused(o, "long_context", "input")


def test_the_dearest_real_row_still_loads():
    from ctxsim.harness.provider.models import load_table

    t = load_table(None)
    assert max(s.output for s in t.models.values()) == 75.0   # claude-opus-4-1: the price table as it is


# --- retention constants --------------------------------------------------------------------------

@pytest.mark.parametrize("item,words", [("curve_m=nan", "finite"), ("curve_m=1e309", "finite"),
                                        ("curve_m=inf", "finite"), ("curve_m=-5", "curve_m"),
                                        ("curve_a=7", "curve_a"), ("curve_tau1=1e300", "curve_tau1"),
                                        ("summary_fidelity=nan", "finite"), ("ref_tokens=0", "ref_tokens"),
                                        ("'category_weights={goal=nan}'", "finite"),
                                        ("'category_weights={goal=-1}'", "category_weights"),
                                        ("'category_weights={gol=3}'", "gol")])
def test_a_retention_constant_that_is_not_a_real_one_is_refused(tmp_path, item, words):
    """Before: curve_m=nan scored retention 0.0, 1e309 scored 1.0, -5 scored 0.0, exit 0."""
    p = _trace(tmp_path)
    o = run_cli(["run", str(p), "-s", "append_only", "-q", "--retention", item.strip("'")])
    _refused(o, "--retention", words)


def test_nan_is_not_explained_as_a_bound(tmp_path):
    """Before: "summary_fidelity: Input should be less than or equal to 1" for nan."""
    p = _trace(tmp_path)
    for argv in (["--retention", "summary_fidelity=nan"], ["--set", "spill_failure_rate=nan"],
                 ["--set", "chars_per_token=inf"]):
        o = run_cli(["run", str(p), "-s", "novacode", "-q", *argv])
        _refused(o, "finite")
        assert "less than" not in o.stderr and "greater than" not in o.stderr, o.stderr


@pytest.mark.parametrize("value", ["nan", "inf", "-5.0", "1e309"])
def test_a_sweeps_retention_grid_is_checked_the_same_way(tmp_path, value):
    p = _trace(tmp_path)
    g = tmp_path / "g.toml"
    g.write_text(f'traces = ["{p}"]\nseeds = [0]\n[[strategies]]\nname = "append_only"\n[retention]\ncurve_m = [{value}]\n')
    o = run_cli(["sweep", str(g), "--out", str(tmp_path / "out"), "--workers", "1", "--no-progress"])
    _refused(o, "curve_m")
    assert not (tmp_path / "out" / "results.parquet").exists()


@pytest.mark.parametrize("value,words", [("nan", "finite"), ("inf", "finite"), ('"ten"', "integer"),
                                         ("1000000000", "less than or equal to 200000"), ("{ x = 1 }", "calls")])
def test_a_bad_preset_set_value_names_the_sweep_file_and_the_field(tmp_path, value, words):
    """Issue 44 fresh, case 28. Before: preset_set={calls=nan} said "<ctxsim>/traces/presets/
    short.toml: calls: Input should be a valid integer, unable to parse string as an integer": the
    shipped preset blamed, a NaN called a string. Now the sweep file and preset_set.calls."""
    g = tmp_path / "g.toml"
    g.write_text(f'traces = ["preset:short"]\nseeds = [0]\npreset_set = {{ calls = {value} }}\n'
                 '[[strategies]]\nname = "append_only"\n')
    o = run_cli(["sweep", str(g), "--out", str(tmp_path / "out"), "--workers", "1", "--no-progress"])
    _refused(o, f"{g}: preset_set", "calls", words)
    assert "presets/short.toml" not in o.stderr, o.stderr
    assert "string" not in o.stderr or value not in ("nan", "inf"), o.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("item", ["'probability={read=nan}'", "'probability={read=7}'", "'probability={red=0.5}'"])
def test_a_recovery_probability_that_is_not_one_is_refused(tmp_path, item):
    """Before: --recovery 'probability={read=nan}' ran, exit 0."""
    p = _trace(tmp_path)
    o = run_cli(["run", str(p), "-s", "append_only", "-q", "--recovery", item.strip("'")])
    _refused(o, "--recovery", "probability")


@pytest.mark.parametrize("item,words", [("fact_share=nan", "not a finite number"), ("fact_share=inf", "not a finite"),
                                        ("min_chars=1e309", "min_chars"), ("min_chars=abc", "min_chars"),
                                        ("excerpt_lines=1e12", "excerpt_lines"),
                                        ("'survival={goal=nan}'", "not finite")])
def test_a_summariser_constant_that_is_not_a_real_one_is_refused(tmp_path, item, words):
    """Found by the fresh hostile set: fact_share=nan was explained as "must be in (0, 1]", and
    min_chars=1e309 ran, exit 0."""
    p = _trace(tmp_path)
    o = run_cli(["run", str(p), "-s", "append_only", "-q", "--summariser", item.strip("'")])
    _refused(o, "--summariser", words)
    assert "must be in" not in o.stderr


# --- strategy parameters against the window -------------------------------------------------------

@pytest.mark.parametrize("strategy,sets", [
    ("novacode", ["summary_reserve=500000"]),
    ("novacode", ["soft_margin=250000", "hard_margin=190000"]),
    ("novacode", ["summary_reserve=150000", "soft_margin=60000", "hard_margin=60000"]),
    ("cut_no_summary", ["summary_reserve_tokens=300000"]),
    ("claude_code", ["autocompact_buffer_tokens=400000"]),
    ("claude_code", ["auto_compact_window=1000"]),
    ("sliding_window", ["reserve_tokens=900000"]),      # found by the fresh hostile set: each ran, exit 0
    ("roo_code", ["max_tokens=900000"]),
    ("opencode", ["reserved_tokens=900000"]),
])
def test_a_reserve_or_margin_that_leaves_no_window_is_refused(tmp_path, strategy, sets):
    """Before: summary_reserve=500000 on a 200k window ran (a compaction line below zero: every
    call compacts), exit 0."""
    p = _trace(tmp_path)
    argv = ["run", str(p), "-s", strategy, "-q", "--window", "200000", "--json", str(tmp_path / "o.json")]
    for s in sets:
        argv += ["--set", s]
    o = run_cli(argv)
    _refused(o, sets[0].split("=")[0], "200,000")
    assert not (tmp_path / "o.json").exists()


@pytest.mark.parametrize("strategy", ["structured_state", "whole_repo", "rag_memory", "tiered_budget"])
def test_a_reserve_larger_than_the_window_is_refused_by_the_windowed_family(tmp_path, strategy):
    """Issue 44 fresh, case 15. Before: --window 50000 --set reserve_tokens=60000 ran, a compaction
    before every call (127 in 120 calls), reported "completed", exit 0."""
    p = _trace(tmp_path)
    o = run_cli(["run", str(p), "-s", strategy, "-q", "--window", "50000", "--set", "reserve_tokens=60000",
                 "--json", str(tmp_path / "o.json")])
    _refused(o, "reserve_tokens 60,000", "50,000")
    assert strategy in o.error_lines[0]
    assert not (tmp_path / "o.json").exists()
    o = run_cli(["run", str(p), "-s", strategy, "-q", "--window", "50000", "--set", "reserve_tokens=49000"])
    assert o.status == 0, o.stderr   # 1,000 tokens left: room, a choice


def test_the_default_reserves_fit_a_small_window(tmp_path):
    p = _trace(tmp_path)
    o = run_cli(["run", str(p), "-s", "novacode", "-q", "--window", "60000"])
    assert o.status == 0, o.stderr
    o = run_cli(["run", str(p), "-s", "novacode", "-q", "--window", "32000"])   # a soft line below 0: a choice
    assert o.status == 0, o.stderr


# --- JSON outputs ---------------------------------------------------------------------------------

def test_json_outputs_never_hold_infinity_or_nan(tmp_path, monkeypatch):
    """A metric that is not finite (a bug, since every input is checked) is an internal error said in
    one line, never ``Infinity`` / ``NaN`` in a file a user parses."""
    from ctxsim.harness.replay import engine

    p = _trace(tmp_path)
    out = tmp_path / "o.json"

    orig = engine.replay

    def broken(*a, **kw):
        res = orig(*a, **kw)
        res.metrics["cost_usd"] = math.inf
        return res

    monkeypatch.setattr(engine, "replay", broken)
    o = run_cli(["run", str(p), "-s", "append_only", "-q", "--json", str(out)])
    assert o.exception == "" and o.status == 1 and len(o.error_lines) == 1, (o.exception, o.stderr)
    assert "cost_usd" in o.stderr and "finite" in o.stderr
    assert not out.exists()
    o = run_cli(["run", str(p), "-s", "append_only", "-q", "--json", "-"])
    assert "Infinity" not in o.stdout and o.status == 1
