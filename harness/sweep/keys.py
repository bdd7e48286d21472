"""A run's key: a digest of everything that moves its numbers (issue 44, item 1).

Two parts. The *setting* is what a grid asks for: strategy, resolved parameters, the trace's content
hash, model, window, cache, seed and the swept modelling constants. The *environment* is what the
machine brings to it: the price table in effect (models.toml with ``CTXSIM_MODELS`` / ``--models``
applied, hashed row by row), the tokenizer, the ctxsim version and the fitted data files ctxsim
reads (harness/data/*.json: the summariser's survival, the recovery rates). The key hashes both, so a
resume after the prices, the tokenizer, ctxsim or its fitted data changed finds nothing done and
redoes the runs; the setting's own digest (``base``) lets it say which runs were done before under
another environment, and what differed.

A checkout's version stays the same while its code changes, so the environment also holds a digest
of the code a run executes (``code``: the strategies and every harness package below the sweep,
harness/__init__.py's order; not the sweep, report, testing or command-line code, which move no
number): an edit to a strategy or the engine is a new environment too.

The label is not part of either: two grid entries that ask for one setting under two labels share
one run (harness/sweep/store.py keeps both labels).
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1] / "data"   # harness/data: fitted constants the replay reads


def _digest(obj: Any, n: int = 20) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:n]


def setting_digest(strategy: str, params: dict[str, Any], trace_hash: str, model: str | None, window: int | None,
                   cache_on: bool, seed: int, assume: dict[str, Any] | None = None, code: str = "") -> str:
    """The digest of what the grid asked for (no environment): the same for a run done under
    other prices, another tokenizer or another ctxsim. ``code``: :func:`strategy_code` of a user's
    strategy (its own source is part of the setting; ctxsim's is in :func:`code_hash`)."""
    parts: list[Any] = [strategy, params, trace_hash, model, window, cache_on, seed]
    if assume:
        parts.append(assume)
    if code:
        parts.append({"code": code})
    return _digest(parts)


def strategy_code(cls: type) -> str:
    """A digest of the source files of ``cls`` and its bases that are not ctxsim's own (a user's
    ``MODULE:CLASS``): an edit to them moves the runs' keys, so a resume redoes them (the fresh hostile
    set of issue 44: an edited strategy file kept its old rows as done). ``""`` for ctxsim's classes."""
    import inspect

    files = []
    for k in cls.__mro__:
        mod = getattr(k, "__module__", "") or ""
        if mod == "builtins" or mod == "ctxsim" or mod.startswith("ctxsim."):
            continue
        try:
            f = inspect.getsourcefile(k)
        except TypeError:
            f = None
        if f and f not in files:
            files.append(f)
    if not files:
        return ""
    h = hashlib.sha256()
    for f in files:
        try:
            h.update(Path(f).read_bytes())
        except OSError:
            h.update(f.encode())
    return h.hexdigest()[:16]


def run_key(base: str, env: dict[str, str]) -> str:
    """The run's key: its setting's digest under this environment."""
    return _digest([base, env])


def price_table_hash() -> str:
    """The price table in effect (every row, the default model), as the replay would read it."""
    from ctxsim.harness.provider.models import load_table

    table = load_table()
    rows = {name: spec.model_dump(mode="json") for name, spec in sorted(table.models.items())}
    return _digest([rows, table.default], 16)


def tokenizer_name() -> str:
    from ctxsim.harness.provider.tokenizer import default_name

    return default_name()


def ctxsim_version() -> str:
    """The installed distribution's version (pyproject.toml's, run from a checkout without one)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ctxsim")
    except PackageNotFoundError:
        import tomllib

        from ctxsim.harness.files import bundled

        pyproject = bundled.REPO / "pyproject.toml"
        return tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"] if pyproject.is_file() \
            else "unknown"


@cache
def data_hash() -> str:
    """The fitted data files the replay reads (harness/data/*.json), by content."""
    files = sorted(DATA.glob("*.json")) if DATA.is_dir() else []
    return _digest([(f.name, hashlib.sha256(f.read_bytes()).hexdigest()) for f in files], 16)


# the packages whose code computes a run's numbers (harness/__init__.py's stack below ``sweep``)
REPLAY_PACKAGES = ("files", "model", "provider", "llm", "retention", "replay", "fidelity", "importers", "synth",
                   "calibration")


@cache
def code_hash() -> str:
    """The source of the code a run executes: every .py of the strategies and of the harness
    packages below the sweep, by content (a wheel's and a checkout's alike)."""
    harness = Path(__file__).resolve().parents[1]
    import ctxsim.strategies as strategies_pkg

    roots = [Path(strategies_pkg.__file__).resolve().parent, *(harness / p for p in REPLAY_PACKAGES)]
    files = sorted(f for r in roots if r.is_dir() for f in r.rglob("*.py"))
    h = hashlib.sha256()
    for f in files:
        h.update(f"{f.parent.name}/{f.name}".encode())
        h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()[:16]


def environment() -> dict[str, str]:
    """What this process brings to every run (read now: a changed ``CTXSIM_MODELS`` counts)."""
    return {"prices": price_table_hash(), "tokenizer": tokenizer_name(), "ctxsim": ctxsim_version(),
            "data": data_hash(), "code": code_hash()}


# how each part reads in a sentence, and whether its values mean anything to a reader
NAMES = {"prices": ("price table", False), "tokenizer": ("tokenizer", True), "ctxsim": ("ctxsim version", True),
         "data": ("fitted data (harness/data)", False), "code": ("replay code (strategies, engine)", False)}


def difference(old: dict[str, str], new: dict[str, str]) -> str:
    """What differs between two environments, as a reader needs it: "another price table",
    "another tokenizer (cl100k, now claude)"."""
    parts = []
    for k, (name, show) in NAMES.items():
        a, b = old.get(k), new.get(k)
        if a != b:
            parts.append(f"another {name} ({a}, now {b})" if show else f"another {name}")
    extra = sorted(set(old) - set(NAMES))
    if extra or not parts:
        parts.append("another environment")
    return " and ".join(parts)
