"""read_inputs: the three files read in order, each fingerprint taken on a thread beside the next read (issue 27):
the same contents and fingerprints as reading them one by one, and the same first error."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from replaylens.bandit import make_bandit
from replaylens.errors import InputError
from replaylens.records import (
    read_evaluator,
    read_futures,
    read_history,
    read_inputs,
    write_evaluator,
    write_futures,
    write_history,
)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    b = make_bandit(n_streams=4, slots_per_block=5, n_future=3)
    d = tmp_path_factory.mktemp("inputs")
    paths = (d / "h.parquet", d / "f.jsonl", d / "u.parquet")
    write_history(b.history, paths[0])
    write_futures(b.futures, paths[1])
    write_evaluator(b.evaluator, paths[2])
    return paths


def test_read_inputs_equals_reading_one_by_one(files: tuple[Path, Path, Path]) -> None:
    h, f, e = read_inputs(*files)
    one = (read_history(files[0]), read_futures(files[1]), read_evaluator(files[2]))
    assert [x.fingerprint() for x in (h, f, e)] == [x.fingerprint() for x in one]
    assert h.equals(one[0]) and f.tasks == one[1].tasks and dict(e.table.items()) == dict(one[2].table.items())


def test_read_inputs_reports_the_first_bad_file_and_leaves_no_thread(files: tuple[Path, Path, Path],
                                                                    tmp_path: Path) -> None:
    bad = tmp_path / "f.jsonl"
    bad.write_text('{"stream": "s0"}\n')
    before = {t.name for t in threading.enumerate()}
    with pytest.raises(InputError) as err:
        read_inputs(files[0], bad, tmp_path / "missing.parquet")
    assert str(bad) in str(err.value)
    for t in threading.enumerate():
        if t.name.startswith("replaylens-fingerprint") and t.name not in before:
            t.join(timeout=30)
            assert not t.is_alive()
