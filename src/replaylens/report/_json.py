"""Indented JSON text for result files, fast for long arrays of numbers (summary.json's per-stream values).

:func:`dumps_indented` gives exactly ``json.dumps(obj, indent=2, allow_nan=False)``: the standard encoder
runs on a copy of ``obj`` whose long lists of floats (or ``None``) are stand-in strings, and each stand-in
is then replaced by its list as the C encoder writes it (``float.__repr__`` for each number, ``null`` for
``None``), laid out as the indenting encoder lays out lists at that depth.  With ``indent`` set, the
standard library encodes in pure Python, element by element; this keeps that cost for the small part.

A :class:`FloatList` (a per-stream array as strict JSON values) carries that flat text, made once: an audit
makes it beside the statistics (:mod:`._ahead`), so writing summary.json only lays it out.
"""

from __future__ import annotations

import json
import re
import uuid
import weakref
from typing import Any, cast

import numpy as np

__all__ = ["FloatList", "dumps_indented", "float_list"]

_LONG = 64   # lists at least this long are laid out here
_SPACES = re.compile(" *")


class FloatList(list[float | None]):
    """A read-only per-stream array as strict JSON values (``None`` for a non-finite number), with its compact
    JSON text (``json.dumps(self, allow_nan=False)``) made once.  Shared inside an audit's result; callers outside
    get plain copies (:func:`~replaylens.report._audit.plain_json`)."""

    __slots__ = ("_text",)

    def __init__(self, values: list[float | None]) -> None:
        super().__init__(values)
        self._text: str | None = None

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = json.dumps(self, allow_nan=False)   # C encoder: "[x, y, null]"
        return self._text


_MADE: weakref.WeakKeyDictionary[Any, FloatList] = weakref.WeakKeyDictionary()


def float_list(owner: Any, values: np.ndarray, *, text: bool = False) -> FloatList:
    """``values`` (a float array) as a :class:`FloatList`, made once per ``owner`` (an immutable object holding
    ``values``, e.g. a :class:`~replaylens.readouts.StreamValues`); ``text``: make its JSON text now too."""
    got = _MADE.get(owner)
    if got is None:
        arr = np.asarray(values, dtype=np.float64).reshape(-1)
        out = cast("list[float | None]", arr.tolist())
        for j in np.flatnonzero(~np.isfinite(arr)).tolist():
            out[j] = None
        got = _MADE[owner] = FloatList(out)
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
                return list(o)
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
