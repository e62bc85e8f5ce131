"""Private: the store and embedder protocols, their value types and the shared helpers of the adapters."""

from __future__ import annotations

import importlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import NamedTuple, Protocol, runtime_checkable

import numpy as np

from ...errors import ConfigError

__all__ = ["EXTRA", "Embedder", "Hit", "Metadata", "Params", "Scalar", "StoreItem", "VectorStore", "check_embedded",
           "check_k", "embed_checked", "embed_queries", "freeze_metadata", "hits_at", "import_backend",
           "load_state", "query_many", "save_state", "unit_rows"]

EXTRA = "replaylens[stores]"

Scalar = str | int | float
Metadata = Mapping[str, Scalar]


def freeze_metadata(md: Mapping[str, Scalar]) -> Mapping[str, Scalar]:
    """A read-only copy of validated metadata; a read-only mapping made here (by a StoreItem) passes as it is,
    so hits share their item's metadata without a copy."""
    if type(md) is MappingProxyType:
        return md
    for k, v in md.items():
        if not isinstance(k, str) or isinstance(v, bool) or not isinstance(v, str | int | float):
            raise ConfigError(f"metadata {k!r}: values must be str, int or float; got {type(v).__name__}")
    return MappingProxyType(dict(md))


@dataclass(frozen=True)
class StoreItem:
    """One record to ingest: a unique ``id``, the ``text`` the store embeds, and flat scalar ``metadata``."""

    id: str
    text: str
    metadata: Metadata = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ConfigError(f"a store item's id must be a non-empty string; got {self.id!r}")
        if not isinstance(self.text, str):
            raise ConfigError(f"store item {self.id!r}: text must be a string")
        object.__setattr__(self, "metadata", freeze_metadata(self.metadata))


class _HitFields(NamedTuple):
    id: str
    score: float
    rank: int
    metadata: Metadata


class Hit(_HitFields):
    """One retrieved record: its ``id``, the backend's similarity ``score`` (higher is closer; cosine similarity
    for every built-in backend), its 1-based ``rank`` in the backend's own order, and its stored ``metadata``
    (read-only). An immutable named tuple: adapters build thousands a second, and a tuple is the cheapest value
    Python makes (see docs/decisions.md, "Store hits as named tuples")."""

    __slots__ = ()

    def __new__(cls, id: str, score: float, rank: int, metadata: Metadata | None = None) -> Hit:
        return super().__new__(cls, id, score, rank, freeze_metadata({} if metadata is None else metadata))


_tuple_new = tuple.__new__


def hits_at(labels: Sequence[int], scores: Sequence[float], ids: Sequence[str], metas: Sequence[Metadata]
            ) -> list[Hit]:
    """Hits ranked 1.. of the records at positions ``labels`` of an adapter's own ``ids`` / ``metas`` (frozen by
    ``StoreItem``), with ``scores`` (Python floats): the values ``Hit(...)`` makes, without its checks."""
    return [_tuple_new(Hit, (ids[i], s, r, metas[i]))
            for r, (i, s) in enumerate(zip(labels, scores, strict=True), 1)]


@runtime_checkable
class Embedder(Protocol):
    """Text → vectors. ``embed`` returns float32 of shape ``(len(texts), dim)``; ``fingerprint`` names the model
    and its settings so that two embedders giving different vectors never share a fingerprint."""

    name: str

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...

    def fingerprint(self) -> str: ...


@runtime_checkable
class VectorStore(Protocol):
    """A text-level store: ``add`` ingests items (embedding them itself), ``query`` returns at most ``k`` hits in
    the backend's order (best first), ``close`` releases files and clients."""

    name: str

    def add(self, items: Sequence[StoreItem]) -> None: ...

    def query(self, text: str, k: int) -> list[Hit]: ...

    def close(self) -> None: ...


def import_backend(module: str, what: str, extra: str = EXTRA) -> ModuleType:
    """Import an optional backend package for ``what`` ("the chroma store"), or raise ConfigError with one line
    naming the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(f"{what} needs the {module.split('.')[0]!r} package ({exc}); "
                          f"install it with: pip install '{extra}'") from None


def unit_rows(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (float32, C-contiguous; the norm in float64); an all-zero row stays zero."""
    x64 = np.array(x, dtype=np.float64, ndmin=2)
    if x64.ndim != 2:
        raise ConfigError(f"embeddings must be a 2-d array; got shape {x64.shape}")
    norms = np.sqrt(np.einsum("ij,ij->i", x64, x64))
    norms[norms == 0] = 1.0
    x64 /= norms[:, None]
    return x64.astype(np.float32)


def check_embedded(vectors: np.ndarray, n: int, embedder: Embedder) -> np.ndarray:
    """The embedder's output validated: float32, shape ``(n, embedder.dim)``, finite."""
    v = np.asarray(vectors, dtype=np.float32)
    if v.shape != (n, embedder.dim):
        raise ConfigError(f"embedder {embedder.fingerprint()} returned shape {v.shape}, expected {(n, embedder.dim)}")
    if not np.isfinite(v).all():
        raise ConfigError(f"embedder {embedder.fingerprint()} returned a non-finite value")
    return v


def embed_checked(embedder: Embedder, texts: Sequence[str], *, unit: bool = False) -> np.ndarray:
    """``embedder.embed(texts)`` validated (float32, ``(len(texts), dim)``, finite), unit rows if ``unit`` (the same
    rows as ``unit_rows``; there a non-finite value shows in its row's squared norm)."""
    if not unit:
        return check_embedded(embedder.embed(texts), len(texts), embedder)
    return _unit_checked(embedder.embed(texts), texts, embedder)


def embed_queries(embedder: Embedder, texts: Sequence[str], *, unit: bool = False) -> np.ndarray:
    """The query vectors of ``texts``, row for row what ``embed_checked(embedder, [text], unit=unit)`` gives for each
    text alone: one ``embed`` call for an embedder whose rows do not depend on the batch (``batch_invariant``
    true: the hashing embedder), else one call per text; the checks and normalisation run once, row-wise."""
    if getattr(embedder, "batch_invariant", False):
        raw = embedder.embed(texts)
    else:
        parts = [np.asarray(embedder.embed([t]), dtype=np.float32) for t in texts]
        raw = np.concatenate(parts, axis=0) if parts else np.zeros((0, embedder.dim), dtype=np.float32)
    if not unit:
        return check_embedded(raw, len(texts), embedder)
    return _unit_checked(raw, texts, embedder)


def _unit_checked(raw: np.ndarray, texts: Sequence[str], embedder: Embedder) -> np.ndarray:
    v = np.asarray(raw, dtype=np.float32)
    if v.shape != (len(texts), embedder.dim):
        raise ConfigError(f"embedder {embedder.fingerprint()} returned shape {v.shape}, "
                          f"expected {(len(texts), embedder.dim)}")
    x64 = v.astype(np.float64)
    sq = np.einsum("ij,ij->i", x64, x64)
    if len(sq) == 1:  # one query: the same operations on a Python float (one row's norm; no array bookkeeping)
        s = float(sq[0])
        if not math.isfinite(s):
            raise ConfigError(f"embedder {embedder.fingerprint()} returned a non-finite value")
        if s:
            x64 /= math.sqrt(s)
        return x64.astype(np.float32)
    if not np.isfinite(sq).all():
        raise ConfigError(f"embedder {embedder.fingerprint()} returned a non-finite value")
    norms = np.sqrt(sq)
    norms[norms == 0] = 1.0
    x64 /= norms[:, None]
    return x64.astype(np.float32)


def query_many(store: VectorStore, texts: Sequence[str], k: int) -> list[list[Hit]]:
    """``[store.query(t, k) for t in texts]``, in one batched call when the store has ``query_many`` (every built-in
    adapter but langgraph and mem0: FAISS, hnswlib, Chroma and Qdrant search a batch natively) with the same hits;
    a user's store needs only ``query``."""
    batched = getattr(store, "query_many", None)
    if not callable(batched):
        return [store.query(t, k) for t in texts]
    out = list(batched(texts, k))
    if len(out) != len(texts):
        raise ConfigError(f"store {store.name!r}: query_many returned {len(out)} results for {len(texts)} queries")
    return out


def check_k(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"k must be a positive integer; got {k!r}")
    return k



class Params:
    """Index parameters of one backend read from a ``params`` mapping; ``done()`` rejects a key nobody read."""

    def __init__(self, backend: str, params: Mapping[str, object]) -> None:
        self.backend = backend
        self._params = dict(params)
        self._read: set[str] = set()

    def _get(self, key: str) -> object:
        self._read.add(key)
        return self._params.get(key)

    def get_int(self, key: str, default: int, *, low: int | None = None) -> int:
        v = self._get(key)
        if v is None:
            return default
        try:
            out = int(str(v)) if not isinstance(v, bool) else None
        except ValueError:
            out = None
        if out is None or (low is not None and out < low):
            bound = f" >= {low}" if low is not None else ""
            raise ConfigError(f"{self.backend} store: parameter {key!r} must be an integer{bound}; got {v!r}")
        return out

    def get_str(self, key: str, default: str, *, choices: Sequence[str] | None = None) -> str:
        v = self._get(key)
        out = default if v is None else str(v)
        if choices is not None and out not in choices:
            raise ConfigError(f"{self.backend} store: parameter {key!r} must be one of {', '.join(choices)}; "
                              f"got {out!r}")
        return out

    def done(self) -> None:
        unknown = sorted(set(self._params) - self._read)
        if unknown:
            raise ConfigError(f"{self.backend} store: unknown parameter(s) {', '.join(unknown)}; "
                              f"known: {', '.join(sorted(self._read))}")


def save_state(file: Path, ids: Sequence[str], meta: Sequence[Metadata], embedder: Embedder) -> None:
    """Write a vector index's side table (ids, metadata, the embedder's fingerprint) as JSON."""
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(json.dumps({"ids": list(ids), "metadata": [dict(m) for m in meta],
                                "embedder": embedder.fingerprint()}))


def load_state(file: Path, embedder: Embedder, backend: str) -> tuple[list[str], list[Metadata]]:
    """Read what ``save_state`` wrote; refuse an index built with another embedder."""
    state = json.loads(file.read_text())
    if state.get("embedder") != embedder.fingerprint():
        raise ConfigError(f"{file.parent}: the {backend} store was built with embedder {state.get('embedder')!r}, "
                          f"not {embedder.fingerprint()!r}")
    return list(state["ids"]), [freeze_metadata(m) for m in state["metadata"]]
