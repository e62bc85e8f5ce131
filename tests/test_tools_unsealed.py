"""Runs whose validation gate does not pass (recorded protocol failures of a weak model): the failure report, the
unsealed export (``"sealed": false``, nothing hidden in it), the CLI (exit 1, export written), the reproductions'
failure-profile rows, and the refusal of every score re-analysis."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import replaylens.paper.tools
from _tools import LEDGER_ROW, small_debug_suite
from replaylens.cli._main import cli
from replaylens.errors import ConfigError
from replaylens.llm import FakeOpenAIServer, ScriptedToolBackend, ToolTurnRequest
from replaylens.paper.experiments import code_debugging as cd_exp
from replaylens.paper.experiments import planning as plan_exp
from replaylens.paper.tools import (
    DebugRun,
    LLMDebugger,
    LLMPlanner,
    PlanningRun,
    SealError,
    build_planning_suite,
    failure_summary,
    read_export,
    reanalyze,
    reanalyze_planning,
)
from replaylens.paper.tools._agents import read_jsonl
from replaylens.paper.tools._protocol import canonical, sha256


@pytest.fixture(scope="module")
def suite():  # type: ignore[no-untyped-def]
    return small_debug_suite()


def _tested(req: ToolTurnRequest, key: str) -> list[str]:
    return [json.loads(c["function"]["arguments"])[key] for m in req.messages
            if m["role"] == "assistant" and m.get("tool_calls") for c in m["tool_calls"]
            if not c["id"].endswith("_rejected")]


def _debug_policy() -> Any:
    """Trajectories 1 and 4 (0-based, in acquisition order) call an unknown tool twice (protocol failure);
    trajectory 2 sends one non-menu ID (corrected, then completes); the rest complete."""
    state = {"traj": -1}

    def policy(req: ToolTurnRequest) -> tuple[str, dict[str, Any]]:
        if len(req.messages) == 2:
            state["traj"] += 1
        if state["traj"] in (1, 4):
            return "delete_everything", {}
        if state["traj"] == 2 and len(req.messages) == 2:
            return "run_tests", {"candidate_id": "P99"}
        name = req.tool_choice if req.tool_choice != "required" else req.tools[0].name
        tested = _tested(req, "candidate_id")
        ids = LEDGER_ROW.findall(next(m["content"] for m in req.messages if m["role"] == "user"))
        return name, {"candidate_id": tested[0] if name == "submit_patch" else ids[len(tested) % len(ids)]}

    return policy


def _unzip(path: Path) -> bytes:
    return gzip.decompress(path.read_bytes())


def test_failure_report_and_unsealed_debug_export(suite: Any, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    run = DebugRun(tmp_path / "run", suite, seed=3, agent=LLMDebugger(ScriptedToolBackend(_debug_policy())))
    run.freeze_manifest()
    assert run.acquire() == {"ok": 6, "protocol_violation": 2}
    with pytest.raises(SealError):
        run.seal()
    with pytest.raises(SealError):
        run.score()  # strict: no hidden score without a valid seal
    hidden = (tmp_path / "run" / "hidden_tests.json").read_bytes()
    # the report and the unsealed export never read the hidden file
    (tmp_path / "run" / "hidden_tests.json").rename(tmp_path / "hidden-aside.json")
    rep = run.failure_report()
    assert rep["experiment"] == "code-debugging" and rep["manifest_sha256"] == run.manifest_sha()
    assert rep["gate"]["passed"] is False and "no successful attempt" in rep["gate"]["error"]
    assert rep["planned_trajectories"] == 8 and rep["completed"] == 6
    assert rep["outcomes"] == {"ok": 6, "protocol_violation": 2}
    assert rep["protocol_failures"] == {"total": 2, "by_reason": {"second format error (unknown_tool)": 2}}
    assert rep["format_errors_by_kind"] == {"not_in_enum": 1, "unknown_tool": 4}
    assert rep["format_corrections"] == {"turns": 3, "trajectories": 3, "completed_after_correction": 1}
    assert rep["capacity_failures"] == {"attempts": 0, "unresolved": 0, "by_status": {}}
    assert rep["attempts_by_kind"] == {"original": {"ok": 6, "protocol_violation": 2}}
    turns = read_jsonl(tmp_path / "run" / "turns.jsonl")
    assert rep["usage"]["turns"] == len(turns) == 6 * 4 + 1 + 2 * 2
    assert failure_summary(rep).startswith("6 of 8 trajectories completed; protocol failures 2 (second format")

    path = run.export_unsealed(tmp_path / "u.json.gz")
    raw = _unzip(path)
    doc = read_export(path, unsealed=True)
    assert doc["sealed"] is False and doc["failure_report"] == rep
    assert set(doc) == {"sealed", "manifest", "failure_report", "plan", "outcomes", "events"}
    assert len(doc["events"]) == 6 and all(len(ev) == 4 for ev in doc["events"].values())
    assert sum(o["status"] == "protocol_violation" for o in doc["outcomes"].values()) == 2
    # nothing hidden: no score fields, no hidden test values; the hidden file's digest only as the manifest's
    # commitment
    for word in (b"hidden_scores", b"score_release", b"final_test_utility", b"choice_seal"):
        assert word not in raw
    for cases in json.loads(hidden).values():
        assert canonical(cases) not in raw
        assert all(canonical(c) not in raw for c in cases)
    digest = sha256(hidden).encode()
    assert digest in raw and digest not in canonical({k: v for k, v in doc.items() if k != "manifest"})
    # every score re-analysis refuses, naming the field
    with pytest.raises(ConfigError, match="'sealed'"):
        reanalyze(path)
    with pytest.raises(ConfigError, match="'sealed'"):
        read_export(path)
    # the reproduction shows the failure profile (all n/a), first / final actions of completed trajectories
    monkeypatch.setattr(cd_exp, "EMBEDDED_EXPORT", path)
    rows = cd_exp.code_debugging_embedded()
    assert rows[0].row == "code-debugging-embedded" and "unsealed export" in rows[0].note
    assert {r.status for r in rows} == {"n/a"}
    by = {(r.row, r.column): r for r in rows}
    assert (by[("planned trajectories", "count")].paper, by[("planned trajectories", "count")].ours) == (192, 8)
    assert by[("completed trajectories", "count")].ours == 6
    assert by[("protocol failures", "count")].ours == 2 and by[("protocol failures", "count")].paper is None
    assert by[("protocol failures: second format error (unknown_tool)", "count")].ours == 2
    assert (by[("format corrections", "count")].paper, by[("format corrections", "count")].ours) == (0, 3)
    assert by[("model turns", "count")].ours == len(turns)
    assert sum(by[(f"completed trajectories: {c}", "count")].ours or 0
               for c in ("Aligned", "Value reassigned", "Pair transport", "Consistent renaming")) == 6
    dis = [r for r in rows if r.column == "disagreement with aligned"]
    assert dis and all(r.paper is None and 0.0 <= (r.ours or 0.0) <= 1.0 for r in dis)
    assert not any(r.table.startswith("tab:") for r in rows)  # no paper table without a matching quantity


def test_scripted_capacity_failure_report(suite: Any, tmp_path: Path) -> None:
    run = DebugRun(tmp_path / "run", suite, seed=3)
    run.freeze_manifest()
    bad = run.plan[1]["request_id"]
    run.acquire(capacity_failures=[bad])
    rep = run.failure_report()
    assert rep["completed"] == 7 and rep["outcomes"] == {"capacity_error": 1, "ok": 7}
    assert rep["capacity_failures"] == {"attempts": 1, "unresolved": 1, "by_status": {"capacity_error": 1}}
    assert rep["usage"] == {"by_kind": {}, "turns": 0, "format_corrections": 0}
    doc = json.loads(run.export_unsealed(tmp_path / "u.json").read_text())
    assert doc["sealed"] is False and len(doc["events"]) == 7
    run.amend([bad], reason="capacity", declared_before_acquisition=True)
    run.replace(bad)
    assert run.failure_report()["gate"] == {"passed": True, "error": None}
    with pytest.raises(SealError, match="gate passes"):
        run.export_unsealed(tmp_path / "v.json")
    run.seal()
    run.score()
    sealed = run.export(tmp_path / "s.json")
    assert "sealed" not in json.loads(sealed.read_text())  # sealed exports keep their format
    assert reanalyze(sealed)["n_trajectories"] == 8


def test_cli_writes_an_unsealed_export_and_exits_1(suite: Any, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replaylens.paper.tools, "build_suite", lambda seed: suite)
    out = tmp_path / "debug.json.gz"
    with FakeOpenAIServer(policy=lambda sha, occ: "unknown_tool") as srv:
        res = CliRunner().invoke(cli, ["paper", "tools", "debug", "--model", "openai/fake", "--base-url", srv.url,
                                       "--api-key-env", "", "--env-file", str(tmp_path / "none.env"),
                                       "--run-dir", str(tmp_path / "run"), "--export", str(out)])
    assert res.exit_code == 1, res.output
    assert "gate not passed" in res.output and f"written to {out}" in res.output
    assert "0 of 8 trajectories completed; protocol failures 8 (second format error (unknown_tool): 8)" in res.output
    doc = read_export(out, unsealed=True)
    assert doc["sealed"] is False and doc["events"] == {}
    assert doc["failure_report"]["format_corrections"]["turns"] == 8
    assert doc["failure_report"]["usage"]["turns"] == 16
    assert not (tmp_path / "run" / "choice_seal.json").exists()
    assert not (tmp_path / "run" / "score_release.json").exists()
    monkeypatch.setattr(cd_exp, "EMBEDDED_EXPORT", out)
    rows = cd_exp.code_debugging_embedded()
    assert {r.status for r in rows} == {"n/a"} and not any("disagreement" in r.column for r in rows)
    with pytest.raises(ConfigError, match="'sealed'"):
        reanalyze(out)
    res = CliRunner().invoke(cli, ["paper", "reanalyze", str(out)])
    assert res.exit_code == 2 and "field 'sealed' is false" in res.stderr


def test_unsealed_planning_export(public_data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    psuite = build_planning_suite(20260908, data_dir=public_data_dir, tasks_per_stratum=1)
    state = {"traj": -1}

    def planner(req: ToolTurnRequest) -> tuple[str, dict[str, Any]]:
        user = req.messages[1]["content"]
        if len(req.messages) == 2:
            state["traj"] += 1
        shown = set(LEDGER_ROW.findall(user))
        menu = re.findall(r"^(\w{5}): sampling=", user, re.MULTILINE)
        tried = _tested(req, "configuration_id")
        if state["traj"] % 3 == 0:  # re-runs an initial configuration twice: already tried, protocol failure
            return "run_experiment", {"configuration_id": sorted(shown)[0], "rationale": "again"}
        if req.tool_choice == "submit_configuration":
            return "submit_configuration", {"configuration_id": tried[0], "rationale": "best"}
        free = [m for m in menu if m not in shown and m not in tried]
        return "run_experiment", {"configuration_id": free[0], "rationale": "next"}

    run = PlanningRun(tmp_path / "run", psuite, seed=1, planner=LLMPlanner(ScriptedToolBackend(planner)))
    run.freeze_manifest()
    assert run.acquire() == {"ok": 21, "protocol_violation": 11}
    with pytest.raises(SealError):
        run.seal()
    test_bytes = (tmp_path / "run" / "final_test.json").read_bytes()
    (tmp_path / "run" / "final_test.json").unlink()  # never read by the report or the unsealed export
    rep = run.failure_report()
    assert rep["experiment"] == "sequential-planning" and rep["planned_trajectories"] == 32
    assert rep["protocol_failures"]["by_reason"] == {"second format error (already_tried)": 11}
    assert rep["format_corrections"]["turns"] == 11
    path = run.export_unsealed(tmp_path / "p.json.gz")
    raw = _unzip(path)
    assert b"final_test_utility" not in raw and b"score_release" not in raw
    pools = json.loads(test_bytes)
    for pool in pools.values():
        assert canonical(pool["X"][0]) not in raw
    with pytest.raises(ConfigError, match="'sealed'"):
        reanalyze_planning(path)
    monkeypatch.setattr(plan_exp, "EMBEDDED_EXPORT", path)
    rows = plan_exp.sequential_planning_embedded()
    assert {r.status for r in rows} == {"n/a"} and "unsealed export" in rows[0].note
    by = {(r.row, r.column): r for r in rows}
    assert (by[("planned trajectories", "count")].paper, by[("planned trajectories", "count")].ours) == (384, 32)
    assert (by[("format corrections", "count")].paper, by[("format corrections", "count")].ours) == (383, 11)
    assert by[("completed trajectories", "count")].ours == 21
    assert ("Submit / Value reassigned", "disagreement with aligned") in by


def _committed_unsealed(path: Path, experiment: str, planned: int) -> tuple[dict[str, Any], bytes]:
    """A committed embedded-model export, when it is unsealed: its document (failure report consistent with
    the plan and the events) and its raw bytes."""
    if not path.is_file():
        pytest.skip(f"no committed embedded-model {experiment} export")
    doc = read_export(path, unsealed=True)
    if doc.get("sealed", True) is not False:
        pytest.skip("the committed export is sealed (covered by the re-analysis tests)")
    rep = doc["failure_report"]
    assert rep["experiment"] == experiment
    assert rep["planned_trajectories"] == planned == len(doc["plan"])
    assert rep["completed"] + rep["protocol_failures"]["total"] == rep["planned_trajectories"]
    assert len(doc["events"]) == rep["completed"]
    return doc, _unzip(path)


def test_committed_embedded_debugging_export_is_consistent_and_keeps_the_hidden_tests_out() -> None:
    doc, raw = _committed_unsealed(cd_exp.EMBEDDED_EXPORT, "code-debugging", 192)
    hidden = replaylens.paper.tools.build_suite(cd_exp.SEED).sealed_doc()
    assert sha256(canonical(hidden)) == doc["manifest"]["hidden_tests_sha256"]  # the export's own hidden tests
    for cases in hidden.values():
        assert canonical(cases) not in raw
        assert all(canonical(c) not in raw for c in cases)
    by = {(r.row, r.column): r for r in cd_exp.code_debugging_embedded()}
    assert by[("completed trajectories", "count")].ours == doc["failure_report"]["completed"]


def test_committed_embedded_planning_export_is_consistent_and_keeps_the_final_test_out(public_data_dir: Path) -> None:
    doc, raw = _committed_unsealed(plan_exp.EMBEDDED_EXPORT, "sequential-planning", 384)
    rep = doc["failure_report"]
    pools = build_planning_suite(plan_exp.SEED, data_dir=public_data_dir).sealed_doc()
    assert sha256(canonical(pools)) == doc["manifest"]["final_test_sha256"]  # the export's own final-test pools
    for pool in pools.values():
        assert canonical(pool["X"]) not in raw
        assert all(canonical(row) not in raw for row in pool["X"])
    by = {(r.row, r.column): r for r in plan_exp.sequential_planning_embedded()}
    assert by[("planned trajectories", "count")].ours == 384
    assert by[("completed trajectories", "count")].ours == rep["completed"]
    assert by[("protocol failures", "count")].ours == rep["protocol_failures"]["total"]
