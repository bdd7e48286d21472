"""ctxsim reproduce (issue 46): exits 0 and prints one row per published study; the fast version runs
here on synthetic sessions and the bundled real logs where present; the same run gives the same
figures; bad options are one line and exit 2; docs/validation.md is what the full run writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ctxsim.harness.cli import main
from ctxsim.harness.validation import published, studies, table

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / ".." / "shared" / "traces" / "real"
SOURCES = [p.source for p in published.ALL]


@pytest.fixture(scope="module")
def fast_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("repro") / "figures.json"
    args = ["reproduce", "--fast", "--json", str(out)] + ([] if REAL.is_dir() else ["--no-real"])
    return args, out


def test_fast_run_prints_one_row_per_source_and_exits_0(fast_run, capsys):
    args, out = fast_run
    assert main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("6 published results reproduced (fast run;")
    rows = [ln for ln in lines[3:] if ln[:1].strip()]  # a row starts in the source column; wrapped lines do not
    assert [r[:27].strip() for r in rows] == SOURCES
    assert all(r.split()[-1] in ("yes", "partly", "no") for r in rows)
    doc = json.loads(out.read_text())
    assert [d["source"] for d in doc] == [p.key for p in published.ALL]
    for d in doc:
        assert d["published"]["citation"] and d["setup"] and d["ctxsim"]["text"] and d["rule"]
        assert d["agrees"] in ("yes", "partly", "no")
        assert d["agrees"] == "yes" or d["reason"]   # a difference is explained


def test_the_same_run_gives_the_same_figures():
    a = table.as_json(studies.run_all(fast=True, only=["complexity_trap", "ace_collapse"]))
    b = table.as_json(studies.run_all(fast=True, only=["complexity_trap", "ace_collapse"]))
    assert a == b


def test_the_complexity_trap_arms_halve_the_raw_agents_cost_without_a_cache():
    """The study's headline on its own shape: masking and the checkpoints roughly halve the raw cost."""
    f = studies.complexity_trap(fast=True)
    assert -0.6 < f.figures["masking_vs_raw"] < -0.4 and -0.6 < f.figures["summary_vs_raw"] < -0.35
    assert f.figures["cached_masking_vs_raw"] > 0   # with a prompt cache masking costs more than raw


@pytest.mark.parametrize("args,message", [
    (["--only", "nope"], "--only 'nope': unknown nope"),
    (["--real", "/nonexistent/logs"], "--real /nonexistent/logs: not a folder"),
    (["--real", ".", "--no-real"], "--real and --no-real: give one"),
])
def test_bad_options_are_one_line_and_exit_2(args, message, capsys):
    assert main(["reproduce", "--fast", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and message in err


def test_the_terminal_table_wraps_long_cells():
    f = studies.ace_collapse(fast=True)
    lines = table.terminal([f])
    assert lines[2].startswith("ACE context collapse") and all(len(ln) <= 120 for ln in lines)


@pytest.mark.slow
@pytest.mark.skipif(not REAL.is_dir(), reason="real logs not present (../shared/traces/real)")
def test_docs_validation_md_is_what_the_full_run_writes(tmp_path):
    out = tmp_path / "validation.md"
    assert main(["reproduce", "--markdown", str(out)]) == 0
    written = out.read_text(encoding="utf-8").replace(str(out), "docs/validation.md")
    assert written == (ROOT / "docs" / "validation.md").read_text(encoding="utf-8"), \
        "docs/validation.md is stale: run `ctxsim reproduce --markdown docs/validation.md`"
