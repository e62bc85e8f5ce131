"""The installed versions of the packages a store audit depends on (tie behaviour depends on them)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__all__ = ["STORE_PACKAGES", "store_package_versions"]

#: backend or embedder -> the distribution that implements it
STORE_PACKAGES: dict[str, str] = {
    "chroma": "chromadb", "qdrant": "qdrant-client", "langgraph": "langgraph", "faiss": "faiss-cpu",
    "hnswlib": "hnswlib", "mem0": "mem0ai", "lancedb": "lancedb", "wordllama": "wordllama", "openai": "openai",
    "numpy": "numpy",
}


def store_package_versions() -> dict[str, str | None]:
    """Every backend's and embedder's distribution with its installed version (None: not installed)."""
    out: dict[str, str | None] = {}
    for dist in dict.fromkeys(STORE_PACKAGES.values()):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = None
    return out
