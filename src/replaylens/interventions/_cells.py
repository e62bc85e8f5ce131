"""Replay cells q: each changes one relation of the history and declares, as data, what it preserves.

At slot t of a block, with the within-block draw σ (pull convention) and outer map ρ:

=============  ==================  ==================  =============
cell           key ℓ_t^q           utility u_t^q       task input
=============  ==================  ==================  =============
aligned        ρ(a_t)              y_t                 x_t
value          ρ(a_t)              y_{σ_v(t)}          x_t
pair           ρ(a_{σ_p(t)})       y_{σ_p(t)}          x_t
key_slot       ρ(a_{σ_t(t)})       y_t                 x_t
mask           ρ(a_t)              NaN (masked)        x_t
reorder        ρ(a_{σ_r(t)})       y_{σ_r(t)}          x_{σ_r(t)}  (whole events move)
rename         ρ(a_t)              y_t                 x_t, and the menu is relabelled by ρ;
                                                       the chosen action is decoded by ρ⁻¹
=============  ==================  ==================  =============

History-only rekey is the map dimension itself: any cell at ρ ≠ id with the menu held fixed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import ConfigError, LawViolation
from ._laws import Law, check_law

__all__ = [
    "CELLS",
    "Cell",
    "TransformedBatch",
    "cell_record",
    "changed_slots",
    "get_cell",
    "outcome_codes",
    "register_cell",
    "resolve_cells",
    "transform_batch",
]

ID = "id"

_COMMON = frozenset({Law.BLOCK_MEMBERSHIP, Law.KEY_MULTISET, Law.RECORD_COUNT})
_COLUMNS = {  # the columns (keys, outcome codes, tasks) a law compares with the reference history's
    Law.TASK_SLOTS: "t", Law.KEY_SEQUENCE: "k", Law.OUTCOME_SEQUENCE: "o", Law.RECORD_COUNT: "k",
    Law.KEY_MULTISET: "k", Law.OUTCOME_MULTISET: "o", Law.PAIR_MULTISET: "ko", Law.EVENT_MULTISET: "kot",
}


@dataclass(frozen=True)
class Cell:
    """A replay cell: which slot role supplies the key, the outcome and the task input at each slot.

    ``key_from`` / ``outcome_from`` / ``task_from`` name a slot role (``value``, ``pair``, ``time``,
    ``reorder``) or ``id`` (stay in place).  ``preserves`` lists the laws the engine checks on
    every history the cell produces.  ``baseline`` is the map the direct contrast compares
    against: ``same`` (aligned at the same ρ, D_A^q(ρ)) or ``identity`` (aligned at id).
    """

    name: str
    key_from: str = ID
    outcome_from: str = ID
    task_from: str = ID
    mask: bool = False
    history_map: bool = True
    menu_map: bool = False
    preserves: frozenset[Law] = field(default_factory=frozenset)
    baseline: str = "same"
    migration: str = ""
    description: str = ""

    @property
    def roles(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r for r in (self.key_from, self.outcome_from, self.task_from) if r != ID))


CELLS: dict[str, Cell] = {}
_ALIASES = {"time": "key_slot", "keyslot": "key_slot", "key-slot": "key_slot", "masked": "mask",
            "utility_masked": "mask", "consistent": "rename", "consistent_renaming": "rename",
            "outcome": "value", "value_reassignment": "value", "pair_transport": "pair", "ingestion": "reorder"}


def register_cell(cell: Cell) -> Cell:
    """Add a cell to the registry (name must be new)."""
    if cell.name in CELLS:
        raise ConfigError(f"a cell named {cell.name!r} is already registered")
    for role in (cell.key_from, cell.outcome_from, cell.task_from):
        if role not in (ID, "value", "pair", "time", "reorder"):
            raise ConfigError(f"cell {cell.name!r}: unknown slot role {role!r}")
    if cell.baseline not in ("same", "identity"):
        raise ConfigError(f"cell {cell.name!r}: baseline must be 'same' or 'identity'")
    CELLS[cell.name] = cell
    return cell


ALIGNED = register_cell(Cell(
    "aligned",
    preserves=_COMMON | {Law.TASK_SLOTS, Law.KEY_SEQUENCE, Law.OUTCOME_SEQUENCE, Law.OUTCOME_MULTISET,
                         Law.PAIR_MULTISET, Law.EVENT_MULTISET, Law.MENU},
    migration="no change (reference)",
    description="the logged records as they are (under ρ, a history-only rekey)",
))
register_cell(Cell(
    "value", outcome_from="value",
    preserves=_COMMON | {Law.TASK_SLOTS, Law.KEY_SEQUENCE, Law.OUTCOME_MULTISET, Law.MENU},
    migration="moving scores across actions",
    description="outcome reassignment: which utility belongs to which key",
))
register_cell(Cell(
    "pair", key_from="pair", outcome_from="pair",
    preserves=_COMMON | {Law.TASK_SLOTS, Law.OUTCOME_MULTISET, Law.PAIR_MULTISET, Law.MENU},
    migration="reordering intact records",
    description="pair transport: where an intact key-outcome pair sits",
))
register_cell(Cell(
    "key_slot", key_from="time",
    preserves=_COMMON | {Law.TASK_SLOTS, Law.OUTCOME_SEQUENCE, Law.OUTCOME_MULTISET, Law.MENU},
    migration="changing which identifier sits over each score",
    description="key-slot reassignment: which key sits over an unchanged outcome",
))
register_cell(Cell(
    "mask", mask=True,
    preserves=_COMMON | {Law.TASK_SLOTS, Law.KEY_SEQUENCE, Law.OUTCOMES_HIDDEN, Law.MENU},
    migration="hiding outcomes",
    description="utility-masked: keys kept, outcomes hidden",
))
register_cell(Cell(
    "reorder", key_from="reorder", outcome_from="reorder", task_from="reorder",
    preserves=_COMMON | {Law.OUTCOME_MULTISET, Law.PAIR_MULTISET, Law.EVENT_MULTISET, Law.MENU},
    migration="reordering whole events at ingestion",
    description="ingestion reorder: whole events (task, key, outcome, time) move together",
))
register_cell(Cell(
    "rename", menu_map=True, baseline="identity",
    preserves=_COMMON | {Law.TASK_SLOTS, Law.KEY_SEQUENCE, Law.OUTCOME_SEQUENCE, Law.OUTCOME_MULTISET,
                         Law.PAIR_MULTISET, Law.EVENT_MULTISET},
    migration="relabelling logs and menus together",
    description="consistent renaming: history and menu relabelled by ρ, the choice decoded by ρ⁻¹",
))


def get_cell(name: str) -> Cell:
    """Look up a registered cell by name or alias."""
    key = _ALIASES.get(name.strip().lower(), name.strip().lower())
    try:
        return CELLS[key]
    except KeyError:
        raise ConfigError(f"unknown cell {name!r}; known cells: {', '.join(CELLS)}") from None


def resolve_cells(names: str | Sequence[str]) -> tuple[Cell, ...]:
    """Cells from a comma-separated list (``aligned`` is always included, first)."""
    items = [s for s in (names.split(",") if isinstance(names, str) else names) if s.strip()]
    if any(s.strip() == "all" for s in items):
        items = list(CELLS)
    cells = [ALIGNED] + [get_cell(s) for s in items]
    return tuple(dict.fromkeys(cells))


@dataclass(frozen=True, eq=False)
class TransformedBatch:
    """Transformed histories of S streams (padded to T) under M maps for one cell and one draw.

    ``keys`` (S, M, T) label codes supplied to the writer; ``outcomes`` (S, T) supplied utilities
    (NaN masked); ``tasks`` (S, T) the task-input position at each slot (−1 padding).
    """

    keys: np.ndarray
    outcomes: np.ndarray
    tasks: np.ndarray


def outcome_codes(outcomes: np.ndarray) -> tuple[np.ndarray, int]:
    """Integer code per distinct utility value (NaN is one value); returns (codes, n_codes)."""
    flat = outcomes.reshape(-1)
    _, inv = np.unique(flat, return_inverse=True, equal_nan=True)
    n = int(inv.max()) + 1 if inv.size else 0
    return inv.reshape(outcomes.shape).astype(np.int64), n


def transform_batch(
    cell: Cell,
    *,
    codes: np.ndarray,
    outcomes: np.ndarray,
    block: np.ndarray,
    perms: Mapping[str, np.ndarray],
    maps: np.ndarray,
    check: bool = True,
    ocodes: np.ndarray | None = None,
    n_ocodes: int | None = None,
    reference: dict[object, np.ndarray] | None = None,
) -> TransformedBatch:
    """Apply ``cell`` to S streams under every map at once and check its declared laws.

    ``codes``/``outcomes``/``block`` are (S, T) in slot order, padded with −1 / NaN / −1;
    ``perms[role]`` is the (S, T) source-position array of that role (padding maps to itself);
    ``maps`` is (M, n): row m holds the images of ρ_m.  The task input at each slot is identified
    by its original position.  Raises :class:`LawViolation` if a declared law fails.  ``reference``: a dict
    shared by the calls of one batch (the same codes, outcomes and block for every cell), in which the
    checks keep the reference history's multiset codes (:func:`check_law`).
    """
    s_n, t_n = codes.shape
    ident = np.broadcast_to(np.arange(t_n, dtype=np.int64), (s_n, t_n))
    pad = block < 0
    padded = bool(pad.any())

    def fill(x: np.ndarray, value: float) -> np.ndarray:
        """``x`` with ``value`` at the padding (``x`` itself when there is none)."""
        return np.where(pad, value, x) if padded else x

    def src(role: str) -> np.ndarray:
        return ident if role == ID else perms[role]

    ks, os_, ts = src(cell.key_from), src(cell.outcome_from), src(cell.task_from)
    checked: set[int] = set()
    row_start = np.arange(0, s_n * t_n, t_n, dtype=np.int64)[:, None]

    def within_rows(source: np.ndarray) -> np.ndarray:
        """``source``, its positions checked to lie in 0..T−1 (once a source; the identity needs no check)."""
        if source is not ident and id(source) not in checked:
            if source.size and (int(source.min()) < 0 or int(source.max()) >= t_n):
                raise IndexError(f"source positions outside 0..{t_n - 1}")
            checked.add(id(source))
        return source

    def gather(x: np.ndarray, source: np.ndarray) -> np.ndarray:
        """``np.take_along_axis(x, source, axis=1)`` (a new array): a copy at the identity, else one flat ``take``
        at the source's positions plus their row's start (the flat positions are made for each call and dropped
        after it: one (S, T) index at a time)."""
        if source is ident:
            return np.array(x, copy=True)
        return np.ascontiguousarray(x).reshape(-1).take((within_rows(source) + row_start).reshape(-1)).reshape(s_n, t_n)

    _m_n, n_lab = maps.shape
    hist_maps = maps if cell.history_map else np.broadcast_to(np.arange(n_lab), maps.shape)
    moved = gather(codes, ks)
    mapped = hist_maps[:, np.maximum(moved, 0)].transpose(1, 0, 2)
    keys = np.where(pad[:, None, :], -1, mapped) if padded else np.ascontiguousarray(mapped)
    outs = fill(np.full((s_n, t_n), np.nan) if cell.mask else gather(outcomes, os_), np.nan)
    tasks = fill(np.array(within_rows(ts), dtype=np.int64), -1)   # a slot's task input: its source position
    if check:
        # Laws are checked on the label codes before ρ: ρ is a bijection applied elementwise to both
        # the transformed and the reference history, so every law holds under ρ iff it holds at id.
        if ocodes is None or n_ocodes is None:
            ocodes, n_ocodes = outcome_codes(outcomes)
        masked_code = n_ocodes
        ref_oc = fill(ocodes, -1)
        oc = fill(np.full_like(ocodes, masked_code) if cell.mask else gather(ocodes, os_), -1)
        plain = fill(moved, -1)
        ref_tasks = fill(ident, -1)
        ref_keys = fill(codes, -1)
        sizes = (int(block.max()) + 1, t_n, n_lab, n_ocodes + 1)
        # a law that compares only columns equal to the reference's element by element holds on every row
        same = {"k": bool((plain == ref_keys).all()), "o": bool((oc == ref_oc).all()),
                "t": bool((tasks == ref_tasks).all())}
        # a per-block multiset law whose columns all come through one source that permutes each row's positions
        # within their blocks holds on every row (the same records, moved): no sorting needed
        col_src = {"k": ks, "o": None if cell.mask else os_, "t": ts}
        moves: dict[int, bool] = {}
        for law in sorted(cell.preserves, key=lambda x: x.value):
            if law in _COLUMNS and all(same[c] for c in _COLUMNS[law]):
                continue
            cols = [col_src[c] for c in _COLUMNS.get(law, "")]
            one = cols[0] if law in _MULTISETS and all(x is not None and x is cols[0] for x in cols) else None
            if one is not None:
                if id(one) not in moves:
                    moves[id(one)] = _moves_within_blocks(one, block)
                if moves[id(one)]:
                    continue
            ok = check_law(law, block=block, keys=plain, ocodes=oc, tasks=tasks, ref_keys=ref_keys,
                           ref_ocodes=ref_oc, ref_tasks=ref_tasks, masked_code=masked_code, sizes=sizes,
                           sources=(ks, os_, ts), menu_changed=cell.menu_map, reference=reference)
            if not ok.all():
                bad = int(np.flatnonzero(~ok)[0])
                raise LawViolation(cell.name, law.value, f"stream #{bad} of the batch")
    return TransformedBatch(keys=keys, outcomes=outs, tasks=tasks)


_MULTISETS = frozenset({Law.RECORD_COUNT, Law.KEY_MULTISET, Law.OUTCOME_MULTISET, Law.PAIR_MULTISET,
                        Law.EVENT_MULTISET})


def _moves_within_blocks(src: np.ndarray, block: np.ndarray) -> bool:
    """Is every row of the (S, T) source positions ``src`` a permutation of 0..T−1 that keeps each position in
    its block (``block``, −1 padding)?  Then any columns gathered through ``src`` hold, per block, the
    same multiset as the columns themselves (a sufficient condition for the multiset laws; linear, no sort)."""
    s_n, t_n = src.shape
    if src.size == 0:
        return True
    if int(src.min()) < 0 or int(src.max()) >= t_n:
        return False
    rows = np.arange(s_n, dtype=np.int64)[:, None]
    if not bool((block[rows, src] == block).all()):
        return False
    hits = np.bincount((rows * t_n + src).reshape(-1), minlength=s_n * t_n)
    return bool((hits == 1).all())


def cell_record(cell: Cell, codes: np.ndarray, outcomes: np.ndarray, t: int, rho: np.ndarray,
                perms: Mapping[str, np.ndarray]) -> tuple[int, float, int]:
    """The paper's cell functional at one slot (pull form): (key ℓ_t^q, utility u_t^q, task position).

    ``codes``/``outcomes`` are one stream's label codes and utilities in slot order, ``rho`` the map's
    images, ``perms[role][t]`` the source position of slot t.  Used by the per-record reference path.
    """
    def at(role: str) -> int:
        return t if role == ID else int(perms[role][t])

    k = int(codes[at(cell.key_from)])
    key = int(rho[k]) if cell.history_map else k
    u = float("nan") if cell.mask else float(outcomes[at(cell.outcome_from)])
    return key, u, at(cell.task_from)


def changed_slots(cell: Cell, codes: np.ndarray, outcomes: np.ndarray, rho: np.ndarray,
                  perms: Mapping[str, np.ndarray]) -> np.ndarray:
    """The slots t < len(codes) whose (key, utility, task position) under ``cell`` differ from the original
    record's, in slot order: :func:`cell_record` evaluated for every slot at once."""
    t = np.arange(codes.size)

    def at(role: str) -> np.ndarray:
        return t if role == ID else np.asarray(perms[role][: t.size], dtype=np.int64)

    k = codes[at(cell.key_from)].astype(np.int64)
    key = rho[k] if cell.history_map else k
    u = np.full(t.size, np.nan) if cell.mask else outcomes[at(cell.outcome_from)].astype(np.float64)
    u0 = outcomes.astype(np.float64)
    same_u = (np.isnan(u) & np.isnan(u0)) | (u == u0)
    return np.flatnonzero(~((key == codes) & same_u & (at(cell.task_from) == t)))
