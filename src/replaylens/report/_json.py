"""Indented JSON text for result files, fast for long arrays of numbers (summary.json's per-stream values).

:func:`dumps_indented` gives exactly ``json.dumps(obj, indent=2, allow_nan=False)``: the standard encoder
runs on a copy of ``obj`` whose long lists of floats (or ``None``) are stand-in strings, and each stand-in
is then replaced by its list as the C encoder writes it (``float.__repr__`` for each number, ``null`` for
``None``), laid out as the indenting encoder lays out lists at that depth.  With ``indent`` set, the
standard library encodes in pure Python, element by element; this keeps that cost for the small part.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

__all__ = ["dumps_indented"]

_LONG = 64   # lists at least this long are laid out here
_SPACES = re.compile(" *")


def dumps_indented(obj: Any) -> str:
    """``json.dumps(obj, indent=2, allow_nan=False)`` (identical text), fast for long float lists."""
    token = uuid.uuid4().hex
    longs: list[list[Any]] = []

    def swap(o: Any) -> Any:
        if isinstance(o, dict):
            return {k: swap(v) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            if len(o) >= _LONG and set(map(type, o)) <= {float, type(None)}:
                longs.append(list(o))
                return f"{token}-{len(longs) - 1}"
            return [swap(v) for v in o]
        return o

    text = json.dumps(swap(obj), indent=2, allow_nan=False)
    if not longs:
        return text

    def lay_out(m: re.Match[str]) -> str:
        flat = json.dumps(longs[int(m.group(1))], allow_nan=False)   # C encoder: "[x, y, null]"
        line = text.rfind("\n", 0, m.start()) + 1
        pad = len(_SPACES.match(text, line).group())   # type: ignore[union-attr]
        inner = "\n" + " " * (pad + 2)
        return "[" + inner + flat[1:-1].replace(", ", "," + inner) + "\n" + " " * pad + "]"

    return re.sub(f'"{token}-([0-9]+)"', lay_out, text)
