"""The store protocol's core: the hashing embedder, the exact reference store, the registries and user factories."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _storecases import corpus, tie_corpus
from hypothesis import given
from hypothesis import strategies as st

from replaylens.errors import ConfigError
from replaylens.stores import (
    STORES,
    ExactStore,
    HashingEmbedder,
    StoreItem,
    VectorStore,
    make_embedder,
    make_store,
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
        "from replaylens.stores import ExactStore\n"
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
