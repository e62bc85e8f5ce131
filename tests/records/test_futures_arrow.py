"""Columnar future-task reader (issue 27): the same tasks, in the same order, as the row reader."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from replaylens.bandit import make_bandit
from replaylens.errors import InputError
from replaylens.records import read_futures, write_futures
from replaylens.records._arrow_rows import ArrowRows
from replaylens.records._futures_arrow import futures_from_arrow
from replaylens.records._io import futures_from_rows


def _rows(table: pa.Table):  # type: ignore[no-untyped-def]
    rows = ArrowRows.of(table)
    assert rows is not None
    return futures_from_rows(rows, "t", range(1, table.num_rows + 1))


def _same(a, b) -> None:  # type: ignore[no-untyped-def]
    assert len(a.tasks) == len(b.tasks)
    for x, y in zip(a.tasks, b.tasks, strict=True):
        assert (x.stream, x.family, x.context, x.task, x.menu, x.index, x.feeds, x.metadata) == \
               (y.stream, y.family, y.context, y.task, y.menu, y.index, y.feeds, y.metadata)


INTERLEAVED = {
    "stream": ["b", "a", "b", "a", "b", "c", "a"],
    "family": ["f2", "f1", "f1", "f1", "f2", "f1", "f2"],
    "context": ["x", "y", "x", "y", "x", "x", "y"],
    "task": ["t1", "t1", "t2", "t2", "t3", "t1", "t3"],
    "menu": [["p", "q"], ["q", "p", "r"], ["p"], ["q", "p", "r"], ["p", "q"], ["r"], ["p", "r"]],
}


def test_interleaved_streams_and_strata_keep_the_row_readers_order() -> None:
    table = pa.table(INTERLEAVED)
    fast = futures_from_arrow(table, "t")
    assert fast is not None
    _same(fast, _rows(table))


def test_feeds_columns() -> None:
    cols = dict(INTERLEAVED, feeds_family=["f1", None, None, None, "f1", None, "f1"],
                feeds_context=["x", None, None, None, "x", None, "y"])
    table = pa.table(cols)
    fast = futures_from_arrow(table, "t")
    assert fast is not None and fast.tasks[0].feeds is not None
    _same(fast, _rows(table))


@pytest.mark.parametrize("change", [
    {"stream": [" b", "a", "b", "a", "b", "c", "a"]},                       # whitespace to trim
    {"task": ["t1", "t1", "t1", "t2", "t3", "t1", "t3"]},                   # duplicate (stream, task)
    {"menu": [["p", "p"], ["q"], ["p"], ["q"], ["p"], ["r"], ["p"]]},       # repeated label
    {"menu": [[], ["q"], ["p"], ["q"], ["p"], ["r"], ["p"]]},               # empty menu
    {"metadata": ['{"a": 1}', None, None, None, None, None, None]},         # metadata
    {"feeds_family": ["f1", None, None, None, None, None, None]},           # feeds_family alone
])
def test_anything_unusual_goes_to_the_row_reader(change: dict[str, list[object]]) -> None:
    assert futures_from_arrow(pa.table(dict(INTERLEAVED, **change)), "t") is None


def test_read_futures_from_files_equals_the_row_reader(tmp_path: Path) -> None:
    sub = make_bandit(n_streams=30, slots_per_block=4, n_future=3)
    for fmt in ("parquet", "jsonl"):
        p = tmp_path / f"f.{fmt}"
        write_futures(sub.futures, p)
        got = read_futures(p)
        _same(got, sub.futures)
        assert got.source == str(p)


def test_a_duplicate_still_gets_the_row_readers_message(tmp_path: Path) -> None:
    p = tmp_path / "f.jsonl"
    rows = [{"stream": "s", "family": "f", "context": "c", "task": "t", "menu": ["a", "b"]}] * 2
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InputError, match="duplicate future task 't' in stream 's'"):
        read_futures(p)
