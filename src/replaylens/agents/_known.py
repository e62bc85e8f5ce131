"""Writers with known laws (per-block state, zero at the start of each block), with both paths.

The canonical calibration laws (paper, "Known writer laws"), with c(u) = u − ½ and e_ℓ the basis
vector of the supplied producer label, s_0 = 0 per family–context block; a stratum reads its own
block's state (strata without a block, e.g. survival, read the zero state); first-canonical argmax:

* replay-invariant: s ← s + α c(u) 𝟏
* key-only:         s ← s + α e_ℓ
* commutative:      s ← s + α c(u) e_ℓ   (α = 1: the endpoint-witness relation writer)
* order-sensitive:  s ← d·s + (1 + 0.01 c(u)) e_ℓ

Commutative sums are accumulated exactly in integer micro-units of utility (six decimals, as ledgers
display them): c(u) = round(10⁶u) − 500000, so sums are order-independent and exact ties stay ties;
α multiplies the exact sum at readout, so the three α values give identical actions.  A masked
outcome contributes c = 0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ._protocols import Agent, FutureInput, QueryBatch, RecordBatch, TaskInput
from ._ties import TieRule, choose, choose_batch, to_micro

__all__ = [
    "BlockLinearWriter",
    "SupportLookup",
    "RecordCells",
    "block_key_reduce",
    "block_key_sums",
    "cell_reduce",
    "cell_sums",
    "first_positions",
    "gather_labels",
    "menu_reads",
    "commutative_agent",
    "invariant_agent",
    "key_only_agent",
    "order_sensitive_agent",
    "query_values",
    "record_cells",
    "relation_agent",
]

State = Mapping[tuple[str, str], Mapping[str, float]]

ALL_RELATIONS = ("value", "pair", "key_slot", "mask", "reorder", "rename", "rekey")


def _c(u: np.ndarray | float) -> np.ndarray:
    """c(u) = u − ½, with masked (NaN) outcomes contributing 0."""
    x = np.asarray(u, dtype=np.float64) - 0.5
    return np.where(np.isnan(x), 0.0, x)


@dataclass(frozen=True, eq=False)
class RecordCells:
    """Where each visible record of a :class:`RecordBatch` lands in its (H, K, B, n) state array.

    ``hi``/``ti`` are the (history, position) of the V records that some cut sees (valid and before
    the last cut), in row-major order; ``cell`` their flat (history, segment, block, label) index and
    ``hb`` their flat (history, block, label) index (the segment left out).
    """

    hi: np.ndarray
    ti: np.ndarray
    cell: np.ndarray
    hb: np.ndarray
    shape: tuple[int, int, int, int]

    def subset(self, keep: np.ndarray) -> RecordCells:
        """The records where ``keep`` (V,) is true."""
        return RecordCells(self.hi[keep], self.ti[keep], self.cell[keep], self.hb[keep], self.shape)


def _segments(cuts: np.ndarray, t_n: int) -> np.ndarray:
    """(H, T): the first cut index k whose prefix contains position t (= ``RecordBatch.segments``)."""
    t = np.arange(t_n)
    seg = np.zeros((cuts.shape[0], t_n), dtype=np.int64)
    for k in range(cuts.shape[1]):
        seg += t[None, :] >= cuts[:, k : k + 1]
    return seg


def record_cells(records: RecordBatch, mask: np.ndarray | None = None) -> RecordCells:
    """The visible records' cells (see :class:`RecordCells`), restricted to ``mask`` when given."""
    h, k, b, n = records.n_histories, records.n_cuts, records.n_blocks, records.n_labels
    t_n = records.keys.shape[1]
    seg = _segments(records.cuts, t_n)
    v = records.valid & (seg < k)
    if mask is not None:
        v &= mask
    hi, ti = np.nonzero(v)
    at = hi * t_n + ti  # flat positions: one-axis reads
    blk_key = np.take(records.blocks, at) * n + np.take(records.keys, at)
    return RecordCells(hi, ti, (hi * k + np.take(seg, at)) * (b * n) + blk_key, hi * (b * n) + blk_key,
                       (h, k, b, n))


def cell_sums(cells: RecordCells, weights: np.ndarray | None = None) -> np.ndarray:
    """Σ of ``weights`` (V,) (or the count, when None) per (history, cut, block, label): (H, K, B, n)."""
    size = int(np.prod(cells.shape))
    per = np.bincount(cells.cell, weights=weights, minlength=size).astype(np.float64, copy=False)
    return np.cumsum(per.reshape(cells.shape), axis=1)


def cell_reduce(cells: RecordCells, values: np.ndarray, ufunc: np.ufunc, fill: float) -> np.ndarray:
    """Like :func:`cell_sums` for max/min (``ufunc`` = np.maximum or np.minimum), ``fill`` where empty."""
    out = np.full(int(np.prod(cells.shape)), fill)
    ufunc.at(out, cells.cell, values)
    return ufunc.accumulate(out.reshape(cells.shape), axis=1)


def first_positions(cells: RecordCells) -> np.ndarray:
    """(H, B, n): the first position of each (history, block, label) among the visible records, inf if none.

    At cut k the first position is this one when it lies before the cut, else there is none.
    """
    h, _k, b, n = cells.shape
    out = np.full(h * b * n, np.inf)
    np.minimum.at(out, cells.hb, cells.ti.astype(np.float64))
    return out.reshape(h, b, n)


def block_key_sums(records: RecordBatch, values: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """Σ of ``values`` over visible records per (history, cut, block, label): an (H, K, B, n) array.

    Entry [h, k] sums the positions t < cuts[h, k] (one bincount over segments, then a cumulative sum).
    """
    h, k, b, n = records.n_histories, records.n_cuts, records.n_blocks, records.n_labels
    size = h * k * b * n
    # every position's flat (history, segment, block, label) cell, invisible ones sent to one spare cell:
    # bincount then sums each cell's values in row-major (history, position) order, as record_cells lists them
    seg = _segments(records.cuts, records.keys.shape[1])
    seen = records.valid & (seg < k) if mask is None else records.valid & (seg < k) & mask
    cell = ((np.arange(h)[:, None] * k + seg) * b + records.blocks) * n + records.keys
    np.copyto(cell, size, where=~seen)
    vals = np.asarray(values, dtype=np.float64)
    per = np.bincount(cell.reshape(-1), weights=np.where(seen, vals, 0.0).reshape(-1), minlength=size + 1)
    return np.cumsum(per[:size].reshape(h, k, b, n), axis=1)


def block_key_reduce(records: RecordBatch, values: np.ndarray, ufunc: np.ufunc, fill: float,
                     mask: np.ndarray | None = None) -> np.ndarray:
    """Like :func:`block_key_sums` for max/min (``ufunc`` = np.maximum or np.minimum), ``fill`` where empty."""
    cells = record_cells(records, mask)
    return cell_reduce(cells, np.asarray(values[cells.hi, cells.ti], dtype=np.float64), ufunc, fill)


def gather_labels(table: np.ndarray, index: tuple[np.ndarray, ...], labels: np.ndarray) -> np.ndarray:
    """``take_along_axis(table[index], max(labels, 0), axis=1)``: (Q, M) values of a (…, n) table at each
    query's leading ``index`` (one (Q,) array per leading axis) and label codes ``labels`` (Q, M) (a padding
    code < 0 reads label 0).  Gathered through flat positions in one pass, without the (Q, n) rows; the same
    values (a table that is not C-contiguous, or an index outside its axis, takes the two-step read)."""
    lab = np.where(labels >= 0, labels, 0)
    dims = table.shape[:len(index)]
    if not table.flags.c_contiguous or any(ix.size and (ix.min() < 0 or ix.max() >= d)
                                           for ix, d in zip(index, dims, strict=True)):
        return np.take_along_axis(table[index], lab, axis=1)
    flat = np.zeros(lab.shape[0], dtype=np.int64)
    for ix, d in zip(index, dims, strict=True):
        flat = flat * d + ix
    return table.reshape(-1)[(flat * table.shape[-1])[:, None] + lab]


def menu_reads(table: np.ndarray, fill: float | int, queries: QueryBatch) -> np.ndarray:
    """(Q, M): an (H, K, B, n) table read at each query's (row, cut, block) for its menu (at
    :attr:`QueryBatch.read_labels`), a padding item reading ``fill``: :func:`query_values`'s values, through
    flat positions in one pass.  Padding is read label −1 (as :class:`QueryBatch` pads menus and state labels;
    the table gets ``fill`` as a label −1 column); an index outside its axis raises, a negative one counts from
    the end, as numpy reads them."""
    h, k, b, n = table.shape
    flat = np.zeros(queries.row.shape[0], dtype=np.int64)
    for ix, d in zip((queries.row, queries.cut, queries.block), (h, k, b), strict=True):
        ix = np.asarray(ix, dtype=np.int64)
        if ix.size and (ix.min() < 0 or ix.max() >= d):
            ix = np.where(ix < 0, ix + d, ix)
            if ix.min() < 0 or ix.max() >= d:
                raise IndexError(f"query index out of bounds for an axis of size {d}")
        flat = flat * d + ix
    ext = np.empty((h * k * b, n + 1), dtype=table.dtype)
    ext[:, 0] = fill
    ext[:, 1:] = table.reshape(-1, n)
    return np.take(ext.reshape(-1), (flat * (n + 1) + 1)[:, None] + queries.read_labels)


def query_values(state: np.ndarray, queries: QueryBatch) -> np.ndarray:
    """Read (H, K, B, n) per-label state at each query's (row, cut, block) for its menu
    (at :attr:`QueryBatch.read_labels`): (Q, M)."""
    return gather_labels(state, (queries.row, queries.cut, queries.block), queries.read_labels)


@dataclass(frozen=True)
class BlockLinearWriter:
    """s ← decay·s + term(u)·(e_ℓ or 𝟏), per block; first-canonical argmax of scale·s over the menu.

    ``term`` maps outcomes to increments elementwise (arithmetic only, so scalar and array
    evaluations agree bit for bit).  With ``decay == 1`` (commutative laws) ``term`` must return
    integer-valued increments (e.g. micro-units), which are summed exactly in any order; otherwise
    plain float recursion in slot order.  ``all_keys`` adds the increment to every label (the
    replay-invariant law).
    """

    term: Callable[[np.ndarray], np.ndarray]
    decay: float = 1.0
    scale: float = 1.0
    all_keys: bool = False
    tie_rule: TieRule = TieRule.FIRST_CANONICAL
    name: str = "block-linear"
    params: Mapping[str, Any] = field(default_factory=dict)
    invariant_to: tuple[str, ...] = ("rename",)
    shares_label_maps: ClassVar[bool] = True  # per-label state: ρ-relabelled records give the ρ-relabelled state
    thread_safe: ClassVar[bool] = True  # act_batch reads only its arguments: shards may run on two threads

    @property
    def commutative(self) -> bool:
        return self.decay == 1.0

    # ---- per-record path (reference oracle)
    def init_state(self) -> State:
        return {}

    def update(self, state: State, task: TaskInput, key: str, outcome: float) -> State:
        inc = self.term(np.asarray([outcome], dtype=np.float64))
        blk = dict(state.get(task.block, {}))
        k = "\x00all" if self.all_keys else key
        if self.commutative:
            blk[k] = float(np.float64(blk.get(k, 0.0)) + inc[0])
        else:
            for kk in blk:
                blk[kk] = float(np.float64(self.decay) * np.float64(blk[kk]))
            blk[k] = float(np.float64(blk.get(k, 0.0)) + inc[0])
        new = dict(state)
        new[task.block] = blk
        return new

    def act(self, state: State, task: FutureInput, menu: tuple[str, ...], rng: np.random.Generator) -> str:
        blk = state.get(task.stratum, {})
        raw = [blk.get("\x00all", 0.0)] * len(menu) if self.all_keys else [blk.get(a, 0.0) for a in menu]
        return choose([float(np.float64(self.scale) * np.float64(x)) for x in raw], menu, self.tie_rule)

    # ---- array path
    def states_batch(self, records: RecordBatch) -> np.ndarray:
        """States at every cut: an (H, K, B, n) array."""
        inc = self.term(records.outcomes)
        if self.commutative:
            s = block_key_sums(records, inc)
            if self.all_keys:
                s = np.broadcast_to(s.sum(axis=3, keepdims=True), s.shape)
            return s
        h, kc, b, n = records.n_histories, records.n_cuts, records.n_blocks, records.n_labels
        t_n = records.keys.shape[1]
        s = np.zeros((h * b, n))  # row h's block blk is row h * b + blk
        snaps = np.zeros((h, kc, b, n))
        d = np.float64(self.decay)
        # the (history, cut) pairs read after each position, found once: cut value c is read after c records
        flat_cuts = records.cuts.reshape(-1)
        order = np.argsort(flat_cuts, kind="stable")
        bounds = np.searchsorted(flat_cuts[order], np.arange(t_n + 2))
        at0 = order[bounds[0]:bounds[1]]
        snaps.reshape(h * kc, b, n)[at0] = s.reshape(h, b, n)[at0 // kc]
        valid_t = np.ascontiguousarray(records.valid.T)
        blk_t = np.ascontiguousarray(np.where(records.valid, records.blocks, 0).T)  # padding: any real block
        every = np.arange(h)
        # flat (history, label) index of each position's key in an (H, n) array; ``all_keys``: every record adds
        # to label 0's entry (the reference's one "\x00all" accumulator), read for every label at the end
        keys = np.zeros_like(records.keys) if self.all_keys else np.maximum(records.keys, 0)
        key_t = np.ascontiguousarray((every[:, None] * n + keys).T)
        inc_t = np.ascontiguousarray(np.asarray(inc, dtype=np.float64).T)
        all_valid = np.all(valid_t, axis=1).tolist()
        # each history's current block state is worked on in ``cur`` (H, n) and written back to ``s`` when the
        # history moves to another block (switch) or a cut reads the states: per position the same float
        # operations in the same order as updating ``s`` in place (decay, then add the increment)
        switch = np.ones(t_n, dtype=bool)
        switch[1:] = (blk_t[1:] != blk_t[:-1]).any(axis=1)
        cur_blk = blk_t[0] if t_n else np.zeros(h, dtype=np.int64)
        cur = s[every * b + cur_blk]
        flat = cur.reshape(-1)
        switches, edges = switch.tolist(), bounds.tolist()
        for t in range(t_n):
            if switches[t]:
                s[every * b + cur_blk] = cur
                cur_blk = blk_t[t]
                cur = s[every * b + cur_blk]
                flat = cur.reshape(-1)
            if all_valid[t]:
                cur *= d
                flat[key_t[t]] += inc_t[t]
            else:
                rows = np.flatnonzero(valid_t[t])
                cur[rows] *= d
                flat[key_t[t, rows]] += inc_t[t, rows]
            if edges[t + 2] > edges[t + 1]:  # cuts read after this position
                hit = order[edges[t + 1]:edges[t + 2]]
                s[every * b + cur_blk] = cur
                snaps.reshape(h * kc, b, n)[hit] = s.reshape(h, b, n)[hit // kc]
        if self.all_keys:
            return np.broadcast_to(snaps[..., :1], snaps.shape)
        return snaps

    def act_batch(self, records: RecordBatch, queries: QueryBatch) -> np.ndarray:
        scores = np.float64(self.scale) * query_values(self.states_batch(records), queries)
        return choose_batch(scores, queries.menu, self.tie_rule, records.labels)

    def agent(self) -> Agent:
        return Agent(self.name, self, self, array=self, task_invariant=True, invariant_to=self.invariant_to,
                     spec={"name": self.name, **self.params})


def _micro_c(u: np.ndarray) -> np.ndarray:
    """c(u) in integer micro-units: round(10⁶u) − 500000 (0 when masked)."""
    return np.where(np.isnan(u), 0.0, to_micro(u) - 500_000.0)


def _one(u: np.ndarray) -> np.ndarray:
    return np.ones(np.shape(u))


def _order_inc(u: np.ndarray) -> np.ndarray:
    return 1.0 + 0.01 * _c(u)


def invariant_agent(alpha: float = 1.0) -> Agent:
    """Replay-invariant law s ← s + α c(u) 𝟏 (outcome-only nuisance): every cell leaves actions unchanged."""
    return BlockLinearWriter(_micro_c, scale=alpha * 1e-6, all_keys=True, name="invariant",
                             params={"alpha": alpha}, invariant_to=ALL_RELATIONS).agent()


def key_only_agent(alpha: float = 1.0) -> Agent:
    """Key-only (count) law s ← s + α e_ℓ."""
    return BlockLinearWriter(_one, scale=alpha, name="key-only", params={"alpha": alpha},
                             invariant_to=("value", "pair", "key_slot", "mask", "reorder", "rename")).agent()


def commutative_agent(alpha: float = 1.0) -> Agent:
    """Commutative-pairing law s ← s + α c(u) e_ℓ (pair transport leaves it exactly unchanged)."""
    return BlockLinearWriter(_micro_c, scale=alpha * 1e-6, name="commutative", params={"alpha": alpha},
                             invariant_to=("pair", "reorder", "rename")).agent()


def relation_agent() -> Agent:
    """The endpoint-witness relation writer: s_a ← s_a + (u − ½)·1[ℓ = a], first-canonical argmax."""
    return BlockLinearWriter(_micro_c, scale=1e-6, name="relation", invariant_to=("pair", "reorder", "rename")).agent()


def order_sensitive_agent(d: float = 0.2) -> Agent:
    """Order-sensitive (prefix-causal recency) law s ← d·s + (1 + 0.01 c(u)) e_ℓ."""
    return BlockLinearWriter(_order_inc, decay=d, name="order-sensitive", params={"d": d}).agent()


@dataclass(frozen=True)
class SupportLookup:
    """Finite-support lookup: the source agent's aligned identity action per (stream, task), frozen.

    Its state is constant and it receives no outcome, so every label replay leaves it unchanged,
    while every endpoint statistic equals the source writer's (Proposition "finite-support
    nonidentification").  Build with :func:`replaylens.replay.support_lookup`.
    """

    table: Mapping[tuple[str, str], str]
    name: str = "support-lookup"
    thread_safe: ClassVar[bool] = True  # a lookup in a table that is never written

    def init_state(self) -> None:
        return None

    def update(self, state: None, task: TaskInput, key: str, outcome: float) -> None:
        return None

    def act(self, state: None, task: FutureInput, menu: tuple[str, ...], rng: np.random.Generator) -> str:
        return self.table[(task.stream, task.task)]

    def act_batch(self, records: RecordBatch, queries: QueryBatch) -> np.ndarray:
        """Table lookup per query (the state is constant)."""
        code = {lab: i for i, lab in enumerate(records.labels)}
        out = np.empty(queries.row.shape[0], dtype=np.int64)
        for q in range(out.shape[0]):
            out[q] = code[self.table[(queries.stream_names[queries.stream[q]], queries.task_names[queries.task[q]])]]
        return out

    def agent(self) -> Agent:
        return Agent(self.name, self, self, array=self, invariant_to=(*ALL_RELATIONS[:-2], "rekey"),
                     spec={"name": self.name})
