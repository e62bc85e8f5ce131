"""Versioned, pydantic-typed run manifest: what ran, on which inputs (sha256), with which seeds."""

from __future__ import annotations

import hashlib
import platform
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["InputFile", "RunManifest", "file_sha256", "git_revision"]

MANIFEST_VERSION = 1


class InputFile(BaseModel):
    """One input file and its sha256."""

    model_config = ConfigDict(frozen=True)

    role: str
    path: str
    sha256: str
    content_fingerprint: str | None = None
    """sha256 of the parsed content (same for the same data in any format)."""


class RunManifest(BaseModel):
    """Everything needed to know (and redo) what an audit ran."""

    model_config = ConfigDict(frozen=True)

    version: int = MANIFEST_VERSION
    tool: str = "replaylens"
    tool_version: str
    created: str = Field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    git_revision: str | None = None
    command: str
    arguments: dict[str, Any]
    inputs: list[InputFile]
    agent: dict[str, Any]
    plan: dict[str, Any]
    seeds: dict[str, Any]
    python: str = Field(default_factory=platform.python_version)
    packages: dict[str, str] = Field(default_factory=dict)


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def git_revision(start: str | Path | None = None) -> str | None:
    """The git commit of the source tree ReplayLens runs from (with ``-dirty``), if it is a checkout."""
    where = Path(start) if start is not None else Path(__file__).resolve().parent
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=5,
                             check=False)
        if rev.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=where,
                               capture_output=True, text=True, timeout=5, check=False)
        return rev.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


#: the core's numerics, then every store backend's, embedder's and model runtime's distribution: tie order, scores
#: and decoding depend on their versions, so every manifest records the installed ones (a missing one is absent)
CORE_PACKAGES: tuple[str, ...] = ("numpy", "scipy", "pandas", "pyarrow", "pydantic")
INTEGRATION_PACKAGES: dict[str, str] = {
    "chroma": "chromadb", "qdrant": "qdrant-client", "langgraph": "langgraph", "faiss": "faiss-cpu",
    "hnswlib": "hnswlib", "mem0": "mem0ai", "lancedb": "lancedb", "wordllama": "wordllama", "openai": "openai",
    "local": "llama-cpp-python", "ray": "ray", "numba": "numba",
}


def package_versions() -> dict[str, str]:
    """Installed version of every distribution in :data:`CORE_PACKAGES` and :data:`INTEGRATION_PACKAGES`."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in dict.fromkeys([*CORE_PACKAGES, *INTEGRATION_PACKAGES.values()]):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            continue
    return out
