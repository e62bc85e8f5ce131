"""The LanceDB backend against the real package (offline, embedded): round trip, exact scores, persistence,
re-adding an id, and its MEASURED tie-break direction (the earlier-inserted of two equal texts ranks first at
k = 1 and k = 5, whether the records arrive in one write or one at a time)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from replaylens.memory.stores import STORES, ExactStore, HashingEmbedder, StoreItem, make_store, query_many

pytest.importorskip("lancedb")
EMB = HashingEmbedder(128)


def _census(n: int = 300, pairs: int = 16, seed: int = 7) -> tuple[list[StoreItem], list[tuple[str, str, str]]]:
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(400)]
    items = [StoreItem(f"r{i}", " ".join(rng.choice(words, 8)), {"t": i}) for i in range(n)]
    cases = []
    for j in range(pairs):
        text = f"tie {j} " + " ".join(rng.choice(words, 6))
        items.insert(int(rng.integers(0, len(items) // 2)), StoreItem(f"t{j}-first", text, {"twin": 0}))
        items.insert(int(rng.integers(len(items) // 2, len(items) + 1)), StoreItem(f"t{j}-last", text, {"twin": 1}))
        cases.append((text, f"t{j}-first", f"t{j}-last"))
    return items, cases


def test_lancedb_is_registered() -> None:
    assert "lancedb" in STORES


@pytest.mark.parametrize("add_batch", [1024, 7])
@pytest.mark.parametrize("k", [1, 5])
def test_measured_tie_break_direction_is_first_inserted(k: int, add_batch: int) -> None:
    items, cases = _census()
    store = make_store("lancedb", EMB, params={"add_batch": add_batch})
    try:
        store.add(items)
        for text, first, last in cases:
            top = store.query(text, k)
            assert top[0].id == first, (text, [h.id for h in top])
            if k > 1:
                assert top[1].id == last and top[0].score == pytest.approx(top[1].score, abs=1e-6)
    finally:
        store.close()


def test_scores_match_the_exact_reference_and_query_many_matches_query() -> None:
    items, _ = _census(120, 4)
    ref, store = ExactStore(EMB), make_store("lancedb", EMB)
    try:
        ref.add(items)
        store.add(items)
        queries = [items[3].text, "w1 w2 w3", "tie 2 w9"]
        for q, many in zip(queries, query_many(store, queries, 10), strict=True):
            one = store.query(q, 10)
            assert [(h.id, h.rank) for h in one] == [(h.id, h.rank) for h in many]
            want = ref.query(q, 10)
            assert [h.id for h in one] == [h.id for h in want]
            np.testing.assert_allclose([h.score for h in one], [h.score for h in want], atol=1e-5)
        assert dict(store.query(items[3].text, 1)[0].metadata) == dict(items[3].metadata)
    finally:
        ref.close()
        store.close()


def test_persistence_and_readding_an_id(tmp_path: Path) -> None:
    items, _ = _census(40, 2)
    store = make_store("lancedb", EMB, path=tmp_path / "db")
    store.add(items)
    before = [h.id for h in store.query(items[5].text, 5)]
    store.add([StoreItem(items[5].id, items[5].text, {"version": 2})])   # write="add": a second copy
    dup = [h for h in store.query(items[5].text, 5) if h.id == items[5].id]
    store.close()
    assert sorted(str(h.metadata.get("version", "old")) for h in dup) == ["2", "old"]
    again = make_store("lancedb", EMB, path=tmp_path / "db", params={"write": "merge"})
    try:
        assert [h.id for h in again.query(items[5].text, 5)][:1] == before[:1]
        again.add([StoreItem(items[6].id, items[6].text, {"version": 3})])   # merge: replaces the one copy
        hits = [h for h in again.query(items[6].text, 5) if h.id == items[6].id]
        assert [dict(h.metadata) for h in hits] == [{"version": 3}]
    finally:
        again.close()


def test_bad_params_name_the_backend() -> None:
    from replaylens.errors import ConfigError

    with pytest.raises(ConfigError, match="lancedb store: unknown parameter"):
        make_store("lancedb", EMB, params={"ef": 3})
