"""Apply one cell to a whole :class:`History` (a pure operator returning a new history)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import ConfigError
from ..maps import LabelMap, SlotSpec, identity, stream_perm
from ..records import History
from ._cells import Cell, get_cell, transform_batch

__all__ = ["apply_cell"]


def apply_cell(
    history: History,
    cell: str | Cell,
    *,
    labels: Sequence[str] | None = None,
    rho: LabelMap | None = None,
    spec: SlotSpec | None = None,
    seed: int = 0,
) -> History:
    """The transformed history D_q(ρ, σ): ``cell`` applied to every stream (laws checked).

    ``labels`` is the canonical label order ρ acts on (default: the history's keys in first-appearance
    order); ``spec`` the slot draw (default ``SlotSpec.from_seed(seed)``).  Task inputs stay in their
    slots except under ``reorder``, where whole events (task, key, outcome, time, id, metadata) move.
    For ``rename`` only the history side is shown here (the menu is relabelled at replay time).
    The input is never modified.
    """
    c = get_cell(cell) if isinstance(cell, str) else cell
    labs = tuple(labels) if labels is not None else history.labels
    code = {lab: i for i, lab in enumerate(labs)}
    missing = [k for k in history.labels if k not in code]
    if missing:
        raise ConfigError(f"history keys {missing} are not in the label order {list(labs)}")
    rmap = rho if rho is not None else identity(len(labs))
    if rmap.n != len(labs):
        raise ConfigError(f"map {rmap.name} acts on {rmap.n} labels, the label order has {len(labs)}")
    sp = spec if spec is not None else SlotSpec.from_seed(seed)
    orig = history.to_columns()   # decoded once (the text columns are decoded on each access)
    cols = {k: v.copy() for k, v in orig.items()}
    cols["key"] = cols["key"].astype(np.result_type(cols["key"], np.asarray(labs, dtype=str)))  # a label may be wider
    k_vocab, k_codes = history.text_codes("key")
    label_code = np.array([code[k] for k in k_vocab.tolist()], dtype=np.int64)[k_codes]
    for s in history.streams:
        sl = history.stream_slice(s)
        blocks = list(zip(orig["family"][sl].tolist(), orig["context"][sl].tolist(), strict=True))
        local = {b: i for i, b in enumerate(dict.fromkeys(blocks))}
        blk = np.array([[local[b] for b in blocks]], dtype=np.int64)
        codes = label_code[sl][None, :]
        outs = history.outcome[sl][None, :].astype(np.float64)
        perms = {role: stream_perm(sp, role, s, blk[0])[None, :] for role in ("value", "pair", "time", "reorder")}
        tb = transform_batch(c, codes=codes, outcomes=outs, block=blk, perms=perms, maps=rmap.array[None, :])
        src = tb.tasks[0]
        cols["key"][sl] = np.asarray(labs, dtype=object)[tb.keys[0, 0]].astype(str)
        cols["outcome"][sl] = tb.outcomes[0]
        for name in ("task", "event_time", "event_id", "metadata"):
            cols[name][sl] = orig[name][sl][src]
    return History.from_columns(**cols, source=f"{history.source} [{c.name}, ρ={rmap.name}]")  # type: ignore[arg-type]
