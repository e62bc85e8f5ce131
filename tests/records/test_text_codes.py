"""A history holds its text columns as (vocab, codes): every observable (columns, records, stream and label
order, selection, errors, fingerprint) is what the fixed-width layout gave, whichever way it is built."""

from __future__ import annotations

import hashlib
import importlib
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replaylens.errors import InputError
from replaylens.records import History, read_history, write_history

io_mod = importlib.import_module("replaylens.records._io")
codes_mod = importlib.import_module("replaylens.records._text_codes")
TEXT = ("stream", "family", "context", "task", "key")
NAMES = ("stream", "family", "context", "slot", "task", "key", "outcome", "event_time", "event_id", "metadata")

# values a reader keeps as they are (no surrounding whitespace): ASCII, accented, CJK, an inner space
WORD = st.sampled_from(["a", "b", "s-1", "ß", "流", "é x", "k" * 30, "clé"])


def _reference(rows: list[dict[str, object]]) -> dict[str, list[object]]:
    """The canonical columns by plain Python: rows ordered by (stream first appearance, slot)."""
    rank = {s: i for i, s in enumerate(dict.fromkeys(r["stream"] for r in rows))}
    ordered = sorted(rows, key=lambda r: (rank[r["stream"]], r["slot"]))
    return {name: [r[name] for r in ordered] for name in NAMES}


def _reference_fingerprint(cols: dict[str, list[object]]) -> str:
    """The fixed-width layout's fingerprint, by plain Python: each column's name, then its bytes (numbers as
    int64/float64, text joined with US separators)."""
    h = hashlib.sha256()
    for name in NAMES:
        h.update(name.encode())
        col = cols[name]
        if name == "slot":
            h.update(np.asarray(col, dtype=np.int64).tobytes())
        elif name in ("outcome", "event_time"):
            h.update(np.asarray(col, dtype=np.float64).tobytes())
        else:
            h.update("\x1f".join(str(v) for v in col).encode())
    return h.hexdigest()


@st.composite
def _rows(draw: st.DrawFn) -> list[dict[str, object]]:
    n_streams = draw(st.integers(1, 4))
    streams = [f"{draw(WORD)}#{i}" for i in range(n_streams)]
    rows = []
    for s in streams:
        slots = draw(st.lists(st.integers(0, 50), min_size=1, max_size=6, unique=True))
        for sl in slots:
            rows.append({"stream": s, "family": draw(WORD), "context": draw(WORD), "slot": sl,
                         "task": f"{draw(WORD)}-{s}-{sl}", "key": draw(WORD),
                         "outcome": draw(st.sampled_from([0.0, 0.25, 1.0, math.nan])), "event_time": math.nan,
                         "event_id": "", "metadata": ""})
    return draw(st.permutations(rows))


def _from_columns(rows: list[dict[str, object]]) -> History:
    return History.from_columns(**{name: [r[name] for r in rows] for name in NAMES[:-3]})  # type: ignore[arg-type]


def _same_as_reference(h: History, ref: dict[str, list[object]]) -> None:
    cols = h.to_columns()
    for name in TEXT:
        assert cols[name].dtype.kind == "U" and cols[name].tolist() == ref[name]
        assert getattr(h, name).tolist() == ref[name]
        vocab, codes = h.text_codes(name)
        assert vocab.dtype.kind == "U" and codes.dtype == np.int32 and not codes.flags.writeable
        assert len(set(vocab.tolist())) == vocab.size                         # distinct
        assert np.bincount(codes, minlength=vocab.size).min() > 0              # every value used
        assert vocab[codes].tolist() == ref[name]
        assert h.text(name, slice(1, 3)).tolist() == ref[name][1:3]
    assert cols["slot"].tolist() == ref["slot"]
    np.testing.assert_array_equal(cols["outcome"], np.asarray(ref["outcome"], dtype=np.float64))
    streams = tuple(dict.fromkeys(ref["stream"]))
    assert h.streams == streams and h.text_codes("stream")[0].tolist() == list(streams)
    assert h.labels == tuple(dict.fromkeys(ref["key"]))
    for s in streams:
        at = [i for i, v in enumerate(ref["stream"]) if v == s]
        assert h.stream_slice(s) == slice(at[0], at[-1] + 1)
        assert h.blocks(s) == tuple(dict.fromkeys((ref["family"][i], ref["context"][i]) for i in at))
        assert [r.task for r in h.records(s)] == [ref["task"][i] for i in at]
    got = [(r.stream, r.family, r.context, r.slot, r.task, r.key) for r in h.records()]
    assert got == list(zip(*(ref[n] for n in ("stream", "family", "context", "slot", "task", "key")), strict=True))
    assert h.fingerprint() == _reference_fingerprint(ref)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=_rows())
def test_parquet_jsonl_and_from_columns_give_the_reference_history(rows: list[dict[str, object]],
                                                                   tmp_path: Path) -> None:
    ref = _reference(rows)
    built = _from_columns(rows)
    _same_as_reference(built, ref)
    for suffix in (".parquet", ".jsonl"):
        p = write_history(built, tmp_path / f"h{suffix}")
        if suffix == ".parquet" and not all(math.isnan(float(o)) for o in ref["outcome"]):  # (all null: untyped)
            # the columnar path, not the row reader
            assert io_mod._history_from_arrow(pq.read_table(p), str(p)) is not None
        read = read_history(p)
        _same_as_reference(read, ref)
        assert read.fingerprint() == built.fingerprint()
    some = list(dict.fromkeys(ref["stream"]))[::2]
    sel = built.select(some)
    _same_as_reference(sel, _reference([r for r in rows if r["stream"] in some]))


def test_dictionary_parquet_values_equal_once_trimmed_share_a_code(tmp_path: Path) -> None:
    text = {"stream": ["s1", "s1 ", " s1", "s2"], "family": ["f", "f", "f", "f"], "context": ["c", "c ", "c", "c"],
            "task": ["t0", "t1", "t2", "t3"], "key": ["k", " k", "k\t", "é"]}
    table = pa.table({**{k: pa.array(v).dictionary_encode() for k, v in text.items()},
                      "slot": pa.array([0, 1, 2, 0]), "outcome": pa.array([0.1, 0.2, 0.3, 0.4])})
    p = tmp_path / "h.parquet"
    pq.write_table(table, p)
    assert io_mod._history_from_arrow(pq.read_table(p), str(p)) is not None
    h = read_history(p)
    assert h.streams == ("s1", "s2") and h.labels == ("k", "é")
    assert h.text_codes("stream")[1].tolist() == [0, 0, 0, 1]
    assert h.text_codes("context")[0].tolist() == ["c"]
    plain = History.from_columns(**{k: [v.strip() for v in vs] for k, vs in text.items()},  # type: ignore[arg-type]
                                 slot=[0, 1, 2, 0], outcome=[0.1, 0.2, 0.3, 0.4], source=str(p), line_word="row")
    assert h.fingerprint() == plain.fingerprint()


def _pinned() -> History:
    return History.from_columns(
        stream=["s-b", "s-a", "s-b", "s-a", "ß流", "s-b"], family=["fam", "fam", "fam2", "fam", "famé", "fam2"],
        context=["c1", "c1", "c2", "c1", "c✓", "c2"], slot=[2, 0, 0, 5, 1, 1],
        task=["t-b2", "t-a0", "t-b0", "t-a5", "tâche", "t-b1"], key=["k1", "k2", "k1", "k3", "clé", "k2"],
        outcome=[0.5, float("nan"), 1.0, 0.0, 0.25, 0.75], event_time=[1.0, 2.0, float("nan"), 4.0, 5.0, 6.0],
        event_id=["", "e1", "", "e2", "", ""], metadata=["", '{"a": 1}', "", "", "", ""],
    )


def test_fingerprints_are_the_fixed_width_layouts() -> None:
    # digests computed on the fixed-width layout (main at 6690147) before the columns became codes
    h = _pinned()
    assert h.fingerprint() == "33f264d03082fe048e5b5cf8c1cb8236aa3332572b0d31e1c9797798216cee18"
    assert h.streams == ("s-b", "s-a", "ß流") and h.labels == ("k1", "k2", "k3", "clé")
    assert h.task.tolist() == ["t-b0", "t-b1", "t-b2", "t-a0", "t-a5", "tâche"]
    small = History.from_columns(stream=["a", "a", "b"], family=["f"] * 3, context=["c"] * 3, slot=[0, 1, 0],
                                 task=["x", "y", "z"], key=["p", "q", "p"], outcome=[0.1, 0.2, 0.3])
    assert small.fingerprint() == "b1d69cb53c68ac6b2c95671dc86c7ca2d850dfa66cbb03e7ade8c49ee61d0624"


@pytest.mark.parametrize(("column", "values", "line", "message"), [
    ("stream", ["a", " ", "b"], 2, "must not be empty"),
    ("key", ["k", "k", ""], 3, "must not be empty"),
    ("task", ["t", "\x1c", "u"], 2, "must not be empty"),
])
def test_from_coded_reports_what_from_columns_reports(column: str, values: list[str], line: int,
                                                      message: str) -> None:
    cols: dict[str, list[str]] = {name: ["v1", "v2", "v3"] for name in TEXT}
    cols[column] = values
    kw = {"slot": [0, 1, 2], "outcome": [0.1, 0.2, 0.3], "source": "h.csv"}
    with pytest.raises(InputError) as plain:
        History.from_columns(**cols, **kw)  # type: ignore[arg-type]
    coded = {name: codes_mod.encode_text(np.asarray(v, dtype=str)) for name, v in cols.items()}
    with pytest.raises(InputError) as by_codes:
        History.from_coded(text=coded, **kw)  # type: ignore[arg-type]
    assert str(plain.value) == str(by_codes.value)
    assert str(plain.value) == f"h.csv:{line}: field {column!r}: {message}"


def test_duplicate_slot_names_the_stream_and_line() -> None:
    with pytest.raises(InputError) as err:
        History.from_columns(stream=["ß", "b", "ß"], family=["f"] * 3, context=["c"] * 3, slot=[1, 0, 1],
                             task=["x", "y", "z"], key=["k"] * 3, outcome=[0.1, 0.2, 0.3], source="h.csv")
    assert str(err.value) == "h.csv:3: field 'slot': duplicate slot 1 in stream 'ß'"


@given(st.lists(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=6),
                min_size=1, max_size=30))
def test_encoded_text_decodes_to_the_column(values: list[str]) -> None:
    col = np.asarray(values, dtype=str)
    vocab, codes = codes_mod.encode_text(col)
    assert len(set(vocab.tolist())) == vocab.size
    assert vocab[codes].tolist() == col.tolist()
    packed = codes_mod.pack(vocab)
    assert codes_mod.decode(packed, codes).tolist() == col.tolist()
    assert codes_mod.decode_bytes(packed).tolist() == vocab.tolist()
    assert (packed.dtype.kind == "S") == (vocab.size > 0 and all(v.isascii() for v in vocab.tolist())
                                            and vocab.dtype.itemsize > 0)


def test_from_coded_refuses_codes_outside_the_vocab_and_unknown_columns() -> None:
    text = {name: (np.array(["a", "b"]), np.array([0, 1, 1], dtype=np.int32)) for name in TEXT}
    h = History.from_coded(text=text, slot=[0, 1, 2], outcome=[0.1, 0.2, 0.3])
    assert h.streams == ("a", "b") and h.key.tolist() == ["a", "b", "b"]
    with pytest.raises(KeyError, match="not a text column"):
        h.text_codes("outcome")
    bad = {**text, "key": (np.array(["a"]), np.array([0, 1, 0], dtype=np.int32))}
    with pytest.raises(ValueError, match="text codes"):
        History.from_coded(text=bad, slot=[0, 1, 2], outcome=[0.1, 0.2, 0.3])


def test_held_nbytes_counts_the_vocab_as_held_and_the_codes() -> None:
    # 'stream' here: ASCII vocab ("a", "b") held as 1-byte text, one int32 code a row; 'key' holds "clé": not ASCII,
    # so its vocab stays 4 bytes a character
    h = History.from_columns(stream=["a", "a", "b"], family=["f"] * 3, context=["c"] * 3, slot=[0, 1, 0],
                             task=["x", "y", "z"], key=["p", "clé", "p"], outcome=[0.1, 0.2, 0.3])
    assert h.held_nbytes("stream") == 2 * 1 + 3 * 4
    assert h.held_nbytes("key") == 2 * 3 * 4 + 3 * 4
    with pytest.raises(KeyError, match="not a text column"):
        h.held_nbytes("slot")
