"""What a run's numbers rest on, written into its metrics (``provenance``) so a report can state
its assumptions from the runs themselves, not from today's defaults: where the trace comes from
(a synthetic preset and its seed, an imported log), the prices of every model the run was billed
on with where and when they were read, who answered the side calls (the simulated summariser and
its calibration, a live model, a recorded store), the retention model's parameters and the retry
bound on rejected requests.

Pure functions of objects the engine already holds; no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any


def trace_source(header: Any) -> dict[str, Any]:
    """``synthetic`` (preset, seed, size), ``imported`` (log format and path) or ``hand-built``."""
    meta = header.meta or {}
    if meta.get("generator"):
        out = {"kind": "synthetic", "generator": str(meta["generator"]), "preset": meta.get("preset"),
               "seed": meta.get("seed")}
        out.update({k: meta[k] for k in ("calls", "sessions") if k in meta})
        return out
    if header.source:
        src = header.source
        return {"kind": "imported", "format": src.get("format"), "path": src.get("path")}
    return {"kind": "hand-built", "name": header.name}


def prices(table: Any, models: Iterable[str]) -> dict[str, Any]:
    """Per model (USD per million tokens) as the price table holds it, with where and when the
    prices were read (the row's ``source`` and ``as_of``)."""
    out: dict[str, Any] = {}
    for name in sorted(set(models)):
        spec = table.get(name)
        row = {"input": spec.input, "output": spec.output, "cache_write_5m": spec.cache_write_5m,
               "cache_write_1h": spec.cache_write_1h, "cache_read": spec.cache_read,
               "as_of": getattr(spec, "as_of", "") or None, "source": getattr(spec, "source", "") or None}
        if spec.long_context is not None:
            row["long_context"] = {"above_tokens": spec.long_context.threshold, "input": spec.long_context.input,
                                   "output": spec.long_context.output}
        out[spec.name or name] = row
    return {"models": out}


def summariser(backend: Any) -> dict[str, Any]:
    """Who answers side calls: the simulated model (with its parameters and calibration file, if
    any), or a live / recorded one (its model)."""
    kind = type(backend).__name__
    params = getattr(backend, "params", None)
    if kind == "SimulatedLLM":
        p = dataclasses.asdict(params) if dataclasses.is_dataclass(params) else {}
        constants = {}
        for cname, value, source in (params.assumptions() if hasattr(params, "assumptions") else []):
            constants[str(cname).removeprefix("summariser.").replace(".", "_")] = {
                "value": value if isinstance(value, (int, float, str, bool)) else str(value), "source": source}
        return {"kind": "simulated", "calibration": p.get("calibration"), "constants": constants}
    out = {"kind": "live", "backend": kind, "model": getattr(backend, "_model", None)}
    if kind == "ReplayBackend":
        out = {"kind": "replay", "model": getattr(backend, "_model", None)}
    if getattr(backend, "opaque_calls", 0):
        out["opaque_prefix"] = {
            "calls": backend.opaque_calls, "tokens_not_sent": backend.opaque_tokens_omitted,
            "billing": "simulated: the trace lacks the prompt prefix's text, so it was not sent and the API's usage "
                       "would leave it out; these calls are billed by the provider model, prefix included"}
    return out


def retention(params: Any) -> dict[str, Any]:
    return params.model_dump() if hasattr(params, "model_dump") else dict(params or {})
