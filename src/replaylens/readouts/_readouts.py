"""Action and consequence readouts (paper notation) computed from replay decisions.

All functions return :class:`StreamValues` (one pooled value per stream, ready for the
stream-cluster bootstrap) unless stated otherwise.  Orientation follows the paper:

* d(a, b) = mean 1[a(x) ≠ b(x)];
* A_q(ρ) = d(a_q^ρ, a_q^id)  (within-cell rekey response; A_rekey = A_aligned over the derangements);
* D_A^q(ρ) = d(a_q^ρ, a_aligned^ρ)  (direct contrast; consistent renaming compares with aligned at id);
* U_q(ρ), O_q(ρ) mean utility and oracle agreement; ΔU_q = U_q − U_aligned, ΔO_q = O_q − O_aligned;
* δ_U^q(ρ) = U_q(id) − U_q(ρ), δ_A^q(ρ) = A_q(ρ), δ_O^q(ρ) = O_q(ρ) − O_q(id);
* Γ_y^q = ⟨δ_y^aligned − δ_y^q⟩, Π_y^{P−V} = ⟨δ_y^pair − δ_y^value⟩, P_y = δ^pair − δ^aligned,
  E_y = δ^value − δ^key_slot.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..replay import Decisions
from ._pool import StreamValues, map_selection, pool_tasks

__all__ = [
    "UtilityDecomposition",
    "a_rekey",
    "action_response",
    "delta",
    "delta_o_direct",
    "delta_u_direct",
    "direct_action_contrast",
    "disagreement",
    "gamma",
    "mean_utility",
    "oracle_agreement",
    "pair_residual",
    "repeat_corrected_disagreement",
    "pi_pair_minus_value",
    "t_gr",
    "utility_decomposition",
    "value_time_contrast",
]

MapSel = str | Sequence[int]


def disagreement(a: np.ndarray, b: np.ndarray) -> float:
    """d(a, b) = (1/|X⁺|) Σ_x 1[a(x) ≠ b(x)]."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.size == 0:
        raise ValueError("d(a, b) needs two non-empty action arrays of the same shape")
    return float(np.mean(a != b))


#: decisions a readout's per-decision temporaries cover at once: maps are taken a few at a time, so a readout
#: over many maps holds a few maps' floats, not all of them (the per-map values are the same either way)
CHUNK_DECISIONS = 1 << 22

PerMap = Callable[[np.ndarray], np.ndarray]


def _map_chunks(dec: Decisions, sel: np.ndarray) -> list[np.ndarray]:
    """``sel`` split into consecutive runs of maps whose decisions number about :data:`CHUNK_DECISIONS`."""
    per_map = max(1, int(np.prod(dec.actions.shape[2:])))   # draws × repeats × tasks
    step = max(1, CHUNK_DECISIONS // per_map)
    return [sel[k:k + step] for k in range(0, len(sel), step)]


def _pooled(per: np.ndarray, dec: Decisions) -> np.ndarray:
    return pool_tasks(per, dec).mean(axis=(1, 2))   # (M', S)


def _finish(name: str, cell: str, dec: Decisions, per_map_task: np.ndarray | PerMap, sel: np.ndarray) -> StreamValues:
    """per_map_task: (M', D, P, N) → pool tasks/strata, average draws and repeats, then maps.  A callable gives
    the values at some of the maps ``sel`` (its argument), taken a few maps at a time (:func:`_map_chunks`)."""
    if callable(per_map_task):
        pooled = np.concatenate([_pooled(per_map_task(part), dec) for part in _map_chunks(dec, sel)])
    else:
        pooled = _pooled(per_map_task, dec)
    return _values(name, cell, dec, pooled, sel)


def _values(name: str, cell: str, dec: Decisions, pooled: np.ndarray, sel: np.ndarray) -> StreamValues:
    """The readout from its (M', S) per-map stream values: averaged over the maps ``sel``."""
    return StreamValues(name, cell, pooled.mean(axis=0), pooled, tuple(dec.plan.map_names[int(i)] for i in sel))


def action_response(dec: Decisions, cell: str = "aligned", maps: MapSel = "nonidentity") -> StreamValues:
    """A_q(ρ) = d(a_q^ρ, a_q^id): the rekey response inside cell q (same σ)."""
    c = dec.cell_index(cell)
    sel = map_selection(dec, maps)
    a = dec.actions[c]
    return _finish(f"A_{cell}", cell, dec, lambda part: a[part] != a[0][None], sel)


def a_rekey(dec: Decisions) -> StreamValues:
    """A_rekey: A_aligned(ρ) averaged over the non-identity maps (the nine derangements for 4 labels).

    With ≥ 2 repeats (a stochastic agent) this is the repeat-corrected T_gr form, so decoding noise of
    a history-blind random agent reads ≈ 0 rather than its disagreement rate.
    """
    if dec.plan.repeats >= 2:
        sv = t_gr(dec, "aligned", "aligned", "nonidentity")
        return StreamValues("T_gr(rekey)", "aligned", sv.values, sv.by_map, sv.maps)
    sv = action_response(dec, "aligned", "nonidentity")
    return StreamValues("A_rekey", "aligned", sv.values, sv.by_map, sv.maps)


def _baseline(dec: Decisions, cell: str, sel: np.ndarray) -> np.ndarray:
    """Aligned actions each (cell, map) is compared with: same map, or identity for consistent renaming."""
    a0 = dec.actions[0]
    cobj = dec.plan.cells[dec.cell_index(cell)]
    return np.broadcast_to(a0[0], a0[sel].shape) if cobj.baseline == "identity" else a0[sel]


def _default_direct_maps(dec: Decisions, cell: str) -> MapSel:
    cobj = dec.plan.cells[dec.cell_index(cell)]
    return "nonidentity" if cobj.baseline == "identity" else "identity"


def direct_action_contrast(dec: Decisions, cell: str, maps: MapSel | None = None) -> StreamValues:
    """D_A^q(ρ) = d(a_q^ρ, a_aligned^ρ); for consistent renaming d(a_rename^ρ, a_aligned^id).

    Default maps: ρ = id for history cells, the non-identity maps for consistent renaming.
    """
    sel = map_selection(dec, maps if maps is not None else _default_direct_maps(dec, cell))
    a = dec.actions[dec.cell_index(cell)]
    return _finish(f"D_A^{cell}", cell, dec, lambda part: a[part] != _baseline(dec, cell, part), sel)


def _chosen_utility(dec: Decisions, actions: np.ndarray) -> np.ndarray:
    """g̃(x_i, a) of every action in ``actions`` (shape (..., N), task i last): ``dec.utility[i, a]``."""
    return np.asarray(dec.utility[np.arange(dec.n_tasks), actions])


def _readout(dec: Decisions, y: str, c: int, sel: np.ndarray | None = None) -> np.ndarray:
    """The per-decision readout y of cell ``c`` at the maps ``sel`` (all maps when None; shape maps × draws ×
    repeats × tasks): computing it for every cell at once would hold a float array as large as all decisions,
    and for maps a readout does not use it would be wasted work."""
    a = dec.actions[c] if sel is None else dec.actions[c][sel]
    if y == "U":
        return _chosen_utility(dec, a)
    if y == "O":   # 0/1 as int8: differences stay exact integers, pooled exactly (pool_tasks)
        return (a == dec.oracle).view(np.int8)
    if y == "A":
        raise ValueError("use action_response / direct_action_contrast for y = A")
    raise ValueError(f"readout y must be 'U', 'A' or 'O'; got {y!r}")


def mean_utility(dec: Decisions, cell: str = "aligned", maps: MapSel = "identity") -> StreamValues:
    """U_q(ρ) = mean over x of g̃(x, a_q^ρ(x))."""
    sel, c = map_selection(dec, maps), dec.cell_index(cell)
    return _finish(f"U_{cell}", cell, dec, lambda part: _readout(dec, "U", c, part), sel)


def oracle_agreement(dec: Decisions, cell: str = "aligned", maps: MapSel = "identity") -> StreamValues:
    """O_q(ρ) = mean over x of 1[a_q^ρ(x) = a*(x)]."""
    sel, c = map_selection(dec, maps), dec.cell_index(cell)
    return _finish(f"O_{cell}", cell, dec, lambda part: _readout(dec, "O", c, part), sel)


def _direct(dec: Decisions, y: str, cell: str, maps: MapSel | None) -> StreamValues:
    sel = map_selection(dec, maps if maps is not None else _default_direct_maps(dec, cell))
    c = dec.cell_index(cell)
    return _finish(f"Δ{y}_{cell}", cell, dec, lambda part: _readout(dec, y, c, part) - _aligned_base(dec, y, c, part),
                   sel)


def _aligned_base(dec: Decisions, y: str, c: int, sel: np.ndarray) -> np.ndarray:
    """Aligned readout y that cell ``c`` at maps ``sel`` is compared with: aligned at the same maps, or aligned at
    ρ = id (broadcast over ``sel``) for consistent renaming."""
    if dec.plan.cells[c].baseline == "identity":
        r0 = _readout(dec, y, 0, np.array([0]))[0]
        return np.broadcast_to(r0, (len(sel), *r0.shape))
    return _readout(dec, y, 0, sel)


def delta_u_direct(dec: Decisions, cell: str, maps: MapSel | None = None) -> StreamValues:
    """ΔU_q(ρ) = U_q(ρ) − U_aligned(ρ) (positive: higher utility under the cell)."""
    return _direct(dec, "U", cell, maps)


def delta_o_direct(dec: Decisions, cell: str, maps: MapSel | None = None) -> StreamValues:
    """ΔO_q(ρ) = O_q(ρ) − O_aligned(ρ)."""
    return _direct(dec, "O", cell, maps)


def delta(dec: Decisions, y: str, cell: str, maps: MapSel = "nonidentity") -> StreamValues:
    """Structural orientation δ_y^q(ρ): U: U_q(id) − U_q(ρ); A: A_q(ρ); O: O_q(ρ) − O_q(id)."""
    sel = map_selection(dec, maps)
    c = dec.cell_index(cell)
    identity = np.array([0])
    per: PerMap
    if y == "A":
        a = dec.actions[c]
        per = lambda part: a[part] != a[0][None]   # noqa: E731
    elif y == "U":
        u0 = _readout(dec, "U", c, identity)
        per = lambda part: u0 - _readout(dec, "U", c, part)   # noqa: E731
    elif y == "O":
        o0 = _readout(dec, "O", c, identity)
        per = lambda part: _readout(dec, "O", c, part) - o0   # noqa: E731
    else:
        raise ValueError(f"y must be 'U', 'A' or 'O'; got {y!r}")
    return _finish(f"δ_{y}^{cell}", cell, dec, per, sel)


def _difference(name: str, cell: str, a: StreamValues, b: StreamValues) -> StreamValues:
    return StreamValues(name, cell, a.values - b.values, a.by_map - b.by_map, a.maps)


def gamma(dec: Decisions, y: str, cell: str, maps: MapSel = "nonidentity") -> StreamValues:
    """Γ_y^q = ⟨δ_y^aligned − δ_y^q⟩ (aligned minus cell interaction, at the realized σ*)."""
    return _difference(f"Γ_{y}^{cell}", cell, delta(dec, y, "aligned", maps), delta(dec, y, cell, maps))


def pi_pair_minus_value(dec: Decisions, y: str, maps: MapSel = "nonidentity") -> StreamValues:
    """Π_y^{P−V} = ⟨δ_y^pair − δ_y^value⟩."""
    return _difference(f"Π_{y}^(P-V)", "pair", delta(dec, y, "pair", maps), delta(dec, y, "value", maps))


def pair_residual(dec: Decisions, y: str, maps: MapSel = "nonidentity") -> StreamValues:
    """P_y = δ_y^pair − δ_y^aligned (= −Γ_y^pair per unit)."""
    return _difference(f"P_{y}", "pair", delta(dec, y, "pair", maps), delta(dec, y, "aligned", maps))


def value_time_contrast(dec: Decisions, y: str, maps: MapSel = "nonidentity") -> StreamValues:
    """E_y = δ_y^value − δ_y^key_slot (the diagonal value–time contrast)."""
    return _difference(f"E_{y}", "value", delta(dec, y, "value", maps), delta(dec, y, "key_slot", maps))


def t_gr(dec: Decisions, cell: str, reference: str = "aligned", maps: MapSel = "identity") -> StreamValues:
    """Repeat-corrected disagreement T_gr(c, e) for stochastic policies (needs ≥ 2 repeats).

    T_gr = mean_{r,s} 1[Y_cr ≠ Y_es] − ½ Σ_{j∈{c,e}} mean_{r<s} 1[Y_jr ≠ Y_js]; with two repeats this is
    ¼ Σ_{r,s} 1[Y_cr ≠ Y_es] − ½ Σ_j 1[Y_j1 ≠ Y_j2].  E[T_gr] = ½ Σ_a (p_c(a) − p_e(a))² ≥ 0; estimates are
    reported unclipped.  Under common random numbers (``plan.rng == "common"``) repeat r of both sides shares a
    generator, so the cross mean runs over the pairs r ≠ s only (the independent ones).
    Computed per decision unit, averaged within streams, then over streams.
    ``t_gr(dec, "aligned", "aligned", "nonidentity")`` is the repeat-corrected rekey response (each map
    against the identity map of the same cell).
    """
    p = dec.plan.repeats
    if p < 2:
        raise ValueError("T_gr needs at least two fresh repeats per cell (plan repeats >= 2)")
    sel = map_selection(dec, maps)
    yc = dec.actions[dec.cell_index(cell)][sel]      # (M', D, P, N)
    cobj = dec.plan.cells[dec.cell_index(cell)]
    ye = dec.actions[dec.cell_index(reference)]
    # renaming compares with aligned at ρ = id; a cell against itself is its rekey response (ρ vs id)
    same = cell == reference
    ye = np.broadcast_to(ye[0], ye[sel].shape) if (cobj.baseline == "identity" and reference == "aligned") or same \
        else ye[sel]
    per = repeat_corrected_disagreement(yc, ye, common=dec.plan.rng == "common")[:, :, None, :]  # (M', D, 1, N)
    return _finish(f"T_gr({cell},{reference})", cell, dec, per, sel)


def repeat_corrected_disagreement(yc: np.ndarray, ye: np.ndarray, *, common: bool) -> np.ndarray:
    """Per decision unit, T_gr between two sets of ``P >= 2`` repeats (the repeat axis is the second to last):
    mean cross disagreement 1[Y_cr ≠ Y_es] minus half the two sides' mean within-side disagreements.  With
    ``common`` (repeat r of both sides drew from one generator: common random numbers, or two replays of one
    agent on two histories) only the cross pairs r ≠ s enter (they are the independent ones, issue 47), which keeps
    E[T_gr] = ½ Σ_a (p_c(a) − p_e(a))²."""
    p = yc.shape[-2]
    cross = np.mean([(yc[..., r, :] != ye[..., s, :]) for r in range(p) for s in range(p)
                     if not (common and r == s)], axis=0)
    pairs = [(r, s) for r in range(p) for s in range(r + 1, p)]
    wc = np.mean([(yc[..., r, :] != yc[..., s, :]) for r, s in pairs], axis=0)
    we = np.mean([(ye[..., r, :] != ye[..., s, :]) for r, s in pairs], axis=0)
    return np.asarray(cross - 0.5 * (wc + we))


@dataclass(frozen=True)
class UtilityDecomposition:
    """Utility consequences of the action switches between a cell and aligned (per-stream values).

    ``net`` = mean ΔU over all tasks; ``absolute`` = mean |ΔU|; ``switch_rate`` = share of tasks whose
    action changed; ``conditional`` = mean ΔU over switched tasks; ``harm``/``tie``/``gain`` = shares of
    switches with ΔU < 0, = 0, > 0 (pooled over every switch of the stream).
    """

    cell: str
    net: StreamValues
    absolute: StreamValues
    switch_rate: StreamValues
    conditional: float
    harm: float
    tie: float
    gain: float
    n_switches: int


def utility_decomposition(dec: Decisions, cell: str, maps: MapSel | None = None) -> UtilityDecomposition:
    """Net, absolute and switch-conditional utility change of ``cell`` against its aligned baseline."""
    sel = map_selection(dec, maps if maps is not None else _default_direct_maps(dec, cell))
    c = dec.cell_index(cell)
    net, absolute, switch, switched = [], [], [], []
    for part in _map_chunks(dec, sel):   # a few maps at a time: the values and their order as with all at once
        du = _readout(dec, "U", c, part) - _aligned_base(dec, "U", c, part)
        sw = dec.actions[c][part] != _baseline(dec, cell, part)
        net.append(_pooled(du, dec))
        absolute.append(_pooled(np.abs(du), dec))
        switch.append(_pooled(sw, dec))
        switched.append(du[sw])
    du_sw = np.concatenate(switched)
    n = int(du_sw.size)
    return UtilityDecomposition(
        cell=cell,
        net=_values(f"ΔU_{cell}", cell, dec, np.concatenate(net), sel),
        absolute=_values(f"|ΔU|_{cell}", cell, dec, np.concatenate(absolute), sel),
        switch_rate=_values(f"switch_{cell}", cell, dec, np.concatenate(switch), sel),
        conditional=float(du_sw.mean()) if n else 0.0,
        harm=float((du_sw < 0).mean()) if n else 0.0,
        tie=float((du_sw == 0).mean()) if n else 0.0,
        gain=float((du_sw > 0).mean()) if n else 0.0,
        n_switches=n,
    )
