"""Private: the exact (brute-force) reference store: numpy cosine similarity, ties broken by insertion order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

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
    load_state,
    save_state,
)

__all__ = ["TIE_DECIMALS", "ExactStore", "rank_order"]

TIE_DECIMALS = 9
"""Scores are ranked after rounding to this many decimals: equal vectors are ties even when the float64 matrix
product scores them one ulp apart (BLAS handles rows at a block boundary, e.g. row 128, in another order)."""


def rank_order(scores: np.ndarray, k: int) -> list[int]:
    """Positions of the ``k`` best ``scores`` (insertion order), best first: descending after rounding to
    :data:`TIE_DECIMALS` decimals, ties (equal rounded scores) by insertion position (a stable sort)."""
    return np.argsort(-np.round(scores, TIE_DECIMALS), kind="stable")[:k].tolist()


class ExactStore:
    """Brute-force cosine similarity over every stored vector (float64 dot products of unit rows).

    The reference every other backend is read against: deterministic, independent of batch size, and among
    equal scores (compared after rounding to :data:`TIE_DECIMALS` decimals) the *first-inserted* record ranks
    first (a stable sort on insertion position). Re-adding an
    existing id replaces its text, vector and metadata in place (it keeps its first insertion position).
    With ``path`` the store is saved there on ``close()`` and loaded back on construction.
    """

    name = "exact"

    def __init__(self, embedder: Embedder, *, path: Path | None = None,
                 params: Mapping[str, object] | None = None) -> None:
        p = Params("exact", params or {})
        self.batch_size = p.get_int("batch_size", 1024, low=1)
        p.done()
        self.embedder = embedder
        self.path = path
        self._ids: list[str] = []
        self._pos: dict[str, int] = {}
        self._meta: list[Metadata] = []
        self._chunks: list[np.ndarray] = []
        self._matrix = np.zeros((0, embedder.dim), dtype=np.float64)
        if path is not None and (path / "exact.npz").is_file():
            self._load(path)

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, items: Sequence[StoreItem]) -> None:
        for start in range(0, len(items), self.batch_size):
            batch = items[start:start + self.batch_size]
            vecs = embed_checked(self.embedder, [it.text for it in batch], unit=True)
            self._add_vectors(batch, vecs)

    def _add_vectors(self, batch: Sequence[StoreItem], vecs: np.ndarray) -> None:
        ids = [it.id for it in batch]
        if len(set(ids)) == len(ids) and self._pos.keys().isdisjoint(ids):  # all new: append in one go
            start = len(self._ids)
            self._pos.update(zip(ids, range(start, start + len(ids)), strict=True))
            self._ids += ids
            self._meta += [it.metadata for it in batch]
            self._chunks.append(vecs.astype(np.float64))
            return
        fresh: list[int] = []
        replaced: list[tuple[int, int, Metadata]] = []
        for row, it in enumerate(batch):
            at = self._pos.get(it.id)
            if at is None:
                self._pos[it.id] = len(self._ids)
                self._ids.append(it.id)
                self._meta.append(it.metadata)
                fresh.append(row)
            else:  # applied after this batch's new rows, in order: the same state as one item at a time
                replaced.append((at, row, it.metadata))
        if fresh:
            self._chunks.append(vecs[fresh].astype(np.float64))
        if replaced:
            self._flush()
            for at, row, md in replaced:
                self._matrix[at] = vecs[row]
                self._meta[at] = md

    def _flush(self) -> None:
        if self._chunks:
            self._matrix = np.concatenate([self._matrix, *self._chunks], axis=0)
            self._chunks = []

    def scores(self, text: str) -> np.ndarray:
        """Cosine similarity of ``text`` to every stored record, in insertion order."""
        self._flush()
        q = embed_checked(self.embedder, [text], unit=True)[0].astype(np.float64)
        return self._matrix @ q

    def query(self, text: str, k: int) -> list[Hit]:
        check_k(k)
        if not self._ids:
            return []
        s = self.scores(text)
        order = rank_order(s, k)
        return hits_at(order, s[order].tolist(), self._ids, self._meta)

    def query_many(self, texts: Sequence[str], k: int) -> list[list[Hit]]:
        """``[self.query(t, k) for t in texts]``: the query vectors embedded together, each scored as alone."""
        check_k(k)
        if not self._ids or not texts:
            return [[] for _ in texts]
        self._flush()
        qs = embed_queries(self.embedder, texts, unit=True)
        out = []
        for q in qs:
            s = self._matrix @ q.astype(np.float64)
            order = rank_order(s, k)
            out.append(hits_at(order, s[order].tolist(), self._ids, self._meta))
        return out

    def close(self) -> None:
        if self.path is not None:
            self._flush()
            self.path.mkdir(parents=True, exist_ok=True)
            np.savez(self.path / "exact.npz", matrix=self._matrix)
            save_state(self.path / "exact.json", self._ids, self._meta, self.embedder)

    def _load(self, path: Path) -> None:
        self._ids, self._meta = load_state(path / "exact.json", self.embedder, "exact")
        with np.load(path / "exact.npz") as z:
            self._matrix = np.asarray(z["matrix"], dtype=np.float64)
        self._pos = {i: n for n, i in enumerate(self._ids)}
