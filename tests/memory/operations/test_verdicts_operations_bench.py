"""bench/verdicts_operations.py (the calibration of check-operation's stochastic verdicts) still runs: one tiny
replicate, its null agents' two paths agree, and their decision laws are the nulls the bench claims."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from replaylens.agents import reference_agent
from replaylens.memory.operations import build_operation_example, decision_response, stream_records
from replaylens.replay import replay

BENCH = Path(__file__).resolve().parents[3] / "bench" / "verdicts_operations.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_verdicts_operations", BENCH)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_replicate_runs_at_a_tiny_size(bench: ModuleType) -> None:
    out = bench.replicate((4, 0, 7, True))
    assert set(out["null"]) == {"uniform", "latest", "uniform+latest"}
    for name, ops in bench.NULL_FAMILIES.items():
        fam = out["null"][name]
        assert len(fam["rows"]) == len(ops)
        for key in bench.MARGINS:
            assert len(fam[key]["holm"]) == len(fam[key]["alone"]) == len(ops)
            assert set(fam[key]["holm"]) <= {"SAFE", "UNSAFE", "INCONCLUSIVE"}
    assert set(out["power"]) == {str(t) for t in bench.RESPONSES}
    # the four built-ins keep every outcome visible: the visibility agent decides identically, T_gr = 0 exactly
    assert all(p["nulls_zero"] for p in out["power"].values())
    assert out == bench.replicate((4, 0, 7, True))   # named seeds: the same replicate twice


def test_prompted_agents_paths_agree_and_latest_is_a_null(bench: ModuleType) -> None:
    ex = build_operation_example(n_streams=3, seed=5)
    operated = bench._operated(ex.history, (*bench.NULL_FAMILIES["latest"], bench.BLANK), stream_records(ex.history))
    for agent in (bench.prompted_uniform(), bench.prompted_latest()):
        for h in (ex.history, *operated.values()):
            a, r = (replay(h, ex.futures, ex.evaluator, agent, cells="", maps="", repeats=2, seed=3, path=p)
                    for p in ("array", "reference"))
            assert np.array_equal(a.actions, r.actions)
    for op in bench.NULL_FAMILIES["latest"]:   # the greedy rule the prompted latest agent explores around
        d = decision_response(ex.history, operated[op], ex.futures, ex.evaluator, reference_agent("latest"), op=op)
        assert d.n_changed == 0
