"""hnswlib's order dependence (issue 25): reversing the ingestion order of the same records changes the top-1 of
many queries at a low ef and few at a high ef, while a same-order rebuild (one thread) changes none."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _storecases import build, corpus

from replaylens.memory.stores import HashingEmbedder, StoreItem, VectorStore


def _answers(store: VectorStore, items: list[StoreItem], queries: list[str]) -> list[list[str]]:
    try:
        store.add(items)
        return [[h.id for h in store.query(q, 10)] for q in queries]
    finally:
        store.close()


@pytest.mark.slow
def test_reversed_ingestion_changes_top1_at_low_ef_not_at_high_ef() -> None:
    rng = np.random.default_rng(11)
    words = [f"w{i}" for i in range(2000)]
    items = [StoreItem(f"r{i}", " ".join(rng.choice(words, 10))) for i in range(5000)]
    queries = [" ".join(rng.choice(words, 6)) for _ in range(500)]
    emb = HashingEmbedder(64)
    share = {}
    for ef in (10, 200):
        params = {"M": 16, "ef_construction": 100, "ef": ef}
        fwd = _answers(build("hnswlib", emb, params=params), items, queries)
        rev = _answers(build("hnswlib", emb, params=params), items[::-1], queries)
        share[ef] = float(np.mean([a[0] != b[0] for a, b in zip(fwd, rev, strict=True)]))
        if ef == 10:  # the control: the same order again, one thread, gives the same answers
            assert _answers(build("hnswlib", emb, params=params), items, queries) == fwd
    # measured (hnswlib 0.8.0, this corpus): 47.6 % at ef = 10, 0.6 % at ef = 200
    assert share[10] >= 0.30, share
    assert share[200] <= 0.05, share
    assert share[200] * 5 < share[10], share


def test_reload_restores_ef_and_answers(tmp_path: Path) -> None:
    emb = HashingEmbedder(64)
    items = corpus(60)
    store = build("hnswlib", emb, path=tmp_path, params={"ef": 50})
    store.add(items)
    before = [[h.id for h in store.query(it.text, 5)] for it in items[::5]]
    store.close()
    again = build("hnswlib", emb, path=tmp_path, params={"ef": 50})
    try:
        assert [[h.id for h in again.query(it.text, 5)] for it in items[::5]] == before
        assert again._index.ef == 50  # type: ignore[attr-defined]  # hnswlib does not persist ef; the adapter sets it
    finally:
        again.close()


def test_readd_updates_in_place() -> None:
    emb = HashingEmbedder(64)
    store = build("hnswlib", emb)
    try:
        store.add([StoreItem("x", "alpha beta"), StoreItem("y", "gamma delta")])
        store.add([StoreItem("x", "gamma delta epsilon", {"v": 2})])
        hits = store.query("gamma delta epsilon", 5)
        assert [h.id for h in hits] == ["x", "y"]
        assert dict(hits[0].metadata) == {"v": 2}
    finally:
        store.close()
