"""Private: reading tabular inputs (JSONL, CSV, Parquet) into validated columns.

Each reader returns the rows as a dict of column lists plus the 1-based line number of every
row, so every later validation error can name the file, line and field.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError

FORMATS = ("jsonl", "csv", "parquet")


def infer_format(path: Path, fmt: str | None) -> str:
    if fmt is not None:
        if fmt not in FORMATS:
            raise InputError(str(path), None, None, f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
        return fmt
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    if suffix in (".csv", ".tsv"):
        return "csv"
    if suffix in (".parquet", ".pq"):
        return "parquet"
    raise InputError(str(path), None, None,
                     f"cannot tell the format from suffix {suffix!r}; use .jsonl, .csv or .parquet")


@dataclass
class RawTable:
    """Rows of one input as python objects, with their 1-based line numbers."""

    source: str
    rows: Sequence[Mapping[str, Any]]
    lines: Sequence[int]
    line_word: str = "line"
    typed: bool = False  # JSONL/Parquet carry types: a string where a number belongs is an error there


def _decode(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(str(path), line, None, f"not valid UTF-8 (byte 0x{data[exc.start]:02x})") from None


def read_raw(path: str | Path, fmt: str | None = None) -> RawTable:
    """Read a file into raw rows; raises InputError for unreadable or malformed files."""
    p = Path(path)
    if not p.exists():
        raise InputError(str(p), None, None, "file not found")
    if p.is_dir():
        raise InputError(str(p), None, None, "is a directory, expected a file")
    kind = infer_format(p, fmt)
    if kind == "parquet":
        return replace(_read_parquet(p), typed=True)
    text = _decode(p, p.read_bytes())
    if kind == "jsonl":
        return replace(_read_jsonl(p, text), typed=True)
    return _read_csv(p, text)


def _read_jsonl(p: Path, text: str) -> RawTable:
    rows: list[dict[str, Any]] = []
    lines: list[int] = []
    for i, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InputError(str(p), i, None, f"invalid JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(obj, dict):
            raise InputError(str(p), i, None, f"expected a JSON object, got {type(obj).__name__}")
        rows.append(obj)
        lines.append(i)
    return RawTable(str(p), rows, lines)


def _read_csv(p: Path, text: str) -> RawTable:
    delim = "\t" if p.suffix.lower() == ".tsv" else ","
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delim, strict=True)
    try:
        header = next(reader)
    except StopIteration:
        raise InputError(str(p), None, None, "empty file (no header)") from None
    except csv.Error as exc:
        raise InputError(str(p), 1, None, f"malformed CSV header ({exc})") from None
    header = [h.strip() for h in header]
    if len(set(header)) != len(header):
        dup = next(h for h in header if header.count(h) > 1)
        raise InputError(str(p), 1, dup, "column appears twice in the header")
    rows: list[dict[str, Any]] = []
    lines: list[int] = []
    while True:
        start = reader.line_num + 1
        try:
            rec = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise InputError(str(p), start, None, f"malformed CSV ({exc})") from None
        if not rec or all(not c.strip() for c in rec):
            continue
        if len(rec) != len(header):
            raise InputError(str(p), start, None, f"expected {len(header)} columns, got {len(rec)}")
        rows.append({h: (None if v == "" else v) for h, v in zip(header, rec, strict=True)})
        lines.append(start)
    return RawTable(str(p), rows, lines)


#: a text column stored in at most this many bytes a row (dictionary indices, a small dictionary) is read
#: dictionary-encoded (:func:`read_parquet_table`'s ``coded``)
CODED_BYTES_PER_ROW = 4.0


def read_parquet_table(p: Path, coded: Sequence[str] = ()) -> Any:
    """The Parquet file as a ``pyarrow.Table`` (InputError when unreadable).  The columns named in ``coded``
    that the file stores as a small dictionary and its indices come back dictionary-encoded (the same values,
    read without a text copy per row; a reader that asks for this takes dictionary columns)."""
    import pyarrow.parquet as pq

    try:
        coded_ = _small_dictionaries(p, coded) or None
        if Path(p).is_dir():   # a dataset directory
            return pq.read_table(p, read_dictionary=coded_)
        with pq.ParquetFile(p, read_dictionary=coded_) as fh:   # one file: no dataset layer (nor pandas import)
            return fh.read()
    except Exception as exc:  # pyarrow raises several unrelated types for broken files
        raise InputError(str(p), None, None, f"not a readable Parquet file ({exc})") from None


def _small_dictionaries(p: Path, names: Sequence[str]) -> list[str]:
    """The top-level columns among ``names`` stored in few bytes a row (decides only how a column is read)."""
    if not names:
        return []
    import pyarrow.parquet as pq

    try:
        meta = pq.ParquetFile(p).metadata
    except Exception:  # the read itself reports it
        return []
    if meta.num_rows == 0:
        return []
    size: dict[str, int] = {}
    for g in range(meta.num_row_groups):
        rg = meta.row_group(g)
        for j in range(rg.num_columns):
            c = rg.column(j)
            size[c.path_in_schema] = size.get(c.path_in_schema, 0) + int(c.total_uncompressed_size)
    return [n for n in names if n in size and size[n] <= CODED_BYTES_PER_ROW * meta.num_rows]


def _read_parquet(p: Path) -> RawTable:
    rows = read_parquet_table(p).to_pylist()
    return RawTable(str(p), rows, list(range(1, len(rows) + 1)), line_word="row")


# ---------------------------------------------------------------- field coercion


def lone_surrogate(s: str) -> int | None:
    """The index of the first lone surrogate (U+D800 … U+DFFF: not encodable as UTF-8) in ``s``, or ``None``."""
    if s.isascii():
        return None
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as exc:
        return int(exc.start)
    return None


def surrogate_point(s: str, at: int) -> str:
    """``"U+D800 at character 3"``: where :func:`lone_surrogate` found one in ``s`` (every message names it so)."""
    return f"U+{ord(s[at]):04X} at character {at + 1}"


class Field:
    """Coerce one field of a raw row; raise InputError naming source, line and field."""

    def __init__(self, table: RawTable) -> None:
        self.t = table

    def err(self, i: int, field: str | None, msg: str) -> InputError:
        return InputError(self.t.source, self.t.lines[i], field, msg)

    def get(self, i: int, name: str, required: bool) -> Any:
        row = self.t.rows[i]
        if name not in row or row[name] is None:
            if required:
                raise self.err(i, name, "missing required field")
            return None
        return row[name]

    def string(self, i: int, name: str, required: bool = True) -> str | None:
        v = self.get(i, name, required)
        if v is None:
            return None
        if isinstance(v, (bool, dict, list)):
            raise self.err(i, name, f"expected a string, got {json.dumps(v)}")
        if isinstance(v, float) and not math.isfinite(v):
            raise self.err(i, name, f"expected a string, got {v}")
        s = str(v) if not isinstance(v, float) else repr(v)
        s = s.strip()
        if not s:
            if required:
                raise self.err(i, name, "must not be empty")
            return None
        self._unicode(i, name, s)
        return s

    def _unicode(self, i: int, name: str, s: str) -> None:
        """Raise unless ``s`` is text every output can hold: JSON's ``\\ud800``-style escapes can spell a lone
        surrogate, which no UTF-8 file (decisions.parquet, summary.json) nor a content hash can encode."""
        at = lone_surrogate(s)
        if at is not None:
            raise self.err(i, name, f"is not valid Unicode text: a lone surrogate ({surrogate_point(s, at)}) of {s!r}")

    def integer(self, i: int, name: str, required: bool = True, minimum: int | None = 0) -> int | None:
        v = self.get(i, name, required)
        if v is None:
            return None
        out: int
        if isinstance(v, bool):
            raise self.err(i, name, f"expected an integer, got {v}")
        if isinstance(v, (int, np.integer)):
            out = int(v)
        elif isinstance(v, float):
            if not math.isfinite(v) or v != int(v):
                raise self.err(i, name, f"expected an integer, got {v}")
            out = int(v)
        elif isinstance(v, str):
            if self.t.typed:
                raise self.err(i, name, f"expected an integer, got the string {v!r} (write it without quotes)")
            try:
                out = int(v.strip())
            except ValueError:
                raise self.err(i, name, f"expected an integer, got {v!r}") from None
        else:
            raise self.err(i, name, f"expected an integer, got {type(v).__name__}")
        if minimum is not None and out < minimum:
            raise self.err(i, name, f"must be >= {minimum}, got {out}")
        return out

    def number(
        self,
        i: int,
        name: str,
        required: bool = True,
        allow_nan: bool = False,
        bounds: tuple[float, float] | None = None,
    ) -> float:
        v = self.get(i, name, required)
        if v is None:
            if allow_nan:
                return math.nan
            return math.nan  # only reached when not required
        if isinstance(v, bool):
            raise self.err(i, name, f"expected a number, got {v}")
        if isinstance(v, (int, float, np.integer, np.floating)):
            out = float(v)
        elif isinstance(v, str):
            if self.t.typed:
                raise self.err(i, name, f"expected a number, got the string {v!r} (write it without quotes)")
            s = v.strip()
            if s.lower() in ("nan", "null", "none", "masked"):
                out = math.nan
            else:
                try:
                    out = float(s)
                except ValueError:
                    raise self.err(i, name, f"expected a number, got {v!r}") from None
        else:
            raise self.err(i, name, f"expected a number, got {type(v).__name__}")
        if math.isnan(out):
            if not allow_nan:
                raise self.err(i, name, "NaN is not allowed here")
            return out
        if math.isinf(out):
            raise self.err(i, name, f"must be finite, got {out}")
        if bounds is not None and not (bounds[0] <= out <= bounds[1]):
            raise self.err(i, name, f"must lie in [{bounds[0]:g}, {bounds[1]:g}], got {out}")
        return out

    def labels(self, i: int, name: str) -> tuple[str, ...]:
        v = self.get(i, name, True)
        items: Sequence[Any]
        if isinstance(v, str):
            s = v.strip()
            if s.startswith("["):
                try:
                    items = json.loads(s)
                except json.JSONDecodeError:
                    raise self.err(i, name, f"expected a JSON list or '|'-separated labels, got {v!r}") from None
            else:
                items = s.split("|")
        elif isinstance(v, (list, tuple, np.ndarray)):
            items = list(v)
        else:
            raise self.err(i, name, f"expected a list of labels, got {type(v).__name__}")
        out = []
        for item in items:
            if not isinstance(item, str) or not item.strip():
                raise self.err(i, name, f"every label must be a non-empty string, got {item!r}")
            self._unicode(i, name, item.strip())
            out.append(item.strip())
        if not out:
            raise self.err(i, name, "must list at least one label")
        if len(set(out)) != len(out):
            raise self.err(i, name, f"labels must be distinct, got {out}")
        return tuple(out)

    def mapping(self, i: int, name: str) -> str:
        """Metadata: a JSON object (or its text) stored as canonical JSON text; '' when absent."""
        v = self.get(i, name, False)
        if v is None:
            return ""
        if isinstance(v, str):
            try:
                v = json.loads(v)
            except json.JSONDecodeError:
                raise self.err(i, name, "expected a JSON object") from None
        if not isinstance(v, Mapping):
            raise self.err(i, name, f"expected a JSON object, got {type(v).__name__}")
        try:
            return json.dumps(v, sort_keys=True, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise self.err(i, name, f"not JSON-serializable ({exc})") from None
