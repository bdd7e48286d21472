"""A report's HTML: one Jinja2 template (``harness/report/templates/report.html.j2``) for the page, and
markdown-it-py for the Markdown the sections are written in (inline spans in paragraphs, bullets,
table cells and captions; whole blocks for content another module wrote as Markdown). No HTML is
built by hand, and raw HTML in the text is escaped, never passed through.

What differs from the hand-built renderer it replaces (``tests/report/test_html.py`` shows it on a
whole report): **bold** becomes ``<strong>`` (was ``<b>``), an apostrophe is no longer escaped
(``'`` was ``&#x27;``; it is text, not markup, inside an element), and the rest of CommonMark is
honoured (a backslash-escaped ``\\|`` in a table cell shows as ``|``; ``*x*`` would be emphasis).
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from ctxsim.harness.report.content import Bullets, Figure, Para, Raw, Section, Table
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markdown_it import MarkdownIt
from markupsafe import Markup

TEMPLATES = Path(__file__).parent / "templates"
_MD = MarkdownIt("commonmark", {"html": False}).enable("table")  # html False: text like <b> is escaped


def inline(text: Any) -> Markup:
    """One line of report Markdown as HTML (escaped; `code`, **bold** and the rest of CommonMark's
    inline syntax kept)."""
    return Markup(_MD.renderInline(str(text)))


def block(text: str) -> Markup:
    """Markdown blocks (headings, bullets, tables, paragraphs) as HTML."""
    return Markup(_MD.render(text))


_ENV = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=select_autoescape(["j2", "html"]),
                   keep_trailing_newline=True)
_ENV.filters["inline"] = inline
_ENV.filters["block"] = block


def _item(item: Any, out: Path) -> dict[str, Any]:
    if isinstance(item, Raw):
        return {"kind": "block", "markdown": "\n".join(item.md)}
    if isinstance(item, Para):
        return {"kind": "para", "text": item.text}
    if isinstance(item, Bullets):
        return {"kind": "bullets", "items": item.items}
    if isinstance(item, Table):
        al = ["num" if a == "r" else "" for a in item.align]
        failed = [i < len(item.failed) and item.failed[i] for i in range(len(item.rows))]
        return {"kind": "table", "head": list(zip(item.headers, al)),
                "body": [(list(zip(r, al)), f) for r, f in zip(item.rows, failed)]}
    if isinstance(item, Figure):
        return {"kind": "figure", "title": item.title, "reading": item.reading,
                "data": base64.b64encode((out / item.file).read_bytes()).decode()}
    raise TypeError(f"no HTML for {type(item).__name__}")


def render(title: str, intro: str, sections: list[Section], out: Path, css: str, notes: Any = ()) -> str:
    sec = [{"title": s.title, "content": [_item(i, out) for i in s.content]} for s in sections]
    return _ENV.get_template("report.html.j2").render(title=title, intro=intro, sections=sec, css=Markup(css),
                                                      notes=list(notes))
