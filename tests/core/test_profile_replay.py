"""tests/tools/profile_replay: a warm replay's time, its profile and, with --io, the file-system
builtins' share (a smoke test on a short session)."""

import re

from ctxsim.harness.model import trace as tr
from ctxsim.harness.synth import generate, load_preset

from tests.tools import profile_replay


def test_profile_replay_prints_the_io_share(tmp_path, capsys):
    path = tmp_path / "short.jsonl"
    tr.write(generate(load_preset("short"), 3), path)
    assert profile_replay.main([str(path), "novacode", "--top", "3", "--io"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"novacode on .*: \d+ calls, warm replay [\d.]+ s CPU", out)
    got = re.search(r"file-system builtins: ([\d.]+) s own time in ([\d,]+) calls", out)
    assert got and int(got.group(2).replace(",", "")) > 0   # NovaCode writes its transcript: real files
