"""The HTML report in a real browser (Debian's Chromium, headless, 1,000 px wide): no broken image,
nothing cut off or scrolled sideways, every figure with its reading. Skipped only where no browser
is installed (.ci/run installs it)."""

import pytest

from tests.report.browser import browser, check_page

pytestmark = pytest.mark.skipif(browser() is None, reason="no Chromium on this machine (.ci/run installs it)")


def test_the_report_reads_whole_at_1000_px(dump_report):
    r = check_page(dump_report / "index.html", width=1000)
    assert r["viewport"] == 1000
    assert r["broken"] == [] and r["images"] == 7  # every figure but the ledger (a sweep report has it)
    assert r["page_width"] <= 1000 and r["outside"] == [] and r["scrolled_tables"] == 0
    assert r["stray_markdown"] == 0  # no ** or ` shown as text
    assert len(r["figures"]) == 7
    assert all(f["img"] and len(f["reading"]) > 40 for f in r["figures"]), r["figures"]


def test_the_check_sees_what_it_looks_for(tmp_path):
    """A page with a broken image, a figure without a reading and a block wider than the window."""
    page = tmp_path / "bad.html"
    page.write_text("<html><body><figure><img alt='gone' src='missing.png'></figure>"
                    "<div style='width:1400px'>wide **not bold**</div></body></html>")
    r = check_page(page, width=1000)
    assert r["broken"] == ["gone"] and r["page_width"] > 1000 and "DIV." in r["outside"]
    assert r["figures"] == [{"img": "gone", "reading": ""}] and r["stray_markdown"] == 2
