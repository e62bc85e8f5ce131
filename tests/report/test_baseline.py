"""Regression baselines (issue 24): compare / audit --baseline report the paired difference per row with its
interval, --fail-on thresholds exit 1 on a regression and 0 otherwise, --json, and refuse another plan."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from replaylens.bandit import make_bandit
from replaylens.cli._main import cli
from replaylens.errors import ConfigError
from replaylens.records import write_evaluator, write_futures, write_history
from replaylens.report import parse_fail_on, response_masks

PLAN = ["--cells", "value,pair,reorder,rename", "--maps", "1032+2301", "--resamples", "200", "--quiet"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("baseline")
    sub = make_bandit(n_streams=4, n_future=4)
    inputs = ["--history", str(write_history(sub.history, root / "h.jsonl")),
              "--future", str(write_futures(sub.futures, root / "f.jsonl")),
              "--utilities", str(write_evaluator(sub.evaluator, root / "u.jsonl"))]
    out = {}
    for name, agent in (("mean", "mean"), ("mean2", "mean"), ("order", "order-sensitive")):
        res = CliRunner().invoke(cli, ["audit", *inputs, "--agent", agent, "--out", str(root / name), *PLAN])
        assert res.exit_code == 0, res.output
        out[name] = root / name
    out["inputs"] = root
    return out


def _inputs(runs: dict[str, Path]) -> list[str]:
    r = runs["inputs"]
    return ["--history", str(r / "h.jsonl"), "--future", str(r / "f.jsonl"), "--utilities", str(r / "u.jsonl")]


def test_compare_fail_on_exits_1_on_a_regression_and_0_otherwise(runs: dict[str, Path]) -> None:
    bad = CliRunner().invoke(cli, ["compare", str(runs["mean"]), str(runs["order"]), "--fail-on", "pair.action:0.05"])
    assert bad.exit_code == 1, bad.output
    lines = [ln for ln in bad.stderr.splitlines() if ln.startswith("regression:")]
    assert len(lines) == 1 and lines[0].startswith("regression: pair: action +")
    assert lines[0].endswith("against the baseline (pair.action rose by > 5pp; exact: a deterministic agent's census)")
    same = CliRunner().invoke(cli, ["compare", str(runs["mean"]), str(runs["mean2"]), "--fail-on",
                                    "action:0,utility:0,oracle:0"])
    assert same.exit_code == 0, same.output
    assert "regression" not in same.stderr
    improved = CliRunner().invoke(cli, ["compare", str(runs["order"]), str(runs["mean"]), "--fail-on", "pair.action:0"])
    assert improved.exit_code == 0  # fewer decisions change in B: not a regression


def test_compare_json_is_machine_readable(runs: dict[str, Path]) -> None:
    res = CliRunner().invoke(cli, ["compare", str(runs["mean"]), str(runs["order"]), "--json", "--fail-on",
                                   "pair.action:0.05"])
    assert res.exit_code == 1
    doc = json.loads(res.stdout)
    assert doc["passed"] is False and doc["fail_on"] == ["pair.action rose by > 5pp"]
    assert [r["cell"] for r in doc["rows"]] == ["value", "pair", "reorder", "rename", "rekey"]
    pair = next(r for r in doc["rows"] if r["cell"] == "pair")
    assert pair["action"] > 0.05 and len(pair["action_ci"]) == 2 and pair["b"]["action"] > pair["a"]["action"]


def test_the_response_columns_agree_with_each_runs_changed_count(runs: dict[str, Path]) -> None:
    """The comparison's "changed in A only / B only" counts each run's own response (against its aligned
    replay): B only − A only equals n_changed(B) − n_changed(A), row by row."""
    res = CliRunner().invoke(cli, ["compare", str(runs["mean"]), str(runs["order"]), "--json"])
    doc = json.loads(res.stdout)
    sa = json.loads((runs["mean"] / "summary.json").read_text())
    sb = json.loads((runs["order"] / "summary.json").read_text())
    for r, ra, rb in zip(doc["rows"], sa["rows"], sb["rows"], strict=True):
        assert r["n_b_only"] - r["n_a_only"] == rb["n_changed"] - ra["n_changed"], r["cell"]
        assert r["n_compared"] == ra["n_decisions"]
    for run, s in ((runs["mean"], sa), (runs["order"], sb)):
        masks = response_masks(s, pd.read_parquet(run / "decisions.parquet")["action"].astype(str).to_numpy())
        assert {c: int(np.sum(m)) for c, m in masks.items()} == {r["cell"]: r["n_changed"] for r in s["rows"]}


def test_audit_baseline_reports_gates_and_refuses_another_plan(runs: dict[str, Path], tmp_path: Path) -> None:
    base = ["audit", *_inputs(runs), "--agent", "order-sensitive", *PLAN]
    res = CliRunner().invoke(cli, [*base, "--out", str(tmp_path / "new"), "--baseline",
                                   str(runs["mean"] / "summary.json"), "--fail-on", "pair.action:0.05"])
    assert res.exit_code == 1, res.output
    assert any(ln.startswith("regression: pair: action +") for ln in res.stderr.splitlines())
    assert "baseline pair: decisions changed +" in res.stdout
    doc = json.loads((tmp_path / "new" / "baseline.json").read_text())
    assert doc["passed"] is False and doc["dir_a"] == str(runs["mean"])
    ok = CliRunner().invoke(cli, ["audit", *_inputs(runs), "--agent", "mean", *PLAN, "--out", str(tmp_path / "ok"),
                                  "--baseline", str(runs["mean"]), "--fail-on", "action:0"])
    assert ok.exit_code == 0, ok.output
    other = CliRunner().invoke(cli, ["audit", *_inputs(runs), "--agent", "mean", *PLAN, "--seed", "1",
                                     "--out", str(tmp_path / "other"), "--baseline", str(runs["mean"])])
    assert other.exit_code == 2
    assert "cannot compare" in other.stderr and "different replay plans" in other.stderr


def test_fail_on_is_checked() -> None:
    got = parse_fail_on("action:0.05, pair.utility:0.01")
    assert [(t.cell, t.metric, t.limit) for t in got] == [(None, "action", 0.05), ("pair", "utility", 0.01)]
    for bad in ("action", "speed:1", "action:-1", "action:x"):
        with pytest.raises(ConfigError, match="--fail-on must be a comma list"):
            parse_fail_on(bad)


def test_no_regression_for_a_stochastic_agent_needs_five_streams() -> None:
    """compare's NO REGRESSION is the audit's SAFE: the interval's upper end within the threshold, from
    MIN_STREAMS_WITHIN streams; with fewer the same difference is INCONCLUSIVE (a REGRESSED is unaffected)."""
    from replaylens.report import MIN_STREAMS_WITHIN, Threshold, regression_verdicts

    def comparison(n: int, d: float) -> dict[str, object]:
        return {"level": 0.95, "n_streams": n, "rows": [
            {"cell": "pair", "stochastic": True, "action": d, "action_ci": [d - 0.01, d + 0.01],
             "se": {"action": 0.002}}]}

    gate = [Threshold("action", 0.05)]
    assert regression_verdicts(comparison(MIN_STREAMS_WITHIN, 0.001), gate)[0]["status"] == "NO REGRESSION"
    assert regression_verdicts(comparison(MIN_STREAMS_WITHIN - 1, 0.001), gate)[0]["status"] == "INCONCLUSIVE"
    assert regression_verdicts(comparison(MIN_STREAMS_WITHIN - 1, 0.2), gate)[0]["status"] == "REGRESSED"
