"""Private: chromadb (ephemeral or persistent client, precomputed embeddings, telemetry off)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ._types import Embedder, Hit, Params, StoreItem, check_k, embed_checked, embed_queries, import_backend

__all__ = ["ChromaStore"]

_EPHEMERAL = itertools.count()  # chromadb shares one in-memory system per process: one collection per store


class ChromaStore:
    """A Chroma collection in cosine space, fed the embedder's vectors (no Chroma embedding function).

    ``path`` gives a PersistentClient there (the collection is kept across constructions), else an
    EphemeralClient with a collection of its own. Writes are Chroma's ``add`` (param ``write="add"``: re-adding
    an existing id is ignored, the first copy stays) or ``upsert`` (``write="upsert"``: it replaces it).
    Index params pass through to Chroma's HNSW configuration: ``ef`` (ef_search), ``ef_construction``, ``M``
    (max_neighbors), ``num_threads``, ``sync_threshold`` and ``batch_size`` (Chroma's brute-force buffer).
    Params ``collection`` (name) and ``add_batch`` (records per Chroma ``add`` call, default 1: one record per
    call builds the same index every time, while several records per call are inserted into the HNSW graph in a
    nondeterministic order — measured: 20–25 of the tool-use example's 96 top-5 answers change between two
    identical builds at 256 per call, none at 1; see docs/guide/stores/chroma.md). Telemetry is off.
    """

    name = "chroma"

    def __init__(self, embedder: Embedder, *, path: Path | None = None,
                 params: Mapping[str, object] | None = None) -> None:
        p = Params("chroma", params or {})
        collection = p.get_str("collection", "replaylens")
        self.write = p.get_str("write", "add", choices=("add", "upsert"))
        self.add_batch = p.get_int("add_batch", 1, low=1)
        hnsw: dict[str, object] = {"space": "cosine"}
        for key, name in (("ef", "ef_search"), ("ef_construction", "ef_construction"), ("M", "max_neighbors"),
                          ("num_threads", "num_threads"), ("sync_threshold", "sync_threshold"),
                          ("batch_size", "batch_size")):
            if key in (params or {}):
                hnsw[name] = p.get_int(key, 0, low=1)
        p.done()
        os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
        chromadb: Any = import_backend("chromadb", "the chroma store")
        config: Any = import_backend("chromadb.config", "the chroma store")
        settings = config.Settings(anonymized_telemetry=False)
        self.embedder = embedder
        self._persistent = path is not None
        if path is not None:
            path.mkdir(parents=True, exist_ok=True)
            self._client = chromadb.PersistentClient(path=str(path), settings=settings)
        else:
            self._client = chromadb.EphemeralClient(settings=settings)
            collection = f"{collection}-{os.getpid()}-{next(_EPHEMERAL)}"
        self._name = collection
        self._coll = self._client.get_or_create_collection(collection, embedding_function=None,
                                                           configuration={"hnsw": hnsw})
        self._count = self._coll.count()

    def _batches(self, items: Sequence[StoreItem]) -> list[list[StoreItem]]:
        """Consecutive batches of at most ``add_batch`` with no id twice (Chroma rejects that within one call)."""
        out: list[list[StoreItem]] = [[]]
        seen: set[str] = set()
        for it in items:
            if len(out[-1]) >= self.add_batch or it.id in seen:
                out.append([])
                seen = set()
            out[-1].append(it)
            seen.add(it.id)
        return [b for b in out if b]

    def add(self, items: Sequence[StoreItem]) -> None:
        for batch in self._batches(items):
            vecs = embed_checked(self.embedder, [it.text for it in batch])
            write = self._coll.add if self.write == "add" else self._coll.upsert
            write(ids=[it.id for it in batch], embeddings=vecs, documents=[it.text for it in batch],
                  metadatas=[dict(it.metadata) or None for it in batch])
        self._count = self._coll.count()  # once per add, not per query

    def query(self, text: str, k: int) -> list[Hit]:
        check_k(k)
        n = self._count
        if not n:
            return []
        q = embed_checked(self.embedder, [text])
        res = self._coll.query(query_embeddings=q, n_results=min(k, n), include=["metadatas", "distances"])
        return self._hits(res, 0)

    @staticmethod
    def _hits(res: Any, j: int) -> list[Hit]:
        metas = res["metadatas"][j] if res.get("metadatas") else [None] * len(res["ids"][j])
        return [Hit(str(i), 1.0 - float(d), r + 1, m or {})
                for r, (i, d, m) in enumerate(zip(res["ids"][j], res["distances"][j], metas, strict=True))]

    def query_many(self, texts: Sequence[str], k: int) -> list[list[Hit]]:
        """``[self.query(t, k) for t in texts]`` in one Chroma ``query`` with every query embedding."""
        check_k(k)
        n = self._count
        if not n or not texts:
            return [[] for _ in texts]
        res = self._coll.query(query_embeddings=embed_queries(self.embedder, texts), n_results=min(k, n),
                               include=["metadatas", "distances"])
        return [self._hits(res, j) for j in range(len(texts))]

    def close(self) -> None:
        if not self._persistent:
            self._client.delete_collection(self._name)
