"""User-supplied text (a sweep label, a parameter value, a trace name) made inert in Markdown.

``report.md`` is read in viewers that render raw HTML (GitHub, VS Code, most static-site
generators): a label ``<img src=x onerror=alert(1)>`` ran there, although ``index.html`` escaped
it. Outside code spans (where a viewer shows text literally), ``<`` and ``>`` become entities and
a link opener ``](`` is broken, so a label can neither open a tag nor make a ``javascript:`` link;
everything else of the report's own Markdown (``code``, **bold**, [intervals]) is left as it is.
"""

from __future__ import annotations

import re

_CODE = re.compile(r"(`+)(.+?)\1", re.S)   # a code span: text between equal runs of backticks (CommonMark 6.1)


def _plain(text: str) -> str:
    return text.replace("<", "&lt;").replace(">", "&gt;").replace("](", "]\\(")


def escape(text: str) -> str:
    """``text`` with raw HTML and link syntax neutralised outside its code spans."""
    out, pos = [], 0
    for m in _CODE.finditer(text):
        out.append(_plain(text[pos:m.start()]))
        out.append(m.group(0))
        pos = m.end()
    out.append(_plain(text[pos:]))
    return "".join(out)
