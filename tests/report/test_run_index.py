"""``replaylens view DIR`` on a directory of runs (issue 24): an index page listing each run with agent, date,
inputs hash, cells and verdict, linking to each report."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from pathlib import Path

from click.testing import CliRunner
from test_report_html import offline_problems

from replaylens.cli._main import cli
from replaylens.report import find_runs
from replaylens.report._viewpages import write_pair_pages


def without_hashed_script(html: str) -> str:
    """The page less its one inline script, after checking that the page's CSP allows exactly that script by its
    sha256 (and nothing else: no 'unsafe-inline', no source)."""
    scripts = re.findall(r"<script>(.*?)</script>", html, re.S)
    assert len(scripts) == 1
    digest = base64.b64encode(hashlib.sha256(scripts[0].encode("utf-8")).digest()).decode()
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', html)
    assert csp is not None and f"script-src 'sha256-{digest}';" in csp.group(1)
    assert "unsafe-inline'; img" in csp.group(1) and csp.group(1).count("script-src") == 1
    assert "'unsafe-inline'" not in csp.group(1).split("script-src")[1].split(";")[0]
    return html.replace(f"<script>{scripts[0]}</script>", "")


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
    assert offline_problems(without_hashed_script(html)) == []
    runs = find_runs(root)
    # newest first; a run reached through OUT's links and its own directory (OUT/runs/...) is listed once
    assert [(r["also"] or [r["dir"]])[0] for r in runs] == ["nested/order", "demo"]
    assert runs[0]["inputs_hash"] == runs[1]["inputs_hash"]  # the same three input files
    for r in runs:
        man = json.loads((root / r["dir"] / "manifest.json").read_text())
        assert f'<a href="{r["dir"]}/report.html">' in html       # the run's own report
        for out in r["also"]:                                        # and OUT's, which leads to its latest run
            assert f'<a href="{out}/report.html">{out}</a>' in html
        assert r["created"] == man["created"] and r["created"][:10] in html
        assert f"<code>{r['inputs_hash']}</code>" in html
    rows = re.findall(r"<tr class=\"run-done\".*?</tr>", html, re.S)
    assert len(rows) == 2
    assert "order-sensitive" in rows[0] and "value, pair" in rows[0] and ">UNSAFE</span>" in rows[0]
    assert "declared expectations failed" in rows[0]
    assert "mean" in rows[1] and ">SAFE</span>" in rows[1]
    single = CliRunner().invoke(cli, ["view", str(demo), "--no-browser"])  # an audit directory: its own report
    assert single.stdout.strip() == os.path.abspath(demo / "report.html")  # the stable link, not .results-XXXX
    forced = CliRunner().invoke(cli, ["view", str(demo), "--index", "--no-browser"])
    assert forced.stdout.strip() == os.path.abspath(demo / "index.html")


def test_view_on_an_empty_directory_is_one_line(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["view", str(tmp_path), "--no-browser"])
    assert res.exit_code == 2 and "no report here" in res.stderr and "Traceback" not in res.output


def _two_runs_of_one_plan(root: Path) -> list[str]:
    demo = root / "demo"
    res = CliRunner().invoke(cli, ["demo", "--out", str(demo), "--scripted", "--streams", "4", "--resamples", "200",
                                   "--quiet"])
    assert res.exit_code == 0, res.output
    d = demo / "inputs"
    inputs = ["--history", str(d / "history.jsonl"), "--future", str(d / "future.jsonl"), "--utilities",
              str(d / "utilities.jsonl")]
    plan = ["--cells", "value,pair", "--maps", "1032", "--seed", "3", "--resamples", "200", "--quiet"]
    for name, agent in (("a", "mean"), ("b", "latest")):
        res = CliRunner().invoke(cli, ["audit", *inputs, "--agent", agent, *plan, "--out", str(root / name)])
        assert res.exit_code == 0, res.output
    return inputs


def test_index_has_seed_rng_repeats_verdicts_compare_links_and_changed_decisions(tmp_path: Path) -> None:
    """Issue 48, point 8: the columns, each run's verdict statuses as found, a comparison with the previous run
    of the same plan and one page per cell of the decisions whose action changed between the two."""
    import pandas as pd

    root = tmp_path / "runs"
    _two_runs_of_one_plan(root)
    res = CliRunner().invoke(cli, ["view", str(root), "--no-browser"])
    assert res.exit_code == 0, res.output
    html = (root / "index.html").read_text(encoding="utf-8")
    listed = find_runs(root)
    write_pair_pages(root, listed)  # made by view already: only read back here
    runs = {(r["also"] or [r["dir"]])[0]: r for r in listed}
    a, b = runs["a"], runs["b"]
    assert "compare_error" not in b, b.get("compare_error")
    for r in (a, b):
        s = json.loads((root / r["dir"] / "summary.json").read_text())
        assert (r["seed"], r["rng"], r["repeats"]) == (3, s["rng"], s["repeats"])
        assert r["statuses"] == [(e["cell"], e["status"]) for e in s["verdict"]["expectations"]]
        row = re.search(rf'<tr class="run-done" data-run="{re.escape(r["dir"])}".*?</tr>', html, re.S)
        assert row is not None
        assert f'data-seed="3" data-rng="{s["rng"]}" data-repeats="{s["repeats"]}"' in row.group(0)
        for _, status in r["statuses"]:
            assert f">{status}</span>" in row.group(0)
    assert b["previous"] == a["dir"] and a["previous"] is None and runs["demo"]["previous"] is None
    assert b["compare"] and (root / b["compare"]).is_file() and f'href="{b["compare"]}"' in html
    assert "B − A" in (root / b["compare"]).read_text(encoding="utf-8")
    # the changed decisions per cell, counted from the two decision tables
    da, db = (pd.read_parquet(root / r["dir"] / "decisions.parquet") for r in (a, b))
    keys = ["stream", "task", "cell", "map", "draw", "repeat"]
    both = da.astype({"action": str}).merge(db.astype({"action": str}), on=keys, suffixes=("_a", "_b"))
    assert set(b["changes"]) == {str(c) for c in both["cell"].unique()}
    for cell, info in b["changes"].items():
        sub = both[both["cell"].astype(str) == cell]
        diff = sub[sub["action_a"] != sub["action_b"]]
        assert (info["changed"], info["decisions"]) == (len(diff), len(sub)), cell
        page = (root / info["page"]).read_text(encoding="utf-8")
        assert f"<strong>{len(diff)}</strong> of {len(sub)} decisions" in page
        assert page.count('<tr><th scope="row">') == min(len(diff), 500)
        if len(diff):
            first = diff.iloc[0]
            assert f'<span class="changed">{first["action_b"]}</span>' in page
            assert f'href="{info["page"]}"' in html
    assert sum(i["changed"] for i in b["changes"].values()) > 0   # mean and latest do differ
    # a second view reuses the pair's pages (made once per pair of result sets)
    before = (root / b["compare"]).stat().st_mtime_ns
    CliRunner().invoke(cli, ["view", str(root), "--no-browser"])
    assert (root / b["compare"]).stat().st_mtime_ns == before


def test_index_shows_whatever_status_words_it_finds(tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "runs"
    _two_runs_of_one_plan(root)
    src = next(r for r in find_runs(root) if (r["also"] or [r["dir"]])[0] == "a")
    copy = root / "edited"
    shutil.copytree(root / src["dir"], copy, symlinks=False, ignore=shutil.ignore_patterns(".*", "journal"))
    s = json.loads((copy / "summary.json").read_text())
    s["verdict"]["expectations"][0]["status"] = "INCONCLUSIVE"
    s["verdict"]["overall"] = "INCONCLUSIVE"
    (copy / "summary.json").unlink()
    (copy / "summary.json").write_text(json.dumps(s))
    assert CliRunner().invoke(cli, ["view", str(root), "--no-browser"]).exit_code == 0
    html = (root / "index.html").read_text(encoding="utf-8")
    row = re.search(r'<tr class="run-done" data-run="edited".*?</tr>', html, re.S)
    assert row is not None and row.group(0).count('status-INCONCLUSIVE">INCONCLUSIVE</span>') == 2


def test_a_run_in_progress_is_listed_and_the_page_reloads(tmp_path: Path) -> None:
    import fcntl

    from replaylens.report import render_index

    out = tmp_path / "runs" / "ci"
    journal = out / "runs" / "20260101T000000Z-mean-0123456789ab" / "journal"
    journal.mkdir(parents=True)
    (journal / "journal.json").write_text(json.dumps({"agent": {"name": "mean"}}))
    (journal / "done.jsonl").write_text('{"shard": 0}\n{"shard": 1}\n')
    fd = os.open(out, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)   # what a running audit holds on OUT
        html = render_index(tmp_path / "runs")
        assert '<meta http-equiv="refresh" content="5">' in html and 'id="live"' in html
        assert ">running</span> 2 shard(s) journaled" in html and ">mean</td>" in html
        assert "--serve" in html and "--serve" not in render_index(tmp_path / "runs", served=True).split("</header>")[0]
    finally:
        os.close(fd)
    html = render_index(tmp_path / "runs")  # the lock gone: an interrupted run, nothing to reload for
    assert "http-equiv=\"refresh\"" not in html and ">interrupted</span> 2 shard(s) journaled" in html


def test_view_serve_rewrites_the_index_at_each_request(tmp_path: Path) -> None:
    """``view DIR --serve``: each request of index.html lists the runs as they are now (a run that starts
    running shows up, and the page then reloads itself)."""
    import fcntl
    import subprocess
    import sys
    import urllib.request

    out = tmp_path / "runs" / "ci"
    journal = out / "runs" / "20260101T000000Z-mean-0123456789ab" / "journal"
    journal.mkdir(parents=True)
    (journal / "done.jsonl").write_text('{"shard": 0}\n')
    env = {**os.environ, "DISPLAY": "", "WAYLAND_DISPLAY": ""}
    with subprocess.Popen([sys.executable, "-m", "replaylens", "view", str(tmp_path / "runs"), "--serve", "--timeout",
                           "30"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as proc:
        fd = os.open(out, os.O_RDONLY)
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().strip()
            assert url.startswith("http://127.0.0.1:") and url.endswith("/index.html")
            with urllib.request.urlopen(url, timeout=10) as resp:
                first = resp.read().decode()
            assert ">interrupted</span>" in first and 'http-equiv="refresh"' not in first
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)   # the run is going again
            (journal / "done.jsonl").write_text('{"shard": 0}\n{"shard": 1}\n{"shard": 2}\n')
            with urllib.request.urlopen(url, timeout=10) as resp:
                second = resp.read().decode()
            assert ">running</span> 3 shard(s) journaled" in second and 'http-equiv="refresh"' in second
        finally:
            os.close(fd)
            proc.terminate()
            proc.communicate(timeout=30)
