"""CLI start-up (issue 21): `ctxsim --help` and `ctxsim validate` load no heavy library. What a
command imports is behaviour, checked in a fresh interpreter (never timed here)."""

import json
import subprocess
import sys

import pytest
from ctxsim.harness import trace as tr

from tests.helpers_traces import Builder

HEAVY = ("pandas", "matplotlib", "dask", "distributed", "pyarrow")

_PROBE = """
import json, sys
from ctxsim.harness.cli import main
try:
    rc = main(sys.argv[1:])
except SystemExit as e:  # argparse's --help exits 0
    rc = e.code
print(json.dumps({"rc": rc, "modules": sorted({m.split(".")[0] for m in sys.modules})}))
"""


def _imported(*argv: str) -> tuple[int, set[str]]:
    out = subprocess.run([sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    return got["rc"], set(got["modules"])


@pytest.mark.parametrize("argv", [["--help"], ["run", "--help"], ["sweep", "--help"]])
def test_help_imports_no_heavy_library(argv):
    rc, mods = _imported(*argv)
    assert rc == 0
    assert not mods & set(HEAVY), f"ctxsim {' '.join(argv)} imported {sorted(mods & set(HEAVY))}"


def test_validate_imports_no_heavy_library(tmp_path):
    t = tmp_path / "t.jsonl"
    tr.write(Builder().user("go").call("look", ["x" * 100]).call("done").build(), t)
    rc, mods = _imported("validate", str(t))
    assert rc == 0
    assert not mods & set(HEAVY), f"ctxsim validate imported {sorted(mods & set(HEAVY))}"
