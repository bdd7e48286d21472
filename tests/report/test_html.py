"""The report's HTML now comes from a Jinja2 template and markdown-it-py (harness/report/html.py)
instead of f-strings and a regex. This shows, on every line and table cell of a whole report, that
the text reads the same as under the old renderer, and where it differs, why."""

import html
import re

import pytest
from ctxsim.harness.report.build import write_report
from ctxsim.harness.report.html import inline

from tests.report.test_tuning import known_frame


def old_inline(text: str) -> str:
    """The renderer this replaces (harness/formatting.inline_html before issue 28), verbatim."""
    t = html.escape(text)
    t = re.sub(r"`([^`]+)`", r"<code>\1</code>", t)
    return re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", t)


def documented(s: str) -> str:
    """The differences harness/report/html.py documents: <strong> for <b>, an apostrophe left as
    it is, a backslash-escaped pipe shown as a pipe; and an entity of report.md's escaped user text
    (harness/report/mdtext.py: ``<`` and ``>`` outside code spans, ``](`` broken) shown as its character,
    where the old renderer escaped the ampersand a second time."""
    s = s.replace("<b>", "<strong>").replace("</b>", "</strong>").replace("&#x27;", "'").replace("\\|", "|")
    return s.replace("&amp;gt;", "&gt;").replace("&amp;lt;", "&lt;").replace("]\\(", "](")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("html")
    write_report(known_frame(), out, target=0.0)
    return out


def _texts(md: str) -> list[str]:
    out = []
    for line in md.splitlines():
        if line.startswith("|") and not re.fullmatch(r"\|[\s:|-]+\|", line):
            out += [c.strip() for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])]
        elif line.startswith("- "):
            out.append(line[2:])
        elif re.fullmatch(r"\*[^*].*[^*]\*", line):  # a figure's reading: its caption, without the italics
            out.append(line[1:-1])
        elif line and not line.startswith(("#", "![", "|")):
            out.append(line)
    return out


def test_every_line_of_a_report_renders_as_before_up_to_the_documented_differences(report):
    texts = _texts((report / "report.md").read_text())
    assert len(texts) > 100
    differ = [t for t in texts if str(inline(t)) != old_inline(t)]
    assert differ, "the premise: some lines carry bold or apostrophes"
    for t in texts:
        assert str(inline(t)) == documented(old_inline(t)), t


def test_raw_html_in_text_is_escaped_and_the_page_has_no_markdown_left(report):
    assert str(inline("<script>x</script> **b**")) == "&lt;script&gt;x&lt;/script&gt; <strong>b</strong>"
    page = (report / "index.html").read_text()
    body = re.sub(r"<[^>]+>", "", page.split("<body>", 1)[1])
    assert "**" not in body and "`" not in body
    assert page.count("<section>") == (report / "report.md").read_text().count("\n## ")
    assert page.count("data:image/png;base64,") == len(list((report / "figures").glob("*.png")))
