"""Terminal states of a state operator under a replay cell, and the pair-state distance (partA §1.3, §1.5).

d̄_pair = (1/|C|) Σ_c ‖s_c^aligned − s_c^pair‖₂ over the contexts c, then averaged over the outer maps and
the streams.  The cell histories are built with the same cell functional, slot draws and law checks as
the replay engine (:func:`replaylens.interventions.transform_batch`, :func:`replaylens.maps.stream_perm`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ...agents import RecordBatch
from ...errors import ConfigError
from ...interventions import get_cell, transform_batch
from ...maps import LabelMap, SlotSpec, stream_perm
from ...records import History
from ._core import StateOperator

__all__ = ["CellStates", "cell_states", "pair_state_distance"]

ROLES = ("value", "pair", "time", "reorder")


@dataclass(frozen=True, eq=False)
class CellStates:
    """``states[s, m, b]``: the exposed terminal state of block ``blocks[b]`` in stream ``streams[s]`` under
    map ``maps[m]`` (a block without records holds the exposure of the zero accumulator)."""

    cell: str
    streams: tuple[str, ...]
    maps: tuple[str, ...]
    blocks: tuple[tuple[str, str], ...]
    states: np.ndarray


def cell_states(op: StateOperator, history: History, *, labels: Sequence[str], cell: str,
                maps: Sequence[LabelMap], spec: SlotSpec,
                blocks: Sequence[tuple[str, str]] | None = None) -> CellStates:
    """Terminal exposed block states of ``op`` on the ``cell`` histories of every stream and map.

    ``labels`` is the canonical label order the maps act on (the replay's menu vocabulary);
    ``blocks`` the block order of the result (default: the history's blocks in first-appearance order).
    """
    c = get_cell(cell)
    labs = tuple(labels)
    code = {lab: i for i, lab in enumerate(labs)}
    family, context, keys = history.family, history.context, history.key   # decoded once, sliced per stream
    hist_blocks = tuple(dict.fromkeys(zip(family.tolist(), context.tolist(), strict=True)))
    blks = tuple(blocks) if blocks is not None else hist_blocks
    bcode = {b: i for i, b in enumerate(blks)}
    if any(b not in bcode for b in hist_blocks):
        raise ConfigError(f"history blocks {[b for b in hist_blocks if b not in bcode]} are not in `blocks`")
    streams = history.streams
    t_n = max(history.stream_slice(s).stop - history.stream_slice(s).start for s in streams)
    s_n = len(streams)
    codes = np.full((s_n, t_n), -1, dtype=np.int64)
    outs = np.full((s_n, t_n), np.nan)
    local = np.full((s_n, t_n), -1, dtype=np.int64)
    glob = np.zeros((s_n, t_n), dtype=np.int64)
    perms = {r: np.broadcast_to(np.arange(t_n, dtype=np.int64), (s_n, t_n)).copy() for r in ROLES}
    for i, s in enumerate(streams):
        sl = history.stream_slice(s)
        bl = list(zip(family[sl].tolist(), context[sl].tolist(), strict=True))
        loc = {b: k for k, b in enumerate(dict.fromkeys(bl))}
        n = len(bl)
        codes[i, :n] = [code[k] for k in keys[sl].tolist()]
        outs[i, :n] = history.outcome[sl]
        local[i, :n] = [loc[b] for b in bl]
        glob[i, :n] = [bcode[b] for b in bl]
        for r in ROLES:
            perms[r][i, :n] = stream_perm(spec, r, s, local[i, :n])
    mp = np.stack([m.array for m in maps])
    tb = transform_batch(c, codes=codes, outcomes=outs, block=local, perms=perms, maps=mp)
    m_n = mp.shape[0]
    keys = tb.keys.reshape(s_n * m_n, t_n)
    records = RecordBatch(
        keys=keys, outcomes=np.repeat(tb.outcomes, m_n, axis=0), blocks=np.repeat(glob, m_n, axis=0),
        tasks=np.zeros_like(keys), valid=keys >= 0, cuts=np.full((s_n * m_n, 1), t_n, dtype=np.int64),
        labels=labs, block_names=blks, task_names=())
    st = op.states_batch(records)[:, 0]  # (S·M, B, ds)
    return CellStates(c.name, streams, tuple(m.name for m in maps), blks, st.reshape(s_n, m_n, len(blks), -1))


def pair_state_distance(op: StateOperator, history: History, *, labels: Sequence[str], maps: Sequence[LabelMap],
                        spec: SlotSpec, blocks: Sequence[tuple[str, str]] | None = None) -> np.ndarray:
    """Per-stream d̄_pair: the Euclidean distance between the aligned and pair terminal states, averaged
    over ``blocks`` (contexts; default the history's blocks) and then over ``maps``: an (S,) array."""
    a = cell_states(op, history, labels=labels, cell="aligned", maps=maps, spec=spec, blocks=blocks)
    p = cell_states(op, history, labels=labels, cell="pair", maps=maps, spec=spec, blocks=blocks)
    dist = np.sqrt(((a.states - p.states) ** 2).sum(axis=-1))  # (S, M, B)
    return dist.mean(axis=2).mean(axis=1)
