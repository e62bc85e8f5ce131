"""Issue 14 point 6: the suite obtains the public data itself, whatever caches the machine has."""

import os
from pathlib import Path

import pytest

from replaylens.paper.data import DATASETS, ENV_VAR, data_dir, verified_path


def test_the_session_points_the_data_directory_at_its_own_fetched_copies(
    _session_public_data: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    assert os.environ[ENV_VAR] == str(_session_public_data)
    assert Path(data_dir()).resolve() == _session_public_data.resolve()
    assert _session_public_data.resolve().is_relative_to(tmp_path_factory.getbasetemp().resolve())
    for name in DATASETS:  # the default lookup (no data_dir argument) finds verified copies
        assert verified_path(name).parent.resolve() == _session_public_data.resolve()


def test_each_copy_was_fetched_this_session_with_provenance(public_data_dir: Path) -> None:
    import json

    for name in DATASETS:
        record = json.loads((public_data_dir / f"{name}.json").read_text())
        assert record["dataset"] == name and record["sha256"] == DATASETS[name].sha256
