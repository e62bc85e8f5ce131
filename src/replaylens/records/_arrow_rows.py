"""Private: the rows of a pyarrow table as a lazy sequence of dicts (for the row validators).

A large future-task file read with ``Table.to_pylist()`` holds one dict, and one copy of every string, per
row at once (about a kilobyte a row); :class:`ArrowRows` builds a row's dict when the validator asks for
it, and dictionary-encodes text so that all rows share their ``str`` objects.  The validator sees exactly
what ``to_pylist()`` would have given it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, overload

import numpy as np


def is_text(kind: Any) -> bool:
    """Whether a pyarrow type is (large) UTF-8 text."""
    import pyarrow as pa

    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))


def text_codes(col: Any) -> tuple[list[Any], np.ndarray]:
    """A text column dictionary-encoded: its distinct values (one ``str`` each) and an int64 code per row
    (-1 for null)."""
    words, codes = arrow_codes(col)
    return words.to_pylist(), codes


def arrow_codes(col: Any) -> tuple[Any, np.ndarray]:
    """:func:`text_codes` with the distinct values kept as one pyarrow ``string`` array (no ``str`` each)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    enc = pc.dictionary_encode(col)
    if isinstance(enc, pa.ChunkedArray):  # unify the chunks' dictionaries (no copy of the text itself)
        enc = enc.combine_chunks()
    words = enc.dictionary
    if words.type != pa.string():
        words = words.cast(pa.string())
    idx = enc.indices.fill_null(-1) if enc.indices.null_count else enc.indices   # (no nulls: no filled copy)
    return words, idx.to_numpy(zero_copy_only=False).astype(np.int64)


#: the ASCII characters ``str.strip`` removes
ASCII_SPACE = np.array([9, 10, 11, 12, 13, 28, 29, 30, 31, 32], dtype=np.uint8)


def clean_words(words: Any) -> bool:
    """Whether every value of a pyarrow ``string`` array (no nulls) is non-empty and kept as it is by
    ``str.strip`` (what the row reader would keep); by bytes when all are ASCII, else value by value."""
    if words.null_count:
        return False
    n = len(words)
    if n == 0:
        return True
    offsets = np.frombuffer(words.buffers()[1], dtype=np.int32)[words.offset : words.offset + n + 1].astype(np.int64)
    lengths = np.diff(offsets)
    if (lengths == 0).any():
        return False
    data = np.frombuffer(words.buffers()[2], dtype=np.uint8)
    if int(data[int(offsets[0]) : int(offsets[-1])].max()) >= 128:
        return all(isinstance(w, str) and w and w == w.strip() for w in words.to_pylist())
    ends = np.r_[data[offsets[:-1]], data[offsets[1:] - 1]]
    return not bool(np.isin(ends, ASCII_SPACE).any())


def is_coded_text(kind: Any) -> bool:
    """Whether a pyarrow type is dictionary-encoded (large) UTF-8 text."""
    import pyarrow as pa

    return bool(pa.types.is_dictionary(kind) and is_text(kind.value_type))


#: widest text (in characters) that :func:`ascii_text_array` lays out column by column
ASCII_MAX_WIDTH = 64


def ascii_text_array(col: Any) -> np.ndarray | None:
    """A null-free text column as numpy fixed-width text (``<U{longest}``), laid out from the arrow buffers
    when every value is ASCII without NUL characters and at most :data:`ASCII_MAX_WIDTH` long (no ``str`` per
    value); ``None`` otherwise (the caller then goes through :func:`text_codes`).  The same array as
    ``np.asarray(col.to_pylist(), dtype=str)``."""
    import pyarrow as pa

    chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
    n = sum(len(c) for c in chunks)
    parts: list[tuple[np.ndarray, np.ndarray]] = []
    width = 0
    for c in chunks:
        if c.null_count or not pa.types.is_string(c.type):
            return None
        offsets = np.frombuffer(c.buffers()[1], dtype=np.int32)[c.offset : c.offset + len(c) + 1]
        buf = c.buffers()[2]
        data = np.frombuffer(buf, dtype=np.uint8) if buf is not None else np.zeros(0, dtype=np.uint8)
        used = data[int(offsets[0]) : int(offsets[-1])] if offsets.size else data[:0]
        if used.size and (int(used.max()) >= 128 or int(used.min()) == 0):
            return None   # non-ASCII (numpy would decode it per value) or a NUL (fixed-width text drops it)
        parts.append((offsets, data))
        if offsets.size > 1:
            width = max(width, int(np.diff(offsets).max()))
    if width > ASCII_MAX_WIDTH:
        return None
    if width == 0:
        return np.full(n, "", dtype="<U1")
    out = np.zeros((n, width), dtype=np.uint32)   # the code points of fixed-width text, NUL-padded
    cols = np.arange(width, dtype=np.int32)
    row = 0
    for offsets, data in parts:
        for a in range(0, offsets.size - 1, 65536):   # 65,536 rows at a time: small mask temporaries
            o = offsets[a : a + 65537]
            m, lo, hi = o.size - 1, int(o[0]), int(o[-1])
            block = out[row : row + m]
            if hi > lo:   # the values' bytes, in row order, fill each row's leading cells
                block[cols < np.diff(o)[:, None]] = data[lo:hi]
            row += m
    return out.view(f"<U{width}").reshape(n)


class _LazyColumn(Sequence[Any]):
    """A column whose row values are built on access (``_at``); slices give lists."""

    n: int

    def _at(self, i: int) -> Any:
        raise NotImplementedError

    def __len__(self) -> int:
        return self.n

    @overload
    def __getitem__(self, i: int) -> Any: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Any]: ...
    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return [self._at(j) for j in range(*i.indices(self.n))]
        return self._at(i)


class _Coded(_LazyColumn):
    """``vocab[codes[i]]`` (``None`` where the code is negative): a text column without per-row objects."""

    def __init__(self, vocab: list[Any], codes: np.ndarray) -> None:
        self.vocab, self.codes, self.n = vocab, codes, int(codes.shape[0])

    def _at(self, i: int) -> Any:
        c = int(self.codes[i])
        return None if c < 0 else self.vocab[c]


class _CodedLists(_LazyColumn):
    """A ``list<string>`` column: row ``i`` is a new list of shared ``str`` objects (``None`` for a null row)."""

    def __init__(self, vocab: list[Any], codes: np.ndarray, offsets: np.ndarray, valid: np.ndarray) -> None:
        self.vocab, self.codes, self.offsets, self.valid = vocab, codes, offsets, valid
        self.n = int(valid.shape[0])

    def _at(self, i: int) -> Any:
        if not self.valid[i]:
            return None
        return [self.vocab[int(c)] for c in self.codes[self.offsets[i]:self.offsets[i + 1]]]


def _column(col: Any) -> Sequence[Any] | None:
    """A lazy view of one column, or ``None`` when it holds anything but strings or lists of strings."""
    import pyarrow as pa

    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if is_text(col.type):
        return _Coded(*text_codes(col))
    if (pa.types.is_list(col.type) or pa.types.is_large_list(col.type)) and is_text(col.type.value_type):
        col = col.cast(pa.large_list(pa.large_string()))
        if col.offset or col.values.null_count:  # sliced arrays or null labels: keep it simple
            return None
        vocab, codes = text_codes(col.values)
        return _CodedLists(vocab, codes, col.offsets.to_numpy(), col.is_valid().to_numpy(zero_copy_only=False))
    return None


class ArrowRows(Sequence[Mapping[str, Any]]):
    """Rows of a table with only text and list-of-text columns, built on access (the last one is kept)."""

    def __init__(self, columns: dict[str, Sequence[Any]], n: int) -> None:
        self.columns, self.n = columns, n
        self._last: tuple[int, dict[str, Any]] | None = None

    @classmethod
    def of(cls, table: Any) -> ArrowRows | None:
        """The lazy rows of ``table``, or ``None`` if a column has another type (use ``to_pylist`` then)."""
        cols: dict[str, Sequence[Any]] = {}
        for name in table.column_names:
            view = _column(table.column(name))
            if view is None:
                return None
            cols[name] = view
        return cls(cols, table.num_rows)

    def __len__(self) -> int:
        return self.n

    @overload
    def __getitem__(self, i: int) -> Mapping[str, Any]: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Mapping[str, Any]]: ...
    def __getitem__(self, i: int | slice) -> Mapping[str, Any] | Sequence[Mapping[str, Any]]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.n))]
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError(i)
        if self._last is None or self._last[0] != i:
            self._last = (i, {k: v[i] for k, v in self.columns.items()})
        return self._last[1]

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        for i in range(self.n):
            yield self[i]
