"""``replaylens audit --agent A --agent B``: several agents on one prepared plan, one comparing report."""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from test_report_html import offline_problems

from replaylens.cli._agents_audit import agent_dirs
from replaylens.cli._main import cli

pytestmark = pytest.mark.slow  # end-to-end runs: left out of the fast subset (README)

ARTIFACTS = {"decisions.parquet", "summary.json", "manifest.json", "report.md", "report.html", "forest.png", "runs"}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    out = tmp_path_factory.mktemp("multi") / "demo"
    res = CliRunner().invoke(cli, ["demo", "--out", str(out), "--streams", "4", "--resamples", "200", "--quiet",
                                   "--scripted"])
    assert res.exit_code == 0, res.output
    d = out / "inputs"
    return ["--history", str(d / "history.jsonl"), "--future", str(d / "future.jsonl"), "--utilities",
            str(d / "utilities.jsonl"), "--resamples", "200", "--quiet"]


def test_several_agents_share_one_prepared_plan(inputs: list[str], tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []
    rp = importlib.import_module("replaylens.replay")  # (the package attribute `replay` is the function)
    real = rp.prepare_replay

    def counting(*a: object, **k: object) -> object:
        calls.append(a)
        return real(*a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(rp, "prepare_replay", counting)
    out = tmp_path / "multi"
    res = CliRunner().invoke(cli, ["audit", *inputs, "--agent", "mean", "--agent", "latest", "--agent", "best",
                                   "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert len(calls) == 1  # one prepared plan for the three agents
    monkeypatch.setattr(rp, "prepare_replay", real)
    assert {p.name for p in out.iterdir()} == {"mean", "latest", "best", "report.html", "agents.json", "runs",
                                               ".results"}
    (run,) = (out / "runs").iterdir()   # the comparison is a run of OUT, linked as its latest
    assert os.readlink(out / ".results") == f"runs/{run.name}/.results"
    for name in ("mean", "latest", "best"):  # each agent's directory is exactly a one-agent audit
        assert {p.name for p in (out / name).iterdir() if not p.name.startswith(".")} == ARTIFACTS
        single = tmp_path / f"single-{name}"
        assert CliRunner().invoke(cli, ["audit", *inputs, "--agent", name, "--out", str(single)]).exit_code == 0
        pd.testing.assert_frame_equal(pd.read_parquet(single / "decisions.parquet"),
                                      pd.read_parquet(out / name / "decisions.parquet"))
        s1, s2 = (json.loads((d / "summary.json").read_text()) for d in (single, out / name))
        assert s1["rows"] == s2["rows"]
    html = (out / "report.html").read_text(encoding="utf-8")
    assert offline_problems(html) == []
    (latest_run,) = (out / "latest" / "runs").iterdir()   # each agent's row links the very run compared
    for needle in ('id="agent-table"', 'id="compare-agent-1"', 'id="compare-agent-2"',
                   f'href="latest/runs/{latest_run.name}/report.html"', "latest − mean", "best − mean",
                   "ReplayLens audit: mean, latest, best"):
        assert needle in html, needle
    index = json.loads((out / "agents.json").read_text())
    assert [a["dir"] for a in index["agents"]] == ["mean", "latest", "best"]
    assert [a["run"] for a in index["agents"]] == [f"{d}/runs/{next((out / d / 'runs').iterdir()).name}"
                                                   for d in ("mean", "latest", "best")]
    # the comparison in the combined report is the one `replaylens compare` computes from the two directories
    res = CliRunner().invoke(cli, ["compare", str(out / "mean"), str(out / "latest")])
    assert res.exit_code == 0, res.output
    from replaylens.report import compare_audits, load_results

    c = compare_audits(load_results(out / "mean"), load_results(out / "latest"))
    combined = index["comparisons"][0]["rows"]
    assert [r["delta_utility_ci"] for r in c["rows"]] == [r["delta_utility_ci"] for r in combined]


def test_one_agent_keeps_the_layout(inputs: list[str], tmp_path: Path) -> None:
    out = tmp_path / "one"
    assert CliRunner().invoke(cli, ["audit", *inputs, "--agent", "mean", "--out", str(out)]).exit_code == 0
    assert {p.name for p in out.iterdir() if not p.name.startswith(".")} == ARTIFACTS  # .results: the set


def test_llm_is_audited_alone(inputs: list[str], tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["audit", *inputs, "--agent", "mean", "--agent", "llm", "--out", str(tmp_path / "x")])
    assert res.exit_code == 2 and "one model per run" in res.output and not (tmp_path / "x").exists()


def test_agent_dirs_are_distinct_and_safe() -> None:
    assert agent_dirs(["mean", "mypkg:make", "mean", "../x"]) == ["mean", "mypkg_make", "mean-2", "x"]
    assert agent_dirs(["runs", "llm", "report.html", "Runs"]) == ["runs-2", "llm-2", "report.html-2", "Runs-2"]
