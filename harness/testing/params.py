"""The kit's small window, the model it prices on, and the parameters a strategy runs with there.

The window is small (:data:`CHECK_WINDOW`), so a few dozen steps cross it several times. A strategy
whose default thresholds are absolute token counts tuned for a 200k window says what to use
instead: a ``check_params`` attribute on the class, a mapping or a function of the window
(docs/writing-a-strategy.md). It is found through the class, so a subclass (under any class name or
``name``) runs with its base's, and a classmethod that reads ``cls.Config`` scales a subclass's own
defaults (NovaCode's and cut_no_summary's do)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxsim.strategies.base import Strategy

CHECK_WINDOW = 32_000  # tokens: small enough that ~40 steps cross it several times, fast to tokenise
CHECK_MODEL = "claude-sonnet-4-6"


def params_for(cls: type[Strategy], window: int = CHECK_WINDOW) -> dict[str, Any]:
    """The parameters the kit runs ``cls`` with at ``window``: its ``check_params`` (a mapping, or a
    callable taking the window; inherited like any class attribute), else the defaults."""
    hook = getattr(cls, "check_params", None)
    if isinstance(hook, Mapping):
        return dict(hook)
    if callable(hook):
        return dict(hook(window))
    return {}
