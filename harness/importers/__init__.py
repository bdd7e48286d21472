"""Importers: third-party agent logs to ctxsim traces (``ctxsim import FORMAT SRC -o TRACE``).

Each format is one module with one ``import_<format>(src) -> ImportResult`` function; this table
names them for the CLI. A bad or foreign file raises :class:`harness.trace.TraceError` naming the
path, the line and the reason.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

from harness.importers.common import ImportResult

FORMATS: dict[str, tuple[str, str]] = {
    "claude-code": ("harness.importers.claude_code", "import_claude_code"),
    "codex": ("harness.importers.codex", "import_codex"),
    "swe-agent": ("harness.importers.swe_agent", "import_swe_agent"),
    "openhands": ("harness.importers.openhands", "import_openhands"),
}


def importer(fmt: str) -> Callable[[str | Path], ImportResult]:
    if fmt not in FORMATS:
        raise ValueError(f"unknown import format {fmt!r}; valid: {', '.join(FORMATS)}")
    module, func = FORMATS[fmt]
    return getattr(importlib.import_module(module), func)


def import_file(fmt: str, src: str | Path, *, calibrate: bool = True, models_file: str | None = None) -> ImportResult:
    """Import one log. With per-call usage, the recorded setting is completed from the log's own
    calls (token scale fitted on the first 30%, prompt prefixes pinned: :func:`harness.fidelity.
    calibrate`), so a replay with no options reproduces the recorded session."""
    result = importer(fmt)(src)
    rec = result.trace.header.recorded
    if rec is not None:
        result.summary.update({"window": rec.window, "window_evidence": rec.window_evidence,
                               "cache_ttl": rec.cache_ttl})
    if calibrate and result.trace.header.usage == "per_call":
        from harness.fidelity import calibrate as fit

        result.trace = fit(result.trace, models_file=models_file)
        rec = result.trace.header.recorded
        result.summary.update({"token_scale": rec.token_scale, "prefix_tokens": result.trace.header.prefix_tokens,
                               "warm_prefix_tokens": rec.warm_prefix_tokens})
    return result


__all__ = ["FORMATS", "ImportResult", "import_file", "importer"]
