"""``replaylens compare`` (paired run-to-run comparison) and ``replaylens view``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from test_report_html import offline_problems

from replaylens.cli._main import cli
from replaylens.inference import mean_inference
from replaylens.report import compare_audits, load_results

FAST = ["--resamples", "300", "--streams", "4"]


def _demo(out: Path, agent: str, *extra: str) -> Path:
    res = CliRunner().invoke(cli, ["demo", "--out", str(out), "--agent", agent, "--quiet", *FAST, *extra])
    assert res.exit_code == 0, res.output
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("cmp")
    return _demo(root / "mean", "mean"), _demo(root / "latest", "latest")


def test_compare_two_demo_runs_with_different_agents(runs: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = runs
    page = tmp_path / "cmp" / "compare.html"
    res = CliRunner().invoke(cli, ["compare", str(a), str(b), "--out", str(page)])
    assert res.exit_code == 0, res.output
    assert "latest − mean" in res.output and "value" in res.output and f"wrote {page}" in res.output
    html = page.read_text(encoding="utf-8")
    assert offline_problems(html) == []
    assert 'id="compare-ab"' in html and 'id="provenance"' in html
    c = compare_audits(load_results(a), load_results(b))
    sa, sb = (json.loads((d / "summary.json").read_text()) for d in (a, b))
    fa, fb = pd.read_parquet(a / "decisions.parquet"), pd.read_parquet(b / "decisions.parquet")
    for r, ra, rb in zip(c["rows"], sa["rows"], sb["rows"], strict=True):
        for k in ("action", "delta_utility", "delta_oracle"):  # mean of the paired per-stream differences
            d = np.subtract(rb["per_stream"][k], ra["per_stream"][k])
            assert r[k] == pytest.approx(d.mean(), abs=1e-12)
            lo, hi = r[f"{k}_ci"]
            assert lo <= r[k] + 1e-12 and r[k] <= hi + 1e-12
            # issue 47: the shown interval is Student t on the paired per-stream differences (S - 1 df) ...
            assert (lo, hi) == pytest.approx(mean_inference(d).interval(c["level"]), abs=1e-12)
            blo, bhi = r["bootstrap_ci"][k]   # ... the percentile bootstrap kept beside: within the data
            assert blo >= d.min() - 1e-12 and bhi <= d.max() + 1e-12
        cell = "aligned" if r["cell"] == "rekey" else r["cell"]
        sel = (fa["cell"] == cell) & (fa["map"].isin(list(ra["by_map"]["action"])))
        assert r["n_differ"] == int((fa.loc[sel, "action"] != fb.loc[sel, "action"]).sum())
    assert sum(r["n_differ"] for r in c["rows"]) > 0
    assert any(r["action_ci"][0] > 0 or r["action_ci"][1] < 0 for r in c["rows"])  # the agents do differ


def test_compare_with_itself_is_zero_and_swapping_negates(runs: tuple[Path, Path]) -> None:
    a, b = (load_results(p) for p in runs)
    same = compare_audits(a, a)
    assert same["a"].startswith("A (") and all(r["n_differ"] == 0 and r["action"] == 0.0 and
                                               r["action_ci"] == [0.0, 0.0] for r in same["rows"])
    ab, ba = compare_audits(a, b), compare_audits(b, a)
    for x, y in zip(ab["rows"], ba["rows"], strict=True):
        assert x["delta_utility"] == pytest.approx(-y["delta_utility"])
        assert x["n_differ"] == y["n_differ"]


def test_compare_refuses_other_seed_or_inputs(runs: tuple[Path, Path], tmp_path: Path) -> None:
    a, _ = runs
    other_seed = _demo(tmp_path / "seed3", "mean", "--seed", "3")
    res = CliRunner().invoke(cli, ["compare", str(a), str(other_seed)])
    assert res.exit_code == 2
    assert "cannot compare" in res.output and "different replay plans" in res.output and "seed" in res.output
    assert "Traceback" not in res.output
    # same plan and seed, one utility changed: the inputs differ
    util = tmp_path / "utilities.jsonl"
    lines = (a / "inputs" / "utilities.jsonl").read_text().splitlines()
    row = json.loads(lines[0])
    row["utility"] += 0.5
    util.write_text("\n".join([json.dumps(row), *lines[1:]]) + "\n")
    out = tmp_path / "changed-utility"
    args = ["audit", "--history", str(a / "inputs" / "history.jsonl"), "--future", str(a / "inputs" / "future.jsonl"),
            "--utilities", str(util), "--agent", "mean", "--out", str(out), "--resamples", "300", "--quiet"]
    assert CliRunner().invoke(cli, args).exit_code == 0
    res = CliRunner().invoke(cli, ["compare", str(a), str(out)])
    assert res.exit_code == 2 and "different inputs (utilities" in res.output
    res = CliRunner().invoke(cli, ["compare", str(a), str(tmp_path / "nowhere")])
    assert res.exit_code == 2 and "missing" in res.output


def test_view_prints_the_path_and_refuses_a_directory_without_report(runs: tuple[Path, Path], tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    opened: list[str] = []
    monkeypatch.setattr("webbrowser.open", lambda url, *a, **k: opened.append(url))
    res = CliRunner().invoke(cli, ["view", str(runs[0])])
    # the stable OUT/report.html (a link to the latest result set), never the .results-XXXX/ it now leads to
    assert res.exit_code == 0 and res.output.strip() == os.path.abspath(runs[0] / "report.html")
    assert ".results" not in res.output
    assert opened == []  # no display: only the path
    monkeypatch.setenv("DISPLAY", ":0")
    assert CliRunner().invoke(cli, ["view", str(runs[0])]).exit_code == 0
    assert opened == [Path(os.path.abspath(runs[0] / "report.html")).as_uri()]
    res = CliRunner().invoke(cli, ["view", str(tmp_path)])
    assert res.exit_code == 2 and "no report here" in res.output and len(res.output.strip().splitlines()) == 1


def test_view_serve_on_localhost_until_timeout(runs: tuple[Path, Path]) -> None:
    env = {**os.environ, "DISPLAY": "", "WAYLAND_DISPLAY": ""}
    with subprocess.Popen([sys.executable, "-m", "replaylens", "view", str(runs[0]), "--serve", "--timeout", "20"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as proc:
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().strip()
            assert url.startswith("http://127.0.0.1:") and url.endswith("/report.html")
            with urllib.request.urlopen(url, timeout=10) as resp:
                assert resp.status == 200 and b'id="cell-table"' in resp.read()
        finally:
            proc.terminate()
            proc.communicate(timeout=30)


def test_view_serve_stops_by_itself_after_timeout(runs: tuple[Path, Path]) -> None:
    env = {**os.environ, "DISPLAY": "", "WAYLAND_DISPLAY": ""}
    res = subprocess.run([sys.executable, "-m", "replaylens", "view", str(runs[0]), "--serve", "--timeout", "0.5"],
                         capture_output=True, text=True, env=env, timeout=60, check=False)
    assert res.returncode == 0 and res.stdout.startswith("http://127.0.0.1:")
