"""Future tasks kept by columns (issue 27): the same tasks, summaries and fingerprint as the objects."""

from __future__ import annotations

import hashlib
import json
import pickle

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replaylens.errors import InputError
from replaylens.records import FutureColumns, FutureRows, FutureTask, FutureTasks
from replaylens.records._arrow_rows import ArrowRows
from replaylens.records._futures import future_dict
from replaylens.records._futures_arrow import futures_from_arrow
from replaylens.records._io import futures_from_rows

WORD = st.sampled_from(["a", "b", "c%", "é", 'q"', "x y", "t\x1c"])
TASK_ID = st.text(alphabet="ab \t\x1cé\x00", min_size=0, max_size=4)


@st.composite
def task_sets(draw: st.DrawFn) -> tuple[FutureTask, ...]:
    n = draw(st.integers(1, 12))
    out = []
    for i in range(n):
        menu = tuple(draw(st.lists(WORD, min_size=1, max_size=3, unique=True)))
        feeds = draw(st.none() | st.tuples(WORD, WORD))
        meta = draw(st.none() | st.fixed_dictionaries({"k": st.integers(0, 3)}))
        out.append(FutureTask(draw(WORD), draw(WORD), draw(WORD), f"t{i}{draw(TASK_ID)}", menu, draw(st.integers(0, 3)),
                              feeds, meta))
    return tuple(out)


def _reference_fingerprint(tasks: tuple[FutureTask, ...]) -> str:
    doc = json.dumps([future_dict(t) for t in tasks], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(doc.encode()).hexdigest()


@settings(max_examples=80, deadline=None)
@given(task_sets())
def test_columns_give_back_the_tasks_and_the_same_summaries(tasks: tuple[FutureTask, ...]) -> None:
    objects = FutureTasks(tasks)
    cols = FutureTasks(source="s", columns=FutureColumns.of_tasks(tasks))
    assert cols.tasks == tasks and objects.columns.build() == tasks
    assert cols.streams == tuple(dict.fromkeys(t.stream for t in tasks))
    assert cols.strata == tuple(dict.fromkeys(t.stratum for t in tasks))
    assert cols.labels == tuple(dict.fromkeys(a for t in tasks for a in t.menu))
    assert cols.menu_width == max(len(t.menu) for t in tasks)
    assert cols.fingerprint() == objects.fingerprint() == _reference_fingerprint(tasks)
    for s in {t.stream for t in tasks}:
        assert cols.of(s) == tuple(t for t in tasks if t.stream == s)
    assert cols.of("no such stream") == ()
    rows = np.array([len(tasks) - 1, 0])
    view = cols.view(rows)
    assert isinstance(view, FutureRows) and len(view) == 2 and view == (tasks[-1], tasks[0])
    assert view[1:] == (tasks[0],) and view.task_ids.tolist() == [tasks[-1].task, tasks[0].task]
    back = pickle.loads(pickle.dumps(cols))
    assert back.tasks == tasks and back.source == "s"
    assert pickle.loads(pickle.dumps(view)) == view


def test_immutable_and_never_empty() -> None:
    f = FutureTasks((FutureTask("s", "f", "c", "t", ("a",), 0),))
    with pytest.raises(AttributeError):
        f.source = "x"  # type: ignore[misc]
    with pytest.raises(InputError, match="empty"):
        FutureTasks(())


TEXT = st.sampled_from(["s", "t", "u", "s", "t", " s", "s\x1c", "", "é"])


@st.composite
def tables(draw: st.DrawFn) -> pa.Table:
    n = draw(st.integers(1, 8))
    ids = draw(st.lists(st.sampled_from(["x0", "x1", "x2", " x3", "x4\x1f", "", "é5", "x6\t", "x7"]),
                        min_size=n, max_size=n, unique=draw(st.booleans())))
    menus = draw(st.lists(st.lists(st.sampled_from(["p", "q", "r", " r"]), min_size=1, max_size=3),
                          min_size=n, max_size=n))
    cols: dict[str, list[object]] = {
        "stream": draw(st.lists(st.sampled_from(["s", "t", "u"]), min_size=n, max_size=n)),
        "family": draw(st.lists(st.sampled_from(["f", "g"]), min_size=n, max_size=n)),
        "context": draw(st.lists(TEXT, min_size=n, max_size=n)),
        "task": ids, "menu": menus,  # type: ignore[dict-item]
    }
    if draw(st.booleans()):
        fed = draw(st.lists(st.booleans(), min_size=n, max_size=n))
        cols["feeds_family"] = [("f" if b else None) for b in fed]
        cols["feeds_context"] = [("s" if b else None) for b in fed]
    table = pa.table({k: pa.array(v, type=pa.list_(pa.string()) if k == "menu" else pa.string())
                      for k, v in cols.items()})
    if draw(st.booleans()) and n > 1:   # chunked columns
        table = pa.concat_tables([table.slice(0, n // 2), table.slice(n // 2)])
    return table


@settings(max_examples=300, deadline=None)
@given(tables())
def test_arrow_columns_equal_the_row_reader_or_step_aside(table: pa.Table) -> None:
    rows = ArrowRows.of(table)
    assert rows is not None
    fast = futures_from_arrow(table, "t")
    try:
        ref = futures_from_rows(rows, "t", range(1, table.num_rows + 1))
    except InputError:
        assert fast is None   # the row reader names the problem
        return
    if fast is not None:
        assert fast.tasks == ref.tasks
        assert fast.fingerprint() == ref.fingerprint()
        assert (fast.streams, fast.strata, fast.labels, fast.menu_width) == \
            (ref.streams, ref.strata, ref.labels, ref.menu_width)


@settings(max_examples=60, deadline=None)
@given(ids=st.lists(st.text(alphabet="ab-_9é", min_size=1, max_size=6), min_size=1, max_size=10))
def test_task_ids_held_as_bytes_when_ascii_and_read_back_as_text(ids: list[str]) -> None:
    """Task ids are held as numpy bytes (1 byte a character) when every id is ASCII, as text otherwise; ``task``,
    ``task_at`` and the decisions' ``task_ids`` give the same text either way."""
    from replaylens.records import unpack_text

    tasks = [FutureTask("s", "f", "c", t, ("a", "b"), i) for i, t in enumerate(ids)]
    cols = FutureColumns.of_tasks(tasks)
    assert cols.task_text.dtype.kind == ("S" if all(t.isascii() for t in ids) else "U")
    assert cols.task.tolist() == ids
    assert cols.task_at(np.array([len(ids) - 1, 0])).tolist() == [ids[-1], ids[0]]
    assert unpack_text(cols.task_text).tolist() == ids
    assert [t.task for t in cols.build()] == ids
    assert not cols.task_text.flags.writeable
