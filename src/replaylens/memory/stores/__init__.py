"""Vector stores and memory frameworks behind one text-level protocol, and the embedders they use.

``make_store(backend, embedder, path=..., params=...)`` builds one of ``STORES`` (exact, chroma, qdrant,
langgraph, faiss, hnswlib, mem0) or a user's own ``file.py:factory``; ``make_embedder(spec)`` builds
``hashing[:DIM]``, ``wordllama[:DIM]`` or ``openai:MODEL@BASE_URL``. Every backend but ``exact`` is an
optional dependency (the ``replaylens[stores]`` extra), imported only when its adapter is built.
``query_many(store, texts, k)`` asks a batch of queries in one native call where the adapter has one, with the
hits one-by-one ``query`` calls give.
"""

from ._embedders import EMBEDDERS, HashingEmbedder, OpenAIEmbedder, WordLlamaEmbedder, make_embedder
from ._exact import ExactStore
from ._registry import STORES, StoreFactory, make_store
from ._types import (
    EXTRA,
    Embedder,
    Hit,
    Metadata,
    Scalar,
    StoreItem,
    VectorStore,
    embed_checked,
    query_many,
    unit_rows,
)

__all__ = [
    "EMBEDDERS",
    "EXTRA",
    "STORES",
    "Embedder",
    "ExactStore",
    "HashingEmbedder",
    "Hit",
    "Metadata",
    "OpenAIEmbedder",
    "Scalar",
    "StoreFactory",
    "StoreItem",
    "VectorStore",
    "WordLlamaEmbedder",
    "embed_checked",
    "make_embedder",
    "make_store",
    "query_many",
    "unit_rows",
]
