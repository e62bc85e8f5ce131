"""read_inputs: the three files read (the utilities first), each fingerprint taken on a thread beside the next read
(issue 27): the same contents and fingerprints as reading them one by one, and the same first error."""

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
    before = set(threading.enumerate())   # threads, not names: an earlier test's hashing thread can share a name
    with pytest.raises(InputError) as err:
        read_inputs(files[0], bad, tmp_path / "missing.parquet")
    assert str(bad) in str(err.value)
    for t in threading.enumerate():
        if t.name.startswith("replaylens-fingerprint") and t not in before:
            t.join(timeout=30)
            assert not t.is_alive()


def test_a_bad_utility_file_is_named_only_after_the_other_two_are_read(files: tuple[Path, Path, Path],
                                                                       tmp_path: Path) -> None:
    """The utilities are read first (their hash is the longest), but the first bad file in argument order is the
    one reported, as reading them one by one would."""
    bad_history = tmp_path / "h.jsonl"
    bad_history.write_text('{"stream": "s0"}\n')
    with pytest.raises(InputError) as err:
        read_inputs(bad_history, files[1], tmp_path / "missing.parquet")
    assert str(bad_history) in str(err.value)
    with pytest.raises(InputError) as err:
        read_inputs(files[0], files[1], tmp_path / "missing.parquet")
    assert "missing.parquet" in str(err.value)


def test_every_hash_is_taken_on_the_thread_after_a_successful_read(files: tuple[Path, Path, Path],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The queued hashes go on after read_inputs returns (they were cancelled once: the last one was then
    computed again on the caller's thread)."""
    from replaylens.records import Evaluator, FutureTasks, History

    seen: list[tuple[str, str]] = []
    for cls in (History, FutureTasks, Evaluator):
        real = cls.fingerprint

        def watched(self: object, real: object = real, name: str = cls.__name__) -> str:
            seen.append((name, threading.current_thread().name))
            return real(self)  # type: ignore[operator, no-any-return]

        monkeypatch.setattr(cls, "fingerprint", watched)
    before = set(threading.enumerate())   # threads, not names: an earlier test's hashing thread can share a name
    read_inputs(*files)
    for t in threading.enumerate():
        if t.name.startswith("replaylens-fingerprint") and t not in before:
            t.join(timeout=60)
    assert sorted(name for name, _ in seen) == ["Evaluator", "FutureTasks", "History"]
    assert all(thread.startswith("replaylens-fingerprint") for _, thread in seen)


def test_the_history_is_read_on_its_own_thread_and_named_first(files: tuple[Path, Path, Path], tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The history is read on the ``replaylens-read`` thread beside the two other reads; a bad history is the
    error raised even when the future tasks (read meanwhile on the caller's thread) are bad too, and no reader
    thread is left behind."""
    import importlib

    inputs = importlib.import_module("replaylens.records._inputs")
    where: list[str] = []
    real = inputs.read_history

    def watched(path: object) -> object:
        where.append(threading.current_thread().name)
        return real(path)

    monkeypatch.setattr(inputs, "read_history", watched)
    h, _, _ = read_inputs(*files)
    assert h.equals(read_history(files[0]))
    assert len(where) == 1 and where[0].startswith("replaylens-read")
    bad_history, bad_futures = tmp_path / "h.jsonl", tmp_path / "f.jsonl"
    bad_history.write_text('{"stream": "s0"}\n')
    bad_futures.write_text('{"stream": "s0"}\n')
    with pytest.raises(InputError) as err:
        read_inputs(bad_history, bad_futures, files[2])
    assert str(bad_history) in str(err.value)
    assert not [t for t in threading.enumerate() if t.name.startswith("replaylens-read") and t.is_alive()]
