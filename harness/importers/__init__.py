"""Importers: third-party agent logs to ctxsim traces (``ctxsim import FORMAT SRC -o TRACE``).

Each format is one module with one ``import_<format>(src) -> ImportResult`` function; this table
names them for the CLI. A bad or foreign file raises :class:`ctxsim.harness.model.trace.TraceError` naming the
path, the line and the reason.

May import: files, model, provider, llm, strategies, retention, replay, fidelity.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:   # the table is read by `ctxsim --help`: the trace model (pydantic, numpy) loads on use
    from ctxsim.harness.importers.common import ImportResult


def __getattr__(name: str) -> Any:
    if name == "ImportResult":
        from ctxsim.harness.importers.common import ImportResult

        return ImportResult
    raise AttributeError(name)

FORMATS: dict[str, tuple[str, str]] = {
    "claude-code": ("ctxsim.harness.importers.claude_code", "import_claude_code"),
    "codex": ("ctxsim.harness.importers.codex", "import_codex"),
    "swe-agent": ("ctxsim.harness.importers.swe_agent", "import_swe_agent"),
    "openhands": ("ctxsim.harness.importers.openhands", "import_openhands"),
}


def importer(fmt: str) -> Callable[[str | Path], ImportResult]:
    if fmt not in FORMATS:
        raise ValueError(f"unknown import format {fmt!r}; valid: {', '.join(FORMATS)}")
    module, func = FORMATS[fmt]
    return getattr(importlib.import_module(module), func)


def guarded(fn: Callable[[str | Path], ImportResult], fmt: str, src: str | Path) -> ImportResult:
    """``fn(src)``, with any value of a shape the importer does not expect (a list where a log has
    an object, a string where it has a number, a structure nested past Python's limits) refused as
    a :class:`TraceError` at the record being read: one error path for bad input, never a
    traceback."""
    from ctxsim.harness.importers import common
    from ctxsim.harness.model.trace import TraceError

    common.reset_cursor()
    try:
        return fn(src)
    except TraceError:
        raise
    except common.SHAPE_ERRORS as e:
        where = common.where()
        path, line, col = where if where else (Path(src), None, None)
        raise TraceError(path, line, common.shape_error(fmt, e), col) from None
    finally:
        common.reset_cursor()


def trace_models(trace) -> list[str]:
    """Every model id a trace names, in order of first appearance: its header's, each call's and
    each recorded compaction call's."""
    from ctxsim.harness.model.trace import CompactEvent, is_call

    out: list[str] = [trace.header.model] if trace.header.model else []
    for e in trace.events:
        m = e.model if is_call(e) else (e.meta.get("call_model") if isinstance(e, CompactEvent) else None)
        if m and m not in out:
            out.append(str(m))
    return out


def import_file(fmt: str, src: str | Path, *, calibrate: bool = True, models_file: str | None = None) -> ImportResult:
    """Import one log. With per-call usage, the recorded setting is completed from the log's own
    calls (token scale fitted on the first 30%, prompt prefixes pinned: :func:`ctxsim.harness.fidelity.compare.
    calibrate`), so a replay with no options reproduces the recorded session."""
    result = guarded(importer(fmt), fmt, src)
    if result.trace.header.usage == "per_call":   # priced: every model it names at once, before any work
        from ctxsim.harness.provider.models import load_table

        load_table(models_file).require(trace_models(result.trace))
    rec = result.trace.header.recorded
    if rec is not None:
        result.summary.update({"window": rec.window, "window_evidence": rec.window_evidence,
                               "cache_ttl": rec.cache_ttl})
    if calibrate and result.trace.header.usage == "per_call":
        from ctxsim.harness.fidelity.compare import calibrate as fit

        result.trace = fit(result.trace, models_file=models_file)
        rec = result.trace.header.recorded
        result.summary.update({"token_scale": rec.token_scale, "prefix_tokens": result.trace.header.prefix_tokens,
                               "warm_prefix_tokens": rec.warm_prefix_tokens})
    return result


__all__ = ["FORMATS", "ImportResult", "import_file", "importer", "trace_models"]
