"""Chroma's own build-to-build variation: two builds of the same records in the same order answer differently at
256 records per ``add`` call, identically at one record per call (the adapter's default)."""

from __future__ import annotations

import numpy as np
import pytest
from _storecases import build

from replaylens.memory.stores import HashingEmbedder, StoreItem


@pytest.mark.slow
def test_two_same_order_chroma_builds_disagree_on_some_queries() -> None:
    """Measured (chromadb 1.5.9): 5,000 records ingested twice in the same order, 256 per ``add`` call, with
    ``num_threads=1``, give a different top-10 set for a sizeable share of queries — the store's own noise, which
    a same-order rebuild control must measure before any migration is read. One record per call (the default):
    1,000 records built twice answer every query identically."""
    rng = np.random.default_rng(11)
    words = [f"w{i}" for i in range(2000)]
    items = [StoreItem(f"r{i}", " ".join(rng.choice(words, 10))) for i in range(5000)]
    queries = [" ".join(rng.choice(words, 6)) for _ in range(200)]
    emb = HashingEmbedder(64)
    runs = []
    for _ in range(2):
        store = build("chroma", emb, params={"num_threads": 1, "add_batch": 256})
        try:
            store.add(items)
            runs.append([[h.id for h in store.query(q, 10)] for q in queries])
        finally:
            store.close()
    changed = float(np.mean([set(a) != set(b) for a, b in zip(*runs, strict=True)]))
    assert changed >= 0.05, changed
    runs = []
    for _ in range(2):
        store = build("chroma", emb)
        try:
            store.add(items[:1000])
            runs.append([[h.id for h in store.query(q, 10)] for q in queries])
        finally:
            store.close()
    assert runs[0] == runs[1]
