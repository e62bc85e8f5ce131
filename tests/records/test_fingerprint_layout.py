"""The column-wise JSON layout gives ``json.dumps``'s bytes value by value (the fingerprints' fast path)."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replaylens.records._layout import concat, joined, json_floats, json_strings, text_of, to_arrow_text
from replaylens.records._text_codes import pack

EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, 1e-4, -1e-4, 9.999999999999999e-05, 1e-5, 1e15, 999999999999999.9,
         999999999999999.0, 1e16, 1e22, 123456789.0, 5e-324, 1.7976931348623157e308, float("nan"), float("inf"),
         float("-inf"), 0.1, 1 / 3, 2.0**53, 0.30000000000000004]


def _as_float(bits: int) -> float:
    return float(struct.unpack("<d", struct.pack("<Q", bits))[0])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.floats(), st.floats(-1e16, 1e16), st.floats(0, 1),
                          st.integers(0, 2**64 - 1).map(_as_float), st.sampled_from(EDGES)), max_size=60))
def test_json_floats_are_json_dumps(values: list[float]) -> None:
    got = json_floats(np.array(values, dtype=np.float64)).to_pylist()
    assert got == [json.dumps(x) for x in values]


def test_json_floats_on_many_random_doubles() -> None:
    rng = np.random.default_rng(7)
    u = np.concatenate([rng.random(20000), np.round(rng.random(20000), 6),
                        rng.integers(0, 2**63, 20000).view(np.float64), 10.0 ** rng.uniform(-6, 17, 20000),
                        np.array(EDGES)])
    assert json_floats(u).to_pylist() == [json.dumps(x) for x in u.tolist()]


TEXT = st.text(st.characters(codec="utf-8"), max_size=8)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(TEXT, st.sampled_from(["a", 'q"', "b\\c", "\x1f", "t\x00u", "é", "\x7f", "x y"])),
                max_size=30))
def test_json_strings_are_json_dumps(values: list[str]) -> None:
    assert json_strings(values).to_pylist() == [json.dumps(v) for v in values]
    assert json_strings(values, quoted=False).to_pylist() == [json.dumps(v)[1:-1] for v in values]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.text(st.characters(max_codepoint=127), max_size=6), TEXT), max_size=30))
def test_numpy_text_to_arrow_reads_as_numpy_does(values: list[str]) -> None:
    arr = np.array(values, dtype=str) if values else np.zeros(0, dtype="<U1")
    assert to_arrow_text(arr).to_pylist() == arr.tolist()
    packed = pack(arr)   # the ids as held (bytes where ASCII): the same text without decoding
    assert to_arrow_text(packed).to_pylist() == arr.tolist()


def test_non_ascii_bytes_are_not_text() -> None:
    import pytest

    with pytest.raises(UnicodeDecodeError):
        to_arrow_text(np.array([b"ok", b"\xff"]))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(TEXT, max_size=4), min_size=1, max_size=10))
def test_joined_and_concat_lay_out_python_joins(groups: list[list[str]]) -> None:
    cells = to_arrow_text([c for g in groups for c in g])
    offsets = np.r_[0, np.cumsum([len(g) for g in groups])]
    rows = concat("{", joined(cells, offsets, ","), "},")
    assert rows.to_pylist() == ["{" + ",".join(g) + "}," for g in groups]
    assert text_of(rows) == "".join("{" + ",".join(g) + "}," for g in groups).encode()
    assert text_of(rows.slice(1)) == "".join("{" + ",".join(g) + "}," for g in groups[1:]).encode()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.text(st.sampled_from("ab \t\x1c\x1f\n\xa0\u2003é"), max_size=4), TEXT), max_size=12))
def test_clean_words_is_the_row_readers_strip_check(words: list[str]) -> None:
    import pyarrow as pa

    from replaylens.records._arrow_rows import arrow_codes, clean_words

    arr = pa.array(words, type=pa.string())
    assert clean_words(arr) == all(w and w == w.strip() for w in words)
    vocab, codes = arrow_codes(arr)
    assert [vocab.to_pylist()[c] for c in codes.tolist()] == words


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["s1", "s2", "s3", "é"]), st.integers(0, 6)), min_size=1, max_size=25,
                unique=True), st.booleans())
def test_history_order_from_runs_or_sort_is_the_canonical_order(rows: list[tuple[str, int]], grouped: bool) -> None:
    """Rows already in (stream, slot) runs and rows in any order give the sort by (first appearance, slot)."""
    from replaylens.records import History

    if grouped:   # a file written stream by stream, slots in order (the runs shortcut)
        first = list(dict.fromkeys(s for s, _ in rows))
        rows = sorted(rows, key=lambda r: (first.index(r[0]), r[1]))
    n = len(rows)
    h = History.from_columns(stream=[s for s, _ in rows], family=["f"] * n, context=["c"] * n,
                             slot=[t for _, t in rows], task=[f"t{i}" for i in range(n)], key=["k"] * n,
                             outcome=[0.5] * n)
    first = list(dict.fromkeys(s for s, _ in rows))
    want = sorted(range(n), key=lambda i: (first.index(rows[i][0]), rows[i][1]))
    assert h.task.tolist() == [f"t{i}" for i in want]
    assert h.streams == tuple(first)


def test_json_strings_of_text_arrow_cannot_hold() -> None:
    """A lone surrogate (json.loads accepts one) is written as json.dumps writes it."""
    values = ["a", "x\ud800y", 'q"']
    assert json_strings(values).to_pylist() == [json.dumps(v) for v in values]
    assert json_strings(np.array(values, dtype=object), quoted=False).to_pylist() == \
        [json.dumps(v)[1:-1] for v in values]


def test_inputs_with_a_lone_surrogate_are_checked_and_fingerprinted() -> None:
    """Text arrow cannot hold goes the Python way: the check passes and the task set's fingerprint is json's."""
    import hashlib

    from replaylens.records import FutureTask, FutureTasks, History, check_inputs
    from replaylens.records._futures import future_dict

    k = "k\ud800"
    h = History.from_columns(stream=["s"], family=["f"], context=["c"], slot=[0], task=["t\ud800"], key=[k],
                             outcome=[0.5])
    f = FutureTasks((FutureTask("s", "f", "c", "x\ud800", (k, "b"), 0),))
    check_inputs(h, f)
    doc = json.dumps([future_dict(t) for t in f.tasks], sort_keys=True, separators=(",", ":"))
    assert f.fingerprint() == hashlib.sha256(doc.encode()).hexdigest()
    # the history's too (its text as surrogatepass encodes it: the same bytes as UTF-8 for every other text)
    def hist(task: str) -> History:
        return History.from_columns(stream=["s"], family=["f"], context=["c"], slot=[0], task=[task], key=[k],
                                    outcome=[0.5])
    assert h.fingerprint() == hist("t\ud800").fingerprint() != hist("t\udc00").fingerprint()
    assert len(h.fingerprint()) == 64


def _surrogate_inputs(where: str) -> tuple[Any, Any]:
    from replaylens.records import FutureTask, FutureTasks, History

    def txt(name: str, value: str) -> str:
        return value + "\ud800" if where == name else value

    h = History.from_columns(stream=[txt("stream", "s")] * 2, family=["f"] * 2, context=["c"] * 2, slot=[0, 1],
                             task=["t0", txt("task", "t1")], key=["a", txt("key", "b")], outcome=[0.5, 1.0])
    menu = ("a", txt("key", "b"), txt("menu", "m"))
    f = FutureTasks((FutureTask(txt("stream", "s"), "f", "c", "x0", menu, 0),
                     FutureTask(txt("stream", "s"), "f", "c", txt("future_task", "x1"), menu, 1)))
    return h, f


@pytest.mark.parametrize(("where", "source", "field", "message"), [
    ("task", "<memory>", "task", "record 2 (stream 's', slot 1) holds a lone surrogate (U+D800 at character 3)"),
    ("key", "<memory>", "key", "record 2 (stream 's', slot 1) holds a lone surrogate (U+D800 at character 2)"),
    ("stream", "<memory>", "stream", "record 1 (stream 's\\ud800', slot 0)"),
    ("future_task", "<memory>", "task", "future task 2 holds a lone surrogate (U+D800 at character 3)"),
    ("menu", "<memory>", "menu", "future task 1 holds a lone surrogate (U+D800 at character 2)"),
])
def test_text_the_result_files_cannot_hold_is_one_input_error(where: str, source: str, field: str,
                                                               message: str) -> None:
    from replaylens.errors import InputError
    from replaylens.records import check_storable

    h, f = _surrogate_inputs(where)
    with pytest.raises(InputError) as info:
        check_storable(h, f)
    err = info.value
    assert (err.source, err.line, err.field) == (source, None, field)
    assert message in err.message and "cannot store it" in err.message
    check_storable(*_surrogate_inputs("nowhere"))   # the same inputs without the surrogate pass


def test_an_audit_writing_results_refuses_such_text_before_touching_out(tmp_path: Path) -> None:
    from replaylens.agents import reference_agent
    from replaylens.bandit import make_bandit
    from replaylens.errors import InputError
    from replaylens.records import History
    from replaylens.report import audit

    sub = make_bandit(n_streams=4, slots_per_block=4, n_future=2, rng=1)
    cols = sub.history.to_columns()
    tasks = cols["task"].tolist()
    tasks[0] += "\ud800"
    h = History.from_columns(**{**cols, "task": tasks})
    out = tmp_path / "out"
    with pytest.raises(InputError, match=r"field 'task': record 1 .* lone surrogate"):
        audit(h, sub.futures, sub.evaluator, reference_agent("mean"), out=out, n_resamples=50)
    assert not out.exists()
    got = audit(h, sub.futures, sub.evaluator, reference_agent("mean"), n_resamples=50)   # in memory: as before
    assert got.rows
