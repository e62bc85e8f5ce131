"""Records IO: round trips through JSONL / CSV / Parquet, canonical order, and located input errors."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from replaylens.errors import InputError
from replaylens.records import (
    Evaluator,
    FutureTasks,
    History,
    check_inputs,
    evaluator_from_rows,
    futures_from_tasks,
    history_from_records,
    read_evaluator,
    read_futures,
    read_history,
    write_evaluator,
    write_futures,
    write_history,
)

FORMATS = ("jsonl", "csv", "parquet")

# ---------------------------------------------------------------- fixtures / helpers


def hrow(stream: str = "s1", family: str = "f", context: str = "c", slot: Any = 0, task: str | None = None,
         key: str = "A", outcome: Any = 0.5, **extra: Any) -> dict[str, Any]:
    d = {"stream": stream, "family": family, "context": context, "slot": slot,
         "task": task if task is not None else f"t{slot}", "key": key, "outcome": outcome}
    d.update(extra)
    return d


def frow(stream: str = "s1", family: str = "f", context: str = "c", task: str = "x0",
         menu: Any = ("A", "B"), **extra: Any) -> dict[str, Any]:
    d = {"stream": stream, "family": family, "context": context, "task": task,
         "menu": list(menu) if isinstance(menu, tuple) else menu}
    d.update(extra)
    return d


def urow(stream: str = "s1", task: str = "x0", key: str = "A", utility: Any = 0.5) -> dict[str, Any]:
    return {"stream": stream, "task": task, "key": key, "utility": utility}


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_text(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def sample_history() -> History:
    rows = [
        hrow("s2", "fam", "hi", 7, "q7", "B", 0.25, event_time=3.5, event_id="e7", metadata={"note": "x", "n": 2}),
        hrow("s1", "fam", "lo", 2, "q2", "A", None),                     # masked
        hrow("s1", "fam", "hi", 0, "q0", "C", 1.0, event_id="e0"),
        hrow("s2", "fam", "lo", 1, "q1", "A", 0.0, event_time=0.0),
        hrow("s1", "fam", "lo", 1, "q1", "B", 0.5),
        hrow("s2", "fam", "hi", 3, "q3", "C", 0.5),
        hrow("s1", "fam", "hi", 5, "q5", "A", None, metadata={"k": [1, 2]}),
    ]
    return history_from_records(rows, source="sample")


def sample_futures() -> FutureTasks:
    return futures_from_tasks([
        frow("s2", "fam", "hi", "u0", ("A", "B", "C")),
        frow("s1", "fam", "lo", "u1", ("A", "B", "C")),
        frow("s1", "fam", "hi", "u2", ("C", "A", "B"), metadata={"difficulty": 3}),
        frow("s1", "other", "x", "u3", ("A", "B", "C"), feeds_family="fam", feeds_context="lo"),
        frow("s2", "other", "x", "u4", ("B", "A")),
    ])


def sample_evaluator() -> Evaluator:
    rows = []
    for t in sample_futures():
        for j, a in enumerate(t.menu):
            rows.append(urow(t.stream, t.task, a, 0.125 * (j + 1)))
    return evaluator_from_rows(rows)


def raises_at(fn: Any, path: Path, line: int | None, field: str | None) -> InputError:
    with pytest.raises(InputError) as info:
        fn(path)
    err = info.value
    assert err.source == str(path)
    assert err.line == line, err
    assert err.field == field, err
    # the one-line form FILE:LINE: field 'F': message
    text = str(err)
    assert text.startswith(str(path))
    if line is not None:
        assert text.startswith(f"{path}:{line}")
    if field is not None:
        assert f"field '{field}'" in text
    return err


# ---------------------------------------------------------------- round trips


@pytest.mark.parametrize("fmt", FORMATS)
def test_history_round_trip(tmp_path: Path, fmt: str) -> None:
    h = sample_history()
    p = write_history(h, tmp_path / f"h.{fmt}")
    back = read_history(p)
    assert back.equals(h)
    assert back.fingerprint() == h.fingerprint()
    assert back.streams == h.streams
    np.testing.assert_array_equal(np.isnan(back.outcome), np.isnan(h.outcome))
    assert int(np.isnan(back.outcome).sum()) == 2  # masked outcomes stay masked
    recs = {(r.stream, r.slot): r for r in back.records()}
    assert recs[("s2", 7)].metadata == {"note": "x", "n": 2}
    assert recs[("s2", 7)].event_time == 3.5 and recs[("s2", 7)].event_id == "e7"
    assert recs[("s1", 5)].metadata == {"k": [1, 2]}
    assert recs[("s1", 2)].masked and recs[("s1", 2)].event_time is None and recs[("s1", 2)].event_id is None


@pytest.mark.parametrize("fmt", FORMATS)
def test_history_round_trip_all_masked(tmp_path: Path, fmt: str) -> None:
    h = history_from_records([hrow(slot=i, outcome=None) for i in range(3)])
    back = read_history(write_history(h, tmp_path / f"m.{fmt}"))
    assert back.equals(h)
    assert np.isnan(back.outcome).all()


@pytest.mark.parametrize("fmt", FORMATS)
def test_futures_round_trip(tmp_path: Path, fmt: str) -> None:
    f = sample_futures()
    back = read_futures(write_futures(f, tmp_path / f"f.{fmt}"))
    assert back.fingerprint() == f.fingerprint()
    assert [t.task for t in back] == [t.task for t in f]
    assert [t.menu for t in back] == [t.menu for t in f]
    assert [t.feeds for t in back] == [t.feeds for t in f]
    assert [t.metadata for t in back] == [t.metadata for t in f]


@pytest.mark.parametrize("fmt", FORMATS)
def test_evaluator_round_trip(tmp_path: Path, fmt: str) -> None:
    e = sample_evaluator()
    back = read_evaluator(write_evaluator(e, tmp_path / f"u.{fmt}"))
    assert back.fingerprint() == e.fingerprint()
    assert back.table == e.table


def test_formats_agree(tmp_path: Path) -> None:
    h = sample_history()
    prints = {read_history(write_history(h, tmp_path / f"h.{fmt}")).fingerprint() for fmt in FORMATS}
    assert prints == {h.fingerprint()}


def test_explicit_format_overrides_suffix(tmp_path: Path) -> None:
    h = sample_history()
    p = write_history(h, tmp_path / "h.data", fmt="jsonl")
    assert read_history(p, fmt="jsonl").equals(h)
    with pytest.raises(InputError):
        read_history(p)  # no recognisable suffix


def test_csv_menu_forms_and_metadata_text(tmp_path: Path) -> None:
    p = write_text(tmp_path / "f.csv",
                   "stream,family,context,task,menu,metadata\n"
                   's1,f,c,x0,A|B|C,"{""a"": 1}"\n'
                   's1,f,c,x1,"[""C"", ""A""]",\n')
    f = read_futures(p)
    assert [t.menu for t in f] == [("A", "B", "C"), ("C", "A")]
    assert f.tasks[0].metadata == {"a": 1} and f.tasks[1].metadata is None
    assert f.labels == ("A", "B", "C")


def test_oracle_is_first_maximum_in_menu_order() -> None:
    f = futures_from_tasks([frow(task="x0", menu=("C", "A", "B"))])
    e = evaluator_from_rows([urow(key="A", utility=0.7), urow(key="B", utility=0.7), urow(key="C", utility=0.2)])
    t = f.tasks[0]
    np.testing.assert_array_equal(e.utilities(t), [0.2, 0.7, 0.7])
    assert e.oracle(t) == "A"


# ---------------------------------------------------------------- canonical order


def test_history_sorted_by_stream_first_appearance_then_slot() -> None:
    rows = [
        hrow("b", "f", "c", 9), hrow("a", "g", "c", 4), hrow("b", "g", "c", 2), hrow("a", "f", "c", 0),
        hrow("c", "f", "c", 1), hrow("b", "f", "c", 5), hrow("a", "f", "c", 7),
    ]
    h = history_from_records(rows)
    assert h.streams == ("b", "a", "c")
    assert h.stream.tolist() == ["b", "b", "b", "a", "a", "a", "c"]
    assert h.slot.tolist() == [2, 5, 9, 0, 4, 7, 1]
    # the same rows in another order give the same content per stream
    h2 = history_from_records(list(reversed(rows)))
    assert h2.streams == ("a", "b", "c")
    for s in ("a", "b", "c"):
        assert h2.select([s]).equals(h.select([s]))
    # blocks ordered by first slot
    assert h.blocks("b") == (("g", "c"), ("f", "c"))
    assert h.blocks("a") == (("f", "c"), ("g", "c"))
    assert h.stream_slice("a") == slice(3, 6)


def test_interleaved_blocks_order_by_first_slot() -> None:
    rows = [hrow(family="x", slot=3), hrow(family="y", slot=1), hrow(family="x", slot=0), hrow(family="z", slot=2)]
    h = history_from_records(rows)
    assert h.blocks("s1") == (("x", "c"), ("y", "c"), ("z", "c"))
    assert h.family.tolist() == ["x", "y", "z", "x"]


# ---------------------------------------------------------------- invalid history inputs


def test_missing_required_key(tmp_path: Path) -> None:
    bad = hrow(slot=1)
    del bad["key"]
    p = write_jsonl(tmp_path / "h.jsonl", [hrow(slot=0), bad])
    raises_at(read_history, p, 2, "key")


def test_missing_outcome_field_vs_null(tmp_path: Path) -> None:
    bad = hrow(slot=1)
    del bad["outcome"]
    raises_at(read_history, write_jsonl(tmp_path / "h.jsonl", [hrow(slot=0), bad]), 2, "outcome")
    ok = read_history(write_jsonl(tmp_path / "ok.jsonl", [hrow(slot=0), hrow(slot=1, outcome=None)]))
    assert math.isnan(float(ok.outcome[1]))


def test_nan_outcome_allowed_but_nan_utility_rejected(tmp_path: Path) -> None:
    # NaN outcome (JSON NaN literal, null, CSV "nan" and empty cell) = masked
    p = write_text(tmp_path / "h.jsonl", json.dumps(hrow(slot=0)) + "\n" + json.dumps(hrow(slot=1, outcome=math.nan))
                   + "\n")
    assert np.isnan(read_history(p).outcome).tolist() == [False, True]
    p = write_text(tmp_path / "h.csv", "stream,family,context,slot,task,key,outcome\n"
                   "s1,f,c,0,t0,A,nan\ns1,f,c,1,t1,A,\ns1,f,c,2,t2,A,0.5\n")
    assert np.isnan(read_history(p).outcome).tolist() == [True, True, False]
    # NaN utility: JSONL literal and CSV text
    p = write_text(tmp_path / "u.jsonl", json.dumps(urow(key="A")) + "\n" + json.dumps(urow(key="B", utility=math.nan))
                   + "\n")
    raises_at(read_evaluator, p, 2, "utility")
    p = write_text(tmp_path / "u.csv", "stream,task,key,utility\ns1,x0,A,0.5\ns1,x0,B,0.1\ns1,x0,C,NaN\n")
    raises_at(read_evaluator, p, 4, "utility")
    p = write_text(tmp_path / "u2.csv", "stream,task,key,utility\ns1,x0,A,0.5\ns1,x0,B,\n")
    raises_at(read_evaluator, p, 3, "utility")


def test_outcome_out_of_range(tmp_path: Path) -> None:
    p = write_jsonl(tmp_path / "h.jsonl", [hrow(slot=0), hrow(slot=1), hrow(slot=2, outcome=1.5)])
    err = raises_at(read_history, p, 3, "outcome")
    assert "[0, 1]" in err.message
    raises_at(read_history, write_jsonl(tmp_path / "n.jsonl", [hrow(slot=0, outcome=-0.1)]), 1, "outcome")


def test_outcome_not_numeric(tmp_path: Path) -> None:
    p = write_jsonl(tmp_path / "h.jsonl", [hrow(slot=0), hrow(slot=1, outcome="abc")])
    raises_at(read_history, p, 2, "outcome")
    p = write_jsonl(tmp_path / "b.jsonl", [hrow(slot=0, outcome=True)])
    raises_at(read_history, p, 1, "outcome")


@pytest.mark.parametrize("slot", [1.5, "2.5", "x", True])
def test_non_integer_slot(tmp_path: Path, slot: Any) -> None:
    p = write_jsonl(tmp_path / "h.jsonl", [hrow(slot=0), hrow(slot=slot, task="t")])
    raises_at(read_history, p, 2, "slot")


def test_integral_float_slot_accepted(tmp_path: Path) -> None:
    h = read_history(write_jsonl(tmp_path / "h.jsonl", [hrow(slot=3.0, task="t")]))
    assert h.slot.tolist() == [3]


def test_negative_slot(tmp_path: Path) -> None:
    p = write_jsonl(tmp_path / "h.jsonl", [hrow(slot=0), hrow(slot=1), hrow(slot=-1, task="t")])
    raises_at(read_history, p, 3, "slot")


def test_duplicate_slot_names_later_line(tmp_path: Path) -> None:
    rows = [hrow(slot=4), hrow(slot=2), hrow("s2", slot=4), hrow(slot=3), hrow(slot=4, task="again")]
    p = write_jsonl(tmp_path / "h.jsonl", rows)
    err = raises_at(read_history, p, 5, "slot")
    assert "duplicate" in err.message
    # the same slot in different streams is fine
    assert len(read_history(write_jsonl(tmp_path / "ok.jsonl", rows[:4]))) == 4


def test_duplicate_event_id(tmp_path: Path) -> None:
    rows = [hrow(slot=0, event_id="e1"), hrow("s2", slot=0, event_id="e1"), hrow(slot=1, event_id="e2"),
            hrow(slot=2, event_id="e1")]
    err = raises_at(read_history, write_jsonl(tmp_path / "h.jsonl", rows), 4, "event_id")
    assert "e1" in err.message


def test_unknown_field(tmp_path: Path) -> None:
    bad = hrow(slot=1)
    bad["outcom"] = bad.pop("outcome")
    p = write_jsonl(tmp_path / "h.jsonl", [hrow(slot=0), bad])
    raises_at(read_history, p, 2, "outcom")
    p = write_text(tmp_path / "h.csv", "stream,family,context,slot,task,key,outcom\ns1,f,c,0,t0,A,0.5\n")
    raises_at(read_history, p, 2, "outcom")


@pytest.mark.parametrize("reader", [read_history, read_futures, read_evaluator])
@pytest.mark.parametrize("name,text", [("e.jsonl", ""), ("blank.jsonl", "\n  \n"), ("e.csv", ""),
                                       ("header_only.csv", "stream,task,key,utility\n")])
def test_empty_file(tmp_path: Path, reader: Any, name: str, text: str) -> None:
    raises_at(reader, write_text(tmp_path / name, text), None, None)


def test_empty_parquet(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = tmp_path / "h.parquet"
    pq.write_table(pa.table({"stream": pa.array([], pa.string())}), p)
    raises_at(read_history, p, None, None)


def test_invalid_json_line(tmp_path: Path) -> None:
    p = write_text(tmp_path / "h.jsonl", json.dumps(hrow(slot=0)) + "\n\n" + '{"stream": "s1", "slot": \n')
    err = raises_at(read_history, p, 3, None)
    assert "invalid JSON" in err.message


def test_non_object_json_line(tmp_path: Path) -> None:
    p = write_text(tmp_path / "h.jsonl", json.dumps(hrow(slot=0)) + "\n[1, 2, 3]\n")
    err = raises_at(read_history, p, 2, None)
    assert "list" in err.message


def test_invalid_utf8(tmp_path: Path) -> None:
    p = tmp_path / "h.jsonl"
    good = (json.dumps(hrow(slot=0)) + "\n" + json.dumps(hrow(slot=1)) + "\n").encode()
    p.write_bytes(good + b'{"stream": "s\xff1"}\n')
    err = raises_at(read_history, p, 3, None)
    assert "UTF-8" in err.message
    c = tmp_path / "h.csv"
    c.write_bytes(b"stream,family,context,slot,task,key,outcome\ns1,f,c,0,t0,\xc3\x28,0.5\n")
    raises_at(read_history, c, 2, None)


@pytest.mark.parametrize("reader,rows,field", [
    (read_history, [hrow(slot=0), hrow(slot=1, task="t\ud800")], "task"),
    (read_history, [hrow(slot=0), hrow(slot=1, key="A\udfff")], "key"),
    (read_futures, [frow(), frow(task="x\ud800")], "task"),
    (read_futures, [frow(), frow(task="x1", menu=("A", "B\udc00"))], "menu"),
    (read_evaluator, [urow(), urow(key="B\ud800")], "key"),
])
def test_lone_surrogate_is_one_input_error(tmp_path: Path, reader: Any, rows: list[dict[str, Any]],
                                            field: str) -> None:
    """JSON's escapes can spell a lone surrogate (json.loads accepts it; no UTF-8 output can hold it): the file,
    line and field are named where it is read."""
    p = write_jsonl(tmp_path / "in.jsonl", rows)
    assert "\\ud" in p.read_text(encoding="utf-8")   # a valid UTF-8 file: the surrogate is a JSON escape
    err = raises_at(reader, p, 2, field)
    assert "lone surrogate" in err.message


def test_csv_wrong_column_count(tmp_path: Path) -> None:
    p = write_text(tmp_path / "h.csv", "stream,family,context,slot,task,key,outcome\n"
                   "s1,f,c,0,t0,A,0.5\ns1,f,c,1,t1,A,0.5,extra\n")
    err = raises_at(read_history, p, 3, None)
    assert "columns" in err.message
    p = write_text(tmp_path / "h2.csv", "stream,family,context,slot,task,key,outcome\ns1,f,c,0,t0,A\n")
    raises_at(read_history, p, 2, None)


def test_csv_header_is_line_one(tmp_path: Path) -> None:
    # first record line is 2; blank lines still count
    p = write_text(tmp_path / "h.csv", "stream,family,context,slot,task,key,outcome\ns1,f,c,0,t0,,0.5\n")
    raises_at(read_history, p, 2, "key")
    p = write_text(tmp_path / "h2.csv", "stream,family,context,slot,task,key,outcome\ns1,f,c,0,t0,A,0.5\n\n"
                   "s1,f,c,1,t1,A,2\n")
    raises_at(read_history, p, 4, "outcome")
    # a quoted multi-line cell: the record is named by the line it starts on
    p = write_text(tmp_path / "h3.csv", 'stream,family,context,slot,task,key,outcome\ns1,f,c,0,"multi\nline",A,0.5\n'
                   "s1,f,c,1,t1,A,abc\n")
    raises_at(read_history, p, 4, "outcome")
    # duplicate header column
    p = write_text(tmp_path / "h4.csv", "stream,stream,family\ns1,s1,f\n")
    raises_at(read_history, p, 1, "stream")


def test_parquet_reports_rows(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [hrow(slot=0), hrow(slot=1), hrow(slot=2, outcome=3.0)]
    p = tmp_path / "h.parquet"
    pq.write_table(pa.Table.from_pylist(rows), p)
    raises_at(read_history, p, 3, "outcome")  # the 1-based row, no header
    rows = [urow(key="A"), urow(key="A")]
    p = tmp_path / "u.parquet"
    pq.write_table(pa.Table.from_pylist(rows), p)
    raises_at(read_evaluator, p, 2, "key")


def test_unreadable_parquet(tmp_path: Path) -> None:
    p = tmp_path / "h.parquet"
    p.write_bytes(b"not parquet at all")
    raises_at(read_history, p, None, None)


def test_missing_file(tmp_path: Path) -> None:
    raises_at(read_history, tmp_path / "nope.jsonl", None, None)


def test_empty_string_field(tmp_path: Path) -> None:
    raises_at(read_history, write_jsonl(tmp_path / "h.jsonl", [hrow(slot=0, task="   ")]), 1, "task")


def test_metadata_must_be_object(tmp_path: Path) -> None:
    raises_at(read_history, write_jsonl(tmp_path / "h.jsonl", [hrow(slot=0, metadata=[1])]), 1, "metadata")


# ---------------------------------------------------------------- invalid future / utility inputs


def test_duplicate_future_task(tmp_path: Path) -> None:
    rows = [frow(task="x0"), frow(task="x1"), frow("s2", task="x0"), frow(family="g", task="x0")]
    err = raises_at(read_futures, write_jsonl(tmp_path / "f.jsonl", rows), 4, "task")
    assert "duplicate" in err.message


@pytest.mark.parametrize("menu", [[], "", "[]"])
def test_empty_menu(tmp_path: Path, menu: Any) -> None:
    raises_at(read_futures, write_jsonl(tmp_path / "f.jsonl", [frow(task="x0"), frow(task="x1", menu=menu)]),
              2, "menu")


def test_empty_menu_csv(tmp_path: Path) -> None:
    p = write_text(tmp_path / "f.csv", "stream,family,context,task,menu\ns1,f,c,x0,A|B\ns1,f,c,x1,\n")
    raises_at(read_futures, p, 3, "menu")


@pytest.mark.parametrize("menu", [["A", "B", "A"], "A|B|A", '["B", "B"]', ["A", ""]])
def test_bad_labels_in_menu(tmp_path: Path, menu: Any) -> None:
    raises_at(read_futures, write_jsonl(tmp_path / "f.jsonl", [frow(task="x0"), frow(task="x1", menu=menu)]),
              2, "menu")


def test_feeds_family_without_context(tmp_path: Path) -> None:
    rows = [frow(task="x0"), frow(task="x1", feeds_family="f")]
    raises_at(read_futures, write_jsonl(tmp_path / "f.jsonl", rows), 2, "feeds_context")
    rows = [frow(task="x0", feeds_context="c")]
    raises_at(read_futures, write_jsonl(tmp_path / "g.jsonl", rows), 1, "feeds_family")


def test_duplicate_utility_row(tmp_path: Path) -> None:
    rows = [urow(key="A"), urow(key="B"), urow("s2", key="A"), urow(key="A", utility=0.9)]
    err = raises_at(read_evaluator, write_jsonl(tmp_path / "u.jsonl", rows), 4, "key")
    assert "duplicate" in err.message


def test_future_canonical_order_and_index() -> None:
    f = futures_from_tasks([frow("s1", "a", "c", "x0"), frow("s2", "a", "c", "y0"), frow("s1", "b", "c", "x1"),
                                frow("s1", "a", "c", "x2")])
    assert [t.task for t in f] == ["x0", "x2", "x1", "y0"]
    assert [t.index for t in f] == [0, 1, 0, 0]
    assert f.strata == (("a", "c"), ("b", "c"))
    assert f.streams == ("s1", "s2")


# ---------------------------------------------------------------- cross checks


def test_check_inputs_accepts_consistent_inputs() -> None:
    check_inputs(sample_history(), sample_futures(), sample_evaluator())


def test_check_inputs_key_outside_menus() -> None:
    h = history_from_records([hrow(slot=0, key="A"), hrow(slot=1, key="Z")], source="h.jsonl")
    f = futures_from_tasks([frow(menu=("A", "B"))], source="f.jsonl")
    with pytest.raises(InputError) as info:
        check_inputs(h, f)
    assert info.value.field == "key" and info.value.source == "h.jsonl"
    assert "'Z'" in info.value.message


def test_check_inputs_future_stream_without_history() -> None:
    h = history_from_records([hrow(slot=0)], source="h.jsonl")
    f = futures_from_tasks([frow(), frow("ghost", task="x1")], source="f.jsonl")
    with pytest.raises(InputError) as info:
        check_inputs(h, f)
    assert info.value.field == "stream" and info.value.source == "f.jsonl"
    assert "ghost" in info.value.message


def test_check_inputs_empty_feeding_block() -> None:
    h = history_from_records([hrow(slot=0, family="f", context="c")], source="h.jsonl")
    f = futures_from_tasks([frow(feeds_family="f", feeds_context="nowhere")], source="f.jsonl")
    with pytest.raises(InputError) as info:
        check_inputs(h, f)
    assert info.value.source == "f.jsonl"
    assert info.value.field == "feeds_family"
    assert "empty" in info.value.message
    # a block that exists in another stream only is still empty in this one
    h2 = history_from_records([hrow(slot=0), hrow("s2", "g", "d", 0)])
    f2 = futures_from_tasks([frow(feeds_family="g", feeds_context="d")])
    with pytest.raises(InputError):
        check_inputs(h2, f2)


def test_check_inputs_evaluator_missing_action() -> None:
    h = history_from_records([hrow(slot=0)])
    f = futures_from_tasks([frow(menu=("A", "B", "C"))])
    e = evaluator_from_rows([urow(key="A"), urow(key="B")], source="u.jsonl")
    with pytest.raises(InputError) as info:
        check_inputs(h, f, e)
    assert info.value.source == "u.jsonl" and info.value.field == "key"
    assert "'C'" in info.value.message
    e2 = evaluator_from_rows([urow(task="other", key="A")], source="u.jsonl")
    with pytest.raises(InputError) as info:
        check_inputs(h, f, e2)
    assert info.value.field == "task"


@pytest.mark.parametrize("fmt", FORMATS)
def test_strict_check_names_the_first_utility_row_of_a_task_that_is_not_a_future_task(tmp_path: Path,
                                                                                      fmt: str) -> None:
    """The CLI's strict check: a utility row for a task outside the future tasks is refused, naming the first such
    row of the file (its line), on the read (coded) table and on an API-built one alike; every row owned passes."""
    futures = sample_futures()
    rows = [urow(t.stream, t.task, a, 0.125 * (j + 1)) for t in futures for j, a in enumerate(t.menu)]
    extra = [urow("s2", "ghost", "A", 0.5), urow("s1", "spare", "B", 0.25)]
    rows = rows[:4] + extra + rows[4:]
    path = write_evaluator(evaluator_from_rows(rows, source="u"), tmp_path / f"u.{fmt}")
    history = sample_history()
    check_inputs(history, futures, read_evaluator(write_evaluator(sample_evaluator(), tmp_path / f"ok.{fmt}")),
                 strict=True)
    for evaluator in (read_evaluator(path), evaluator_from_rows(rows, source=str(path))):
        check_inputs(history, futures, evaluator)   # not strict: extra rows are the API's right
        with pytest.raises(InputError) as info:
            check_inputs(history, futures, evaluator, strict=True)
        err = info.value
        assert (err.source, err.field) == (str(path), "task")
        assert "'ghost'" in err.message and "'s2'" in err.message and "not a future task" in err.message
        assert err.line == _line_of_ghost(path, fmt)


def _line_of_ghost(path: Path, fmt: str) -> int:
    """The line (parquet: row) of the first 'ghost' row as the file was written."""
    if fmt == "parquet":
        import pandas as pd

        return int(np.flatnonzero(pd.read_parquet(path)["task"].to_numpy() == "ghost")[0]) + 1
    lines = path.read_text(encoding="utf-8").splitlines()
    return next(i + 1 for i, line in enumerate(lines) if "ghost" in line)


def test_from_columns_errors_use_row_numbers() -> None:
    base: dict[str, Any] = {"stream": ["s"] * 3, "family": ["f"] * 3, "context": ["c"] * 3, "slot": [0, 1, 2],
                            "task": ["a", "b", "c"], "key": ["A", "B", "A"], "outcome": [0.1, 0.2, 0.3]}
    History.from_columns(**base)
    with pytest.raises(InputError) as info:
        History.from_columns(**{**base, "outcome": [0.1, 1.2, 0.3]}, source="cols")
    assert (info.value.source, info.value.line, info.value.field) == ("cols", 2, "outcome")
    with pytest.raises(InputError) as info:
        History.from_columns(**{**base, "slot": [0, 1, 1]}, lines=[10, 20, 30])
    assert (info.value.line, info.value.field) == (30, "slot")
    with pytest.raises(InputError) as info:
        History.from_columns(**{**base, "key": ["A", "B"]})
    assert info.value.field == "key" and info.value.line is None


def test_future_strata_ranked_within_their_stream() -> None:
    # s1's strata are ordered by their first appearance among s1's tasks, not across all streams,
    # so the canonical order is idempotent under write -> read.
    f = futures_from_tasks([frow("s2", "b", "c", "y0"), frow("s1", "a", "c", "x0"), frow("s1", "b", "c", "x1")])
    assert [t.task for t in f] == ["y0", "x0", "x1"]
    again = futures_from_tasks(list(f.tasks))
    assert [t.task for t in again] == [t.task for t in f]
    assert again.fingerprint() == f.fingerprint()


@pytest.mark.parametrize("writer,reader,obj", [(write_history, read_history, sample_history),
                                               (write_futures, read_futures, sample_futures),
                                               (write_evaluator, read_evaluator, sample_evaluator)])
def test_tsv_round_trip(tmp_path: Path, writer: Any, reader: Any, obj: Any) -> None:
    original = obj()
    p = writer(original, tmp_path / "table.tsv")
    assert "\t" in p.read_text(encoding="utf-8").splitlines()[0]
    assert reader(p).fingerprint() == original.fingerprint()


def test_large_integer_slots_are_exact() -> None:
    big = 1_700_000_000_000_000_001
    h = history_from_records([hrow(slot=big), hrow(slot=big + 1, task="t2")])
    assert h.slot.tolist() == [big, big + 1]


def test_csv_menu_label_with_pipe_round_trips(tmp_path: Path) -> None:
    f = futures_from_tasks([frow(menu=("A|B", "C"))])
    assert read_futures(write_futures(f, tmp_path / "f.csv")).tasks[0].menu == ("A|B", "C")
