"""The kit's small window, the model it prices on, and the parameters a strategy runs with there.

The window is small (:data:`CHECK_WINDOW`), so a few dozen steps cross it several times. A strategy
whose default thresholds are absolute token counts tuned for a 200k window can say what to use
instead: a ``check_params`` attribute on the class, a mapping or a function of the window
(docs/writing-a-strategy.md)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ctxsim.strategies.base import Strategy

CHECK_WINDOW = 32_000  # tokens: small enough that ~40 steps cross it several times, fast to tokenise
CHECK_MODEL = "claude-sonnet-4-6"

# --- parameters for a small window -----------------------------------------------------------------

# NovaCode's numbers are absolute (spec/novacode.md, tuned for 200k): scaled by window / 200k so the
# same rules act at the same relative points of a small window.
_NOVACODE_SCALED = ("summary_reserve", "soft_margin", "hard_margin", "tail_min_tokens", "tail_max_tokens",
                    "min_compressible_tokens", "summary_max_output_tokens", "restore_file_tokens",
                    "restore_total_tokens", "restore_skill_tokens", "spill_threshold_chars",
                    "spill_budget_chars", "spill_preview_chars")


def _scaled(names: tuple[str, ...], base_window: int = 200_000) -> Callable[[type[Strategy], int], dict[str, Any]]:
    def params(cls: type[Strategy], window: int) -> dict[str, Any]:
        fields = cls.Config.model_fields
        missing = [n for n in names if n not in fields]
        if missing:
            raise ValueError(f"{cls.name}: the property kit scales {', '.join(missing)}, which the config no "
                             "longer has; give the class a check_params (docs/writing-a-strategy.md)")
        return {n: max(1, int(fields[n].default * window / base_window)) for n in names}
    return params


# strategies whose modules do not (yet) declare check_params themselves
KNOWN_PARAMS: dict[str, Callable[[type[Strategy], int], dict[str, Any]]] = {
    "novacode": _scaled(_NOVACODE_SCALED),
    # NovaCode's lines and tail, no summary (N-COMP-13): the same absolute numbers, scaled alike
    "cut_no_summary": _scaled(("summary_reserve_tokens", "soft_margin_tokens", "tail_min_tokens",
                               "tail_max_tokens", "min_prefix_tokens")),
}


def params_for(cls: type[Strategy], window: int = CHECK_WINDOW) -> dict[str, Any]:
    """The parameters the kit runs ``cls`` with at ``window``: the class's own ``check_params``
    (a mapping, or a callable taking the window), else the kit's table, else the defaults."""
    hook = getattr(cls, "check_params", None)
    if isinstance(hook, Mapping):
        return dict(hook)
    if callable(hook):
        return dict(hook(window))
    known = KNOWN_PARAMS.get(cls.name)
    return known(cls, window) if known else {}
