"""The pieces a report section is made of: written once, rendered to Markdown and to HTML
(harness/report.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ctxsim.harness.figures import Figure


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
