"""Departures from the source, stated where users look (issue #33): ``ctxsim strategies novacode``
lists every one with its default; a report's Assumptions states those in effect.

Read at: spec/novacode.md (N-COMP-4, N-COMP-6, N-COMP-11, N-MEM-3, N-MEM-7, N-TRANS-3), this repository."""

from __future__ import annotations

import pandas as pd
from ctxsim.harness.cli import main
from ctxsim.strategies.departures import assumption_lines, flags, in_effect
from ctxsim.strategies.novacode.strategy import NovaCode

BEYOND = ["calibrate_unanchored", "summary_input_fit", "summary_input_last_resort", "restore_skip_in_tail",
          "open_loop_thinking"]
READINGS = ["tail_rule", "breaker_reset", "restore_file_tokens", "memory_index_max_bytes", "memory_lock_stale_after_s"]


def test_every_not_in_the_seed_parameter_is_a_departure():
    assert [f for f in flags(NovaCode) if f in BEYOND] == BEYOND
    for f in flags(NovaCode):
        assert NovaCode.Config.model_fields[f].description.startswith("not in the seed")


def test_ctxsim_strategies_novacode_lists_every_departure_with_its_default(capsys):
    assert main(["strategies", "novacode"]) == 0
    out = capsys.readouterr().out
    block = out[out.index("departures from the seed"):]
    for line, default in [("calibrate_unanchored = True: beyond the seed, on by default", "--set calibrate_unanchored=false"),
                          ("summary_input_fit = False: beyond the seed, off by default", ""),
                          ("summary_input_last_resort = True: beyond the seed, on by default", ""),
                          ("restore_skip_in_tail = False: beyond the seed, off by default", ""),
                          ("open_loop_thinking = True: beyond the seed, on by default", "--set open_loop_thinking=false"),
                          ("tail_rule = 'both': N-COMP-6 reading", ""),
                          ("breaker_reset = 'never': N-COMP-4 reading", ""),
                          ("restore_file_tokens = 5000: N-COMP-11, seed silent", "path reference"),
                          ("memory_index_max_bytes = 25000: N-MEM-3 reading", "25,600"),
                          ("memory_lock_stale_after_s = 3600.0: N-MEM-7, seed silent", "(assumed)")]:
        at = block.index(line)
        assert default in block[at:block.index("\n", at)]
    assert main(["strategies", "append_only"]) == 0
    assert "departures" not in capsys.readouterr().out


def test_in_effect_names_the_flags_that_are_on_and_every_reading():
    on = in_effect(NovaCode, {})
    assert on[0] == ("beyond the seed, on: calibrate_unanchored=True, calibrate_budgets=True, "
                     "summary_input_last_resort=True, open_loop_thinking=True")
    assert all(f"{r}=" in on[1] for r in READINGS)
    literal = in_effect(NovaCode, {"calibrate_unanchored": False, "calibrate_budgets": False, "summary_input_last_resort": False,
                                   "open_loop_thinking": False, "tail_rule": "either"})
    assert len(literal) == 1 and literal[0].startswith("readings and constants: tail_rule='either'")
    assert in_effect(NovaCode, {"summary_input_fit": True})[0].endswith("summary_input_fit=True, summary_input_last_resort=True, open_loop_thinking=True")


def test_assumption_lines_from_report_rows():
    rows = pd.DataFrame([{"strategy": "novacode", "param.open_loop_thinking": False, "param.keep_tool_uses": float("nan")},
                         {"strategy": "novacode", "param.open_loop_thinking": float("nan"), "param.keep_tool_uses": float("nan")},
                         {"strategy": "context_editing", "param.open_loop_thinking": float("nan"), "param.keep_tool_uses": 3}])
    lines = assumption_lines(rows)
    # context_editing's one reading the docs do not settle (clear_at_least per request or per clearing, #46)
    assert len(lines) == 3 and all(x.startswith("**`novacode` departs from its source**") for x in lines[:2])
    assert lines[2].startswith("**`context_editing` departs from its source**") and "clear_at_least_scope=" in lines[2]
    assert "open_loop_thinking=True" in lines[1] and "open_loop_thinking=True" not in lines[0]
    assert assumption_lines([("append_only", {}), ("no_such_strategy", {})]) == []
