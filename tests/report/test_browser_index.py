"""Issue 48, point 8: the run index in headless Chromium at 390 and 1300 CSS px — its one hashed script runs
under the page's own CSP, sorts and filters, nothing scrolls sideways, no request leaves the page; the
changed-decisions page lays out at both widths too."""

from __future__ import annotations

import json
import re
from html import escape
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_browser import shots
from test_run_index import _two_runs_of_one_plan

from conftest import require
from replaylens.cli._main import cli
from replaylens.report import find_runs
from replaylens.report._viewpages import write_pair_pages

pytestmark = pytest.mark.slow

#: run in the page after its own script: sort by agent (the select, as on a phone, then the header), filter
PROBE = """<script>
const rows = () => Array.from(document.querySelectorAll("#run-table tbody tr")).filter(r => !r.hidden);
const agents = () => rows().map(r => r.dataset.agent);
const out = {tools: !document.getElementById("run-tools").hidden, initial: rows().map(r => r.dataset.date)};
const sel = document.getElementById("run-sort");
sel.value = "agent:asc"; sel.dispatchEvent(new Event("change"));
out.by_agent = agents();
document.querySelector('th[data-key="agent"] button').click();
out.by_agent_desc = agents();
out.aria = document.querySelector('th[data-key="agent"]').getAttribute("aria-sort");
const f = document.getElementById("run-filter");
f.value = "agent:latest"; f.dispatchEvent(new Event("input"));
out.filtered = agents(); out.count = document.getElementById("run-count").textContent;
f.value = "SAFE  compare"; f.dispatchEvent(new Event("input"));
out.text_filtered = agents();
f.value = ""; f.dispatchEvent(new Event("input"));
out.width = document.documentElement.clientWidth;
out.overflow = document.documentElement.scrollWidth - document.documentElement.clientWidth;
out.boxes = Array.from(document.querySelectorAll(".scroll")).map(e => e.scrollWidth - e.clientWidth);
const tools = document.getElementById("run-tools").getBoundingClientRect();
out.tools_fit = tools.right <= document.documentElement.clientWidth + 1;
const pre = document.createElement("pre"); pre.id = "probe-result"; pre.textContent = JSON.stringify(out);
(window.parent !== window ? window.parent.document : document).body.appendChild(pre);
</script>"""


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shots.chromium() is None:
        require("browser", "headless Chromium (/usr/bin/chromium) is not installed")
    root = tmp_path_factory.mktemp("browser-index") / "runs"
    _two_runs_of_one_plan(root)
    res = CliRunner().invoke(cli, ["view", str(root), "--no-browser"])
    assert res.exit_code == 0, res.output
    return root


def _probe(page: Path, width: int, tmp: Path, probe: str = PROBE) -> dict[str, object]:
    """``page`` in an iframe ``width`` px wide (as test_browser does), with the probe appended after the page's
    own script; the page's CSP is kept and only widened by the probe's hash-free inline permission."""
    html = page.read_text(encoding="utf-8")
    html = html.replace("default-src 'none';", "default-src 'none'; script-src 'unsafe-inline';")
    inner = html.replace("</body>", probe + "</body>")
    out = tmp / f"probe-{page.stem}-{width}.html"
    out.write_text('<!DOCTYPE html><html><head><meta charset="utf-8"><style>body { margin: 0 } '
                   f'iframe {{ border: 0; display: block; width: {width}px; height: 900px }}</style></head>'
                   f'<body><iframe srcdoc="{escape(inner, quote=True)}"></iframe></body></html>', encoding="utf-8")
    dom, requests = shots.render(out, width=max(width, 500), height=900)
    assert requests == []
    m = re.search(r'<pre id="probe-result">(.*?)</pre>', dom, re.S)
    assert m is not None, "the probe did not run"
    return json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))


@pytest.mark.parametrize("width", [390, 1300])
def test_index_sorts_filters_and_fits(root: Path, width: int, tmp_path: Path) -> None:
    got = _probe(root / "index.html", width, tmp_path)
    agents = [r["agent"] for r in find_runs(root)]
    assert got["tools"] is True and got["tools_fit"] is True
    assert got["initial"] == sorted(got["initial"], reverse=True)             # newest first
    assert got["by_agent"] == sorted(agents) and got["by_agent_desc"] == sorted(agents, reverse=True)
    assert got["aria"] == "descending"
    assert got["filtered"] == ["latest"] and got["count"] == f"1 of {len(agents)} runs"
    assert got["text_filtered"] == ["latest"]   # every word somewhere in the row (only b has a comparison)
    assert got["width"] == width and got["overflow"] == 0
    assert all(b == 0 for b in got["boxes"]), got["boxes"]  # type: ignore[union-attr]


def test_the_pages_own_csp_runs_its_script_and_nothing_else(root: Path) -> None:
    """Rendered as written (no probe, the page's CSP as is): the hashed script ran (the tools are shown), and a
    second inline script added to the page does not run."""
    dom, requests = shots.render(root / "index.html", width=1100, height=900)
    assert requests == [] and re.search(r'id="run-tools" class="tools"(?! hidden)', dom)
    assert re.search(r'id="run-count"[^>]*>\d+ of \d+ runs<', dom)
    html = (root / "index.html").read_text(encoding="utf-8")
    other = root / "tampered.html"
    other.write_text(html.replace("</body>", '<script>document.body.dataset.ran = "yes";</script></body>'),
                     encoding="utf-8")
    dom, _ = shots.render(other, width=1100, height=900)
    assert 'data-ran="yes"' not in dom


@pytest.mark.parametrize("width", [390, 1300])
def test_changed_decisions_page_fits(root: Path, width: int, tmp_path: Path) -> None:
    runs = find_runs(root)
    write_pair_pages(root, runs)
    pages = [root / c["page"] for r in runs for c in r["changes"].values() if c["changed"]]
    assert pages
    probe = PROBE.split("const sel")[0].replace('const out = {tools: !document.getElementById("run-tools").hidden, '
                                                'initial: rows().map(r => r.dataset.date)};', "const out = {};") + """
out.width = document.documentElement.clientWidth;
out.overflow = document.documentElement.scrollWidth - document.documentElement.clientWidth;
out.boxes = Array.from(document.querySelectorAll(".scroll")).map(e => e.scrollWidth - e.clientWidth);
out.rows = document.querySelectorAll("#change-table tbody tr").length;
const pre = document.createElement("pre"); pre.id = "probe-result"; pre.textContent = JSON.stringify(out);
(window.parent !== window ? window.parent.document : document).body.appendChild(pre);
</script>"""
    got = _probe(pages[0], width, tmp_path, probe)
    assert got["width"] == width and got["overflow"] == 0 and got["rows"] > 0  # type: ignore[operator]
    assert all(b == 0 for b in got["boxes"]), got["boxes"]  # type: ignore[union-attr]
