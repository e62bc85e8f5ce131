"""Text an audit's result files can store: UTF-8 cannot encode a lone surrogate (U+D800 … U+DFFF without its
pair), which a history or task set built through the Python API may hold (the file readers refuse it).

An audit that writes a result set checks its inputs here before the replay starts, so such text is one input
error naming the object, the field and the record, not a traceback from the report writer after the replay
(and never a half-written result).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import InputError
from ._columns import lone_surrogate, surrogate_point
from ._futures import FutureTasks
from ._history import TEXT_COLUMNS, History

__all__ = ["check_storable"]

_WHY = "the result files (UTF-8) cannot store it; fix the text, or audit without an output directory"


def _first_bad(values: Sequence[str]) -> tuple[int, int] | None:
    """(index, character) of the first value holding a lone surrogate, or ``None``: one encode of the values
    joined (a C pass), value by value only when that fails."""
    try:
        "".join(values).encode("utf-8")
        return None
    except UnicodeEncodeError:
        pass
    for i, v in enumerate(values):
        at = lone_surrogate(v)
        if at is not None:
            return i, at
    return None   # pragma: no cover - the joined text failed, so one value does


def check_storable(history: History, futures: FutureTasks) -> None:
    """Raise :class:`~replaylens.errors.InputError` at the first text value of ``history`` (its text columns) or
    ``futures`` (streams, strata, task ids, menu labels) that UTF-8 cannot encode, naming the field and the
    record (the history's row in canonical order, the task's position in the set)."""
    for name in TEXT_COLUMNS:
        vocab, codes = history._held(name)
        if vocab.dtype.kind == "S":   # held as bytes: every value ASCII
            continue
        words = vocab.tolist()
        bad = _first_bad(words)
        if bad is not None:
            row = int(np.flatnonzero(codes == bad[0])[0])
            raise InputError(history.source, None, name,
                             f"record {row + 1} (stream {str(history.text('stream', slice(row, row + 1))[0])!r}, slot "
                             f"{int(history.slot[row])}) holds a lone surrogate "
                             f"({surrogate_point(words[bad[0]], bad[1])}): {_WHY}")
    cols = futures.columns
    named: list[tuple[str, Sequence[str], np.ndarray | None]] = [
        ("stream", cols.streams, cols.stream), ("family", cols.families, cols.family),
        ("context", cols.contexts, cols.context)]
    if cols.task_text.dtype.kind != "S":   # held as bytes: every id ASCII
        named.append(("task", cols.task_text.tolist(), None))   # one id per task: a value's index is its task's
    for name, words, code in named:
        bad = _first_bad(words)
        if bad is not None:
            pos = bad[0] if code is None else int(np.flatnonzero(code == bad[0])[0])
            raise InputError(futures.source, None, name, f"future task {pos + 1} holds a lone surrogate "
                             f"({surrogate_point(words[bad[0]], bad[1])}): {_WHY}")
    if _first_bad(futures.labels) is None:   # every menu label at once; the menus one by one only if one fails
        return
    for m, menu in enumerate(cols.menus):
        bad = _first_bad(menu)
        if bad is not None:
            pos = int(np.flatnonzero(cols.menu == m)[0])
            raise InputError(futures.source, None, "menu", f"future task {pos + 1} holds a lone surrogate "
                             f"({surrogate_point(menu[bad[0]], bad[1])}): {_WHY}")
