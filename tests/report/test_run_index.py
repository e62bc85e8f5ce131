"""``replaylens view DIR`` on a directory of runs (issue 24): an index page listing each run with agent, date,
inputs hash, cells and verdict, linking to each report."""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner
from test_report_html import offline_problems

from replaylens.cli._main import cli
from replaylens.report import find_runs


def test_view_on_a_directory_of_runs_writes_an_index(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    demo = root / "demo"
    res = CliRunner().invoke(cli, ["demo", "--out", str(demo), "--scripted", "--streams", "4", "--resamples", "200",
                                   "--quiet"])
    assert res.exit_code == 0, res.output
    d = demo / "inputs"
    inputs = ["--history", str(d / "history.jsonl"), "--future", str(d / "future.jsonl"), "--utilities",
              str(d / "utilities.jsonl")]
    res = CliRunner().invoke(cli, ["audit", *inputs, "--agent", "order-sensitive", "--cells", "value,pair",
                                   "--maps", "1032", "--out", str(root / "nested" / "order"), "--resamples", "200",
                                   "--quiet", "--expect", "pair=invariant"])
    assert res.exit_code == 1  # its declared gate fails; the run is listed all the same
    view = CliRunner().invoke(cli, ["view", str(root), "--no-browser"])
    assert view.exit_code == 0, view.output
    page = root / "index.html"
    assert view.stdout.strip() == str(page.resolve())
    html = page.read_text(encoding="utf-8")
    assert offline_problems(html) == []
    runs = find_runs(root)
    assert [r["dir"] for r in runs] == ["nested/order", "demo"]  # newest first
    assert runs[0]["inputs_hash"] == runs[1]["inputs_hash"]  # the same three input files
    for r in runs:
        man = json.loads((root / r["dir"] / "manifest.json").read_text())
        assert f'<a href="{r["dir"]}/report.html">{r["dir"]}</a>' in html
        assert r["created"] == man["created"] and r["created"][:10] in html
        assert f"<code>{r['inputs_hash']}</code>" in html
    rows = re.findall(r"<tr><th scope=\"row\">.*?</tr>", html, re.S)
    assert len(rows) == 2
    assert "order-sensitive" in rows[0] and "value, pair" in rows[0] and ">UNSAFE</span>" in rows[0]
    assert "declared expectations failed" in rows[0]
    assert "mean" in rows[1] and ">SAFE</span>" in rows[1]
    single = CliRunner().invoke(cli, ["view", str(demo), "--no-browser"])  # an audit directory: its own report
    assert single.stdout.strip() == str((demo / "report.html").resolve())
    forced = CliRunner().invoke(cli, ["view", str(demo), "--index", "--no-browser"])
    assert forced.stdout.strip() == str((demo / "index.html").resolve())


def test_view_on_an_empty_directory_is_one_line(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["view", str(tmp_path), "--no-browser"])
    assert res.exit_code == 2 and "no report here" in res.stderr and "Traceback" not in res.output
