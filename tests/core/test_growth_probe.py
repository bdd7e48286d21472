"""tests/tools/growth_probe: the doubling figure's breakdown prints, for each strategy, the time and
work ratios and five per-call medians (a smoke test on short sessions)."""

import re

from tests.tools import growth_probe


def test_growth_probe_prints_each_strategy(capsys):
    assert growth_probe.main(["truncate,codex", "--calls", "40", "--repeats", "1", "--seed", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"seed 3: user turns \d+ -> \d+", out[0])
    for name, line in zip(("truncate", "codex"), out[1:], strict=True):
        assert line.startswith(f"{name}: cpu ") and "python calls" in line and "compactions" in line
        assert len(line.rsplit(": ", 1)[1].split()) == 5   # one median a history quintile


def test_growth_probe_refuses_a_session_too_short(capsys):
    import pytest

    with pytest.raises(SystemExit) as e:
        growth_probe.main(["codex", "--calls", "0"])
    assert e.value.code == 2 and "--calls must be at least 2" in capsys.readouterr().err
