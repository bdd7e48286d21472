"""ctxsim check-strategy: passes a correct strategy, writes a replayable minimal failure otherwise."""

from __future__ import annotations

from pathlib import Path

from harness import trace as tr
from harness.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"


def test_a_correct_user_strategy_passes(monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    assert main(["check-strategy", "keep_recent:KeepRecent", "--profile", "ci", "--no-crashes"]) == 0
    out = capsys.readouterr().out
    assert "checking keep_recent:KeepRecent (name 'keep_recent') — profile ci, window 32,000" in out
    assert "window" in out.splitlines()[1]  # manages_window: the window invariant is held
    assert "ok: every invariant held" in out


def test_a_broken_strategy_fails_with_a_trace_that_replays(tmp_path, capsys):
    out_file = tmp_path / "failure.jsonl"
    rc = main(["check-strategy", "tests.testing.mutants:SilentEditor", "-o", str(out_file), "--shrink-seconds", "3"])
    assert rc == 1
    out = capsys.readouterr().out
    assert "FAILED: stable_prefix" in out
    t = tr.load(out_file)  # a valid trace file
    meta = t.header.meta["check_strategy"]
    assert meta["strategy"] == "tests.testing.mutants:SilentEditor" and meta["window"] == 32_000
    assert t.calls >= 2  # the edit shows from the second call on (how far shrinking got varies)
    assert main(["check-strategy", "tests.testing.mutants:SilentEditor", "--replay", str(out_file)]) == 1
    replay = capsys.readouterr().out
    recorded, now = replay.split("violations now:")
    assert "[stable_prefix]" in now and now.strip().splitlines()[0].strip() in recorded
    # the fixed strategy passes the same session
    assert main(["check-strategy", "tests.testing.mutants:DeclaredEditor", "--replay", str(out_file)]) == 0


def test_bad_input_exits_2(capsys):
    assert main(["check-strategy", "no.such.module:Thing"]) == 2
    assert "cannot load" in capsys.readouterr().err
    assert main(["check-strategy", "append_only", "--set", "nope=1"]) == 2
