"""Sequential experiment planning (C4): configuration space, tool protocol, scripted planner, sealing, analysis."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from replaylens.paper.tools import (
    CONFIGS,
    PLAN_CONDITIONS,
    PlanningRun,
    PlanningSession,
    PlanningSuite,
    ProtocolViolation,
    ScriptedPlanner,
    SealError,
    build_planning_suite,
    crn_equivariance,
    planning_view,
    reanalyze_planning,
    reference_choices,
    tool_schemas,
)
from replaylens.paper.tools._planning import _lda

SEED = 20260908


@pytest.fixture(scope="module")
def suite(public_data_dir: Path) -> PlanningSuite:
    return build_planning_suite(SEED, data_dir=public_data_dir)


def test_configuration_space_and_tasks(suite: PlanningSuite) -> None:
    assert len(CONFIGS) == 96 and len(set(CONFIGS)) == 96
    assert len(suite.tasks) == 48
    strata = [t.stratum for t in suite.tasks]
    assert {s: strata.count(s) for s in strata} == {"breast-cancer/iid": 12, "breast-cancer/shift": 12,
                                                    "wine-red/iid": 12, "wine-red/shift": 12}
    for t in suite.tasks:
        assert len(set(t.ids)) == 96 and all(re.fullmatch(r"[A-Z0-9]{5}", i) for i in t.ids)
        assert not set(t.ids) & set(t.rename_ids) and len(set(t.rename_ids)) == 96
        assert len(set(t.initial)) == 8 and len(set(t.random_trials)) == 3
        assert not set(t.random_trials) & set(t.initial)
        # sigma is a single 8-cycle
        seen, k = [], 0
        for _ in range(8):
            seen.append(k)
            k = t.sigma[k]
        assert k == 0 and sorted(seen) == list(range(8))
        v = np.array(t.validation)
        assert np.all((v > 0) & (v <= 1)) and np.array_equal(v, np.round(v, 6))
        assert set(t.card) == {"family", "context", "candidates", "n_features", "first_feature_mean",
                               "first_feature_sd"}  # label-free


def test_lda_single_class_is_smoothed_prior() -> None:
    X = np.random.default_rng(0).normal(size=(1, 5, 3))
    beta, b0 = _lda(X, np.ones((1, 5)), 0.08)
    assert np.all(beta == 0) and b0[0] == pytest.approx(np.log(5.5 / 0.5))


def test_conditions(suite: PlanningSuite) -> None:
    t = suite.tasks[0]
    al, menu = planning_view(t, "aligned")
    va, _ = planning_view(t, "value")
    pa, _ = planning_view(t, "pair")
    rn, rmenu = planning_view(t, "rename")
    assert [c for c, _ in va] == [c for c, _ in al]  # configuration sequence retained
    assert [u for _, u in va] == [u for _, u in pa]  # pair uses the same utility sequence as value
    assert sorted(pa) == sorted(al) and [u for _, u in va] != [u for _, u in al]
    assert [u for _, u in rn] == [u for _, u in al] and [s for _, s in rmenu] == [s for _, s in menu]
    dec = {cid: i for i, cid in enumerate(t.rename_ids)}
    assert [t.ids[dec[c]] for c, _ in rn] == [c for c, _ in al]


def test_tool_protocol(suite: PlanningSuite) -> None:
    t = suite.tasks[1]
    sch = tool_schemas(t.ids)
    assert [s["name"] for s in sch] == ["run_experiment", "submit_configuration"]
    p = sch[0]["parameters"]
    assert p["additionalProperties"] is False and p["properties"]["rationale"]["maxLength"] == 300
    assert p["properties"]["configuration_id"]["enum"] == list(t.ids)
    s = PlanningSession(t, "aligned")
    with pytest.raises(ProtocolViolation):
        s.submit_configuration(t.ids[t.initial[0]])  # before three experiments
    with pytest.raises(ProtocolViolation):
        s.run_experiment(t.ids[t.initial[0]])  # already tried
    with pytest.raises(ProtocolViolation):
        s.run_experiment("ZZZZZZ")  # not on the menu
    with pytest.raises(ProtocolViolation):
        s.call("run_experiment", {"configuration_id": t.ids[0], "rationale": "x" * 301})
    with pytest.raises(ProtocolViolation):
        s.call("run_experiment", {"configuration_id": t.ids[0], "rationale": "", "extra": 1})
    with pytest.raises(ProtocolViolation):
        s.call("delete_everything", {"configuration_id": t.ids[0], "rationale": ""})
    free = [i for i in range(96) if i not in t.initial]
    for k, c in enumerate(free[:3]):
        r = s.call("run_experiment", {"configuration_id": t.ids[c], "rationale": "try"})
        assert r == {"configuration_id": t.ids[c], "status": "ok", "validation_utility": t.validation[c],
                     "experiments_remaining": 2 - k}
    assert s.label_accesses <= 72
    with pytest.raises(ProtocolViolation):
        s.run_experiment(t.ids[free[3]])  # a fourth experiment
    with pytest.raises(ProtocolViolation):
        s.submit_configuration(t.ids[free[3]])  # untested new configuration
    assert s.submit_configuration(t.ids[free[1]])["status"] == "recorded"
    with pytest.raises(ProtocolViolation):
        s.submit_configuration(t.ids[free[1]])
    assert [e["choice"] for e in s.events] == [*free[:3], free[1]]


def test_planner_equivariance_and_fresh_repeats(suite: PlanningSuite) -> None:
    small = PlanningSuite(suite.seed, suite.tasks[::6], {}, {})
    crn = crn_equivariance(small, ScriptedPlanner(), 7)
    assert crn["pair"] == 1.0 and crn["rename"] == 1.0 and crn["value"] < 1.0


def test_references_invariant(suite: PlanningSuite) -> None:
    for t in suite.tasks:
        ref = {c: reference_choices(t, c) for c in PLAN_CONDITIONS}
        assert ref["pair"] == ref["aligned"] == ref["rename"]
        assert ref["aligned"]["random-search"][:3] == list(t.random_trials)


def test_sealed_run_and_analysis(suite: PlanningSuite, tmp_path: Path) -> None:
    run = PlanningRun(tmp_path / "run", suite, seed=SEED, clock=lambda: "t")
    with pytest.raises(SealError):
        run.acquire()  # no manifest
    run.freeze_manifest()
    run.acquire()
    with pytest.raises(SealError):
        run.score()  # no seal yet
    run.seal()
    seal = json.loads((tmp_path / "run" / "choice_seal.json").read_text())
    assert seal["counts"] == {"trajectories": 384, "agent_decisions": 1536, "rows": 1536 + 48 * 4 * 5}
    # tampering with a recorded choice after sealing blocks scoring
    att = tmp_path / "run" / "attempts.jsonl"
    good = att.read_text()
    lines = good.splitlines()
    rec = json.loads(lines[0])
    rec["events"][3]["choice"] = rec["events"][2]["choice"] if rec["events"][3]["choice"] != rec["events"][2][
        "choice"] else rec["events"][1]["choice"]
    att.write_text("\n".join([json.dumps(rec), *lines[1:]]) + "\n")
    with pytest.raises(SealError):
        run.score()
    att.write_text(good)
    rel = run.score()
    assert all(0 < v <= 1 for v in rel["final_test_utility"].values())
    res = reanalyze_planning(run.export(tmp_path / "export.json", n_boot=500))
    assert (res["n_tasks"], res["n_trajectories"], res["n_decisions"], res["n_initial"]) == (48, 384, 1536, 8)
    by = {(r.table, r.row, r.condition): r for r in res["rows"]}
    for p in ("random-search", "initial-incumbent"):
        assert by[("S3", p, "pair")].estimate == by[("S3", p, "aligned")].estimate == by[("S3", p, "rename")].estimate
    assert by[("S4", "value minus aligned", "value")].level == 0.975
    assert by[("S4", "rename minus aligned", "rename")].level == 0.95
    for r in res["rows"]:
        if r.table == "S6":
            assert 3 <= r.extra["distinct_min"] <= r.extra["distinct_max"] <= 6
    # the value condition must visibly move the submission; pair and renaming stay near zero
    assert by[("S1", "Submit", "value")].estimate > 0.3
