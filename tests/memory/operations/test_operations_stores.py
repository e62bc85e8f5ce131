"""Memory operations replayed through the retrieval-memory agent over real vector stores (no mocks)."""

from __future__ import annotations

from typing import Any

import pytest

from replaylens.memory.operations import build_operation_example, check_operation


@pytest.mark.parametrize("backend", ["exact", "chroma", "qdrant"])
def test_operations_through_a_retrieval_agent_on_a_real_store(backend: str) -> None:
    if backend != "exact":
        pytest.importorskip({"chroma": "chromadb", "qdrant": "qdrant_client"}[backend])
    from replaylens.memory.retrieval import make_agent

    ex = build_operation_example(n_streams=2, records_per_block=20, n_future=4)
    agent = make_agent(backend, "hashing:64", k=5)
    kw: dict[str, Any] = {"futures": ex.futures, "evaluator": ex.evaluator, "agents": [agent]}
    same = check_operation(ex.history, "dedup", **kw)   # no exact duplicate in the example: nothing changes
    assert same.records_after == same.records_before and same.decisions[0].status == "SAFE"
    assert same.decisions[0].n_changed == 0
    merged = check_operation(ex.history, "merge-text", **kw)
    assert "key_outcome_binding" in merged.broken
    d = merged.decisions[0]
    assert d.n_decisions == 2 * 2 * 4 and d.status == ("SAFE" if d.n_changed == 0 else "UNSAFE")
    assert d.n_changed > 0   # the averaged outcomes move the retrieved records' scores


@pytest.mark.parametrize("backend", ["exact", "chroma", "lancedb"])
def test_retrieval_level_response_on_a_real_store(backend: str) -> None:
    if backend != "exact":
        pytest.importorskip(backend if backend != "chroma" else "chromadb")
    ex = build_operation_example(n_streams=2, records_per_block=20, n_future=4)
    same = check_operation(ex.history, "dedup", futures=ex.futures, store=backend, store_k=3)
    assert same.retrieval is not None
    assert (same.retrieval.n_queries, same.retrieval.n_changed) == (2 * 2 * 4, 0)
    latest = check_operation(ex.history, "keep-latest", futures=ex.futures, store=backend, store_k=3)
    r = latest.retrieval
    assert r is not None and r.backend == backend and r.k == 3
    assert 0 < r.n_changed_set <= r.n_changed <= r.n_queries and "stream a00" in r.example
    assert any(x.startswith(f"  retrieval ({backend}, hashing-v1:dim=256") for x in latest.lines())
