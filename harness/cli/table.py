"""The terminal table of run metrics (one row per run), shared by run and compare.

It fits the terminal: the essential columns always, the others (trace, tokens by kind, p50) in
that order while the table stays within the console's width. Runs that completed come first, cheapest
first; runs that failed come last, marked, their cost in parentheses (spend until the failure:
never ranked against the others).
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable
from typing import Any

from ctxsim.harness.report import formatting as fmt
from rich import box
from rich.console import Console
from rich.table import Table

# (header, metric path, justify, formatter); the essential ones first, then by priority
ESSENTIAL = [
    ("strategy", "strategy", "left", str),
    ("completed", "completed", "left", None),
    ("cost $", "cost_usd", "right", None),
    ("hit\nrate", "cache_hit_rate", "right", fmt.share),
    ("p95\ns", "latency_s.p95", "right", fmt.seconds),
    ("com-\npact", "compactions.succeeded", "right", fmt.count),
    ("rej-\nected", "rejected_requests", "right", fmt.count),
    ("peak\nctx", "peak_context_tokens", "right", fmt.count),
    ("reten-\ntion", "retention.score", "right", fmt.share),
    ("95% CI", "retention.ci95", "right", None),  # over seeds × probes (compare; harness/sweep/uncertainty.py)
    ("goal", "retention.goal", "right", fmt.share),
]
OPTIONAL = [
    ("trace", "trace", "left", lambda v: str(v).rsplit("/", 1)[-1]),
    ("cache\nread", "tokens.cache_read", "right", fmt.count),
    ("cache\nwrite", "tokens.cache_write", "right", fmt.count),
    ("un-\ncached", "tokens.input_uncached", "right", fmt.count),
    ("output", "tokens.output", "right", fmt.count),
    ("p50\ns", "latency_s.p50", "right", fmt.seconds),
]
FAILED_NOTE = "(cost) = spend until the session failed, not comparable with the runs that completed"
PARTLY_NOTE = "1/3 FAILED@k = 1 of 3 seeds failed, the earliest at call k"


def _get(m: dict[str, Any], path: str) -> Any:
    for part in path.split("."):
        m = m.get(part) if isinstance(m, dict) else None
    return m


def _cell(m: dict[str, Any], key: str, f) -> str:
    failed = m.get("completed") is False
    if key == "completed":
        if not failed:
            return "yes"
        runs, bad = m.get("runs"), m.get("runs_failed")
        some = f"{bad}/{runs} " if isinstance(runs, int) and isinstance(bad, int) and 0 < bad < runs else ""
        return f"{some}FAILED@{fmt.count(m.get('failed_at_call'))}"  # 1/3 FAILED@678: one seed of three, at call 678
    if key == "cost_usd":
        v = fmt.money(m.get("cost_usd")).lstrip("$")
        return f"({v})" if failed else v
    v = _get(m, key)
    if key == "retention.ci95":
        return f"{v[0]:.2f}–{v[1]:.2f}" if isinstance(v, (list, tuple)) and len(v) == 2 else fmt.MISSING
    return fmt.MISSING if v is None else f(v)


def ordered(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Completed runs by cost, then failed runs by how far they got."""
    rows = list(rows)
    done = sorted((m for m in rows if m.get("completed") is not False), key=lambda m: m.get("cost_usd") or 0)
    failed = sorted((m for m in rows if m.get("completed") is False), key=lambda m: -(m.get("failed_at_call") or 0))
    return done + failed


def _table(rows: list[dict[str, Any]], cols, cells, title: str | None) -> Table:
    failed = any(m.get("completed") is False for m in rows)
    partly = any(cells["completed"][i][:1].isdigit() for i in range(len(rows)))
    caption = (FAILED_NOTE + (f"; {PARTLY_NOTE}" if partly else "")) if failed else None
    t = Table(title=title, header_style="bold", caption=caption, caption_justify="left",
              box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 0))
    for head, _, justify, _ in cols:
        t.add_column(head, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for i, m in enumerate(rows):
        t.add_row(*(cells[k][i] for _, k, _, _ in cols), style="magenta" if m.get("completed") is False else None)
    return t


def _rendered_width(t: Table) -> int:
    """Characters of the widest line as a reader sees it (on a terminal the capture would hold the
    styles' escape codes and drop columns that fit)."""
    c = Console(width=10_000, file=io.StringIO(), record=True, color_system=None)
    c.print(t)
    return max((len(line.rstrip()) for line in c.export_text(styles=False).splitlines()), default=0)


def metrics_table(rows: Iterable[dict[str, Any]], title: str | None = None, width: int = 100) -> Table:
    """The table of ``rows``: essential columns, then optional ones while it fits ``width``."""
    rows = ordered(rows)
    cells = {c[1]: [_cell(m, c[1], c[3]) for m in rows] for c in ESSENTIAL + OPTIONAL}
    has_ci = any(_get(m, "retention.ci95") for m in rows)
    cols = [c for c in ESSENTIAL if c[1] != "retention.ci95" or has_ci]
    multi_trace = len({m.get("trace") for m in rows}) > 1
    for c in OPTIONAL:
        if c[1] == "trace" and not multi_trace:
            continue
        if _rendered_width(_table(rows, [*cols, c], cells, None)) > width:
            break  # in priority order: a later column never shows without the earlier ones
        cols.append(c)
    return _table(rows, cols, cells, title)


PIPE_WIDTH = 120  # output to a file or a pipe: no terminal to fit (rich would assume 80 columns)


def print_table(rows: Iterable[dict[str, Any]], title: str | None = None, console: Console | None = None) -> None:
    """The title on its own line (never wrapped), then the table at the terminal's width."""
    if console is None:
        console = Console()
        if not console.is_terminal and "COLUMNS" not in os.environ:
            console = Console(width=PIPE_WIDTH)
    if title:
        console.print(title, soft_wrap=True, highlight=False)
    console.print(metrics_table(rows, None, console.width))
