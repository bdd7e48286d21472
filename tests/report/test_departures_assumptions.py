"""A report with a NovaCode run states NovaCode's departures from the seed under Assumptions (issue #33)."""

from tests.report.test_report import _section


def test_the_assumptions_name_novacodes_departures_in_effect(dump_report):
    a = _section((dump_report / "report.md").read_text(), "Assumptions")
    assert "`novacode` departs from its source" in a and "`ctxsim strategies novacode`" in a
    assert ("beyond the seed, on: calibrate_unanchored=True, calibrate_budgets=True, summary_input_last_resort=True, "
            "open_loop_thinking=True") in a
    assert "tail_rule='both'" in a and "memory_lock_stale_after_s=3600.0" in a and "(assumed)" in a
    assert "`append_only` departs" not in a
