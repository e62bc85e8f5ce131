"""Private: the store registry (``STORES``) and ``make_store`` (a built-in backend or a user's own factory)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from ..._imports import import_target
from ...errors import ConfigError
from ._types import Embedder, VectorStore

__all__ = ["STORES", "StoreFactory", "make_store"]


class StoreFactory(Protocol):
    """Builds a store over ``embedder``; ``path`` is where a persistent backend keeps its files (None: in memory)."""

    def __call__(self, embedder: Embedder, *, path: Path | None, params: Mapping[str, object]) -> VectorStore: ...


def _exact(embedder: Embedder, *, path: Path | None, params: Mapping[str, object]) -> VectorStore:
    from ._exact import ExactStore

    return ExactStore(embedder, path=path, params=params)


def _chroma(embedder: Embedder, *, path: Path | None, params: Mapping[str, object]) -> VectorStore:
    from ._chroma import ChromaStore

    return ChromaStore(embedder, path=path, params=params)


def _qdrant(embedder: Embedder, *, path: Path | None, params: Mapping[str, object]) -> VectorStore:
    from ._qdrant import QdrantStore

    return QdrantStore(embedder, path=path, params=params)


def _langgraph(embedder: Embedder, *, path: Path | None, params: Mapping[str, object]) -> VectorStore:
    from ._langgraph import LangGraphStore

    return LangGraphStore(embedder, path=path, params=params)


def _faiss(embedder: Embedder, *, path: Path | None, params: Mapping[str, object]) -> VectorStore:
    from ._ann import FaissStore

    return FaissStore(embedder, path=path, params=params)


def _hnswlib(embedder: Embedder, *, path: Path | None, params: Mapping[str, object]) -> VectorStore:
    from ._ann import HnswlibStore

    return HnswlibStore(embedder, path=path, params=params)


def _mem0(embedder: Embedder, *, path: Path | None, params: Mapping[str, object]) -> VectorStore:
    from ._mem0 import Mem0Store

    return Mem0Store(embedder, path=path, params=params)


def _lancedb(embedder: Embedder, *, path: Path | None, params: Mapping[str, object]) -> VectorStore:
    from ._lancedb import LanceDBStore

    return LanceDBStore(embedder, path=path, params=params)


STORES: dict[str, StoreFactory] = {
    "exact": _exact,
    "chroma": _chroma,
    "qdrant": _qdrant,
    "langgraph": _langgraph,
    "faiss": _faiss,
    "hnswlib": _hnswlib,
    "mem0": _mem0,
    "lancedb": _lancedb,
}


def make_store(backend: str, embedder: Embedder, *, path: Path | None = None,
               params: Mapping[str, object] | None = None) -> VectorStore:
    """A store: a built-in backend by name (``STORES``) or a user's factory ``file.py:factory`` /
    ``module:factory``, called as ``factory(embedder, path=path, params=params)``."""
    params = dict(params or {})
    factory = STORES.get(backend)
    if factory is None:
        if ":" not in backend:
            raise ConfigError(f"unknown store backend {backend!r}; known: {', '.join(STORES)} "
                              "(or your own file.py:factory / module:factory)")
        factory = import_target(backend, "store factory")
        if not callable(factory):
            raise ConfigError(f"store factory {backend!r} is not callable")
    try:
        store = factory(embedder, path=path, params=params)
    except ConfigError:
        raise
    except Exception as exc:  # a backend or a user's factory failing at construction: one line naming it
        raise ConfigError(f"building the {backend} store failed: {type(exc).__name__}: {exc}") from None
    if not isinstance(store, VectorStore):
        raise ConfigError(f"store factory {backend!r} returned {type(store).__name__}, which lacks the "
                          "VectorStore methods (name, add, query, close)")
    return store
