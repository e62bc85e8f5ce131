"""Verdicts (issue 24): every row judged SAFE / UNSAFE / EXPECTED RESPONSE against a declared or default
expectation, shown first in report.html and report.md, recorded in summary.json; the console lines made exact."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from replaylens.agents import load_agent
from replaylens.bandit import make_bandit
from replaylens.cli._expect import state_lines
from replaylens.cli._main import cli
from replaylens.errors import ConfigError
from replaylens.report import Expectation, audit, default_expectation, judge, parse_expectations
from replaylens.report._verdict import JudgeContext

FAST = ["--resamples", "300", "--streams", "4", "--scripted"]


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("verdict") / "run"
    res = CliRunner().invoke(cli, ["demo", "--out", str(out), *FAST])
    assert res.exit_code == 0, res.output
    return out


def test_report_html_puts_the_verdict_lines_first(demo_dir: Path) -> None:
    html = (demo_dir / "report.html").read_text(encoding="utf-8")
    style = html[html.index("<style>"):html.index("</style>")]
    assert "&#34;" not in style and '"Segoe UI"' in style  # the font rule is not HTML-escaped
    body = html[html.index("<body>"):]
    verdict_at = body.index('id="verdicts"')
    for later in ('id="cell-table"', 'id="forest"', 'id="consequence-table"', 'id="examples"'):
        assert verdict_at < body.index(later), later
    summary = json.loads((demo_dir / "summary.json").read_text())
    rows = [r["cell"] for r in summary["rows"]]
    items = re.findall(r'<li class="st-[\w-]+" id="verdict-(\w+)"><span class="status status-[\w-]+">([A-Z ]+)</span>',
                       body)
    assert [c for c, _ in items] == rows  # one verdict line per row, in row order
    status = dict(items)
    # the scripted Mean agent on the bandit: responds to scores and outcomes, ignores order and consistent names
    assert status["value"] == status["mask"] == "EXPECTED RESPONSE"
    assert status["pair"] == status["reorder"] == status["rename"] == "SAFE"
    assert "Overall: <span class=\"status status-SAFE\">SAFE</span>" in body
    assert "default: the agent declares invariance to it" in body  # Mean declares rename
    for term in ('utility change <span class="sym">ΔU</span>', 'oracle agreement change <span class="sym">ΔO</span>',
                 "D_A^q", "A_rekey"):
        assert term in body, term  # plain names first, the paper's symbols as secondary labels, defined
    assert "<dt>utility change" in body and "<dt>oracle agreement change" in body


def test_report_md_and_summary_json_carry_the_verdict(demo_dir: Path) -> None:
    md = (demo_dir / "report.md").read_text(encoding="utf-8")
    assert md.index("## Verdict") < md.index("## Evidence")
    assert "**SAFE** (no expectation declared; judged against the default expectations)" in md
    assert "**utility change** (ΔU)" in md and "**oracle agreement change** (ΔO)" in md
    v = json.loads((demo_dir / "summary.json").read_text())["verdict"]
    assert v["overall"] == "SAFE" and v["passed"] and v["declared"] == [] and v["failed"] == []
    for e in v["expectations"]:
        assert set(e) >= {"cell", "status", "passed", "gate", "expectation", "value", "interval", "n_changed",
                          "n_decisions", "line"}
        assert e["value"] == e["n_changed"] / e["n_decisions"]


def test_an_order_sensitive_agent_is_flagged_unsafe_by_default() -> None:
    sub = make_bandit(n_streams=4, n_future=4)
    res = audit(sub.history, sub.futures, sub.evaluator, load_agent("order-sensitive"), cells="value,pair,reorder",
                maps="1032", n_resamples=200)
    v = res.summary()["verdict"]
    judged = {e["cell"]: e for e in v["expectations"]}
    assert judged["pair"]["n_changed"] > 0
    assert judged["pair"]["status"] == "UNSAFE" and not judged["pair"]["gate"]
    assert v["overall"] == "UNSAFE" and v["passed"]  # a default expectation is shown, never gates
    declared = audit(sub.history, sub.futures, sub.evaluator, load_agent("order-sensitive"), cells="value,pair",
                     maps="1032", n_resamples=200, expect={"pair": {"kind": "invariant", "tolerance": 0.01}})
    dv = declared.summary()["verdict"]
    assert not dv["passed"] and dv["failed"] == ["pair"]
    pair = next(e for e in dv["expectations"] if e["cell"] == "pair")
    assert pair["failure"].startswith("expectation failed: pair declared invariant, but ")
    assert "margin 1%" in pair["failure"] and pair["margin"] == 0.01 and pair["margin_source"] == "declared"


def test_judge_kinds_and_tolerance() -> None:
    row = {"cell": "value", "migration": "m (value)", "action_readout": "D_A", "action": 0.25,
           "action_ci": [0.2, 0.3], "n_changed": 25, "n_decisions": 100}
    assert judge(row, Expectation("value", "invariant")).status == "UNSAFE"
    assert judge(row, Expectation("value", "invariant", 0.25)).status == "SAFE"  # 25% is not above 25%
    assert judge(row, Expectation("value", "responds")).status == "EXPECTED RESPONSE"
    assert judge(row, Expectation("value", "responds", 0.3)).status == "UNSAFE"
    assert judge(row, Expectation("value", "free")).status == "NOT JUDGED"
    per = [0.0, 0.04, 0.01, 0.03, 0.02, 0.02, 0.01, 0.03]   # mean 0.02, 8 streams
    noisy = row | {"action_readout": "T_gr (repeat-corrected)", "action": 0.02, "action_ci": [-0.01, 0.05],
                   "per_stream": {"action": per}, "n_streams": 8}
    assert judge(noisy, Expectation("value", "invariant")).status == "SAFE"  # upper bound < the 5% default margin
    assert judge(noisy, Expectation("value", "invariant", 0.0)).status == "UNSAFE"  # lower bound > 0
    inc = judge(noisy, Expectation("value", "invariant", 0.02))  # the estimate sits on the margin: undecidable
    assert inc.status == "INCONCLUSIVE" and inc.passed and inc.streams_needed is None
    assert "detects a response above" in inc.line()
    assert not judge(noisy, Expectation("value", "invariant", 0.02), JudgeContext(on_inconclusive="fail")).passed
    assert judge(noisy, Expectation("value", "responds")).status == "UNSAFE"  # shown below the margin
    assert default_expectation("value").kind == "responds"
    assert default_expectation("pair").kind == "invariant"
    assert default_expectation("value", ["value"]).kind == "invariant"


def test_parse_expectations_rejects_bad_entries_in_one_line() -> None:
    got = parse_expectations({"pair": "invariant", "value": "must_respond", "mask": {"kind": "free"}})
    assert {c: e.kind for c, e in got.items()} == {"pair": "invariant", "value": "responds", "mask": "free"}
    with pytest.raises(ConfigError, match=r"expect\.pair: expectation must be one of"):
        parse_expectations({"pair": "stable"})
    with pytest.raises(ConfigError, match=r"expect\.pair\.tolerance must be a number in \[0, 1\]"):
        parse_expectations({"pair": {"kind": "invariant", "tolerance": 5}})
    with pytest.raises(ConfigError, match=r"unknown field\(s\) tol"):
        parse_expectations({"pair": {"kind": "invariant", "tol": 0.1}})


def test_state_lines_add_the_caveat_only_where_no_decision_changed() -> None:
    summary = {"rows": [{"cell": "value", "n_changed": 180}, {"cell": "pair", "n_changed": 0},
                        {"cell": "reorder", "n_changed": 0}],
               "state_response": {"value": {"changed": 16, "total": 16}, "pair": {"changed": 16, "total": 16},
                                  "reorder": {"changed": 0, "total": 16}}}
    lines = state_lines(summary)
    assert lines[0] == "state response S_value vs S_aligned: 16 of 16 states changed"
    assert lines[1].endswith("(yet no decision changed: unchanged decisions do not prove invariance)")
    assert lines[2] == "state response S_reorder vs S_aligned: 0 of 16 states changed"


def test_quiet_prints_only_the_verdict_lines(demo_dir: Path, tmp_path: Path) -> None:
    d = demo_dir / "inputs"
    res = CliRunner().invoke(cli, ["audit", "--history", str(d / "history.jsonl"), "--future", str(d / "future.jsonl"),
                                   "--utilities", str(d / "utilities.jsonl"), "--agent", "mean", "--out",
                                   str(tmp_path / "q"), "--resamples", "200", "--quiet"])
    assert res.exit_code == 0, res.output
    assert "state response" not in res.stdout and "wrote" not in res.stdout
    assert all(": " in ln for ln in res.stdout.splitlines())
    assert "% of tasks" not in res.stdout
