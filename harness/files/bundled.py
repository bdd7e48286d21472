"""The data files ctxsim ships, found the same way in a wheel and in a checkout.

The design fixes where they live in the repository (``traces/presets/``, ``traces/trace.schema.json``,
``sweeps/``); setup.py maps those folders into the wheel as ``harness/data/traces`` and
``harness/data/sweeps``, so an installed ctxsim reads them from inside its own package. Run from a
checkout (``PYTHONPATH=.``, or an editable install that does not map them) the repository's folders
are used. Nothing here reads a path outside the installed package or the checkout.

Files inside ``harness/`` itself (``harness/data/summary_survival.json``, ``harness/synth/corpus/``,
``harness/provider/models.toml``) are package data already and are found next to their modules.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]   # the checkout's root when run from one (else site-packages)

# the wheel's data folder (a package under this one, whatever this one is imported as) -> the
# repository folder it is built from (setup.py's package_dir mapping)
FOLDERS = {"traces": "traces", "sweeps": "sweeps"}


class MissingData(FileNotFoundError):
    """A bundled data folder is in neither the installed package nor a checkout (a broken install)."""


def folder(name: str) -> Path:
    """The folder of a bundled data package: ``traces`` (``ctxsim.harness.data.traces`` in a wheel) or ``sweeps``."""
    package = f"{__package__.rsplit('.', 1)[0]}.data.{name}"   # ctxsim.harness.data.<name>
    try:
        spec = importlib.util.find_spec(package)
    except ModuleNotFoundError:   # ctxsim.harness.data has no such subfolder: a checkout
        spec = None
    if spec is not None and spec.submodule_search_locations:
        for loc in spec.submodule_search_locations:
            if Path(loc).is_dir():
                return Path(loc)
    src = REPO / FOLDERS[name]
    if src.is_dir():
        return src
    raise MissingData(f"ctxsim's bundled {FOLDERS[name]}/ is missing from this install "
                      f"(looked for the package {package} and for {src}); reinstall ctxsim")


def presets_dir() -> Path:
    """The synthetic generator's presets (``traces/presets/*.toml`` in the repository)."""
    return folder("traces") / "presets"


def trace_schema() -> Path:
    """The JSON schema of a trace file (``traces/trace.schema.json``)."""
    return folder("traces") / "trace.schema.json"


def sweeps_dir() -> Path:
    """The example sweep grids (``sweeps/*.toml``: demo, example, thresholds)."""
    return folder("sweeps")


def example_sweep(name: str) -> Path | None:
    """The bundled sweep grid called ``name`` (``demo`` or ``demo.toml``), or None."""
    stem = name[:-5] if name.endswith(".toml") else name
    if not stem or "/" in stem or "\\" in stem:
        return None
    p = sweeps_dir() / f"{stem}.toml"
    return p if p.is_file() else None


def example_sweeps() -> list[str]:
    return sorted(p.stem for p in sweeps_dir().glob("*.toml"))


def in_checkout() -> bool:
    """Run from the repository (not an installed wheel): its pyproject.toml and harness/ are here."""
    return (REPO / "pyproject.toml").is_file() and (REPO / "harness" / "files" / "bundled.py").is_file() and (REPO / "traces").is_dir()


def shared_logs(*parts: str) -> Path | None:
    """The project's shared real logs (``../shared/traces/real/...`` beside the checkout), or None
    when not run from a checkout or the folder is not there: a default for developer commands only."""
    if not in_checkout():
        return None
    p = REPO.parent / "shared" / "traces" / "real" / Path(*parts)
    return p if p.exists() else None
