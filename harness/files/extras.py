"""Optional dependencies: the opt-in parts of ctxsim import theirs through :func:`require`, which
names the pip extra to install when the module is missing (pyproject.toml, [project.optional-dependencies])."""

from __future__ import annotations

import importlib
from types import ModuleType


class MissingExtra(ImportError):
    """An opt-in feature's dependency is not installed; the message says which extra brings it."""


def require(extra: str, module: str) -> ModuleType:
    """``import module``, or a one-line :class:`MissingExtra` naming ``pip install 'ctxsim[extra]'``."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name is None or not (module == e.name or module.startswith(e.name + ".")):
            raise  # the module exists but one of its own imports failed: that is not a missing extra
        raise MissingExtra(f"{module} is not installed: this needs ctxsim's [{extra}] extra "
                           f"(pip install 'ctxsim[{extra}]')") from None
