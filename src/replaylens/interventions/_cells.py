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
    "get_cell",
    "register_cell",
    "resolve_cells",
    "transform_stream",
]

ID = "id"

_COMMON = frozenset({Law.BLOCK_MEMBERSHIP, Law.KEY_MULTISET, Law.RECORD_COUNT})


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


@dataclass(frozen=True)
class TransformedBatch:
    """Transformed histories of one stream: (H, T) keys, outcomes, task codes; H = maps (one cell, one draw)."""

    keys: np.ndarray
    outcomes: np.ndarray
    tasks: np.ndarray
    events: np.ndarray  # (T,) source position of the event metadata (time, id) at each slot


def transform_stream(
    cell: Cell,
    *,
    codes: np.ndarray,
    outcomes: np.ndarray,
    tasks: np.ndarray,
    block: np.ndarray,
    perms: Mapping[str, np.ndarray],
    maps: np.ndarray,
    check: bool = True,
) -> TransformedBatch:
    """Apply ``cell`` to one stream under every map at once and check its declared laws.

    ``codes``/``outcomes``/``tasks``/``block`` are (T,) in slot order; ``perms[role]`` is the (T,)
    source-position array of that role; ``maps`` is (M, n) (row m = images of ρ_m).
    Returns (M, T) arrays.  Raises :class:`LawViolation` if a declared law fails.
    """
    t = codes.shape[0]
    ident = np.arange(t, dtype=np.int64)

    def src(role: str) -> np.ndarray:
        return ident if role == ID else perms[role]

    ks, os_, ts = src(cell.key_from), src(cell.outcome_from), src(cell.task_from)
    m = maps.shape[0]
    hist_maps = maps if cell.history_map else np.broadcast_to(np.arange(maps.shape[1]), maps.shape)
    keys = np.take_along_axis(hist_maps, np.broadcast_to(codes[ks], (m, t)), axis=1)
    outs = np.broadcast_to(np.full(t, np.nan) if cell.mask else outcomes[os_], (m, t))
    tks = np.broadcast_to(tasks[ts], (m, t))
    if check:
        ref_keys = np.take_along_axis(hist_maps, np.broadcast_to(codes, (m, t)), axis=1)
        ref_out = np.broadcast_to(outcomes, (m, t))
        ref_tasks = np.broadcast_to(tasks, (m, t))
        for law in sorted(cell.preserves, key=lambda x: x.value):
            ok = check_law(law, block=block, keys=keys, outcomes=outs, tasks=tks, ref_keys=ref_keys,
                           ref_outcomes=ref_out, ref_tasks=ref_tasks, sources=(ks, os_, ts),
                           menu_changed=cell.menu_map)
            if not ok.all():
                bad = int(np.flatnonzero(~ok)[0])
                raise LawViolation(cell.name, law.value, f"map #{bad} of this stream")
    return TransformedBatch(keys=keys, outcomes=np.array(outs), tasks=np.array(tks), events=ts)
