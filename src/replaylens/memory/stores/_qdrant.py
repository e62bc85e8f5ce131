"""Private: qdrant-client in local mode (``QdrantClient(path=...)`` or ``":memory:"``), no server."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ._types import Embedder, Hit, Params, StoreItem, check_k, embed_checked, embed_queries, import_backend

__all__ = ["QdrantStore", "point_id"]

_NS = uuid.UUID("5b8a7c0e-2f4e-4f61-9d0a-7f2b3c1d9e11")  # fixed namespace: a record id maps to one point id


def point_id(record_id: str) -> str:
    """Qdrant point ids are unsigned integers or UUIDs: a record id becomes the UUID5 of it (deterministic)."""
    return str(uuid.uuid5(_NS, record_id))


class QdrantStore:
    """A Qdrant collection (cosine distance) in qdrant-client's local mode: on disk under ``path`` (kept across
    constructions), else in memory. Writes are ``upsert``: re-adding an id overwrites its point (one copy).
    Params: ``collection`` (name, default "replaylens"), ``batch_size`` (points per upsert, 256).
    The record's id, text and metadata travel in the point's payload.
    """

    name = "qdrant"

    def __init__(self, embedder: Embedder, *, path: Path | None = None,
                 params: Mapping[str, object] | None = None) -> None:
        p = Params("qdrant", params or {})
        self.collection = p.get_str("collection", "replaylens")
        self.batch_size = p.get_int("batch_size", 256, low=1)
        p.done()
        qc: Any = import_backend("qdrant_client", "the qdrant store")
        self._models: Any = import_backend("qdrant_client.models", "the qdrant store")
        self.embedder = embedder
        if path is not None:
            path.mkdir(parents=True, exist_ok=True)
            self._client = qc.QdrantClient(path=str(path))
        else:
            self._client = qc.QdrantClient(location=":memory:")
        if not self._client.collection_exists(self.collection):
            self._client.create_collection(
                self.collection,
                vectors_config=self._models.VectorParams(size=embedder.dim, distance=self._models.Distance.COSINE))

    def add(self, items: Sequence[StoreItem]) -> None:
        for start in range(0, len(items), self.batch_size):
            batch = items[start:start + self.batch_size]
            vecs = embed_checked(self.embedder, [it.text for it in batch])
            points = [self._models.PointStruct(id=point_id(it.id), vector=v.tolist(),
                                               payload={"rl_id": it.id, "rl_text": it.text,
                                                        "rl_metadata": dict(it.metadata)})
                      for it, v in zip(batch, vecs, strict=True)]
            self._client.upsert(self.collection, points=points, wait=True)

    def query(self, text: str, k: int) -> list[Hit]:
        check_k(k)
        q = embed_checked(self.embedder, [text])[0]
        res = self._client.query_points(self.collection, query=q.tolist(), limit=k, with_payload=True)
        return self._hits(res.points)

    @staticmethod
    def _hits(points: Any) -> list[Hit]:
        return [Hit(str(pt.payload["rl_id"]), float(pt.score), r + 1, pt.payload.get("rl_metadata") or {})
                for r, pt in enumerate(points)]

    def query_many(self, texts: Sequence[str], k: int) -> list[list[Hit]]:
        """``[self.query(t, k) for t in texts]``: the query vectors embedded together, then one ``query_points`` each.
        Not ``query_batch_points``: in local mode it scores the batch as one matrix product, whose rounding differs
        from a single query's (qdrant-client 1.x; measured in tests/memory/stores/test_stores_query_many.py), and ties
        would then break differently."""
        check_k(k)
        return [self._hits(self._client.query_points(self.collection, query=q.tolist(), limit=k,
                                                     with_payload=True).points)
                for q in embed_queries(self.embedder, texts)] if texts else []

    def close(self) -> None:
        self._client.close()
