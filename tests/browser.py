"""A page opened in a real headless browser: Debian's chromium (scripts/engines.sh installs it as root).

`probe(page, folder)` loads a copy of an HTML file with a small script added that, once the page has
loaded, records how many <img> it holds, how many decoded (complete, naturalWidth and naturalHeight > 0)
and every resource the page fetched that is not a data: URI; chromium's --dump-dom prints the DOM with
that record. The browser runs with a fresh profile, no GPU, no background networking and every host name
resolving to nothing, so a page that tried to reach the network shows it in `fetched` and gets nothing.
Without chromium the test says why it cannot run (skipped); under CI=true it fails instead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

PROBE = """<script>
window.addEventListener('load', () => {
  const imgs = Array.from(document.images);
  const fetched = performance.getEntriesByType('resource').map(e => e.name).filter(n => !n.startsWith('data:'));
  document.body.setAttribute('data-probe', JSON.stringify({images: imgs.length,
    decoded: imgs.filter(i => i.complete && i.naturalWidth > 0 && i.naturalHeight > 0).length,
    sizes: imgs.map(i => [i.naturalWidth, i.naturalHeight]), fetched: fetched}));
});
</script>"""
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--disable-extensions", "--no-first-run", "--no-default-browser-check", "--host-resolver-rules=MAP * ~NOTFOUND",
         "--virtual-time-budget=10000")


def chromium() -> str:
    """The browser's path; skips (fails under CI=true) when there is none."""
    found = next((shutil.which(name) for name in ("chromium", "chromium-browser") if shutil.which(name)), None)
    if found:
        return found
    message = "no chromium on PATH (scripts/setup.sh installs Debian's chromium as root; or: sudo apt-get install chromium)"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(message)
    pytest.skip(message)


class _Body(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.probe: str | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "body":
            self.probe = dict(attrs).get("data-probe", self.probe)


def probe(page: Path, folder: Path) -> dict:
    """{images, decoded, sizes, fetched} of `page` as chromium loaded it (a copy with the probe script)."""
    browser = chromium()
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / "probe.html"
    copy.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
    proc = subprocess.run([browser, *FLAGS, f"--user-data-dir={folder / 'profile'}", "--dump-dom", copy.resolve().as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    body = _Body()
    body.feed(proc.stdout)
    assert body.probe, f"the probe did not run (chromium's DOM has no data-probe): {proc.stdout[:500]} {proc.stderr[-1000:]}"
    return json.loads(body.probe)
