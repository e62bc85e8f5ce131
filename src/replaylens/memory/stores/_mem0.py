"""Private: mem0 (``mem0ai``) with ``infer=False``: local Qdrant, the given embedder, no LLM call, no telemetry."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from ._types import Embedder, Hit, Params, StoreItem, check_k, embed_checked, import_backend

__all__ = ["MEM0_DIR_ENV", "Mem0Store", "import_mem0"]

_ID = "rl_id"  # the record id travels in mem0's metadata (mem0 gives every memory a fresh uuid4)
MEM0_DIR_ENV = "MEM0_DIR"


def import_mem0() -> Any:
    """Import mem0 with its home directory (``MEM0_DIR``, read once when ``mem0.memory.setup`` is first imported;
    mem0 2.2.1 writes ``config.json`` there on import, and its telemetry store) pointed at a temporary directory
    of this process, removed at exit, so an audit never writes into the user's ``~/.mem0``.  A ``MEM0_DIR`` the
    caller set is respected; the environment is restored after the import.  When mem0 was already imported by
    someone else, its directory is whatever that import chose."""
    if "mem0.memory.setup" in sys.modules or os.environ.get(MEM0_DIR_ENV):
        return import_backend("mem0", "the mem0 store")
    home = tempfile.mkdtemp(prefix="replaylens-mem0-home-")
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    os.environ[MEM0_DIR_ENV] = home
    try:
        return import_backend("mem0", "the mem0 store")
    finally:
        os.environ.pop(MEM0_DIR_ENV, None)


def _embedding_model(embedder: Embedder) -> Any:
    """A mem0 ``EmbeddingBase`` over ``embedder``: mem0 2.2 validates its embedder provider against a fixed list
    (its ``langchain`` provider needs the full ``langchain`` package), so the adapter builds the Memory with the
    ``openai`` provider (constructed, never called) and then sets this object as ``memory.embedding_model``,
    the single attribute through which mem0 embeds on add and search."""
    base: Any = import_backend("mem0.embeddings.base", "the mem0 store")

    class _Embedding(base.EmbeddingBase):  # type: ignore[misc]
        def embed(self, text: str, memory_action: str | None = None) -> list[float]:
            v = embed_checked(embedder, [text])
            return [float(x) for x in v[0]]

        def embed_batch(self, texts: Sequence[str], memory_action: str = "add") -> list[list[float]]:
            v = embed_checked(embedder, list(texts))
            return v.tolist()

    return _Embedding()


class Mem0Store:
    """mem0's ``Memory`` with a local Qdrant vector store (``path`` kept on disk with ``on_disk``, else a temporary
    directory removed on ``close()``), the given embedder, and ``add(..., infer=False)``: each record becomes one
    memory verbatim, with no LLM call; mem0 assigns it a fresh uuid4, so re-adding an id stores a second copy.
    ``search`` is mem0's own ranking (semantic over-fetch, then ``score_and_rank`` with its ``threshold``,
    default 0.1 as in mem0: a hit scoring below it is dropped, so fewer than k may return). BM25 and entity
    boosts join only when mem0's optional fastembed/spaCy models are installed; the stores extra installs
    neither. Params: ``user_id`` (scope, "replaylens"), ``collection`` ("replaylens"), ``threshold``
    (a number, 0.1). ``MEM0_TELEMETRY=False`` is set before mem0 is imported unless the caller set it, and mem0's
    home directory is a temporary one of this process unless ``MEM0_DIR`` is set (:func:`import_mem0`).
    """

    name = "mem0"

    def __init__(self, embedder: Embedder, *, path: Path | None = None,
                 params: Mapping[str, object] | None = None) -> None:
        p = Params("mem0", params or {})
        self.user_id = p.get_str("user_id", "replaylens")
        collection = p.get_str("collection", "replaylens")
        raw = p.get_str("threshold", "0.1")
        p.done()
        try:
            self.threshold = float(raw)
        except ValueError:
            raise ConfigError(f"mem0 store: parameter 'threshold' must be a number; got {raw!r}") from None
        os.environ.setdefault("MEM0_TELEMETRY", "False")
        main: Any = import_mem0()
        self.embedder = embedder
        self._tmp: str | None = None
        if path is None:
            self._tmp = tempfile.mkdtemp(prefix="replaylens-mem0-")
            root = Path(self._tmp)
        else:
            root = path
            root.mkdir(parents=True, exist_ok=True)
        config = {
            "vector_store": {"provider": "qdrant",
                             "config": {"collection_name": collection, "embedding_model_dims": embedder.dim,
                                        "path": str(root / "qdrant"), "on_disk": True}},
            # constructed by mem0 and replaced below; never asked for an embedding
            "embedder": {"provider": "openai", "config": {"api_key": "unused", "model": "unused",
                                                          "openai_base_url": "http://127.0.0.1:9/v1"}},
            # infer=False makes no LLM call; mem0 still constructs one
            "llm": {"provider": "openai", "config": {"api_key": "unused", "model": "unused",
                                                     "openai_base_url": "http://127.0.0.1:9/v1"}},
            "history_db_path": str(root / "history.db"),
        }
        self._memory = main.Memory.from_config(config)
        self._memory.embedding_model = _embedding_model(embedder)

    def add(self, items: Sequence[StoreItem]) -> None:
        for it in items:
            self._memory.add([{"role": "user", "content": it.text}], user_id=self.user_id,
                             metadata={**it.metadata, _ID: it.id}, infer=False)

    def query(self, text: str, k: int) -> list[Hit]:
        check_k(k)
        found = self._memory.search(text, top_k=k, filters={"user_id": self.user_id}, threshold=self.threshold)
        hits = []
        for r, m in enumerate(found["results"]):
            md = dict(m.get("metadata") or {})
            rid = md.pop(_ID, None)
            if rid is None:
                raise ConfigError(f"mem0 returned memory {m.get('id')!r} without a ReplayLens id (added elsewhere?)")
            hits.append(Hit(str(rid), float(m["score"]), r + 1, md))
        return hits

    def close(self) -> None:
        client = getattr(self._memory.vector_store, "client", None)
        if client is not None:
            client.close()
        db = getattr(self._memory, "db", None)
        if db is not None and hasattr(db, "close"):
            db.close()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
