from __future__ import annotations

import json
from pathlib import Path

import pytest

from replaylens.paper.tools import (
    DebugRun,
    ProtocolViolation,
    SealError,
    ToolSession,
    analyze,
    build_suite,
    condition_view,
    reanalyze,
    rename_id,
)


@pytest.fixture(scope="module")
def suite():  # type: ignore[no-untyped-def]
    return build_suite(11, families=("dict-lookup", "sign"), instances=(2,))


def test_suite_structure(suite) -> None:  # type: ignore[no-untyped-def]
    for t in suite.tasks:
        assert len(t.sources) == 12 and sorted(t.display, key=lambda s: int(s[1:])) == [f"P{i}" for i in range(12)]
        assert all(f < 1 for f in t.public_fraction[2:]) and t.public_fraction[:2] == (1.0, 1.0)
        assert sum(f == 1.0 for _, f in t.ledger) == 1 and len(t.ledger) == 4
        assert t.task_id in suite.hidden and len(suite.hidden[t.task_id]) == 8


def test_conditions(suite) -> None:  # type: ignore[no-untyped-def]
    t = suite.tasks[0]
    al, _ = condition_view(t, "aligned")
    va, _ = condition_view(t, "value")
    pa, _ = condition_view(t, "pair")
    rn, menu = condition_view(t, "rename")
    assert [i for i, _ in va] == [i for i, _ in al] and [f for _, f in va] == [al[j][1] for j in (1, 0, 3, 2)]
    assert pa == [al[j] for j in (2, 3, 0, 1)]
    assert rn == [(rename_id(i), f) for i, f in al] and rename_id("P11") == "R0" and menu[0][0] == "R0"


def test_protocol_is_enforced(suite) -> None:  # type: ignore[no-untyped-def]
    t = suite.tasks[0]
    s = ToolSession(t, "aligned", lambda task, c: __import__("replaylens.paper.tools", fromlist=["x"]).run_candidate(
        task.sources[c], task.func, task.public))
    with pytest.raises(ProtocolViolation):
        s.submit_patch("P0")
    with pytest.raises(ProtocolViolation):
        s.run_tests("R3")
    for _ in range(3):
        assert set(s.run_tests("P0")) == {"passed", "total"}
    with pytest.raises(ProtocolViolation):
        s.run_tests("P1")
    s.submit_patch("P0")


def test_sealed_pipeline(suite, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run = DebugRun(tmp_path / "run", suite, seed=3)
    with pytest.raises(SealError):
        run.acquire()  # manifest not frozen
    run.freeze_manifest()
    bad = run.plan[1]["request_id"]
    run.acquire(capacity_failures=[bad])
    with pytest.raises(SealError):
        run.seal()  # incomplete
    with pytest.raises(SealError):
        run.replace(bad)  # no amendment
    run.amend([bad], reason="capacity", declared_before_acquisition=True)
    run.replace(bad)
    with pytest.raises(SealError):
        run.replace(bad)  # only one replacement
    with pytest.raises(SealError):
        run.score()  # no seal yet
    run.seal()
    rel = run.score()
    assert rel["seal_sha256"] == json.loads((tmp_path / "run" / "choice_seal.json").read_text())["choices_sha256"]
    out = run.export(tmp_path / "export.json")
    res = reanalyze(out)
    assert res["n_trajectories"] == 2 * 4 * 2 and res["n_events"] == 64
    assert res["hidden_u"]["aligned"] == analyze(json.loads(out.read_text()))["hidden_u"]["aligned"]
    # tamper with a recorded choice -> the scorer refuses
    lines = (tmp_path / "run" / "attempts.jsonl").read_text().splitlines()
    rec = json.loads(lines[0])
    rec["events"][3]["choice"] = (rec["events"][3]["choice"] + 1) % 12
    lines[0] = json.dumps(rec)
    (tmp_path / "run" / "attempts.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(SealError):
        run.score()


def test_repeats_differ_and_runs_repeat(suite, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    def choices(d: Path) -> list[list[int]]:
        r = DebugRun(d, suite, seed=5)
        r.freeze_manifest()
        r.acquire()
        r.seal()
        return json.loads((d / "choice_seal.json").read_text())["choices"]  # type: ignore[no-any-return]
    a, b = choices(tmp_path / "a"), choices(tmp_path / "b")
    assert a == b
    by_rep = {(x[0], x[1], x[2]): [] for x in a}  # type: ignore[var-annotated]
    for x in a:
        by_rep[(x[0], x[1], x[2])].append(x[4])
    assert any(by_rep[(t, c, 0)] != by_rep[(t, c, 1)] for t, c, _ in by_rep)
