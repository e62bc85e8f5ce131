"""The array path's displayed menus: every query's menu and read labels, built once per distinct menu."""

from __future__ import annotations

import numpy as np

from ..records import distinct_rows

__all__ = ["query_menus"]


def query_menus(all_menu: np.ndarray, q_f: np.ndarray, q_task: np.ndarray, cc: np.ndarray, mm: np.ndarray,
                maps: np.ndarray, inv: np.ndarray, menu_map: np.ndarray, history_map: np.ndarray, *,
                shared: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """Every query's displayed menu (Q, M) (ρ(menu) where its cell relabels the menu) and, for an agent
    sharing rows across maps, the labels its items are read at (ρ⁻¹ of the displayed codes where the cell
    relabels the history; −1 padding kept).  Both depend only on the query's (cell, draw, map) combination
    ``q_f`` and its task's menu: when there are at most half as many such pairs as queries they are built once
    per pair and gathered (the same values)."""
    m_n = maps.shape[0]
    first, u_of = distinct_rows(all_menu)
    uniq = all_menu[first]
    q_n, cdm, u_n = q_f.shape[0], cc.shape[0], uniq.shape[0]
    if cdm * u_n <= q_n // 2:
        base = np.broadcast_to(uniq, (cdm, *uniq.shape))
        f_c, f_m = cc[:, None, None], mm[:, None, None]
        key = q_f * u_n + u_of[q_task]
    else:  # every query on its own
        base = all_menu[q_task]
        f_c, f_m, key = cc[q_f][:, None], mm[q_f][:, None], None
    menu = np.where(menu_map[f_c], np.where(base >= 0, maps[f_m, np.maximum(base, 0)], -1), base) \
        if menu_map.any() else base
    labels = None
    if shared:  # a label ℓ shown under ρ is read at ρ⁻¹(ℓ) where ρ relabelled the history, else at ℓ
        # ρ⁻¹ with one more column that keeps the padding code −1 (a menu entry −1 reads that last column)
        inv_pad = np.concatenate([inv, np.full((m_n, 1), -1, dtype=inv.dtype)], axis=1)
        labels = inv_pad[f_m, menu] if history_map.all() else np.where(history_map[f_c], inv_pad[f_m, menu], menu)
    if key is None:
        return menu, labels
    width = all_menu.shape[1]
    return (np.take(menu.reshape(-1, width), key, axis=0),
            np.take(labels.reshape(-1, width), key, axis=0) if labels is not None else None)
