"""The one thing pyproject.toml cannot say: the design keeps presets, the trace schema and the example
sweeps at the top of the repository (traces/, sweeps/), and the wheel ships them inside the package
as harness/data/traces and harness/data/sweeps (read through harness/bundled.py)."""

from setuptools import find_packages, setup

# wheel package -> repository folder (harness/bundled.py FOLDERS: harness.data.<key>)
MAPPED = {"harness.data.traces": "traces", "harness.data.traces.presets": "traces/presets",
          "harness.data.sweeps": "sweeps"}
# data-only folders inside harness/ (no __init__.py): package data of their own
DATA = {"harness.data": ["*.json"], "harness.synth.corpus": ["*.json.gz", "*.md", "*.txt"],
        "harness.data.traces": ["trace.schema.json", "README.md"], "harness.data.traces.presets": ["*.toml"],
        "harness.data.sweeps": ["*.toml"], "harness.templates": ["*.j2"]}

setup(
    packages=find_packages(include=["harness", "harness.*", "strategies", "strategies.*"]) + list(DATA),
    package_dir=MAPPED,
    package_data={"harness.provider": ["*.toml"], **DATA},
)
