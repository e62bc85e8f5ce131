"""Indented JSON text for result files, fast for long arrays of numbers (summary.json's per-stream values).

:func:`dumps_indented` gives exactly ``json.dumps(obj, indent=2, allow_nan=False)``: the standard encoder
runs on a copy of ``obj`` whose long lists of floats (or ``None``) are stand-in strings, and each stand-in
is then replaced by its list as the C encoder writes it (``float.__repr__`` for each number, ``null`` for
``None``), laid out as the indenting encoder lays out lists at that depth.  With ``indent`` set, the
standard library encodes in pure Python, element by element; this keeps that cost for the small part.

A :class:`FloatList` (a per-stream array as strict JSON values) holds the array itself, not a Python float per
value, and carries its flat JSON text, made once: an audit makes it beside the statistics (:mod:`._ahead`), so
writing summary.json only lays it out.
"""

from __future__ import annotations

import json
import math
import re
import uuid
import weakref
from collections.abc import Iterator, Sequence
from typing import Any, cast, overload

import numpy as np

__all__ = ["FloatList", "dumps_indented", "float_list"]

_LONG = 64   # lists at least this long are laid out here
_SPACES = re.compile(" *")


class FloatList(Sequence[float | None]):
    """A read-only per-stream array as strict JSON values (``None`` for a non-finite number) over the float array
    itself (no Python float per value: 10^6 of them held 32 MB), with its compact JSON text
    (``json.dumps(self.tolist(), allow_nan=False)``) made once.  Shared inside an audit's result; callers outside
    get plain lists (:func:`~replaylens.report._audit.plain_json`).  Equal to any sequence of the same values."""

    __slots__ = ("_text", "_values")

    def __init__(self, values: np.ndarray) -> None:
        arr = np.asarray(values, dtype=np.float64).reshape(-1)
        if arr.flags.writeable:   # a caller's array: a read-only copy (a StreamValues' array is shared as it is)
            arr = arr.copy()
            arr.flags.writeable = False
        self._values = arr
        self._text: str | None = None

    def tolist(self) -> list[float | None]:
        """The values as a plain list (``None`` for a non-finite number)."""
        out = cast("list[float | None]", self._values.tolist())
        for j in np.flatnonzero(~np.isfinite(self._values)).tolist():
            out[j] = None
        return out

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = json.dumps(self.tolist(), allow_nan=False)   # C encoder: "[x, y, null]"
        return self._text

    def __len__(self) -> int:
        return int(self._values.shape[0])

    @overload
    def __getitem__(self, i: int) -> float | None: ...
    @overload
    def __getitem__(self, i: slice) -> list[float | None]: ...
    def __getitem__(self, i: int | slice) -> float | list[float | None] | None:
        if isinstance(i, slice):
            return FloatList(self._values[i]).tolist()
        x = float(self._values[i])
        return x if math.isfinite(x) else None

    def __iter__(self) -> Iterator[float | None]:
        return iter(self.tolist())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FloatList):
            other = other.tolist()
        return isinstance(other, (list, tuple)) and self.tolist() == list(other)

    __hash__ = None   # type: ignore[assignment]  # equal to lists, which do not hash

    def __repr__(self) -> str:
        return f"FloatList({self.tolist()!r})"


_MADE: weakref.WeakKeyDictionary[Any, FloatList] = weakref.WeakKeyDictionary()


def float_list(owner: Any, values: np.ndarray, *, text: bool = False) -> FloatList:
    """``values`` (a float array) as a :class:`FloatList`, made once per ``owner`` (an immutable object holding
    ``values``, e.g. a :class:`~replaylens.readouts.StreamValues`); ``text``: make its JSON text now too."""
    got = _MADE.get(owner)
    if got is None:
        got = _MADE[owner] = FloatList(values)
    if text:
        got.text  # noqa: B018 - made now (on the caller's thread), kept for the writer
    return got


def dumps_indented(obj: Any) -> str:
    """``json.dumps(obj, indent=2, allow_nan=False)`` (identical text), fast for long float lists."""
    token = uuid.uuid4().hex
    longs: list[str] = []

    def swap(o: Any) -> Any:
        if isinstance(o, dict):
            return {k: swap(v) for k, v in o.items()}
        if isinstance(o, FloatList):
            if len(o) < _LONG:
                return o.tolist()
            longs.append(o.text)
            return f"{token}-{len(longs) - 1}"
        if isinstance(o, (list, tuple)):
            if len(o) >= _LONG and set(map(type, o)) <= {float, type(None)}:
                longs.append(json.dumps(list(o), allow_nan=False))   # C encoder: "[x, y, null]"
                return f"{token}-{len(longs) - 1}"
            return [swap(v) for v in o]
        return o

    text = json.dumps(swap(obj), indent=2, allow_nan=False)
    if not longs:
        return text

    def lay_out(m: re.Match[str]) -> str:
        flat = longs[int(m.group(1))]
        line = text.rfind("\n", 0, m.start()) + 1
        pad = len(_SPACES.match(text, line).group())   # type: ignore[union-attr]
        inner = "\n" + " " * (pad + 2)
        return "[" + inner + flat[1:-1].replace(", ", "," + inner) + "\n" + " " * pad + "]"

    return re.sub(f'"{token}-([0-9]+)"', lay_out, text)
