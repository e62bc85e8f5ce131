"""An OpenAI-compatible embedder behind the cross-run request cache of the LLM agents (``replaylens.llm``).

Each input text is one cache entry keyed by (endpoint base URL, model, sha256 of the text)
(:func:`replaylens.llm.embedding_cache_key`), its float32 vector stored with a digest that binds it to the key and
checked on every read; an entry whose digest differs is deleted and asked again (one warning line per run).  A
rerun is therefore answered without a request, whatever the batching; the counts say how many texts came from
the cache, how many were embedded, and how many requests were sent.  A damaged cache file is one line naming it
(as for chat requests).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["CachedEmbedder", "cached_embedder"]


class CachedEmbedder:
    """``inner`` (an :class:`~replaylens.memory.stores.OpenAIEmbedder`) answered from a
    :class:`~replaylens.llm.RequestCache` where possible; the same vectors, name and fingerprint as ``inner``."""

    def __init__(self, inner: Any, cache: Any) -> None:
        self.inner = inner
        self.cache = cache
        self.name = str(inner.name)
        self.hits = 0
        self.misses = 0
        self.stored = 0
        self.discarded = 0
        self._dim: int | None = inner.known_dim

    @property
    def dim(self) -> int:
        if self._dim is None:  # probe through the cache: a rerun sends no request for it either
            self._dim = int(self.embed(["dimension probe"]).shape[1])
        return self._dim

    def _key(self, text: str) -> str:
        from ...llm import embedding_cache_key

        return embedding_cache_key(self.inner.base_url, self.inner.model, text)

    def _cached(self, key: str) -> np.ndarray | None:
        before = len(self.cache.discarded)
        blob = self.cache.get_vector(key)
        v = None if blob is None or len(blob) % 4 else np.frombuffer(blob, dtype="<f4")
        if blob is not None and (v is None or v.size == 0 or (self._dim is not None and v.size != self._dim)):
            self.cache.discarded.append(key)
            v = None
        if len(self.cache.discarded) > before:
            self._note_discard()
        return v

    def _note_discard(self) -> None:
        self.discarded += 1
        if self.discarded == 1:
            print(f"replaylens: warning: request cache {self.cache.path}: an embedding entry was discarded (its "
                  "digest or size does not match its key); the endpoint is asked instead (and for any further one)",
                  file=sys.stderr)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        keys = [self._key(t) for t in texts]
        rows: dict[str, np.ndarray] = {}
        todo: dict[str, str] = {}
        for key, text in zip(keys, texts, strict=True):
            if key in rows or key in todo:
                continue
            v = self._cached(key)
            if v is None:
                todo[key] = text
            else:
                rows[key] = v
                self.hits += 1
                if self._dim is None:
                    self._dim = int(v.size)
        if todo:
            got = np.asarray(self.inner.embed(list(todo.values())), dtype=np.float32)
            self.misses += len(todo)
            if self._dim is None:
                self._dim = int(got.shape[1])
            for key, v in zip(todo, got, strict=True):
                self.cache.put_vector(key, self.inner.model, v.astype("<f4").tobytes())
                self.stored += 1
                rows[key] = v
        return np.stack([rows[k] for k in keys]).astype(np.float32)

    def fingerprint(self) -> str:
        return str(self.inner.fingerprint())

    def stats(self) -> dict[str, Any]:
        """What summary.json records: the cache file, texts from the cache, texts embedded, requests sent."""
        return {"embedder": self.fingerprint(), "cache": str(self.cache.path), "texts_from_cache": self.hits,
                "texts_embedded": self.misses, "requests": int(self.inner.requests), "stored": self.stored,
                "discarded": self.discarded}


def cached_embedder(inner: Any, cache: Any = True) -> Any:
    """``inner`` behind the request cache when it is an OpenAI-compatible embedder and ``cache`` is a path or True
    (the default path, ``$REPLAYLENS_CACHE``); any other embedder, or ``cache`` False/None, as it is."""
    from ..stores import OpenAIEmbedder

    if not isinstance(inner, OpenAIEmbedder) or cache is None or cache is False:
        return inner
    from ...llm import RequestCache, default_cache_path

    return CachedEmbedder(inner, RequestCache(default_cache_path() if cache is True else cache))
