"""What pyproject.toml cannot say.

The design keeps harness/ and strategies/ at the top of the repository, and the presets, the trace
schema and the example sweeps there too (traces/, sweeps/). They install under one import package,
``ctxsim`` (``ctxsim.harness``, ``ctxsim.strategies``), so that neither name collides with the
index's ``harness`` and ``strategies`` distributions (issue 32); the wheel ships traces/ and sweeps/
inside the package as ctxsim/harness/data/traces and ctxsim/harness/data/sweeps (read through
harness/files/bundled.py)."""

from setuptools import find_packages, setup

PREFIX = "ctxsim."
# wheel package -> repository folder (harness/files/bundled.py FOLDERS: ctxsim.harness.data.<key>)
MAPPED = {"ctxsim.harness": "harness", "ctxsim.strategies": "strategies",
          "ctxsim.harness.data.traces": "traces", "ctxsim.harness.data.traces.presets": "traces/presets",
          "ctxsim.harness.data.sweeps": "sweeps"}
# data-only folders inside harness/ (no __init__.py): package data of their own
DATA = {"ctxsim.harness.data": ["*.json"], "ctxsim.harness.synth.corpus": ["*.json.gz", "*.md", "*.txt"],
        "ctxsim.harness.data.traces": ["trace.schema.json", "README.md"], "ctxsim.harness.data.traces.presets": ["*.toml"],
        "ctxsim.harness.data.sweeps": ["*.toml"], "ctxsim.harness.report.templates": ["*.j2"]}

setup(
    packages=[PREFIX + p for p in find_packages(include=["harness", "harness.*", "strategies", "strategies.*"])] + list(DATA),
    package_dir=MAPPED,
    package_data={"ctxsim.harness.provider": ["*.toml"], **DATA},
)
