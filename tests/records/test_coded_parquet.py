"""Parquet text columns read dictionary-encoded (a small dictionary and its indices) give what the row reader
gives: the same history and utility table (values trimmed), or the same first error."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replaylens.errors import InputError
from replaylens.records import evaluator_from_rows, read_evaluator, read_history
from replaylens.records._columns import _small_dictionaries
from replaylens.records._io import history_from_rows

N = 1500   # rows enough for the repeated texts to be stored as a small dictionary
WORD = st.sampled_from(["a", "b", " c", "d ", "é", "x y", "", "  "])


def _history_rows(streams: list[str], keys: list[str], null_at: int | None) -> list[dict[str, Any]]:
    rows = []
    for i in range(N):
        rows.append({"stream": streams[i % len(streams)], "family": "f", "context": keys[(i // 7) % len(keys)],
                     "slot": i, "task": f"t{i}", "key": keys[i % len(keys)], "outcome": (i % 10) / 10})
    if null_at is not None:
        rows[null_at]["key"] = None
    return rows


def _outcome(fn: Any) -> Any:
    try:
        return "ok", fn()
    except InputError as exc:
        return "error", str(exc).replace("row", "line")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(WORD, min_size=1, max_size=4), st.lists(WORD, min_size=1, max_size=4),
       st.one_of(st.none(), st.integers(0, N - 1)))
def test_coded_history_is_the_row_readers(tmp_path: Path, streams: list[str], keys: list[str],
                                          null_at: int | None) -> None:
    rows = _history_rows(streams, keys, null_at)
    path = tmp_path / "h.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    assert {"stream", "key", "context"} <= set(_small_dictionaries(path, ("stream", "key", "context", "task")))
    assert "task" not in _small_dictionaries(path, ("task",))
    got = _outcome(lambda: read_history(path).fingerprint())
    ref = _outcome(lambda: history_from_rows(rows, str(path), None, "row", typed=True).fingerprint())
    assert got[0] == ref[0]
    if got[0] == "ok":
        assert got == ref


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(WORD, min_size=1, max_size=3, unique=True), st.lists(WORD, min_size=1, max_size=3, unique=True))
def test_coded_utility_table_is_the_row_readers(tmp_path: Path, streams: list[str], keys: list[str]) -> None:
    rows = [{"stream": s, "task": f"t{i}", "key": k, "utility": math.fmod(i * 0.37, 1.0)}
            for i in range(N // (len(streams) * len(keys)) + 1) for s in streams for k in keys]
    path = tmp_path / "u.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    got = _outcome(lambda: read_evaluator(path).fingerprint())
    ref = _outcome(lambda: evaluator_from_rows(rows, str(path), range(1, len(rows) + 1), typed=True).fingerprint())
    assert got[0] == ref[0]
    if got[0] == "ok":
        assert got == ref


def test_a_null_in_a_coded_column_names_its_row(tmp_path: Path) -> None:
    rows = _history_rows(["s1", "s2"], ["A", "B"], 700)
    path = tmp_path / "h.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    with pytest.raises(InputError) as err:
        read_history(path)
    assert err.value.line == 701 and err.value.field == "key"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(WORD, min_size=1, max_size=4), st.lists(WORD, min_size=1, max_size=3),
       st.sampled_from([["p", "q"], ["q", "p", "p"], ["p", " r"], ["p"]]))
def test_coded_future_tasks_are_the_row_readers(tmp_path: Path, streams: list[str], contexts: list[str],
                                                odd_menu: list[str]) -> None:
    from replaylens.records import read_futures
    from replaylens.records._io import futures_from_rows

    rows = [{"stream": streams[i % len(streams)], "family": "f", "context": contexts[(i // 5) % len(contexts)],
             "task": f"x{i}", "menu": odd_menu if i == N // 2 else ["p", "q", "r"]} for i in range(N)]
    path = tmp_path / "f.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    assert {"stream", "context"} <= set(_small_dictionaries(path, ("stream", "context")))
    got = _outcome(lambda: read_futures(path).fingerprint())
    ref = _outcome(lambda: futures_from_rows(rows, str(path), range(1, N + 1)).fingerprint())
    assert got == ref


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3), st.integers(0, 4)), min_size=1, max_size=30))
def test_run_shortcut_never_misses_a_repeated_key(rows: list[tuple[int, int, int]]) -> None:
    """When the task-by-task shortcut says yes, no (stream, task, key) is repeated; when the rows come task by
    task without repeats, it says yes."""
    import numpy as np

    from replaylens.records._io import _runs_without_repeated_keys

    codes = [np.array(c, dtype=np.int64) for c in zip(*rows, strict=True)]
    said = _runs_without_repeated_keys(codes, [3, 4, 5])
    repeated = len(set(rows)) != len(rows)
    pairs = [r[:2] for r in rows]
    runs = [p for i, p in enumerate(pairs) if i == 0 or p != pairs[i - 1]]
    assert not (said and repeated)
    assert said == (not repeated and len(set(runs)) == len(runs))
