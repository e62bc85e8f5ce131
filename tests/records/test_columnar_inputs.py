"""The columnar input paths give what the row-by-row reference gives: the utility table, the input
cross-checks (first problem and its message), and the content fingerprints."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replaylens.bandit import make_bandit
from replaylens.errors import InputError
from replaylens.records import (
    Evaluator,
    FutureTask,
    FutureTasks,
    History,
    check_inputs,
    read_evaluator,
    write_evaluator,
)
from replaylens.records._coded_table import CodedTable
from replaylens.records._futures import future_dict
from replaylens.records._history import _joined_text
from replaylens.records._text_codes import pack

WORDS = st.sampled_from(["a", "b", "c", "dd", "é", "x y"])


def _dict_table(rows: list[tuple[str, str, str, float]]) -> dict[tuple[str, str], dict[str, float]]:
    out: dict[tuple[str, str], dict[str, float]] = {}
    for s, t, k, u in rows:
        out.setdefault((s, t), {})[k] = u
    return out


def _coded(rows: list[tuple[str, str, str, float]]) -> CodedTable:
    cols = list(zip(*rows, strict=True))
    vocabs = [list(dict.fromkeys(c)) for c in cols[:3]]
    codes = [np.array([v.index(x) for x in c], dtype=np.int64) for v, c in zip(vocabs, cols[:3], strict=True)]
    return CodedTable(*vocabs, *codes, np.array(cols[3], dtype=np.float64))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(WORDS, WORDS, WORDS, st.floats(0, 1)), min_size=1, max_size=40,
                unique_by=lambda r: r[:3]))
def test_coded_table_is_the_nested_dicts(rows: list[tuple[str, str, str, float]]) -> None:
    ref, got = _dict_table(rows), _coded(rows)
    assert list(got) == list(ref) and len(got) == len(ref)
    assert [dict(v) for v in got.values()] == list(ref.values())
    assert [list(v) for v in got.values()] == [list(v) for v in ref.values()]   # keys in file order
    assert ("zz", "a") not in got and got.get(("zz", "a")) is None
    assert Evaluator(got).fingerprint() == Evaluator(ref).fingerprint()
    payload = json.dumps({f"{s}\x1f{t}": dict(v) for (s, t), v in sorted(ref.items())}, sort_keys=True,
                         separators=(",", ":"))
    assert Evaluator(got).fingerprint() == hashlib.sha256(payload.encode()).hexdigest()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(WORDS, WORDS, WORDS, st.floats(0, 1)), min_size=1, max_size=30,
                unique_by=lambda r: r[:3]),
       st.lists(st.tuples(WORDS, WORDS, st.lists(WORDS, min_size=1, max_size=3, unique=True)), min_size=1,
                max_size=12, unique_by=lambda r: r[:2]))
def test_check_covers_on_codes_names_the_problem_the_loop_names(rows: list[tuple[str, str, str, float]],
                                                                  tasks: list[tuple[str, str, list[str]]]) -> None:
    fut = FutureTasks(tuple(FutureTask(s, "f", "c", t, tuple(m), i) for i, (s, t, m) in enumerate(tasks)))

    def outcome(ev: Evaluator) -> str:
        try:
            ev.check_covers(fut)
        except InputError as exc:
            return str(exc)
        return "ok"

    assert outcome(Evaluator(_coded(rows))) == outcome(Evaluator(_dict_table(rows)))


def test_utility_file_reads_back_the_same_table(tmp_path: Path) -> None:
    sub = make_bandit(n_streams=6, slots_per_block=3, n_future=3)
    for fmt in ("parquet", "jsonl"):
        p = write_evaluator(sub.evaluator, tmp_path / f"u.{fmt}")
        got = read_evaluator(p)
        assert isinstance(got.table, CodedTable)
        assert list(got.table.items()) == [(k, dict(v)) for k, v in sub.evaluator.table.items()]
        assert got.fingerprint() == sub.evaluator.fingerprint()


@pytest.mark.parametrize("values", [["ab", "", "c d", "x\x00y", "zzz"], ["é", "a"], ["a"], [""], ["a", "b\x1f"]])
def test_joined_text_is_the_joined_values(values: list[str]) -> None:
    arr = np.array(values)
    assert _joined_text(arr) == "\x1f".join(arr.tolist()).encode()


def test_futures_fingerprint_is_the_json_of_every_task() -> None:
    tasks = (FutureTask("s", "f", "c", 't"é', ("a", "b"), 0, ("ff", "cc")),
             FutureTask("s", "f", "c", "t2", ("a",), 1, None, {"z": 1, "a": [1, {"y": 2}]}),
             *(FutureTask("s2", "g", "c", f"t{i}", ("b", "a"), i) for i in range(70_000)))
    fut = FutureTasks(tasks)
    payload = json.dumps([future_dict(t) for t in tasks], sort_keys=True, separators=(",", ":"))
    assert fut.fingerprint() == hashlib.sha256(payload.encode()).hexdigest()


def _reference_check(history: History, futures: FutureTasks) -> str:
    """The record-by-record scan check_inputs replaced (its first problem's text, or "ok")."""
    streams = set(history.streams)
    menus: dict[str, set[str]] = {}
    for i, t in enumerate(futures.tasks):
        if t.stream not in streams:
            return f"#{i + 1} stream {t.stream}"
        menus.setdefault(t.stream, set()).update(t.menu)
        if t.feeds is not None and t.feeds not in history.blocks(t.stream):
            return f"feeds {t.task}"
    for j in range(len(history)):
        s = str(history.stream[j])
        if s in menus and str(history.key[j]) not in menus[s]:
            return f"key {history.key[j]} slot {history.slot[j]} stream {s}"
    return "ok"


def _check(history: History, futures: FutureTasks) -> str:
    try:
        check_inputs(history, futures)
    except InputError as exc:
        msg = str(exc)
        if "which has no history records" in msg:
            i = msg.split("(#")[1].split(")")[0]
            return f"#{i} stream {msg.split('names stream ')[1].split(',')[0].strip(chr(39))}"
        if "is fed by block" in msg:
            return f"feeds {msg.split('future task ')[1].split(' of')[0].strip(chr(39))}"
        key = msg.split("key ")[1].split(" at")[0].strip("'")
        slot = msg.split("at slot ")[1].split(" ")[0]
        stream = msg.split("of stream ")[1].split(" is")[0].strip("'")
        return f"key {key} slot {slot} stream {stream}"
    return "ok"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["s1", "s2", "s3"]), st.sampled_from(["f", "g"]), WORDS), min_size=1,
                max_size=25),
       st.lists(st.tuples(st.sampled_from(["s1", "s2", "s4"]), st.lists(WORDS, min_size=1, max_size=3, unique=True),
                          st.sampled_from([None, ("f", "c"), ("g", "c"), ("h", "c")])), min_size=1, max_size=8))
def test_check_inputs_reports_the_first_problem_of_the_scan(records: list[tuple[str, str, str]],
                                                            tasks: list[tuple[str, list[str], tuple[str, str] | None]]
                                                            ) -> None:
    h = History.from_columns(stream=[r[0] for r in records], family=[r[1] for r in records],
                             context=["c"] * len(records), slot=list(range(len(records))),
                             task=["t"] * len(records), key=[r[2] for r in records], outcome=[0.5] * len(records))
    fut = FutureTasks(tuple(FutureTask(s, "f", "c", f"x{i}", tuple(m), i, feeds)
                            for i, (s, m, feeds) in enumerate(tasks)))
    assert _check(h, fut) == _reference_check(h, fut)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(WORDS, WORDS, WORDS, st.floats(0, 1)), min_size=1, max_size=40,
                unique_by=lambda r: r[:3]), st.integers(1, 5))
def test_coded_table_values_and_chunked_document(rows: list[tuple[str, str, str, float]], chunk: int) -> None:
    """``values_at`` gives the row dicts' values; the fingerprint's JSON is the same bytes whatever the chunk."""
    ref, got = _dict_table(rows), _coded(rows)
    pairs = list(ref)
    menus = [tuple(reversed(list(ref[p]))) for p in pairs]
    streams = sorted({s for s, _ in pairs})
    code = np.array([streams.index(s) for s, _ in pairs], dtype=np.int64)
    g = got.rows_for(streams, code, np.array([t for _, t in pairs], dtype=object))
    assert g.tolist() == list(range(len(pairs)))   # every task has its row, in iteration order
    back = got.rows_for(streams, code[::-1].copy(), np.array([t for _, t in pairs][::-1], dtype=object))
    assert back.tolist() == list(range(len(pairs)))[::-1]   # another order: looked up by name
    held = pack(np.array([t for _, t in pairs][::-1]))   # the ids as FutureColumns holds them
    assert got.rows_for(streams, code[::-1].copy(), held).tolist() == back.tolist()
    held_in_order = pack(np.array([t for _, t in pairs]))
    assert got.rows_for(streams, code, held_in_order).tolist() == g.tolist()
    assert got.values_at(g, menus, np.arange(len(menus))).tolist() == \
        [ref[p][a] for p, m in zip(pairs, menus, strict=True) for a in m]
    assert got.first_uncovered(g, menus, np.arange(len(menus))) == (-1, None)
    with pytest.raises(KeyError):
        got.values_at(g[:1], [("not a key",)], np.zeros(1, dtype=np.int64))
    assert got.first_uncovered(g[:1], [("not a key",)], np.zeros(1, dtype=np.int64)) == (0, "not a key")
    missing = got.rows_for(["zz"], np.zeros(1, dtype=np.int64), np.array(["zz"], dtype=object))
    assert missing.tolist() == [-1]
    with pytest.raises(KeyError):
        got.values_at(missing, [menus[0]], np.zeros(1, dtype=np.int64))
    assert got.first_uncovered(missing, [menus[0]], np.zeros(1, dtype=np.int64)) == (0, None)
    payload = json.dumps({f"{s}\x1f{t}": dict(v) for (s, t), v in sorted(ref.items())}, sort_keys=True,
                         separators=(",", ":"))
    assert b"".join(got.json_document(chunk)) == payload.encode()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(WORDS, WORDS), min_size=1, max_size=20, unique=True),
       st.lists(st.sampled_from(["k%s", "%", "b", "é", 'q"'], ), min_size=1, max_size=4, unique=True),
       st.integers(1, 5), st.sampled_from([0.25, -0.0, 1e-300, float("nan")]))
def test_coded_table_document_with_the_same_keys_in_every_task(tasks: list[tuple[str, str]], keys: list[str],
                                                               chunk: int, odd: float) -> None:
    """Tasks that all have the same keys (one template per chunk, '%' in a key included) give json.dumps's bytes."""
    rows = [(s, t, k, (i * 0.37) % 1.0 if i % 3 else odd) for i, ((s, t), k) in
            enumerate((p, k) for p in tasks for k in keys)]
    ref = _dict_table(rows)
    payload = json.dumps({f"{s}\x1f{t}": dict(v) for (s, t), v in sorted(ref.items())}, sort_keys=True,
                         separators=(",", ":"))
    assert b"".join(_coded(rows).json_document(chunk)) == payload.encode()


def test_memoized_checks_and_fingerprints_follow_the_objects() -> None:
    """A passed check or a fingerprint is kept for those very (immutable) objects only."""
    sub = make_bandit(n_streams=3, slots_per_block=4, n_future=2)
    h, f = sub.history, sub.futures
    assert h.fingerprint() == h.fingerprint() == h._fingerprint()
    assert f.fingerprint() == f._fingerprint()
    check_inputs(h, f)
    other = FutureTasks(tuple(FutureTask(t.stream + "?", t.family, t.context, t.task, t.menu, t.index)
                              for t in f.tasks))
    with pytest.raises(InputError):   # another task set is checked, not taken from the memo
        check_inputs(h, other)


def test_memoized_computes_once_when_two_threads_ask_at_once() -> None:
    """A thread asking while another computes waits for that value: one computation."""
    import threading

    from replaylens.records._memo import memoized

    class Obj:
        pass

    obj, calls, second_asking = Obj(), [], threading.Event()

    def compute() -> str:
        calls.append(1)
        if len(calls) == 1:   # hold the first computation until the other thread is asking
            second_asking.wait(5)
            threading.Event().wait(0.2)
        return "value"

    got: list[str] = []
    first = threading.Thread(target=lambda: got.append(memoized(obj, "fp", compute)))
    first.start()
    while not calls:   # the first thread is inside compute()
        threading.Event().wait(0.001)

    def second() -> None:
        second_asking.set()
        got.append(memoized(obj, "fp", compute))

    other = threading.Thread(target=second)
    other.start()
    first.join(10)
    other.join(10)
    assert got == ["value", "value"] and len(calls) == 1


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(st.text(alphabet=st.sampled_from("ab z-_09é\x00"), max_size=9), max_size=30), min_size=1,
                max_size=4),
       st.integers(0, 3), st.booleans())
def test_ascii_text_array_is_the_per_value_array(chunks: list[list[str]], cut: int, fixed: bool) -> None:
    """Laid out from arrow buffers (chunked, sliced, fixed or varying width): ``np.asarray(values, dtype=str)``;
    ``None`` for non-ASCII or NUL text."""
    import pyarrow as pa

    from replaylens.records._arrow_rows import ascii_text_array

    if fixed:
        chunks = [[(v + "xxxxxxxxx")[:5] for v in c] for c in chunks]
    col = pa.chunked_array([pa.array(c, type=pa.string()) for c in chunks], type=pa.string())
    col = col.slice(min(cut, len(col)))   # an offset into the first chunk
    values = col.to_pylist()
    got = ascii_text_array(col)
    plain = all(ch.isascii() and ch != "\x00" for v in values for ch in v)
    if not plain:
        assert got is None
        return
    assert got is not None
    want = np.asarray(values, dtype=str) if values and any(values) else np.full(len(values), "", dtype="<U1")
    assert got.dtype == want.dtype and got.tolist() == want.tolist()


def test_ascii_text_array_declines_what_it_cannot_lay_out() -> None:
    import pyarrow as pa

    from replaylens.records._arrow_rows import ASCII_MAX_WIDTH, ascii_text_array

    assert ascii_text_array(pa.array(["a", None])) is None                        # nulls
    assert ascii_text_array(pa.array(["a" * (ASCII_MAX_WIDTH + 1)])) is None      # too wide
    assert ascii_text_array(pa.array(["a"], type=pa.large_string())) is None      # 64-bit offsets
    assert ascii_text_array(pa.array(["ab", "c"])).tolist() == ["ab", "c"]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["s1", "s2"]), st.sampled_from(["t1", "t2", "t3"]), WORDS,
                          st.floats(0, 1)), min_size=1, max_size=80),
       st.integers(0, 40), st.integers(1, 4))
def test_values_at_scans_or_searches_a_row_alike(rows: list[tuple[str, str, str, float]], scan: int,
                                                 per_lookup: int) -> None:
    """``values_at`` on rows of many keys, a key listed twice (its last value, as the row's dict), any number of
    tasks a lookup: scanning each row in place and searching the sorted entries give the row dicts' values, and
    ``first_uncovered`` finds the same first gap."""
    from replaylens.records import _coded_table as ct

    ref, got = _dict_table(rows), _coded(rows)
    pairs = list(ref)
    menus = [tuple(ref[p]) for p in pairs]
    streams = sorted({s for s, _ in pairs})
    g = got.rows_for(streams, np.array([streams.index(s) for s, _ in pairs], dtype=np.int64),
                     np.array([t for _, t in pairs], dtype=object))
    want = [ref[p][a] for p, m in zip(pairs, menus, strict=True) for a in m]
    saved = ct._SCAN_KEYS, ct._LOOKUP_TASKS
    try:
        ct._SCAN_KEYS, ct._LOOKUP_TASKS = scan, per_lookup
        assert got.values_at(g, menus, np.arange(len(menus))).tolist() == want
        lacking = [*menus[:-1], (*menus[-1], "not a key")]
        with pytest.raises(KeyError) as err:
            got.values_at(g, lacking, np.arange(len(menus)))
        assert err.value.args == ("not a key",)
        assert got.first_uncovered(g, menus, np.arange(len(menus))) == (-1, None)
        assert got.first_uncovered(g, lacking, np.arange(len(menus))) == (len(menus) - 1, "not a key")
        no_row = np.r_[g[:-1], -1]
        assert got.first_uncovered(no_row, menus, np.arange(len(menus))) == (len(menus) - 1, None)
    finally:
        ct._SCAN_KEYS, ct._LOOKUP_TASKS = saved
