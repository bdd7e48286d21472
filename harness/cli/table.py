"""The terminal table of run metrics (one row per run), shared by run and compare."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.table import Table

COLUMNS = [
    ("strategy", "strategy", "left"),
    ("trace", "trace", "left"),
    ("completed", "completed", "left"),
    ("cost $", "cost_usd", "right"),
    ("uncached", "tokens.input_uncached", "right"),
    ("cache wr", "tokens.cache_write", "right"),
    ("cache rd", "tokens.cache_read", "right"),
    ("output", "tokens.output", "right"),
    ("hit rate", "cache_hit_rate", "right"),
    ("p50 s", "latency_s.p50", "right"),
    ("p95 s", "latency_s.p95", "right"),
    ("compact", "compactions.succeeded", "right"),
    ("overflow", "overflows", "right"),
    ("pair 400", "pairing_violations", "right"),
    ("peak ctx", "peak_context_tokens", "right"),
    ("retention", "retention.score", "right"),
    ("95% CI", "retention.ci95", "right"),  # over seeds × probes (compare; harness/uncertainty.py)
    ("goal", "retention.goal", "right"),
]


def _get(m: dict[str, Any], path: str) -> Any:
    for part in path.split("."):
        m = m.get(part) if isinstance(m, dict) else None
    return m


def _fmt(v: Any, key: str, m: dict[str, Any] | None = None) -> str:
    if key == "completed":
        return "yes" if v or v is None else f"FAILED at call {(m or {}).get('failed_at_call')}"
    if v is None:
        return "–"
    if key == "trace":
        return str(v).rsplit("/", 1)[-1]
    if key == "cost_usd":
        return f"{v:,.3f}"
    if key == "retention.ci95":
        return f"{v[0]:.2f}–{v[1]:.2f}" if isinstance(v, (list, tuple)) and len(v) == 2 else "–"
    if key in ("cache_hit_rate", "retention.score", "retention.goal"):
        return f"{v:.3f}"
    if isinstance(v, float):
        return f"{v:,.2f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def metrics_table(rows: Iterable[dict[str, Any]], title: str | None = None) -> Table:
    t = Table(title=title, header_style="bold")
    for head, _, justify in COLUMNS:
        t.add_column(head, justify=justify)  # type: ignore[arg-type]
    for m in rows:
        t.add_row(*(_fmt(_get(m, key), key, m) for _, key, _ in COLUMNS))
    return t


def print_table(rows: Iterable[dict[str, Any]], title: str | None = None) -> None:
    Console(width=200).print(metrics_table(rows, title))
