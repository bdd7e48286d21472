"""The pieces a report section is made of, written once and rendered to Markdown and to HTML
(harness/report/build.py), and the :class:`Context` every section and figure reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd


@dataclass
class Para:
    """A paragraph; ``code`` and **bold** spans are kept in HTML."""

    text: str


@dataclass
class Bullets:
    items: list[str]


@dataclass
class Table:
    headers: list[str]
    rows: list[list[str]]
    align: list[str]  # "l" | "r" per column
    failed: list[bool] = field(default_factory=list)  # rows marked failed (shaded in HTML)


@dataclass
class Raw:
    """Content another module rendered itself (its Markdown lines and their HTML)."""

    md: list[str]
    html: str


@dataclass
class Section:
    title: str
    content: list[Para | Bullets | Table | Figure | Raw]


@dataclass
class Figure:
    file: str
    title: str
    reading: str


@dataclass
class Context:
    runs: pd.DataFrame                 # one row per successful run, with ``completed`` and ``config``
    cfgs: pd.DataFrame                 # one row per configuration × window (analysis.by_config), ranked
    calls: dict[str, pd.DataFrame]     # per-call rows by run key
    ledger: pd.DataFrame | None
    target: float
    out: Path
    errors: pd.DataFrame               # runs that raised (no numbers)
    probes: dict[str, pd.DataFrame] = field(default_factory=dict)  # run key -> per-probe scores
    rec: dict[str, Any] | None = None
    figures: int = 0
    sets: list[Any] = field(default_factory=list)          # tuning.Setting per configuration × window × traces
    answers: list[Any] = field(default_factory=list)       # tuning.Answer per swept strategy × window × traces
    grid_warnings: list[str] = field(default_factory=list)  # what the grid did not measure (grid_checks)
    retention_method: str = ""
    grid_ledger: pd.DataFrame | None = None                # tuning.ledger: N-WIN-3 on the grid's own axis
    cost_column: str = "cost_usd"
    pooled: list[Any] = field(default_factory=list)        # tuning.Setting per configuration × window, all traces
    rec_setting: Any = None                                # the recommendation's pooled setting (needs at risk)

    @property
    def window(self) -> int:
        return int(self.cfgs["window"].min())

    @property
    def primary(self) -> pd.DataFrame:
        """Configurations at the smallest window (where strategies differ), in report order."""
        return self.cfgs[self.cfgs["window"] == self.window]

    @property
    def windows(self) -> list[int]:
        return sorted(int(w) for w in self.cfgs["window"].dropna().unique())

    def figure(self, fig: Figure | None) -> Section | None:
        if fig is None:
            return None
        self.figures += 1
        return Section(f"Figure {self.figures}. {fig.title}", [fig])

    def figures_section(self, title: str, figs_: list[Figure]) -> Section | None:
        """Several figures under one numbered heading."""
        if not figs_:
            return None
        self.figures += 1
        return Section(f"Figure {self.figures}. {title}", list(figs_))
