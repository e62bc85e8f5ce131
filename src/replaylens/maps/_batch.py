"""σ for many streams at once: the per-stream draws of :func:`stream_perm`, laid out in one pass.

Each (role, stream) keeps its own generator and draws its blocks in the same order as
:func:`stream_perm`, so every row is the same permutation; what is batched is the bookkeeping (block
positions found by one sort, one scatter for all streams) and roles that share a generator and a law
(pair with value, by default) are drawn once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..rng import derive_rng
from ._slots import SlotLaw, SlotSpec

__all__ = ["stream_perms"]

_MAX_TRIES = 100_000


def _block_groups(block_local: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Flat positions grouped by (row, block), blocks ascending and positions ascending within a
    block; with each group's start and size (padding, block < 0, is left out)."""
    t_n = block_local.shape[1]
    flat = block_local.reshape(-1)
    valid = np.flatnonzero(flat >= 0)
    width = int(flat.max(initial=-1)) + 1
    key = (valid // t_n) * width + flat[valid]
    order = np.argsort(key, kind="stable")
    positions = valid[order]
    sorted_key = key[order]
    starts = np.flatnonzero(np.r_[True, sorted_key[1:] != sorted_key[:-1]]) if sorted_key.size else valid[:0]
    sizes = np.diff(np.r_[starts, sorted_key.size])
    return positions, starts, sizes


def _draw(law: SlotLaw, n: int, g: np.random.Generator) -> list[int] | None:
    """``draw_block(law, n, g)`` (same draws) as a list; ``None`` for the identity (no draw)."""
    if law is SlotLaw.IDENTITY or n <= 1:
        return None
    p: list[int] = g.permutation(n).tolist()
    if law is SlotLaw.DERANGEMENT:
        tries = 1
        while any(map(int.__eq__, p, range(n))):  # a fixed point: redraw
            if tries >= _MAX_TRIES:  # pragma: no cover (acceptance ≈ e^-1 per try)
                raise RuntimeError("derangement rejection sampler did not accept")
            p = g.permutation(n).tolist()
            tries += 1
    return p


def stream_perms(spec: SlotSpec, roles: Sequence[str], streams: Sequence[str],
                 block_local: np.ndarray) -> dict[str, np.ndarray]:
    """``role -> (S, T)`` source positions: row ``i`` is ``stream_perm(spec, role, streams[i], row_blocks)``
    where ``row_blocks`` is row ``i`` of ``block_local`` before its ``-1`` padding (padding maps to itself)."""
    s_n, t_n = block_local.shape
    positions, starts, sizes = _block_groups(block_local)
    row_of = positions[starts] // t_n if starts.size else starts
    bounds = np.searchsorted(row_of, np.arange(s_n + 1))
    starts_l, sizes_l, bounds_l = starts.tolist(), sizes.tolist(), bounds.tolist()
    out: dict[str, np.ndarray] = {}
    done: dict[tuple[int, str, SlotLaw], np.ndarray] = {}
    for role in roles:
        seed, law = spec._role(role)
        gen_role = "value" if (role == "pair" and spec.pair_shares_value) else role
        key = (seed, gen_role, law)
        if key not in done:
            local: list[int] = list(range(positions.size))  # group position -> its source, identity by default
            for i, name in enumerate(streams):
                lo, hi = bounds_l[i], bounds_l[i + 1]
                if law is SlotLaw.IDENTITY or all(sizes_l[q] <= 1 for q in range(lo, hi)):
                    continue  # stream_perm draws nothing here
                g = derive_rng(seed, gen_role, name)
                for q in range(lo, hi):
                    p = _draw(law, sizes_l[q], g)
                    if p is not None:
                        start = starts_l[q]
                        local[start : start + len(p)] = [start + x for x in p]
            perm = np.arange(s_n * t_n, dtype=np.int64)
            perm[positions] = positions[np.array(local, dtype=np.int64)]
            perm %= max(t_n, 1)  # flat source index -> position within its row (padding stays put)
            done[key] = perm.reshape(s_n, t_n)
        out[role] = done[key]
    return out
