"""Private: a text column held as (vocab, codes) — its distinct values once and an int32 code per row.

A history's text columns (stream, family, context, task, key) repeat a few values many times; numpy's
fixed-width text spends 4 bytes a character on every row.  A coded column spends 4 bytes a row plus the
distinct values once.  Every helper keeps the vocab *distinct* (equal codes ⇔ equal text), which is what lets
the history validate, sort and group on codes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._arrow_rows import arrow_codes, ascii_text_array
from ._layout import to_arrow_text

__all__ = ["TextCodes", "blank_rows", "compact", "decode", "decode_bytes", "encode_text", "first_appearance",
           "numpy_words", "pack", "readonly"]

#: (vocab: distinct values as a 1-d numpy ``<U`` array, codes: an int32 index into it per row)
TextCodes = tuple[np.ndarray, np.ndarray]


def readonly(a: np.ndarray) -> np.ndarray:
    """``a`` marked read-only (a history's arrays are shared by everyone who asks for them)."""
    a.flags.writeable = False
    return a


def pack(vocab: np.ndarray) -> np.ndarray:
    """A ``<U`` vocab held compactly: as numpy bytes (``S``, 1 byte a character instead of 4) when every value
    is ASCII, else as it is.  :func:`decode_bytes` gives it back exactly (both drop only trailing NULs)."""
    if vocab.dtype.kind != "U" or vocab.size == 0 or vocab.dtype.itemsize == 0:
        return vocab
    points = np.ascontiguousarray(vocab).view(np.uint32)
    if int(points.max()) >= 128:
        return vocab
    return points.astype(np.uint8).view(f"S{vocab.dtype.itemsize // 4}").reshape(vocab.shape)   # by code points


def decode_bytes(vocab: np.ndarray) -> np.ndarray:
    """A :func:`pack` ed array as numpy ``<U`` text (a ``<U`` array as it is); ASCII bytes widened as code
    points (no per-value decoding)."""
    if vocab.dtype.kind != "S":
        return vocab
    if vocab.size == 0 or vocab.dtype.itemsize == 0:
        return vocab.astype(f"<U{max(vocab.dtype.itemsize, 1)}")
    points = np.ascontiguousarray(vocab).view(np.uint8).astype(np.uint32)
    return points.view(f"<U{vocab.dtype.itemsize}").reshape(vocab.shape)


def decode(vocab: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """The column as numpy fixed-width text: ``vocab[codes]`` (a new array; a packed vocab is gathered as bytes,
    then decoded)."""
    return decode_bytes(vocab[codes]) if vocab.size else np.zeros(codes.shape[0], dtype="<U1")


def numpy_words(words: Any) -> TextCodes:
    """A pyarrow ``string`` array of distinct values (no nulls) as a numpy vocab, and the code of each word in
    it (identity unless two words read as the same numpy text: numpy drops trailing NULs)."""
    laid = ascii_text_array(words)   # plain ASCII without NULs: laid out from the buffers, still distinct
    n = len(words)
    if laid is not None:
        return laid, np.arange(n, dtype=np.int32)
    vocab = np.asarray(words.to_pylist(), dtype=str) if n else np.zeros(0, dtype="<U1")
    if len(set(vocab.tolist())) == n:
        return vocab, np.arange(n, dtype=np.int32)
    uniq, inverse = np.unique(vocab, return_inverse=True)
    return uniq, inverse.reshape(-1).astype(np.int32)


def encode_text(values: np.ndarray) -> TextCodes:
    """A numpy ``<U`` column as (vocab, codes): by hashing (an arrow dictionary, vocab in first-appearance
    order), or by a sort when arrow cannot hold the text (a lone surrogate)."""
    import pyarrow as pa

    try:
        words, codes = arrow_codes(to_arrow_text(values))
    except (UnicodeEncodeError, pa.ArrowException):
        uniq, inverse = np.unique(values, return_inverse=True)
        return uniq, inverse.reshape(-1).astype(np.int32)
    vocab, remap = numpy_words(words)
    return vocab, remap[codes]


def compact(vocab: np.ndarray, codes: np.ndarray) -> TextCodes:
    """Drop the vocab entries no row uses (codes renumbered in the same order); as given when all are used.
    ``ValueError`` for a code outside the vocab."""
    if codes.size and (int(codes.min()) < 0 or int(codes.max()) >= vocab.size):
        raise ValueError(f"text codes must lie in 0..{vocab.size - 1}")
    used = np.bincount(codes, minlength=vocab.size) > 0 if codes.size else np.zeros(vocab.size, dtype=bool)
    if used.all():
        return vocab, codes.astype(np.int32, copy=False)
    new = np.cumsum(used, dtype=np.int64) - 1
    return vocab[used], new[codes].astype(np.int32)


def first_appearance(codes: np.ndarray, size: int) -> np.ndarray:
    """The codes ``0 .. size-1`` (each used at least once) in the order of their first row.  When each code's
    rows are one run (a column sorted or written group by group), read off the runs without a sort."""
    n = codes.shape[0]
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]]) if n else np.zeros(0, dtype=np.int64)
    at_start = codes[starts]
    if at_start.size == size:   # as many runs as codes: each code is one run, in this order
        return at_start.astype(np.int64)
    first = np.full(size, n, dtype=np.int64)
    np.minimum.at(first, at_start, starts)
    return np.argsort(first, kind="stable")


def blank_rows(vocab: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """The rows whose value is empty or only whitespace (checked once per distinct value)."""
    bad = (vocab == "") | np.char.isspace(vocab)
    return np.flatnonzero(bad[codes]) if bad.any() else np.zeros(0, dtype=np.int64)
