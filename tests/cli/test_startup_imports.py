"""`ctxsim --help` and `ctxsim validate` import nothing heavy (issue 30): no pandas, numpy,
pyarrow, matplotlib, dask or anthropic; they are loaded by the commands that use them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HEAVY = ("pandas", "numpy", "pyarrow", "matplotlib", "dask", "distributed", "anthropic")
KIT = Path(__file__).resolve().parents[2] / "traces" / "kit"

PROBE = f"""
import contextlib, io, json, sys
from ctxsim.harness.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        main(sys.argv[1:])
    except SystemExit:
        pass
print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})))
"""


def loaded(*argv: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, check=True).stdout
    return sorted({m.split(".")[0] for m in json.loads(out.strip().splitlines()[-1])})


def test_help_imports_nothing_heavy():
    assert loaded("--help") == []


def test_validate_imports_nothing_heavy():
    trace = sorted(KIT.glob("*.jsonl"))[0]
    assert loaded("validate", str(trace)) == []
