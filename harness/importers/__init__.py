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


def import_file(fmt: str, src: str | Path) -> ImportResult:
    return importer(fmt)(src)


__all__ = ["FORMATS", "ImportResult", "import_file", "importer"]
