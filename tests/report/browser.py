"""Look at a report the way a reader does: Debian's Chromium, headless, at a given width.

``check_page`` loads a copy of the page with a small script added that, once everything has
loaded, writes what it measured into the page; Chromium prints the resulting DOM
(``--dump-dom``) and the measurements are read back. ``screenshot`` renders the whole page to a
PNG. Both return None when no browser is installed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
# the machine's network is closed: keep Chromium from trying (machines/python.md)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--force-device-scale-factor=1"]

PROBE = r"""
<script>
window.addEventListener('load', () => {
  const vw = window.innerWidth;
  const broken = [...document.images].filter(i => !i.complete || i.naturalWidth === 0).map(i => i.alt);
  const outside = [...document.querySelectorAll('body *')]
    .filter(e => e.getBoundingClientRect().right > vw + 0.5).map(e => e.tagName + '.' + e.className).slice(0, 20);
  const scrolled = [...document.querySelectorAll('.tablewrap')].filter(w => w.scrollWidth > w.clientWidth + 0.5).length;
  const figures = [...document.querySelectorAll('figure')].map(f => ({
    img: f.querySelector('img') ? f.querySelector('img').alt : null,
    reading: (f.querySelector('figcaption.reading') || {textContent: ''}).textContent.trim()}));
  const stray = (document.body.innerText.match(/\*\*|`/g) || []).length;  // Markdown left unrendered
  const out = {viewport: vw, stray_markdown: stray, page_width: document.documentElement.scrollWidth,
               page_height: document.documentElement.scrollHeight, images: document.images.length,
               broken: broken, outside: outside, scrolled_tables: scrolled, figures: figures};
  const pre = document.createElement('pre');
  pre.id = 'ctxsim-check';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>
"""


def browser() -> str | None:
    for c in CANDIDATES:
        if Path(c).exists():
            return c
    return shutil.which("chromium")


def _run(args: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([browser(), *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                              text=True, timeout=timeout)


def check_page(page: Path, width: int = 1000, height: int = 900) -> dict[str, Any] | None:
    if browser() is None:
        return None
    with tempfile.TemporaryDirectory() as d:
        copy = Path(d) / "page.html"
        copy.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
        res = _run([f"--window-size={width},{height}", "--virtual-time-budget=20000", "--dump-dom", copy.as_uri()])
    start = res.stdout.find('<pre id="ctxsim-check">')
    if start < 0:
        raise RuntimeError(f"the page reported nothing (chromium exit {res.returncode}): {res.stderr[-500:]}")
    text = res.stdout[start:].split(">", 1)[1].split("</pre>", 1)[0]
    import html

    return json.loads(html.unescape(text))


def screenshot(page: Path, dest: Path, width: int = 1000, height: int | None = None) -> Path | None:
    """The whole page (``height`` = the page's own height unless given) as a PNG."""
    if browser() is None:
        return None
    if height is None:
        height = (check_page(page, width) or {}).get("page_height", 2000)
    dest.parent.mkdir(parents=True, exist_ok=True)
    _run([f"--window-size={width},{height}", "--virtual-time-budget=20000", f"--screenshot={dest.resolve()}",
          page.resolve().as_uri()])
    return dest if dest.exists() else None
