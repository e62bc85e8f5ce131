"""``load``: read a verified copy into (X, y, feature_names)."""

from __future__ import annotations

import csv
import io
import os
import shlex
from pathlib import Path

import numpy as np

from ._registry import DatasetSpec, dataset_spec
from ._store import DataError, dataset_path, file_sha256

__all__ = ["load", "verified_path"]


def verified_path(dataset: str, *, data_dir: str | os.PathLike[str] | None = None) -> Path:
    """Path of ``dataset``'s verified copy; :class:`DataError` naming the fix when missing or mismatching."""
    spec = dataset_spec(dataset)
    path = dataset_path(spec, data_dir)
    fix = f"replaylens paper data fetch {spec.name}"
    if data_dir is not None:
        fix += f" --data-dir {shlex.quote(str(data_dir))}"
    if not path.is_file():
        raise DataError(spec.name, path, f"data set {spec.name!r} is not available offline yet; run `{fix}` "
                        "once (or set REPLAYLENS_DATA_DIR to a directory that holds a verified copy)", fix)
    digest = file_sha256(path)
    if digest != spec.sha256:
        raise DataError(spec.name, path, f"the stored copy of {spec.name!r} fails verification (sha256 {digest}, "
                        f"expected {spec.sha256}); run `{fix}` to replace it", fix)
    return path


def load(dataset: str, *, data_dir: str | os.PathLike[str] | None = None,
         ) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """``(X, y, feature_names)`` of a verified copy: X float64 [n, d], y int64 in {0, 1}.

    ``"breast-cancer"``: 569 × 30 (UCI feature order, ``mean radius`` first), y = malignant.
    ``"wine-red"``: 1,599 × 11 (``fixed_acidity`` first), y = 1 when quality ≥ 6.
    Raises :class:`DataError` (an InputError) saying ``replaylens paper data fetch NAME`` when the copy is missing or
    does not match its pinned sha256.  Nothing is downloaded here.
    """
    path = verified_path(dataset, data_dir=data_dir)
    spec = dataset_spec(dataset)
    text = path.read_text(encoding="ascii")
    rows = list(csv.reader(io.StringIO(text)))
    header, body = rows[0], [r for r in rows[1:] if r]
    try:
        table = np.array(body, dtype=np.float64)
    except ValueError as exc:
        raise DataError(spec.name, path, f"unparseable numeric value ({exc}); run `replaylens paper data fetch "
                        f"{spec.name}`") from None
    _check_shape(spec, path, header, table)
    X = np.ascontiguousarray(table[:, : spec.n_features])
    last = table[:, spec.n_features]
    y = (last >= 6).astype(np.int64) if spec.name == "wine-red" else last.astype(np.int64)
    if int(y.sum()) != spec.n_positive:
        raise DataError(spec.name, path, f"expected {spec.n_positive} positive labels, found {int(y.sum())}")
    return X, y, tuple(h.strip() for h in header[: spec.n_features])


def _check_shape(spec: DatasetSpec, path: Path, header: list[str], table: np.ndarray) -> None:
    want = (spec.n_rows, spec.n_features + 1)
    if len(header) != want[1] or table.ndim != 2 or table.shape != want:
        raise DataError(spec.name, path, f"expected {want[0]} rows x {want[1]} columns, found {table.shape}")
    if not np.isfinite(table).all():
        raise DataError(spec.name, path, "the copy has missing or non-finite values")
