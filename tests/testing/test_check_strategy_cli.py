"""ctxsim check-strategy: passes a correct strategy, writes a replayable minimal failure otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest
from ctxsim.harness.cli import main
from ctxsim.harness.model import trace as tr

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
    assert meta["strategy"] == "tests.testing.mutants.basic:SilentEditor" and meta["window"] == 32_000
    # the run line names the class, registered or not; hypothesis itself prints nothing
    assert f"ctxsim run {out_file} --strategy tests.testing.mutants.basic:SilentEditor --window 32000" in out
    assert "Falsifying" not in out and "state." not in out
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


def _check_in_module(monkeypatch, cls) -> int:
    """``check-strategy MODULE:CLASS --profile ci`` on ``cls``, put in a module of its own."""
    import sys
    import types

    mod = types.ModuleType(f"{cls.name}_mod")
    setattr(mod, cls.__name__, cls)
    cls.__module__ = mod.__name__
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    return main(["check-strategy", f"{mod.__name__}:{cls.__name__}", "--profile", "ci"])


# a declaration the kit cannot hold to, as a user writes it: (base, class name, hook, what it returns, the error)
_BAD_DECLARATIONS = [
    ("truncate", "KilobyteLimit", "result_limits", ((10, "kilobytes"),),        # the kit counts bytes, chars, lines
     "KilobyteLimit.result_limits: units are bytes, chars, lines, got ['kilobytes']"),
    ("goose", "NumberedModel", "call_models", {"summary": 3},                   # kinds of call to model names
     "NumberedModel.call_models: kinds and models are strings, got 'summary'"),
    ("claude_code", "TextIdle", "clears_when_idle", ("1h", ("Read",)),          # (seconds, tool names)
     "TextIdle.clears_when_idle: (seconds, tool names) or None, got ('1h', ('Read',))"),
    ("claude_code", "IndexMarks", "cache_marks", ("system", -1),                # places, not message indexes
     "IndexMarks.cache_marks: places among tools, system, last, last_user, got ('system', -1)"),
    ("anthropic_compaction", "TextTrigger", "compacts_above", "150k",           # a number of tokens
     "TextTrigger.compacts_above: a number of tokens or None, got '150k'"),
]


@pytest.mark.parametrize("base, name, hook, value, message", _BAD_DECLARATIONS, ids=[d[1] for d in _BAD_DECLARATIONS])
def test_a_declaration_the_kit_cannot_hold_is_bad_input(monkeypatch, capsys, base, name, hook, value, message):
    """A declaration hook returning what the kit cannot hold the strategy to (a result limit in kilobytes
    was an internal error, exit 1) is the user's input: exit 2, one line naming the hook."""
    from ctxsim.strategies import registry

    cls = type(name, (registry.get(base),), {"name": name.lower(), hook: classmethod(lambda cls, *args: value)})
    assert _check_in_module(monkeypatch, cls) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err and "internal error" not in err


def test_a_crash_names_the_file_and_line(tmp_path, capsys):
    rc = main(["check-strategy", "tests.testing.mutants:Raiser", "-o", str(tmp_path / "f.jsonl"),
               "--shrink-seconds", "1", "--profile", "ci"])
    assert rc == 1
    out = capsys.readouterr().out
    assert "FAILED: crash" in out
    line = next(x for x in out.splitlines() if "[crash]" in x)
    assert "KeyError: 'exit_code' at tests/testing/mutants/basic.py:" in line and line.endswith("in on_tool_results")
    # the replay names it the same way
    assert main(["check-strategy", "tests.testing.mutants:Raiser", "--replay", str(tmp_path / "f.jsonl")]) == 1
    assert "at tests/testing/mutants/basic.py:" in capsys.readouterr().out.split("violations now:")[1]


def test_profiles_are_named_in_the_header(monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.delenv("HYPOTHESIS_PROFILE", raising=False)
    from ctxsim.harness.testing import selected_profile

    assert selected_profile() == "default"  # what check-strategy runs unless told
    with pytest.raises(SystemExit) as e:  # argparse: exit 2 naming the option
        main(["check-strategy", "keep_recent:KeepRecent", "--profile", "nope"])
    assert e.value.code == 2 and "--profile: invalid choice: 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize("spec", ["tests.testing.mutants.variants:MyNovaCode",
                                  "tests.testing.mutants.variants:ClearingAssistant"])
def test_a_users_subclass_is_checked_like_its_base(spec, capsys):
    """Issue #45: a variant under another class name and ``name`` runs with its base's parameters at
    the kit's window and passes (the default profile under make test-deep, as check-strategy runs it)."""
    import os

    profile = "default" if os.environ.get("HYPOTHESIS_PROFILE") == "deep" else "ci"
    assert main(["check-strategy", spec, "--profile", profile, "--sample", "0"]) == 0
    out = capsys.readouterr().out
    if spec.endswith("MyNovaCode"):
        assert "summary_reserve=3200" in out and "declares: every summary keeps Primary request and intent" in out
        assert "its own clock: the sessions also cross midnight UTC on the strategy's own clock" in out
    else:
        assert "trigger_input_tokens=16000, clear_at_least=800" in out
        assert "declares: a clearing frees at least 800 tokens per request" in out


def test_a_subclass_inherits_its_bases_known_findings():
    """A known finding is in the base's code, which a subclass runs: blind set 16's correct variant of
    tiered_budget failed its base's known no_respill finding. The registered strategy a class is or derives
    from is the nearest in its MRO; a class that derives from none has no known findings."""
    from ctxsim.harness.testing.known import known_base, known_for
    from ctxsim.strategies.base import Strategy
    from ctxsim.strategies.tiered_budget import TieredBudget

    class MyTiered(TieredBudget):
        name = "my_tiered"

    class Unnamed(MyTiered):
        pass

    assert known_base(TieredBudget) == known_base(MyTiered) == known_base(Unnamed) == "tiered_budget"
    assert known_for(known_base(MyTiered)) == known_for("tiered_budget") != ()
    assert known_base(type("Own", (Strategy,), {"name": "own"})) == ""
