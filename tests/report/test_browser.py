"""report.html and the comparison page in a real browser (headless Chromium): key elements rendered and
visible, a narrow window without horizontal page scrolling, a screenshot, and no request leaving the page."""

from __future__ import annotations

import importlib.util
import json
import re
from html import escape
from pathlib import Path
from types import ModuleType

import pytest
from click.testing import CliRunner
from PIL import Image

from conftest import require
from replaylens.cli._main import cli

pytestmark = pytest.mark.slow  # end-to-end runs: left out of the fast subset (README)

ROOT = Path(__file__).resolve().parents[2]


def _shots() -> ModuleType:
    spec = importlib.util.spec_from_file_location("screenshot_report", ROOT / "scripts" / "screenshot_report.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


shots = _shots()

REPORT_IDS = ["header", "verdicts", "definitions", "cell-table", "forest", "heatmap", "consequence-table", "examples",
              "provenance", "agent-table", "compare-agent-1"]
COMPARE_IDS = ["header", "comparison", "compare-ab", "verdicts", "provenance"]

#: appended to a copy of the page (CSP relaxed for this one inline script only): where each element is drawn
#: (an element must start inside the window), how far the page and each table box scroll sideways, the body's
#: computed font and the smallest SVG label in CSS px as drawn (font size × the SVG's display scale)
PROBE = """<script>
const ids = %s;
const out = {};
for (const id of ids) {
  const e = document.getElementById(id);
  if (!e) { out[id] = null; continue; }
  const r = e.getBoundingClientRect(), s = getComputedStyle(e);
  out[id] = {w: r.width, h: r.height, visible: s.visibility !== "hidden" && s.display !== "none" && r.width > 0
             && r.height > 0 && r.left >= -1 && r.left < document.documentElement.clientWidth};
}
out.__svg = Array.from(document.querySelectorAll("svg")).map(s => s.getBoundingClientRect().width);
out.__overflow = document.documentElement.scrollWidth - document.documentElement.clientWidth;
out.__boxes = Array.from(document.querySelectorAll(".scroll")).map(e => e.scrollWidth - e.clientWidth);
out.__width = document.documentElement.clientWidth;
out.__font = getComputedStyle(document.body).fontFamily;
let smallest = null;
for (const svg of document.querySelectorAll("svg")) {
  const vb = svg.viewBox.baseVal, k = vb && vb.width ? svg.getBoundingClientRect().width / vb.width : 1;
  for (const t of svg.querySelectorAll("text")) {
    const px = parseFloat(getComputedStyle(t).fontSize) * k;
    if (smallest === null || px < smallest) smallest = px;
  }
}
out.__smallest_label = smallest;
const pre = document.createElement("pre"); pre.id = "probe-result"; pre.textContent = JSON.stringify(out);
(window.parent !== window ? window.parent.document : document).body.appendChild(pre);
</script>"""

#: intended body font stack (style.css); a dropped declaration (e.g. HTML-escaped quotes) leaves the default serif
BODY_FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif'


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if shots.chromium() is None:
        require("browser", "headless Chromium (/usr/bin/chromium) is not installed")
    root = tmp_path_factory.mktemp("browser")
    demo = root / "demo"
    res = CliRunner().invoke(cli, ["demo", "--out", str(demo), "--scripted", "--streams", "4", "--resamples", "300",
                                   "--quiet"])
    assert res.exit_code == 0, res.output
    d = demo / "inputs"
    multi = root / "multi"
    res = CliRunner().invoke(cli, ["audit", "--history", str(d / "history.jsonl"), "--future", str(d / "future.jsonl"),
                                   "--utilities", str(d / "utilities.jsonl"), "--agent", "mean", "--agent", "latest",
                                   "--out", str(multi), "--resamples", "300", "--quiet"])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(cli, ["compare", str(multi / "mean"), str(multi / "latest"), "--out",
                                   str(root / "compare.html")])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(cli, ["view", str(root), "--no-browser"])  # no report.html there: the run index
    assert res.exit_code == 0, res.output
    return {"report": multi / "report.html", "compare": root / "compare.html", "single": demo / "report.html",
            "index": root / "index.html"}


def _probe(page: Path, ids: list[str], width: int, tmp: Path) -> dict[str, object]:
    """Lay a copy of ``page`` out ``width`` CSS px wide and run PROBE in it.  The copy sits in an
    ``iframe srcdoc`` of that width: headless Chromium never makes its window narrower than 500 px, an
    iframe is exactly as wide as asked (its media queries see that width)."""
    html = page.read_text(encoding="utf-8")
    html = html.replace("default-src 'none';", "default-src 'none'; script-src 'unsafe-inline';")
    inner = html.replace("</body>", PROBE % json.dumps(ids) + "</body>")
    probe = tmp / f"probe-{page.stem}-{width}.html"
    probe.write_text('<!DOCTYPE html><html><head><meta charset="utf-8"><style>body { margin: 0 } '
                     f'iframe {{ border: 0; display: block; width: {width}px; height: 900px }}</style></head>'
                     f'<body><iframe srcdoc="{escape(inner, quote=True)}"></iframe></body></html>', encoding="utf-8")
    dom, requests = shots.render(probe, width=max(width, 500), height=900)
    assert requests == []
    m = re.search(r'<pre id="probe-result">(.*?)</pre>', dom, re.S)
    assert m is not None, "the probe did not run"
    return json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))


@pytest.mark.parametrize(("name", "ids"), [("report", REPORT_IDS), ("compare", COMPARE_IDS),
                                          ("index", ["header", "runs", "run-table"])])
def test_page_renders_with_key_elements_visible(pages: dict[str, Path], name: str, ids: list[str],
                                                tmp_path: Path) -> None:
    page = pages[name]
    dom, requests = shots.render(page, screenshot=tmp_path / f"{name}.png", width=1100, height=1400)
    assert requests == []  # nothing left the page
    for i in ids:
        assert f'id="{i}"' in dom, i
    with Image.open(tmp_path / f"{name}.png") as im:
        assert im.size == (1100, 1400)
        colours = im.convert("RGB").getcolors(maxcolors=1 << 20)
        assert colours is not None and len(colours) > 50  # drawn text, tables and plots, not a blank page
    for width in (1300, 390):  # desktop and a phone (iPhone 12-15: 390 CSS px)
        got = _probe(page, ids, width, tmp_path)
        for i in ids:
            assert got[i] is not None and got[i]["visible"], (width, i, got[i])  # type: ignore[index]
        assert got["__width"] == width
        assert got["__overflow"] == 0, f"the page scrolls sideways at {width}px"
        assert got["__boxes"] and all(b == 0 for b in got["__boxes"]), (width, got["__boxes"])  # no table cut off
        assert got["__font"] == BODY_FONT  # the stylesheet's font rule reached the browser intact
        if name == "report":
            svg = got["__svg"]
            assert isinstance(svg, list) and len(svg) >= 2 and all(0 < w <= got["__width"] for w in svg)
            smallest = got["__smallest_label"]
            assert isinstance(smallest, float) and smallest >= 10.0, (width, smallest)  # plot labels readable


def test_page_without_its_csp_still_requests_nothing(pages: dict[str, Path], tmp_path: Path) -> None:
    """The HTML itself names nothing to fetch: with the Content-Security-Policy removed, still no request."""
    for name in ("report", "single", "compare", "index"):
        html = pages[name].read_text(encoding="utf-8")
        bare = tmp_path / f"{name}-nocsp.html"
        bare.write_text(re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html), encoding="utf-8")
        assert "Content-Security-Policy" not in bare.read_text(encoding="utf-8")
        _, requests = shots.render(bare)
        assert requests == [], name


def test_the_network_check_sees_a_page_that_fetches(tmp_path: Path) -> None:
    """Negative control: a page with remote images is caught by the same check."""
    if shots.chromium() is None:
        require("browser", "headless Chromium (/usr/bin/chromium) is not installed")
    page = tmp_path / "leaky.html"
    page.write_text('<!DOCTYPE html><p id="x">x</p><img src="http://example.invalid/a.png">'
                    '<link rel="stylesheet" href="https://cdn.example.com/s.css">', encoding="utf-8")
    _, requests = shots.render(page)
    assert sorted(requests) == ["http://example.invalid/a.png", "https://cdn.example.com/s.css"]
