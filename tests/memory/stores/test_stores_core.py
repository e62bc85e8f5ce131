"""The store protocol's core: the hashing embedder, the exact reference store, the registries and user factories."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from _storecases import corpus, tie_corpus
from hypothesis import given
from hypothesis import strategies as st

from replaylens.errors import ConfigError
from replaylens.memory.stores import (
    STORES,
    ExactStore,
    HashingEmbedder,
    Hit,
    StoreItem,
    VectorStore,
    embed_checked,
    make_embedder,
    make_store,
    unit_rows,
)


def test_hashing_embedder_is_deterministic_and_normalised() -> None:
    e = HashingEmbedder(64)
    texts = ["Fix the parser crash", "fix the PARSER crash", "speed up the cache", ""]
    v = e.embed(texts)
    assert v.dtype == np.float32 and v.shape == (4, 64)
    np.testing.assert_array_equal(v, HashingEmbedder(64).embed(texts))  # a fresh instance: same vectors
    np.testing.assert_array_equal(v[0], v[1])  # lower-cased
    np.testing.assert_allclose(np.linalg.norm(v[:3], axis=1), 1.0, atol=1e-6)
    assert not v[3].any()  # no features: the zero vector
    assert float(v[0] @ v[1]) > float(v[0] @ v[2])
    assert e.fingerprint() != HashingEmbedder(128).fingerprint()


@given(st.lists(st.text(max_size=40), max_size=6))
def test_hashing_embedder_rows_do_not_depend_on_the_batch(texts: list[str]) -> None:
    e = HashingEmbedder(32)
    batch = e.embed(texts)
    for i, t in enumerate(texts):
        np.testing.assert_array_equal(batch[i], e.embed([t])[0])


def test_make_embedder_specs() -> None:
    assert make_embedder("hashing").dim == 256
    assert make_embedder("hashing:64").dim == 64
    for bad, msg in (("nope", "unknown embedder"), ("hashing:x", "integer"), ("openai:model-only", "MODEL@BASE_URL")):
        with pytest.raises(ConfigError, match=msg):
            make_embedder(bad)


def test_exact_store_ranks_ties_by_insertion_order_and_batches_do_not_matter() -> None:
    items, cases = tie_corpus()
    a = ExactStore(HashingEmbedder(128))
    b = ExactStore(HashingEmbedder(128), params={"batch_size": 1})
    a.add(items)
    for i in range(0, len(items), 7):
        b.add(items[i:i + 7])
    for text, first, last in cases:
        ha, hb = a.query(text, 3), b.query(text, 3)
        assert [h.id for h in ha[:2]] == [first, last]
        assert ha == hb
        assert ha[0].score == ha[1].score


def test_exact_store_readd_replaces_in_place() -> None:
    s = ExactStore(HashingEmbedder(64))
    s.add([StoreItem("x", "alpha beta", {"v": 1}), StoreItem("y", "gamma delta"), StoreItem("x", "gamma delta",
                                                                                            {"v": 2})])
    assert len(s) == 2
    hits = s.query("gamma delta", 2)
    assert [h.id for h in hits] == ["x", "y"]  # x keeps its first insertion position, so it wins the tie
    assert dict(hits[0].metadata) == {"v": 2}


def test_exact_store_persists_and_refuses_another_embedder(tmp_path: Path) -> None:
    items = corpus(20)
    s = ExactStore(HashingEmbedder(64), path=tmp_path)
    s.add(items)
    before = s.query("cache", 5)
    s.close()
    again = ExactStore(HashingEmbedder(64), path=tmp_path)
    assert again.query("cache", 5) == before
    with pytest.raises(ConfigError, match="built with embedder"):
        ExactStore(HashingEmbedder(32), path=tmp_path)


def test_store_items_validate() -> None:
    with pytest.raises(ConfigError, match="id"):
        StoreItem("", "text")
    with pytest.raises(ConfigError, match="metadata"):
        StoreItem("a", "text", {"flag": True})
    with pytest.raises(ConfigError, match="k must be"):
        ExactStore(HashingEmbedder(16)).query("q", 0)


def test_make_store_registry_params_and_user_factory(tmp_path: Path) -> None:
    assert {"exact", "chroma", "qdrant", "langgraph", "faiss", "hnswlib"} <= set(STORES)
    with pytest.raises(ConfigError, match="unknown store backend"):
        make_store("nope", HashingEmbedder(16))
    with pytest.raises(ConfigError, match="unknown parameter"):
        make_store("exact", HashingEmbedder(16), params={"ef": 3})
    user = tmp_path / "mystore.py"
    user.write_text(
        "from replaylens.memory.stores import ExactStore\n"
        "def factory(embedder, *, path, params):\n"
        "    s = ExactStore(embedder, params=params)\n"
        "    s.name = 'mine'\n"
        "    return s\n"
        "def broken(embedder, *, path, params):\n"
        "    return 42\n")
    s = make_store(f"{user}:factory", HashingEmbedder(16), params={"batch_size": 2})
    assert isinstance(s, VectorStore) and s.name == "mine"
    s.add(corpus(5))
    assert s.query(corpus(5)[2].text, 1)[0].id == "r002"
    with pytest.raises(ConfigError, match="lacks the VectorStore methods"):
        make_store(f"{user}:broken", HashingEmbedder(16))


class _Bad:
    """An embedder that breaks its contract: a wrong width, or a NaN."""

    name = "bad"
    dim = 4

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def embed(self, texts: list[str]) -> np.ndarray:
        if self.mode == "shape":
            return np.ones((len(texts), 3), dtype=np.float32)
        out = np.ones((len(texts), 4), dtype=np.float32)
        out[-1, 2] = np.nan
        return out

    def fingerprint(self) -> str:
        return f"bad-{self.mode}"


@pytest.mark.parametrize(("mode", "msg"), [("shape", r"bad-shape returned shape \(2, 3\)"),
                                           ("nan", "bad-nan returned a non-finite value")])
def test_a_broken_embedder_is_one_clear_error(mode: str, msg: str) -> None:
    store = ExactStore(_Bad(mode))
    with pytest.raises(ConfigError, match=msg):
        store.add([StoreItem("a", "x"), StoreItem("b", "y")])


@given(st.lists(st.tuples(st.integers(0, 7), st.integers(0, 5)), min_size=1, max_size=25),
       st.integers(1, 6))
def test_exact_store_any_batching_equals_one_item_at_a_time(log: list[tuple[int, int]], batch: int) -> None:
    """The all-new fast path and the re-add path give the state of ingesting one item at a time."""
    items = [StoreItem(f"id{i}", f"text {t} of task {t % 3}", {"n": n}) for n, (i, t) in enumerate(log)]
    emb = HashingEmbedder(32)
    one = ExactStore(emb, params={"batch_size": 1})
    for it in items:
        one.add([it])
    many = ExactStore(emb, params={"batch_size": batch})
    many.add(items)
    for q in ("text 1", "task 2", "text 5 of task 2"):
        assert one.query(q, 8) == many.query(q, 8)


class _RawEmbedder:
    """Returns the given rows as they are (float32, not normalised), so the adapter's normalisation shows."""

    name = "raw"
    batch_invariant = True

    def __init__(self, rows: dict[str, np.ndarray]) -> None:
        self.rows = rows
        self.dim = len(next(iter(rows.values())))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self.rows[t] for t in texts]).astype(np.float32)

    def fingerprint(self) -> str:
        return "raw"


@given(st.lists(st.lists(st.floats(-1e3, 1e3, width=32), min_size=5, max_size=5), min_size=1, max_size=12))
def test_one_query_vector_is_normalised_to_the_bytes_of_a_batch_row(rows: list[list[float]]) -> None:
    """``embed_checked`` normalises a single text with a scalar fast path; each row equals that text's row in the
    batched call and in ``unit_rows`` (an all-zero row stays zero)."""
    emb = _RawEmbedder({f"t{i}": np.array(r, dtype=np.float32) for i, r in enumerate(rows)})
    texts = list(emb.rows)
    batch = embed_checked(emb, texts, unit=True)
    assert batch.tobytes() == unit_rows(emb.embed(texts)).tobytes()
    for n, t in enumerate(texts):
        one = embed_checked(emb, [t], unit=True)
        assert one.dtype == np.float32 and one.shape == (1, 5)
        assert one.tobytes() == batch[n:n + 1].tobytes()


def test_a_hit_is_an_immutable_named_tuple_with_frozen_metadata() -> None:
    md = {"outcome": 1.5}
    hit = Hit("a", 0.9, 1, md)
    md["outcome"] = 0.0
    assert (hit.id, hit.score, hit.rank, hit.metadata["outcome"]) == ("a", 0.9, 1, 1.5)
    assert hit == Hit("a", 0.9, 1, {"outcome": 1.5}) and hit != Hit("a", 0.9, 2, {"outcome": 1.5})
    with pytest.raises(TypeError):
        hit.metadata["outcome"] = 2.0  # type: ignore[index]
    with pytest.raises(AttributeError):
        hit.score = 0.0  # type: ignore[misc]
    with pytest.raises(ConfigError, match="metadata 'x'"):
        Hit("a", 0.9, 1, {"x": [1]})  # type: ignore[dict-item]
    assert repr(hit).startswith("Hit(id='a', score=0.9, rank=1")


def _greedy_batches(items: list[StoreItem], size: int) -> list[list[StoreItem]]:
    """The LangGraph adapter's batching rule, one item at a time: a new batch at ``size`` items or at a key or text
    already in the batch."""
    out: list[list[StoreItem]] = [[]]
    for it in items:
        if len(out[-1]) >= size or any(it.id == o.id or it.text == o.text for o in out[-1]):
            out.append([])
        out[-1].append(it)
    return [b for b in out if b]


@given(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9)), max_size=40), st.integers(1, 8))
def test_langgraph_batches_are_the_greedy_rule(pairs: list[tuple[int, int]], size: int) -> None:
    from replaylens.memory.stores._langgraph import LangGraphStore

    items = [StoreItem(f"id{i}", f"text {t}") for i, t in pairs]
    store = object.__new__(LangGraphStore)  # the batching needs no backend (langgraph may be absent here)
    store.batch_size = size
    assert store._batches(items) == _greedy_batches(items, size)
