"""Private: vector-index adapters that hold raw vectors: FAISS (flat inner product or HNSW) and hnswlib."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ._types import (
    Embedder,
    Hit,
    Metadata,
    Params,
    StoreItem,
    check_k,
    embed_checked,
    embed_queries,
    hits_at,
    import_backend,
    load_state,
    save_state,
)

__all__ = ["FaissStore", "HnswlibStore"]


class _Vectors:
    """The shared part: embed in batches of ``batch_size`` and keep each label's id and metadata."""

    name = ""

    def __init__(self, embedder: Embedder, batch_size: int) -> None:
        self.embedder = embedder
        self.batch_size = batch_size
        self._ids: list[str] = []
        self._meta: list[Metadata] = []

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        return embed_checked(self.embedder, texts, unit=True)

    def _query_vector(self, text: str) -> np.ndarray:
        return self._embed([text])

    def add(self, items: Sequence[StoreItem]) -> None:
        for start in range(0, len(items), self.batch_size):
            batch = items[start:start + self.batch_size]
            self._add_batch(batch, self._embed([it.text for it in batch]))

    def _add_batch(self, batch: Sequence[StoreItem], vecs: np.ndarray) -> None:
        raise NotImplementedError


class FaissStore(_Vectors):
    """FAISS over unit vectors: ``index="flat"`` (IndexFlatIP, exact inner product = cosine similarity, the
    default) or ``index="hnsw"`` (IndexHNSWFlat, inner product; params ``M``, ``ef_construction``, ``ef``).
    FAISS has no ids of its own: every ``add`` appends, so re-adding an id stores a second copy (both can be
    retrieved). ``threads`` sets FAISS's OpenMP thread count, which is process-wide (default: FAISS's own for the
    flat index, whose build is deterministic anyway; **1** for ``hnsw``, whose multi-threaded insertion order is
    not reproducible). With ``path`` the index is
    written on ``close()`` (faiss.write_index) and read back on construction.
    """

    name = "faiss"

    def __init__(self, embedder: Embedder, *, path: Path | None = None,
                 params: Mapping[str, object] | None = None) -> None:
        p = Params("faiss", params or {})
        kind = p.get_str("index", "flat", choices=("flat", "hnsw"))
        m = p.get_int("M", 32, low=2)
        efc = p.get_int("ef_construction", 40, low=1)
        self.ef = p.get_int("ef", 16, low=1)
        threads = p.get_int("threads", 1 if kind == "hnsw" else 0, low=0)
        super().__init__(embedder, p.get_int("batch_size", 1024, low=1))
        p.done()
        self._faiss: Any = import_backend("faiss", "the faiss store")
        if threads:
            self._faiss.omp_set_num_threads(threads)
        self.kind = kind
        self.path = path
        dim = embedder.dim
        if path is not None and (path / "faiss.index").is_file():
            self._ids, self._meta = load_state(path / "faiss.json", embedder, "faiss")
            self._index = self._faiss.read_index(str(path / "faiss.index"))
        elif kind == "flat":
            self._index = self._faiss.IndexFlatIP(dim)
        else:
            self._index = self._faiss.IndexHNSWFlat(dim, m, self._faiss.METRIC_INNER_PRODUCT)
            self._index.hnsw.efConstruction = efc
        if kind == "hnsw":
            self._index.hnsw.efSearch = self.ef

    def _add_batch(self, batch: Sequence[StoreItem], vecs: np.ndarray) -> None:
        self._index.add(vecs)
        self._ids += [it.id for it in batch]
        self._meta += [it.metadata for it in batch]

    def query(self, text: str, k: int) -> list[Hit]:
        check_k(k)
        if not self._ids:
            return []
        scores, labels = self._index.search(self._query_vector(text), min(k, len(self._ids)))
        return self._hits(scores[0].tolist(), labels[0].tolist())

    def _hits(self, scores: list[float], labels: list[int]) -> list[Hit]:
        if -1 in labels:  # fewer results than asked (an HNSW index that found fewer)
            scores = [s for s, i in zip(scores, labels, strict=True) if i >= 0]
            labels = [i for i in labels if i >= 0]
        return hits_at(labels, scores, self._ids, self._meta)

    def query_many(self, texts: Sequence[str], k: int) -> list[list[Hit]]:
        """``[self.query(t, k) for t in texts]`` in batched ``search`` calls of fewer queries than FAISS's
        ``distance_compute_blas_threshold`` (20): below it a flat index scores each query with the same kernel as a
        single query; at or above it FAISS switches to a BLAS matrix product whose rounding can break ties
        differently."""
        check_k(k)
        if not self._ids or not texts:
            return [[] for _ in texts]
        qs = embed_queries(self.embedder, texts, unit=True)
        step = max(1, int(self._faiss.cvar.distance_compute_blas_threshold) - 1)
        kk, out = min(k, len(self._ids)), []
        for lo in range(0, len(qs), step):
            scores, labels = self._index.search(qs[lo:lo + step], kk)
            out += [self._hits(s, i) for s, i in zip(scores.tolist(), labels.tolist(), strict=True)]
        return out

    def close(self) -> None:
        if self.path is not None:
            self.path.mkdir(parents=True, exist_ok=True)
            self._faiss.write_index(self._index, str(self.path / "faiss.index"))
            save_state(self.path / "faiss.json", self._ids, self._meta, self.embedder)


class HnswlibStore(_Vectors):
    """hnswlib (cosine space) with params ``M`` (16), ``ef_construction`` (200), ``ef`` (10, hnswlib's own
    default and Chroma's old one), ``seed`` (100, hnswlib's default ``random_seed``) and ``num_threads``
    (1 here, so that a build is deterministic; hnswlib's own default -1 uses every core). Labels are insertion
    positions; re-adding an id overwrites its vector under the same label (hnswlib's ``add_items`` update).
    The index grows by doubling. With ``path`` it is saved on ``close()`` and loaded on construction, and
    ``ef`` is set again after loading (hnswlib does not persist it).
    """

    name = "hnswlib"

    def __init__(self, embedder: Embedder, *, path: Path | None = None,
                 params: Mapping[str, object] | None = None) -> None:
        p = Params("hnswlib", params or {})
        self.m = p.get_int("M", 16, low=2)
        self.ef_construction = p.get_int("ef_construction", 200, low=1)
        self.ef = p.get_int("ef", 10, low=1)
        self.seed = p.get_int("seed", 100, low=0)
        self.num_threads = p.get_int("num_threads", 1)
        capacity = p.get_int("capacity", 1024, low=1)
        super().__init__(embedder, p.get_int("batch_size", 1024, low=1))
        p.done()
        hnswlib: Any = import_backend("hnswlib", "the hnswlib store")
        self.path = path
        self._pos: dict[str, int] = {}
        self._index = hnswlib.Index(space="cosine", dim=embedder.dim)
        if path is not None and (path / "hnswlib.bin").is_file():
            self._ids, self._meta = load_state(path / "hnswlib.json", embedder, "hnswlib")
            self._index.load_index(str(path / "hnswlib.bin"), max_elements=max(capacity, len(self._ids)))
            self._pos = {i: n for n, i in enumerate(self._ids)}
        else:
            self._index.init_index(max_elements=capacity, ef_construction=self.ef_construction, M=self.m,
                                   random_seed=self.seed)
        self._index.set_ef(self.ef)
        self._index.set_num_threads(self.num_threads)

    def _add_batch(self, batch: Sequence[StoreItem], vecs: np.ndarray) -> None:
        labels = np.empty(len(batch), dtype=np.int64)
        for n, it in enumerate(batch):
            at = self._pos.get(it.id)
            if at is None:
                at = self._pos[it.id] = len(self._ids)
                self._ids.append(it.id)
                self._meta.append(it.metadata)
            else:
                self._meta[at] = it.metadata
            labels[n] = at
        need = len(self._ids)
        if need > self._index.get_max_elements():
            self._index.resize_index(max(need, 2 * self._index.get_max_elements()))
        self._index.add_items(vecs, labels, num_threads=self.num_threads)

    def query(self, text: str, k: int) -> list[Hit]:
        check_k(k)
        n = len(self._ids)
        if not n:
            return []
        labels, dists = self._index.knn_query(self._query_vector(text), k=min(k, n), num_threads=self.num_threads)
        return self._hits(labels[0].tolist(), dists[0].tolist())

    def _hits(self, labels: list[int], dists: list[float]) -> list[Hit]:
        return hits_at(labels, [1.0 - d for d in dists], self._ids, self._meta)

    def query_many(self, texts: Sequence[str], k: int) -> list[list[Hit]]:
        """``[self.query(t, k) for t in texts]`` in one ``knn_query`` call (each query searched as alone)."""
        check_k(k)
        n = len(self._ids)
        if not n or not texts:
            return [[] for _ in texts]
        labels, dists = self._index.knn_query(embed_queries(self.embedder, texts, unit=True), k=min(k, n),
                                              num_threads=self.num_threads)
        return [self._hits(lab, d) for lab, d in zip(labels.tolist(), dists.tolist(), strict=True)]

    def close(self) -> None:
        if self.path is not None:
            self.path.mkdir(parents=True, exist_ok=True)
            self._index.save_index(str(self.path / "hnswlib.bin"))
            save_state(self.path / "hnswlib.json", self._ids, self._meta, self.embedder)
