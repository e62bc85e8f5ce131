"""Render a ReplayLens report in headless Chromium: screenshot, DOM dump and the requests the page made.

    python scripts/screenshot_report.py                 # demo audit → docs/report.png
    python scripts/screenshot_report.py OUT/report.html shot.png

Used by tests/test_browser.py (the same flags and the same network check) and to produce the README
screenshot.  Chromium runs with a fresh profile, no background networking, and every host name
resolving to nothing; its net log tells which requests the *page* started (the browser's own
housekeeping requests carry no page origin and are ignored).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
         "--host-resolver-rules=MAP * ~NOTFOUND"]


def chromium() -> str | None:
    """The Chromium executable (Debian's ``chromium``), or None."""
    for name in ("/usr/bin/chromium", "chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


def page_requests(netlog: Path) -> list[str]:
    """URLs of every request a page started (initiator is an origin), from a Chromium net log."""
    data = json.loads(netlog.read_text(encoding="utf-8"))
    start = data["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    return [e["params"]["url"] for e in data["events"]
            if e.get("type") == start and e.get("params", {}).get("initiator", "not an origin") != "not an origin"]


def render(page: Path, *, screenshot: Path | None = None, width: int = 1100, height: int = 1400,
           timeout: float = 120.0) -> tuple[str, list[str]]:
    """Load ``page`` in headless Chromium; returns (the DOM after load, the URLs the page requested).
    With ``screenshot`` a PNG of the viewport is written there (a second, otherwise identical run)."""
    exe = chromium()
    if exe is None:
        raise FileNotFoundError("chromium is not installed (Debian: apt-get install chromium)")
    url = page.resolve().as_uri()
    with tempfile.TemporaryDirectory(prefix="replaylens-chromium-") as tmp:
        base = [exe, *FLAGS, f"--window-size={width},{height}"]
        netlog = Path(tmp) / "net.json"
        dom = subprocess.run([*base, f"--user-data-dir={tmp}/profile", f"--log-net-log={netlog}", "--dump-dom", url],
                             capture_output=True, text=True, timeout=timeout, check=True).stdout
        requests = page_requests(netlog)
        if screenshot is not None:
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run([*base, f"--user-data-dir={tmp}/profile2", f"--screenshot={screenshot.resolve()}", url],
                           capture_output=True, text=True, timeout=timeout, check=True)
            if not screenshot.exists():
                raise RuntimeError(f"chromium wrote no screenshot for {url}")
    return dom, requests


def _demo_report(tmp: Path) -> Path:
    """A scripted demo audit (no model) whose report.html is shown in the README."""
    out = tmp / "replaylens-demo"
    subprocess.run([sys.executable, "-m", "replaylens", "demo", "--scripted", "--out", str(out), "--streams", "8",
                    "--resamples", "2000", "--quiet"], check=True, capture_output=True, text=True)
    return out / "report.html"


def main(argv: list[str]) -> int:
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(argv[0]) if argv else _demo_report(Path(tmp))
        png = Path(argv[1]) if len(argv) > 1 else root / "docs" / "report.png"
        _, requests = render(page, screenshot=png, width=1100, height=1500)
    if requests:
        print(f"the page requested {requests}", file=sys.stderr)
        return 1
    print(png)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
