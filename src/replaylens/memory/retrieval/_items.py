"""Memory items (one per history record), store configurations, and building / querying a real store.

A history record (x_t, a_t, y_t) becomes a :class:`MemoryItem`: its ``id`` (the record's event id, else
``stream:slot``), the ``text`` the store embeds (``metadata["text"]`` of the task input, else the task id), the
action key, the outcome and the event time.  The store embeds only the text; action and outcome travel as
metadata and are read back through the id (so a masked outcome, NaN, never reaches a backend).
"""

from __future__ import annotations

import contextlib
import math
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import ConfigError

__all__ = ["MemoryItem", "Retrieved", "StoreSpec", "build_store", "embedder_for", "embedding_stats", "item_from_task",
           "query_store", "query_store_many", "similarities", "text_of"]


@dataclass(frozen=True, slots=True)
class MemoryItem:
    """One ingested record: id, embedded text, action key, outcome (NaN = masked), event time."""

    id: str
    text: str
    action: str
    outcome: float
    time: float | None = None

    def metadata(self) -> dict[str, str | int | float]:
        md: dict[str, str | int | float] = {"action": self.action}
        if not math.isnan(self.outcome):
            md["outcome"] = float(self.outcome)
        if self.time is not None:
            md["time"] = float(self.time)
        return md

    def key(self) -> tuple[str, str, str, float | None, float | None]:
        """Hashable content (NaN outcomes compare equal through ``None``)."""
        return (self.id, self.text, self.action, None if math.isnan(self.outcome) else self.outcome, self.time)


def text_of(task: str, metadata: Mapping[str, Any] | None) -> str:
    """The text a record or future task is embedded by: ``metadata["text"]`` when it is a string, else the task id."""
    if metadata is not None:
        t = metadata.get("text")
        if isinstance(t, str) and t:
            return t
    return task


def item_from_task(task: Any, key: str, outcome: float) -> MemoryItem:
    """A :class:`MemoryItem` from a replay ``TaskInput`` (after the cell transform) and its key and outcome."""
    rid = task.event_id if task.event_id else f"{task.stream}:{task.slot}"
    return MemoryItem(str(rid), text_of(task.task, task.metadata), key, float(outcome), task.event_time)


@dataclass(frozen=True)
class StoreSpec:
    """A store configuration: backend, its index parameters, the embedder spec and the ingestion batch size
    (records per ``add`` call; ``None``: all records in one call)."""

    backend: str = "exact"
    params: Mapping[str, Any] = field(default_factory=dict)
    embedder: str = "hashing:256"
    batch_size: int | None = None
    persistent: bool = False
    """Build in a temporary directory (the backend's on-disk mode) instead of in memory."""

    def with_(self, **kw: Any) -> StoreSpec:
        return replace(self, **kw)

    def label(self) -> str:
        ps = ",".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        return f"{self.backend}" + (f"({ps})" if ps else "") + f" / {self.embedder}"

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "params": dict(self.params), "embedder": self.embedder,
                "batch_size": self.batch_size}


_EMBEDDERS: dict[tuple[str, str | None], Any] = {}


def embedder_for(spec: str) -> Any:
    """The embedder of ``spec`` (built once per process: every embedder is deterministic); an OpenAI-compatible
    one (``openai:MODEL@URL``) behind the cross-run request cache (``$REPLAYLENS_CACHE`` or the default path)."""
    key = (spec, str(_cache_path()) if spec.startswith("openai:") else None)
    if key not in _EMBEDDERS:
        from ..stores import make_embedder
        from ._embedcache import cached_embedder

        emb = make_embedder(spec)
        _EMBEDDERS[key] = cached_embedder(emb, Path(key[1])) if key[1] is not None else emb
    return _EMBEDDERS[key]


def _cache_path() -> Path:
    from ...llm import default_cache_path

    return default_cache_path()


def embedding_stats() -> list[dict[str, Any]]:
    """Cache counts of every cached embedder built in this process (texts from the cache, embedded, requests)."""
    return [e.stats() for e in _EMBEDDERS.values() if callable(getattr(e, "stats", None))]


@contextlib.contextmanager
def build_store(spec: StoreSpec, items: Sequence[MemoryItem], *, embedder: Any = None) -> Iterator[Any]:
    """A fresh store of ``spec`` holding ``items`` ingested in the given order, ``spec.batch_size`` per ``add``
    call; closed (and its temporary directory removed) on exit.  ``embedder`` overrides ``spec.embedder``."""
    from ..stores import StoreItem, make_store

    emb = embedder if embedder is not None else embedder_for(spec.embedder)
    with tempfile.TemporaryDirectory(prefix="replaylens-store-") as tmp:
        store = make_store(spec.backend, emb, path=Path(tmp) / "store" if spec.persistent else None,
                           params=dict(spec.params))
        try:
            step = spec.batch_size or max(len(items), 1)
            for lo in range(0, len(items), step):
                store.add([StoreItem(it.id, it.text, it.metadata()) for it in items[lo:lo + step]])
            yield store
        finally:
            store.close()


@dataclass(frozen=True, slots=True)
class Retrieved:
    """One query's result: ids best first and the backend's scores."""

    ids: tuple[str, ...]
    scores: tuple[float, ...]


def query_store(store: Any, text: str, k: int) -> Retrieved:
    hits = store.query(text, k)
    return Retrieved(tuple(h.id for h in hits), tuple(float(h.score) for h in hits))


def query_store_many(store: Any, texts: Sequence[str], k: int) -> list[Retrieved]:
    """``[query_store(store, t, k) for t in texts]`` in one batched call where the store has one."""
    from ..stores import query_many

    return [Retrieved(tuple(h.id for h in hits), tuple(float(h.score) for h in hits))
            for hits in query_many(store, list(texts), k)]


def similarities(embedder: Any, query: str, texts: Sequence[str]) -> np.ndarray:
    """Exact float64 cosine similarity of ``query`` to each text (ReplayLens's own reading, used to find ties)."""
    if not texts:
        return np.zeros(0)
    v = np.asarray(embedder.embed([query, *texts]), dtype=np.float64)
    n = np.linalg.norm(v, axis=1)
    n[n == 0] = 1.0
    v = v / n[:, None]
    return np.asarray(v[1:] @ v[0])


def check_spec(spec: StoreSpec) -> None:
    from ..stores import STORES

    if spec.backend not in STORES and ":" not in spec.backend:
        raise ConfigError(f"unknown store backend {spec.backend!r}; built-in: {', '.join(STORES)}, "
                          "or file.py:factory")
