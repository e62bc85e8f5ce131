"""Reading and writing histories, future task sets and utility tables (JSONL, CSV, Parquet).

The schema is documented in ``docs/guide/schema.md``.  Every reader validates as it goes and raises
:class:`~replaylens.errors.InputError` naming the file, line and field of the first problem.
"""

from __future__ import annotations

import csv
import json
import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._memory import release_freed_memory
from ..errors import InputError
from ._arrow_rows import ArrowRows, arrow_codes, ascii_text_array, clean_words, is_coded_text, is_text, text_codes
from ._coded_table import CodedTable
from ._codes import distinct, has_duplicates
from ._columns import Field, RawTable, infer_format, read_parquet_table, read_raw
from ._futures import FutureTask, FutureTasks, future_dict
from ._futures_arrow import futures_from_arrow
from ._history import Evaluator, History, Record, record_dict
from ._memo import passed, remember_passed
from ._text_codes import TextCodes, numpy_words

__all__ = [
    "EVALUATOR_FIELDS",
    "FUTURE_FIELDS",
    "HISTORY_FIELDS",
    "check_inputs",
    "evaluator_from_rows",
    "futures_from_tasks",
    "history_from_records",
    "read_evaluator",
    "read_futures",
    "read_history",
    "write_evaluator",
    "write_futures",
    "write_history",
]

HISTORY_FIELDS = ("stream", "family", "context", "slot", "task", "key", "outcome", "event_time", "event_id",
                  "metadata")
HISTORY_REQUIRED = ("stream", "family", "context", "slot", "task", "key", "outcome")
FUTURE_FIELDS = ("stream", "family", "context", "task", "menu", "feeds_family", "feeds_context", "metadata")
EVALUATOR_FIELDS = ("stream", "task", "key", "utility")


def _reject_unknown(t: RawTable, allowed: Sequence[str]) -> None:
    ok = set(allowed)
    for i, row in enumerate(t.rows):
        for k in row:
            if k not in ok:
                raise InputError(t.source, t.lines[i], k, f"unknown field; allowed fields: {', '.join(allowed)}")


def history_from_records(records: Sequence[Record | Mapping[str, Any]], source: str = "<memory>") -> History:
    """A validated :class:`History` from :class:`Record` objects or mappings with the documented field names
    (the same checks and messages as the file readers)."""
    rows = [r if isinstance(r, Mapping) else record_dict(r) for r in records]
    return history_from_rows(rows, source=source, lines=None)


def futures_from_tasks(tasks: Sequence[FutureTask | Mapping[str, Any]], source: str = "<memory>") -> FutureTasks:
    """A validated :class:`FutureTasks` from :class:`FutureTask` objects or mappings (canonical order)."""
    rows = [t if isinstance(t, Mapping) else future_dict(t) for t in tasks]
    return futures_from_rows(rows, source=source, lines=None)


def history_from_rows(rows: Sequence[Mapping[str, Any]], source: str, lines: Sequence[int] | None,
                      line_word: str = "line", typed: bool = False) -> History:
    t = RawTable(source, [dict(r) for r in rows], list(lines) if lines is not None else
                 list(range(1, len(rows) + 1)), line_word, typed)
    if not t.rows:
        raise InputError(source, None, None, "the history has no records")
    _reject_unknown(t, HISTORY_FIELDS)
    f = Field(t)
    n = len(t.rows)
    cols: dict[str, list[Any]] = {k: [] for k in HISTORY_FIELDS}
    for i in range(n):
        cols["stream"].append(f.string(i, "stream"))
        cols["family"].append(f.string(i, "family"))
        cols["context"].append(f.string(i, "context"))
        cols["slot"].append(f.integer(i, "slot"))
        cols["task"].append(f.string(i, "task"))
        cols["key"].append(f.string(i, "key"))
        if "outcome" not in t.rows[i]:  # present; null means masked
            raise f.err(i, "outcome", "missing required field (use null for a masked outcome)")
        cols["outcome"].append(f.number(i, "outcome", required=False, allow_nan=True, bounds=(0.0, 1.0)))
        cols["event_time"].append(f.number(i, "event_time", required=False, allow_nan=True))
        cols["event_id"].append(f.string(i, "event_id", required=False) or "")
        cols["metadata"].append(f.mapping(i, "metadata"))
    return History.from_columns(**cols, source=source, lines=t.lines, line_word=t.line_word)  # type: ignore[arg-type]


def futures_from_rows(rows: Sequence[Mapping[str, Any]], source: str, lines: Sequence[int] | None) -> FutureTasks:
    # lazy table rows are read as they are (a dict per row at once would cost ~1 kB a row)
    t = RawTable(source, rows if isinstance(rows, ArrowRows) else [dict(r) for r in rows],
                 list(lines) if lines is not None else range(1, len(rows) + 1))
    if not t.rows:
        raise InputError(source, None, None, "the future task set is empty")
    _reject_unknown(t, FUTURE_FIELDS)
    f = Field(t)
    out: list[FutureTask] = []
    seen: set[tuple[str, str]] = set()
    counter: dict[tuple[str, str, str], int] = {}
    for i in range(len(t.rows)):
        stream = f.string(i, "stream")
        fam = f.string(i, "family")
        ctx = f.string(i, "context")
        task = f.string(i, "task")
        assert stream is not None and fam is not None and ctx is not None and task is not None
        menu = f.labels(i, "menu")
        ff = f.string(i, "feeds_family", required=False)
        fc = f.string(i, "feeds_context", required=False)
        if (ff is None) != (fc is None):
            raise f.err(i, "feeds_context" if fc is None else "feeds_family",
                        "feeds_family and feeds_context must be given together")
        meta = f.mapping(i, "metadata")
        if (stream, task) in seen:
            raise f.err(i, "task", f"duplicate future task {task!r} in stream {stream!r}")
        seen.add((stream, task))
        k = (stream, fam, ctx)
        idx = counter.get(k, 0)
        counter[k] = idx + 1
        out.append(FutureTask(stream, fam, ctx, task, menu, idx, None if ff is None else (ff, fc or ""),
                              json.loads(meta) if meta else None))
    # canonical order: stream first appearance, then stratum first appearance within it, then index
    s_rank = {s: i for i, s in enumerate(dict.fromkeys(x.stream for x in out))}
    r_rank = {r: i for i, r in enumerate(dict.fromkeys((x.stream, x.stratum) for x in out))}
    out.sort(key=lambda x: (s_rank[x.stream], r_rank[(x.stream, x.stratum)], x.index))
    return FutureTasks(tuple(out), source=source)


def evaluator_from_rows(rows: Sequence[Mapping[str, Any]], source: str = "<memory>",
                        lines: Sequence[int] | None = None, typed: bool = False) -> Evaluator:
    """A validated :class:`Evaluator` (utility table) from mappings with stream, task, key and utility
    (``typed``: the file format has typed numbers, so a quoted number is an error)."""
    rows = list(rows)
    t = RawTable(source, [dict(r) for r in rows], list(lines) if lines is not None else
                 list(range(1, len(rows) + 1)), typed=typed)
    if not t.rows:
        raise InputError(source, None, None, "the utility table is empty")
    _reject_unknown(t, EVALUATOR_FIELDS)
    f = Field(t)
    table: dict[tuple[str, str], dict[str, float]] = {}
    for i in range(len(t.rows)):
        stream = f.string(i, "stream")
        task = f.string(i, "task")
        key = f.string(i, "key")
        assert stream is not None and task is not None and key is not None
        u = f.number(i, "utility")
        row = table.setdefault((stream, task), {})
        if key in row:
            raise f.err(i, "key", f"duplicate utility for action {key!r} of task {task!r} in stream {stream!r}")
        row[key] = u
    return Evaluator(table, source=source)


def _history_from_arrow(table: Any, source: str, line_word: str = "row") -> History | None:
    """Columnar fast path for a well-typed Parquet history (no per-record Python objects for the
    repeated string columns: they are dictionary-encoded).  ``None`` whenever any column is not
    plainly valid; the row-by-row reader then reports the first problem with its usual message."""
    cols = _history_columns(table)
    return None if cols is None else _history_of(cols, source, line_word)


def _history_of(cols: dict[str, Any], source: str, line_word: str) -> History:
    """The history of :func:`_history_columns`' fresh columns (kept, not copied)."""
    n = len(cols["slot"])
    return History.from_coded(**cols, source=source, lines=range(1, n + 1), line_word=line_word, copy=False)


def _mostly_distinct(col: Any, sample: int = 4096) -> bool:
    """Whether a text column's first ``sample`` values are mostly distinct (then dictionary encoding costs more
    than it saves).  Decides only how the column is converted, never what it holds."""
    import pyarrow.compute as pc

    head = col.slice(0, sample)
    return len(head) > 0 and pc.count_distinct(head).as_py() * 2 > len(head)


def _history_columns(table: Any) -> dict[str, Any] | None:
    """The columns of :func:`_history_from_arrow` (text trimmed and checked; stream, family, context, task and
    key as ``text[name] = (vocab, codes)``, never as fixed-width text), or ``None``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = set(table.column_names)
    n = table.num_rows
    if n == 0 or not names <= set(HISTORY_FIELDS) or not set(HISTORY_REQUIRED) <= names:
        return None
    if "metadata" in names and table.column("metadata").null_count != n:
        return None

    def strings(name: str) -> np.ndarray | None:   # an optional text column (null reads "") as numpy text
        col = table.column(name)
        if is_coded_text(col.type):   # read dictionary-encoded: the distinct values trimmed
            words, codes = arrow_codes(col)
            words = pc.utf8_trim_whitespace(words)
            return np.asarray([*words.to_pylist(), ""], dtype=str)[codes]   # code −1 (null) reads ""
        if not is_text(col.type):
            return None
        col = pc.utf8_trim_whitespace(col).fill_null("")
        if _mostly_distinct(col):   # e.g. event ids: laid out from the arrow buffers when plain ASCII
            laid = ascii_text_array(col)
            if laid is not None:
                return laid
        vocab, codes = text_codes(col)
        return np.asarray(vocab, dtype=str)[codes]

    def coded(name: str) -> TextCodes | None:   # a required text column as (vocab, codes)
        col = table.column(name)
        if is_coded_text(col.type):   # read dictionary-encoded: the distinct values trimmed and checked
            words, codes = arrow_codes(col)
            if (codes < 0).any():
                return None
            words = pc.utf8_trim_whitespace(words)
            used = np.bincount(codes, minlength=len(words)) > 0
            empty = pc.equal(pc.utf8_length(words), 0).to_numpy(zero_copy_only=False)
            if (empty & used).any():
                return None
            words, merged = arrow_codes(words)   # values equal once trimmed share one code
            codes = merged[codes]
        elif is_text(col.type):
            col = pc.utf8_trim_whitespace(col)
            if col.null_count or pc.any(pc.equal(pc.utf8_length(col), 0)).as_py():
                return None
            words, codes = arrow_codes(col)
        else:
            return None
        vocab, remap = numpy_words(words)
        return vocab, remap[codes]

    def numbers(name: str) -> np.ndarray | None:
        col = table.column(name)
        if not (pa.types.is_floating(col.type) or pa.types.is_integer(col.type)):
            return None
        num = pc.cast(col, pa.float64())
        out = np.asarray((num.fill_null(np.nan) if num.null_count else num).to_numpy(), dtype=np.float64)
        return None if np.isinf(out).any() else out

    text = {name: coded(name) for name in ("stream", "family", "context", "task", "key")}
    if any(v is None for v in text.values()):
        return None
    cols: dict[str, Any] = {"text": text}
    slot = table.column("slot")
    if not pa.types.is_integer(slot.type) or slot.null_count:
        return None
    cols["slot"] = slot.to_numpy().astype(np.int64)
    cols["outcome"] = numbers("outcome")
    if "event_time" in names:
        cols["event_time"] = numbers("event_time")
    if "event_id" in names:
        cols["event_id"] = strings("event_id")
    if any(v is None for v in cols.values()) or (cols["slot"] < 0).any():
        return None
    u = cols["outcome"]
    if ((u < 0.0) | (u > 1.0)).any():
        return None
    return cols


def _arrow_jsonl(p: Path, required: str = "outcome") -> Any:
    """The JSONL file as a ``pyarrow.Table`` when pyarrow reads it as one object per line (no BOM,
    no blank lines, consistent types, every line with a ``required`` key); else ``None`` (the row reader
    takes over)."""
    import io

    import pyarrow.json as pj

    data = p.read_bytes()
    if not data.strip() or data.startswith(b"\xef\xbb\xbf"):
        return None
    try:
        data.decode("utf-8")  # pyarrow does not check; the row reader names the bad byte's line
    except UnicodeDecodeError:
        return None
    try:
        table = pj.read_json(io.BytesIO(data))
    except Exception:  # any parse or type-inference problem: the row reader reports it precisely
        return None
    n_lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    # every line must *have* the required key (a history's outcome: null = masked, absent = an error); a
    # JSON string value is never followed by ':', so this counts keys only
    if table.num_rows != n_lines or data.count(f'"{required}":'.encode()) != n_lines:
        return None
    return table


def read_history(path: str | os.PathLike[str], fmt: str | None = None) -> History:
    """Read and validate a history file (JSONL, CSV or Parquet; see docs/guide/schema.md).

    A well-typed Parquet or JSONL file is read column by column through pyarrow; anything else (or any
    problem) goes through the row reader, which names the file, row and field."""
    p = Path(path)
    table, kind = _arrow_table(p, fmt, "outcome", ("stream", "family", "context", "key", "event_id"))
    cols = None if table is None else _history_columns(table)
    del table
    release_freed_memory()   # the file's table goes before the history is built from its columns
    if cols is not None:
        history = _history_of(cols, str(p), "row" if kind == "parquet" else "line")
        del cols
        release_freed_memory()
        return history
    t = read_raw(p, fmt)
    return history_from_rows(t.rows, t.source, t.lines, t.line_word, t.typed)


def _arrow_table(p: Path, fmt: str | None, required: str, coded: Sequence[str] = ()) -> tuple[Any, str | None]:
    """``(table, format)``: the file as a ``pyarrow.Table`` when it is Parquet (the ``coded`` text columns
    dictionary-encoded where the file stores them so), or JSONL that pyarrow reads as one object per line with
    a ``required`` key on each; else ``(None, format)`` for the row reader."""
    kind = infer_format(p, fmt) if p.is_file() else None
    if kind == "parquet":
        return read_parquet_table(p, coded), kind
    if kind == "jsonl":
        return _arrow_jsonl(p, required), kind
    return None, kind


def read_futures(path: str | os.PathLike[str], fmt: str | None = None) -> FutureTasks:
    """Read and validate a future task file.

    A Parquet or JSONL file of text and list-of-text columns is read through pyarrow and validated row by
    row without materializing every row (same checks and messages as the row reader)."""
    p = Path(path)
    table, _ = _arrow_table(p, fmt, "menu", ("stream", "family", "context"))
    fast = None if table is None else futures_from_arrow(table, str(p))  # plainly valid: by columns
    if fast is not None:
        del table
        release_freed_memory()
        return fast
    if table is not None and any(is_coded_text(t) for t in table.schema.types):
        table, _ = _arrow_table(p, fmt, "menu")   # the row checks read plain text columns
    rows = None if table is None or table.num_rows == 0 else ArrowRows.of(table)
    if rows is not None:
        return futures_from_rows(rows, str(p), range(1, len(rows) + 1))
    t = read_raw(p, fmt)
    return futures_from_rows(t.rows, t.source, t.lines)


def _evaluator_columns(table: Any) -> tuple[list[Any], list[np.ndarray], np.ndarray] | None:
    """A plainly valid utility table's columns (stream, task and key vocabularies and codes, utilities), read
    column by column (strings dictionary-encoded, no per-row dicts); ``None`` for anything else, which the row
    reader then reports with its file, row and field."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = table.column_names
    if table.num_rows == 0 or sorted(names) != sorted(EVALUATOR_FIELDS):
        return None
    words: list[Any] = []
    codes: list[np.ndarray] = []
    for name in ("stream", "task", "key"):
        col = table.column(name)
        if not (is_text(col.type) or is_coded_text(col.type)) or col.null_count:
            return None
        vocab, code = arrow_codes(col)
        if not clean_words(vocab):  # the row reader trims and rejects empty labels
            return None
        words.append(vocab)
        codes.append(code)
    col = table.column("utility")
    if not (pa.types.is_floating(col.type) or pa.types.is_integer(col.type)) or col.null_count:
        return None
    util = np.asarray(pc.cast(col, pa.float64()).to_numpy(), dtype=np.float64)
    if not np.isfinite(util).all():
        return None
    sizes = [len(w) for w in words]
    if _runs_without_repeated_keys(codes, sizes):
        return words, codes, util
    if sizes[0] * sizes[1] * sizes[2] < 2**62:
        flat = (codes[0] * sizes[1] + codes[1]) * sizes[2] + codes[2]
        duplicated = has_duplicates(flat)   # one sort (numpy's hashing np.unique is far slower on 10^6 codes)
    else:
        duplicated = np.unique(np.stack(codes, axis=1), axis=0).shape[0] != util.size
    if duplicated:
        return None
    return words, codes, util


def _runs_without_repeated_keys(codes: list[np.ndarray], sizes: list[int]) -> bool:
    """Whether the rows come task by task (each (stream, task) one run of rows, as a file written task by task)
    with no key twice in a run: then no (stream, task, key) is repeated.  Checked with one bit per key (at most
    56 keys): a run's keys are distinct exactly when the sum of their bits is their OR (no sort of every row).
    ``False`` says only that this shortcut does not apply."""
    s, t, k = codes
    if sizes[2] > 56 or sizes[0] * max(sizes[1], 1) >= 2**62:
        return False
    pair = s * max(sizes[1], 1) + t
    starts = np.flatnonzero(np.r_[True, pair[1:] != pair[:-1]])
    if (np.diff(np.r_[starts, pair.size]) > sizes[2]).any() or has_duplicates(pair[starts]):
        return False   # a run longer than the key vocabulary repeats a key; a task in two runs
    bits = np.left_shift(np.int64(1), k)   # runs of at most 56 bits of at most 2**55: no overflow
    return bool((np.add.reduceat(bits, starts) == np.bitwise_or.reduceat(bits, starts)).all())


def read_evaluator(path: str | os.PathLike[str], fmt: str | None = None) -> Evaluator:
    """Read and validate a counterfactual utility table.

    A well-typed Parquet or JSONL file is read column by column through pyarrow; anything else (or any
    problem) goes through the row reader, which names the file, row and field."""
    p = Path(path)
    table, _ = _arrow_table(p, fmt, "utility", ("stream", "task", "key"))
    cols = None if table is None else _evaluator_columns(table)
    del table
    release_freed_memory()   # before the table's index is built: the file's text is encoded by now
    if cols is not None:
        (s_words, t_words, k_words), codes, util = cols
        del cols
        evaluator = Evaluator(CodedTable(s_words.to_pylist(), t_words, k_words.to_pylist(), codes[0], codes[1],
                                         codes[2], util), source=str(p))
        del codes, util
        release_freed_memory()
        return evaluator
    t = read_raw(p, fmt)
    return evaluator_from_rows(t.rows, t.source, t.lines, t.typed)


def _stream_runs(history: History) -> tuple[list[str], np.ndarray]:
    """The history's streams (in row order, each one contiguous: rows are sorted by stream) and each row's
    stream index (the stream codes: a stream's code is its rank)."""
    return list(history.streams), history.text_codes("stream")[1].astype(np.int64)


def check_inputs(history: History, futures: FutureTasks, evaluator: Evaluator | None = None, *,
                 strict: bool = False) -> None:
    """Cross-check the three inputs of an audit (see :func:`_check_inputs`); a check these very objects (immutable:
    a history, a task set, a file-read evaluator) passed before is not run again."""
    cacheable = evaluator is None or isinstance(evaluator.table, CodedTable)  # a dict table may be mutated
    others: tuple[object, ...] = (futures,) if evaluator is None else (futures, evaluator)
    name = f"check_inputs:{int(strict and evaluator is not None)}"
    if cacheable and passed(history, name, others):
        return
    _check_inputs(history, futures, evaluator, strict=strict)
    if cacheable:
        remember_passed(history, name, others)
        if evaluator is not None:  # the strict check implies the plain one, which implies the one without utilities
            remember_passed(history, "check_inputs:0", others)
            remember_passed(history, "check_inputs:0", (futures,))


def _check_inputs(history: History, futures: FutureTasks, evaluator: Evaluator | None = None, *,
                  strict: bool = False) -> None:
    """Cross-check the three inputs of an audit; raise InputError naming the file/line/field.

    * every future stream has history records, every ``feeds`` block exists in its stream;
    * every history key is an action of some menu of its stream (shared namespace);
    * the evaluator has a utility for every menu action of every future task;
    * ``strict`` (the CLI's input files): the evaluator has no rows for tasks that are not future tasks
      (the Python API may replay a subset of the tasks an evaluator covers).

    The checks run on integer codes (a pass over the tasks, none over the records in Python); the first
    problem reported is the one a task-by-task, then record-by-record scan meets first.
    """
    cols = futures.columns
    names, h_sid = _stream_runs(history)
    s_pos = {s: i for i, s in enumerate(names)}
    f_sid = np.array([s_pos.get(s, -1) for s in cols.streams], dtype=np.int64)[cols.stream]
    bad = f_sid < 0
    fed = np.flatnonzero(cols.feed >= 0)
    if fed.size:  # a feeds block must have records in the task's stream
        blocks = _stream_blocks(history)
        for i in fed.tolist():
            if (cols.streams[int(cols.stream[i])], *cols.feeds[int(cols.feed[i])]) not in blocks:
                bad[i] = True
    first = np.flatnonzero(bad)
    if first.size:
        i = int(first[0])
        t = cols.build(np.array([i]))[0]
        if f_sid[i] < 0:
            raise InputError(futures.source, _line_of(futures.source, stream=t.stream, task=t.task), "stream",
                             f"future task {t.task!r} (#{i + 1}) names stream {t.stream!r}, which has no history "
                             "records")
        assert t.feeds is not None
        raise InputError(futures.source, None, "feeds_family",
                         f"future task {t.task!r} of stream {t.stream!r} is fed by block "
                         f"{t.feeds[0]}/{t.feeds[1]}, which is empty (no records) in that stream")
    # every history key of a stream with future tasks is in one of that stream's menus
    n_menus = len(cols.menus)
    k_words, k_code = history.text_codes("key")
    vocab = {k: j for j, k in enumerate(k_words.tolist())}
    for m in cols.menus:
        for a in m:
            vocab.setdefault(a, len(vocab))
    menu_codes = [np.array([vocab[a] for a in m], dtype=np.int64) for m in cols.menus]
    width = len(vocab)
    pairs = distinct(f_sid * n_menus + cols.menu)   # distinct (stream, menu)
    p_sid, p_menu = pairs // n_menus, pairs % n_menus
    lens = np.array([c.size for c in menu_codes], dtype=np.int64)[p_menu]
    allowed = distinct(np.repeat(p_sid, lens) * width +
                        (np.concatenate([menu_codes[j] for j in p_menu.tolist()]) if pairs.size else
                         np.zeros(0, dtype=np.int64)))
    has_future = np.zeros(len(names), dtype=bool)
    has_future[f_sid] = True
    rows = has_future[h_sid] & ~np.isin(h_sid * width + k_code.reshape(-1), allowed)
    wrong = np.flatnonzero(rows)
    if wrong.size:
        j = int(wrong[0])
        s, k, sl = names[int(h_sid[j])], str(k_words[k_code[j]]), int(history.slot[j])
        menu = sorted({a for t in futures.view(futures.rows_of(s)) for a in t.menu})
        raise InputError(history.source, _line_of(history.source, stream=s, slot=str(sl)), "key",
                         f"key {k!r} at slot {sl} of stream {s!r} is not an "
                         f"action of any menu of that stream ({', '.join(menu)})")
    if evaluator is not None:
        evaluator.check_covers(futures)
    if evaluator is not None and strict:
        table = evaluator.table
        if isinstance(table, CodedTable):   # on codes: the first row (in the table's order) no future task owns
            owned = table.rows_for(cols.streams, cols.stream, cols.task_text)
            spare = np.ones(len(table), dtype=bool)
            spare[owned[owned >= 0]] = False
            rows = np.flatnonzero(spare)
            stray = table.key_at(int(rows[0])) if rows.size else None
        else:
            known = set(zip((cols.streams[i] for i in cols.stream.tolist()), cols.task.tolist(), strict=True))
            stray = next((key for key in table if key not in known), None)
        if stray is not None:
            s, task = stray
            raise InputError(evaluator.source, _line_of(evaluator.source, stream=s, task=task), "task",
                             f"utilities for task {task!r} of stream {s!r}, which is not a future task "
                             f"(in {futures.source})")


def _stream_blocks(history: History) -> set[tuple[str, str, str]]:
    """Every (stream, family, context) of the history, looked up on codes (once per run of equal rows)."""
    (sv, sc), (fv, fc), (cv, cc) = (history.text_codes(name) for name in ("stream", "family", "context"))
    start = np.flatnonzero(np.r_[True, (sc[1:] != sc[:-1]) | (fc[1:] != fc[:-1]) | (cc[1:] != cc[:-1])])
    return set(zip(sv[sc[start]].tolist(), fv[fc[start]].tolist(), cv[cc[start]].tolist(), strict=True))


def _line_of(source: str, **match: str) -> int | None:
    """The line (row) of the first record of file ``source`` whose fields equal ``match`` (as text);
    ``None`` for in-memory inputs.  Only called on an error path, so re-reading the file is fine."""
    p = Path(source)
    if not p.is_file():
        return None
    try:
        t = read_raw(p)
    except (InputError, OSError):
        return None
    for row, line in zip(t.rows, t.lines, strict=True):
        if all(str(row.get(k, "")).strip() == v for k, v in match.items()):
            return int(line)
    return None


# ---------------------------------------------------------------- writing


def _json_default(v: Any) -> Any:
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    raise TypeError(type(v).__name__)


def _history_rows(h: History) -> list[dict[str, Any]]:
    rows = []
    for r in h.records():
        d: dict[str, Any] = {
            "stream": r.stream, "family": r.family, "context": r.context, "slot": r.slot, "task": r.task,
            "key": r.key, "outcome": None if math.isnan(r.outcome) else r.outcome,
        }
        if r.event_time is not None:
            d["event_time"] = r.event_time
        if r.event_id is not None:
            d["event_id"] = r.event_id
        if r.metadata is not None:
            d["metadata"] = dict(r.metadata)
        rows.append(d)
    return rows


def _atomic_write(path: Path, write: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    from .._durable import umask_mode

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.fchmod(fd, umask_mode())  # the user's umask, not mkstemp's 0600
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_rows(rows: list[dict[str, Any]], fields: Sequence[str], path: Path, fmt: str | None) -> None:
    kind = infer_format(path, fmt)

    def write(tmp: Path) -> None:
        if kind == "jsonl":
            with tmp.open("w", encoding="utf-8") as fh:
                for r in rows:
                    fh.write(json.dumps(r, default=_json_default, allow_nan=False) + "\n")
        elif kind == "csv":
            with tmp.open("w", encoding="utf-8", newline="") as fh:
                w = csv.writer(fh, delimiter="\t" if path.suffix.lower() == ".tsv" else ",")
                w.writerow(fields)
                for r in rows:
                    w.writerow([_csv_cell(r.get(k)) for k in fields])
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            cols: dict[str, list[Any]] = {k: [r.get(k) for r in rows] for k in fields}
            for k in ("metadata",):
                if k in cols:
                    cols[k] = [None if v is None else json.dumps(v, sort_keys=True) for v in cols[k]]
            cols = {k: v for k, v in cols.items()
                    if any(x is not None for x in v) or k in fields[:5] or k in HISTORY_REQUIRED}
            pq.write_table(pa.table(cols), tmp)

    _atomic_write(path, write)


def _csv_cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, (list, tuple)):
        items = [str(x) for x in v]
        if any("|" in x or x.startswith("[") for x in items):
            return json.dumps(items)
        return "|".join(items)
    if isinstance(v, Mapping):
        return json.dumps(v, sort_keys=True)
    if isinstance(v, float):
        return repr(v)
    return str(v)


def write_history(history: History, path: str | os.PathLike[str], fmt: str | None = None) -> Path:
    """Write a history atomically (format from the suffix or ``fmt``)."""
    p = Path(path)
    _write_rows(_history_rows(history), HISTORY_FIELDS, p, fmt)
    return p


def write_futures(futures: FutureTasks, path: str | os.PathLike[str], fmt: str | None = None) -> Path:
    """Write a future task set atomically."""
    p = Path(path)
    _write_rows([future_dict(t) for t in futures.tasks], FUTURE_FIELDS, p, fmt)
    return p


def write_evaluator(evaluator: Evaluator, path: str | os.PathLike[str], fmt: str | None = None) -> Path:
    """Write a utility table atomically."""
    p = Path(path)
    rows = [{"stream": s, "task": t, "key": k, "utility": float(u)}
            for (s, t), row in evaluator.table.items() for k, u in row.items()]
    _write_rows(rows, EVALUATOR_FIELDS, p, fmt)
    return p
