"""Private: LangGraph's ``InMemoryStore`` with a semantic index (``index={"dims", "embed", "fields"}``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from ._types import Embedder, Hit, Params, StoreItem, check_k, embed_checked, import_backend

__all__ = ["LangGraphStore"]


class LangGraphStore:
    """LangGraph's ``InMemoryStore`` indexing each record's ``text`` field with the given embedder.

    Records are ``put`` under one namespace (param ``namespace``, default "replaylens") in ``batch`` calls of
    at most ``batch_size`` (64) PutOps with distinct texts, and ``search`` ranks them by cosine similarity.
    ``put`` on an existing key replaces it (one copy). In memory only: a ``path`` is refused."""

    name = "langgraph"

    def __init__(self, embedder: Embedder, *, path: Path | None = None,
                 params: Mapping[str, object] | None = None) -> None:
        p = Params("langgraph", params or {})
        self.namespace = (p.get_str("namespace", "replaylens"),)
        self.batch_size = p.get_int("batch_size", 64, low=1)
        p.done()
        if path is not None:
            raise ConfigError("the langgraph store (InMemoryStore) keeps nothing on disk: give no path")
        memory: Any = import_backend("langgraph.store.memory", "the langgraph store")
        base: Any = import_backend("langgraph.store.base", "the langgraph store")
        self._put_op = base.PutOp
        self.embedder = embedder

        def embed(texts: Sequence[str]) -> list[list[float]]:
            v = embed_checked(embedder, list(texts))
            return v.tolist()

        self._store = memory.InMemoryStore(index={"dims": embedder.dim, "embed": embed, "fields": ["text"]})

    def _batches(self, items: Sequence[StoreItem]) -> list[list[StoreItem]]:
        """Consecutive batches of at most ``batch_size`` with no key and no text twice: LangGraph's
        ``InMemoryStore.batch`` embeds each distinct text once and then fails ("Number of embeddings does not
        match number of indices") when two PutOps of one batch share a text (langgraph 1.2)."""
        out: list[list[StoreItem]] = []
        pos, n = 0, len(items)
        while pos < n:
            chunk = list(items[pos:pos + self.batch_size])
            if len({it.id for it in chunk}) < len(chunk) or len({it.text for it in chunk}) < len(chunk):
                keys: set[str] = set()
                texts: set[str] = set()
                for m, it in enumerate(chunk):  # the longest prefix with no key and no text twice
                    if it.id in keys or it.text in texts:
                        chunk = chunk[:m]
                        break
                    keys.add(it.id)
                    texts.add(it.text)
            out.append(chunk)
            pos += len(chunk)
        return out

    def add(self, items: Sequence[StoreItem]) -> None:
        for batch in self._batches(items):
            self._store.batch([self._put_op(self.namespace, it.id, {"text": it.text, "metadata": dict(it.metadata)})
                               for it in batch])

    def query(self, text: str, k: int) -> list[Hit]:
        check_k(k)
        found = self._store.search(self.namespace, query=text, limit=k)
        return [Hit(str(it.key), float(it.score), r + 1, it.value.get("metadata") or {})
                for r, it in enumerate(found)]

    def close(self) -> None:
        """Nothing to release (the store lives in this process's memory)."""
