"""Damaged input never gets a traceback: mutants of the real logs (all four importers) and of a
trace (the loader) are refused with exit 2 naming the file and the line (line:column in a JSON
document), or accepted when the damage is harmless; what ``import`` accepts loads again.

The fast sample (``make test``) is a few mutants of each kind on the small real logs; the deep
profile (``HYPOTHESIS_PROFILE=deep``, ``make test-deep``) runs at least 1,000 mutants over every
real log (import only: it re-loads what it wrote; ``python -m tests.fuzz.measure`` also runs what
import accepts through validate, run and fidelity). ``FUZZ_SEED`` picks other
mutants (the default seed is fixed: the same cases on every machine). The real logs are read in
place from ``<repo>/../shared/traces/real``; without them only the trace loader is fuzzed.
"""

from __future__ import annotations

import os

import pytest

from tests.fuzz import cases, damage, drive
from tests.fuzz.judge import Tally

DEEP = os.environ.get("HYPOTHESIS_PROFILE") == "deep"
SEED = int(os.environ.get("FUZZ_SEED", "19"))
DEEP_MUTANTS = 1_000


def _failures(tally: Tally) -> str:
    return f"{tally.failures()} of {tally.total()} mutants mishandled:\n{tally.table()}\n{tally.why_table()}"


def test_damaged_real_logs_are_refused_at_their_line(tmp_path):
    srcs = drive.real_sources(fast=not DEEP)
    if not srcs:
        pytest.skip("the real logs (../shared/traces/real) are absent")
    per = -(-DEEP_MUTANTS // len(srcs)) if DEEP else len(damage.KINDS) // 3
    tally = Tally()
    drive.fuzz_logs(srcs, per, SEED, tmp_path, tally, after=False)
    assert tally.total() >= (DEEP_MUTANTS if DEEP else 4 * per)
    assert tally.failures() == 0, _failures(tally)


def test_damaged_traces_are_refused_at_their_line(tmp_path):
    t = tmp_path / "short.jsonl"
    cases.write_trace(t, cases.TRACES["crlf"])   # a small valid trace (every kind applies to it)
    synth = tmp_path / "synth.jsonl"
    from tests.fuzz.judge import run_cli

    assert run_cli(["synth", "short", "--seed", "5", "--set", "calls=12", "-o", str(synth)]).status == 0
    tally = Tally()
    drive.fuzz_traces([t, synth], 300 if DEEP else len(damage.KINDS), SEED, tmp_path / "work", tally)
    assert tally.failures() == 0, _failures(tally)


@pytest.mark.parametrize("name", sorted(cases.TRACES))
def test_hand_made_bad_trace(name, tmp_path):
    """Each hand-made trace is refused by validate naming its line (or is valid, and then runs)."""
    if not DEEP and name not in FAST_TRACES:
        pytest.skip("deep profile only")
    tally = Tally()
    for _stage, v in cases.judge_trace(name, cases.TRACES[name], tmp_path):
        tally.add("trace: hand-made", v, name)
    assert tally.failures() == 0, _failures(tally)


# what ctxsim once crashed or was silent on (issue #19), in every run of the suite
FAST_TRACES = {"header-only", "no-call", "t-infinity", "t-string", "t-absurd", "empty-tool-use-id",
               "meta-files-list", "meta-files-escape", "usage-huge", "usage-string", "recorded-scale-nan",
               "recorded-fit-calls-over", "deep-input", "huge-digits", "bom", "bad-utf8-line6"}


def test_fuzz_is_deterministic():
    """The same seed gives the same mutants (a failure names a case anyone can re-run)."""
    data = b'{"type": "user", "t": 2, "text": "hi"}\n{"type": "assistant", "t": 3, "usage": {"input": 5}}\n'
    first, again = damage.mutants(data, True, 20, SEED), damage.mutants(data, True, 20, SEED)
    assert [m.data for m in first] == [m.data for m in again] and len(first) == 20


def test_bad_command_lines_are_refused_before_any_work(tmp_path):
    """Every hand-made bad command line (tests/fuzz/cases.py): exit 2, one line naming the option
    or the file, no traceback, no output left behind, no bad value run with exit 0."""
    values = cases.fixtures(tmp_path / "fixtures", drive.REAL)
    tally = Tally()
    for case in cases.COMMAND_LINES:
        if case.needs_real and not values["I"]:
            continue
        v, _ = cases.judge_case(case, values)
        tally.add(f"cli: {case.argv.split()[0]}", v, case.argv)
    assert tally.total() >= 140 and tally.failures() == 0, _failures(tally)
