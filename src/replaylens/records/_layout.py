"""Private: JSON text laid out by columns with pyarrow's string kernels (no Python ``str`` per row).

The content fingerprints hash canonical JSON documents (``json.dumps(..., sort_keys=True)``, compact); a
document of millions of values built value by value in Python costs seconds.  These helpers give the very
bytes ``json.dumps`` writes for a whole column at once: each value's JSON (strings escaped as
``encode_basestring_ascii`` does, floats as ``float.__repr__``), pieces joined row by row, and a column's
text as one buffer.  Only the odd values (text that needs escaping, floats outside the range where arrow's
shortest digits are written positionally) go through the Python encoder, one value at a time.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring_ascii as quote  # json.dumps of a str
from typing import Any

import numpy as np

__all__ = ["concat", "joined", "json_floats", "json_strings", "replace_rows", "text_of", "to_arrow_text"]

#: a character that ``json.dumps`` (ensure_ascii) writes other than as itself: quote, backslash, a control
#: character or anything outside printable ASCII
_NEEDS_ESCAPE = r'[^\x20\x21\x23-\x5b\x5d-\x7e]'


def to_arrow_text(values: Any) -> Any:
    """A text column (numpy ``<U``/object array, numpy bytes of ASCII text as the records hold it, e.g.
    ``FutureColumns.task_text``, list of ``str`` or a pyarrow string array) as one pyarrow ``string`` array."""
    import pyarrow as pa

    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array):
        return values if values.type == pa.string() else values.cast(pa.string())
    if isinstance(values, np.ndarray) and values.dtype.kind in "US":
        laid = _ascii_arrow(values)
        if laid is not None:
            return laid
        if values.dtype.kind == "S":   # (ASCII widened as code points; other bytes: UnicodeDecodeError)
            values = values.astype(f"<U{max(values.dtype.itemsize, 1)}")
    return pa.array(list(values), type=pa.string())   # (pyarrow's own numpy conversion stops at a NUL)


def _ascii_arrow(values: np.ndarray) -> Any:
    """A 1-d numpy ``<U`` (or ``S``) array of ASCII text as a pyarrow ``string`` array, laid out from its code
    points (NULs inside a value kept, trailing ones not: numpy's own reading); ``None`` for other text."""
    import pyarrow as pa

    col = np.ascontiguousarray(values).reshape(-1)
    unit = 1 if col.dtype.kind == "S" else 4   # bytes a character
    width = col.dtype.itemsize // unit
    n = col.size
    if n == 0 or width == 0:
        return pa.array([""] * n, type=pa.string())
    points = col.view(np.uint8 if unit == 1 else np.uint32).reshape(n, width)
    if int(points.max()) >= 128:
        return None
    lengths = np.char.str_len(col).astype(np.int64)
    offsets = np.r_[0, np.cumsum(lengths)]
    if offsets[-1] >= 2**31:
        return None
    data = points[np.arange(width) < lengths[:, None]].astype(np.uint8)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data))


def _plain_bytes(arr: Any) -> bool:
    """Whether every byte of a string array's values is printable ASCII other than quote and backslash."""
    if len(arr) == 0 or arr.buffers()[2] is None:
        return True
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32)[arr.offset : arr.offset + len(arr) + 1]
    data = np.frombuffer(arr.buffers()[2], dtype=np.uint8)[int(offsets[0]) : int(offsets[-1])]
    return not bool(((data < 0x20) | (data > 0x7E) | (data == 0x22) | (data == 0x5C)).any())


def json_strings(values: Any, quoted: bool = True) -> Any:
    """``json.dumps(v)`` of every text value (without its quotes when not ``quoted``) as a pyarrow ``string``
    array; only the values that need an escape are encoded by Python."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        arr = to_arrow_text(values)
    except (UnicodeEncodeError, pa.ArrowException):   # text arrow cannot hold (a lone surrogate): all by Python
        texts = values.tolist() if isinstance(values, np.ndarray) else list(values)
        return pa.array([quote(v) if quoted else quote(v)[1:-1] for v in texts], type=pa.string())
    out = pc.binary_join_element_wise('"', arr, '"', "") if quoted else arr
    if not _plain_bytes(arr):
        odd = pc.match_substring_regex(arr, _NEEDS_ESCAPE)
        mask = odd.to_numpy(zero_copy_only=False)
        fixed = [quote(v) if quoted else quote(v)[1:-1] for v in arr.filter(odd).to_pylist()]
        out = pc.replace_with_mask(out, pa.array(mask), pa.array(fixed, type=pa.string()))
    return out


def json_floats(values: np.ndarray) -> Any:
    """``json.dumps(x)`` of every float (``float.__repr__``; ``NaN``/``Infinity`` as json writes them) as a
    pyarrow ``string`` array.

    Arrow writes a double's shortest round-trip digits, as ``repr`` does; where it writes them positionally
    (no exponent) and ``repr`` does too (1e-4 <= |x| < 1e16, or zero) the texts agree but for ``repr``'s
    trailing ``.0`` on whole numbers, which is appended.  Every other value is written by ``json.dumps``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    u = np.ascontiguousarray(values, dtype=np.float64).reshape(-1)
    text = pc.cast(pa.array(u), pa.string())
    mag = np.abs(u)
    with np.errstate(invalid="ignore"):
        plain = ((mag >= 1e-4) & (mag < 1e16)) | (u == 0)
        whole = u == np.floor(u)
    plain &= ~pc.match_substring(text, "e").to_numpy(zero_copy_only=False)
    whole &= plain
    if whole.any():
        mask = pa.array(whole)
        text = pc.replace_with_mask(text, mask, pc.binary_join_element_wise(text.filter(mask), ".0", ""))
    if not plain.all():
        odd = ~plain
        text = replace_rows(text, odd, [json.dumps(x) for x in u[odd].tolist()])
    return text


def replace_rows(arr: Any, mask: np.ndarray, values: list[str]) -> Any:
    """``arr`` with the rows where ``mask`` holds replaced by ``values`` (in order)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.replace_with_mask(arr, pa.array(mask), pa.array(values, type=pa.string()))


def concat(*parts: Any) -> Any:
    """Row-wise concatenation of string arrays and ``str`` constants (a pyarrow ``string`` array)."""
    import pyarrow.compute as pc

    return pc.binary_join_element_wise(*parts, "")


def joined(cells: Any, offsets: np.ndarray, sep: str) -> Any:
    """``sep.join(cells[offsets[i]:offsets[i + 1]])`` for every ``i`` (a pyarrow ``string`` array)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    lists = pa.ListArray.from_arrays(pa.array(np.asarray(offsets, dtype=np.int32)), cells)
    return pc.binary_join(lists, sep)


def text_of(arr: Any) -> bytes:
    """The values of a pyarrow ``string`` array written one after another (UTF-8), as ``"".join(...)``."""
    import pyarrow as pa

    if isinstance(arr, pa.ChunkedArray):
        return b"".join(text_of(c) for c in arr.chunks)
    if len(arr) == 0:
        return b""
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32)[arr.offset : arr.offset + len(arr) + 1]
    data = arr.buffers()[2]
    lo, hi = int(offsets[0]), int(offsets[-1])
    return b"" if data is None or hi == lo else data.slice(lo, hi - lo).to_pybytes()
