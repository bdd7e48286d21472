"""ctxsim synth: byte-identical output for one seed, exit 2 on bad input."""

from ctxsim.harness.cli import main


def test_synth_writes_byte_identical_traces_for_a_seed(tmp_path, capsys):
    a, b, c = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    assert main(["synth", "short", "--seed", "4", "-o", str(a)]) == 0
    assert main(["synth", "short", "--seed", "4", "-o", str(b)]) == 0
    assert main(["synth", "short", "--seed", "5", "-o", str(c)]) == 0
    assert a.read_bytes() == b.read_bytes() != c.read_bytes()
    assert "30 model calls" in capsys.readouterr().out
    assert main(["validate", str(a)]) == 0


def test_synth_set_and_errors(tmp_path, capsys):
    out = tmp_path / "t.jsonl"
    assert main(["synth", "short", "--set", "calls=12", "-o", str(out)]) == 0
    assert "12 model calls" in capsys.readouterr().out
    assert main(["synth", "nope", "-o", str(out)]) == 2
    assert "unknown preset 'nope'" in capsys.readouterr().err
    assert main(["synth", "short", "--set", "calls=-3", "-o", str(out)]) == 2
    assert main(["synth", "short", "--seed", "-1", "-o", str(out)]) == 2
