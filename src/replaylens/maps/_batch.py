"""σ for many streams at once: the per-stream draws of :func:`stream_perm`, laid out in one pass.

Each (role, stream) keeps its own generator ``derive_rng(seed, role, stream)`` and draws its blocks
in the same order as :func:`stream_perm`, so every row is the same permutation.  What is batched:
the block positions (one sort), the generators' seeding (one vectorized SeedSequence/PCG64 pass
over all streams, :mod:`._pcg`) and the draws themselves (every generator advanced together, draw
for draw as numpy's ``permutation``); roles that share a generator and a law (pair with value, by
default) are drawn once.  A stream with a block longer than :data:`VEC_MAX_BLOCK` slots (or more
than :data:`VEC_MAX_SLOTS` drawn slots), or a batch of few long streams, uses numpy's own generator
(seeded from the same vectorized state), which is faster there.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._jit import loaded
from ..rng import derive_seed, stable_int, stable_ints
from ._compiled import shuffle_loop
from ._pcg import VectorPCG64, pcg64_states, shuffle_draws
from ._slots import SlotLaw, SlotSpec, draw_block, stream_perm

__all__ = ["VEC_MAX_BLOCK", "VEC_MAX_SLOTS", "VEC_MIN_STREAMS_PER_SLOT", "stream_perms", "vector_draws_match_numpy"]

VEC_MAX_BLOCK = 4
"""Largest block drawn by the vectorized generators (longer blocks: numpy's generator per stream).  They advance
every stream one draw per loop turn until the stream needing most draws is done, so their cost grows with the
block size (and, for derangements, with the longest run of rejected shuffles), while numpy's costs ~10 µs per
stream: measured on 1,220 streams of 2 blocks, the vectorized draws are faster up to 4 slots a block and
numpy's from 5 (2x at 10, the 10⁶-record audit's blocks)."""
VEC_MAX_SLOTS = 512
"""Most drawn slots of one stream on the vectorized generators."""
VEC_MIN_STREAMS_PER_SLOT = 8
"""The vectorized generators run only for at least this many streams per drawn slot of the longest
(they advance all streams together, one draw per step; few long streams are cheaper one at a time)."""


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


def _place(local: np.ndarray, starts: np.ndarray, sizes: np.ndarray, perms: np.ndarray) -> None:
    """``local[start + t] = start + perm[t]`` for every group's t < size."""
    cols = np.arange(perms.shape[1])
    inside = cols < sizes[:, None]
    local[(starts[:, None] + cols)[inside]] = (starts[:, None] + perms)[inside]


def _role_local(seed: int, gen_role: str, law: SlotLaw, names: Sequence[str], name_ints: np.ndarray,
                starts: np.ndarray, sizes: np.ndarray, row_of: np.ndarray, n_pos: int) -> np.ndarray:
    """Group position -> its source position under one (seed, role, law) for every stream."""
    local = np.arange(n_pos, dtype=np.int64)
    if law is SlotLaw.IDENTITY:
        return local
    derive_seed(seed, gen_role)  # the seed is checked as derive_rng checks it
    dq = np.flatnonzero(sizes > 1)  # groups that draw, ordered by stream then block
    if not dq.size:
        return local
    g_rows, g_first, g_count = np.unique(row_of[dq], return_index=True, return_counts=True)
    states = pcg64_states([seed, stable_int(gen_role)], name_ints[g_rows])
    loop = shuffle_loop() if loaded() else None
    if loop is not None:  # numba loaded (a large run preloads it): every stream in one compiled pass
        q_sizes = sizes[dq]
        perms = np.empty((dq.size, int(q_sizes.max())), dtype=np.int64)
        loop(*states, g_first, g_first + g_count, q_sizes, law is SlotLaw.DERANGEMENT, perms)
        _place(local, starts[dq], q_sizes, perms)
        return local
    slots = np.add.reduceat(sizes[dq], g_first)  # the numpy paths: short blocks vectorized, the rest per stream
    small = (np.maximum.reduceat(sizes[dq], g_first) <= VEC_MAX_BLOCK) & (slots <= VEC_MAX_SLOTS)
    if small.any() and int(small.sum()) < VEC_MIN_STREAMS_PER_SLOT * int(slots[small].max()):
        small[:] = False  # too few streams for their length: one at a time is cheaper
    if small.any():
        sel = np.flatnonzero(small)
        q_small = dq[np.repeat(small, g_count)]
        first = np.r_[0, np.cumsum(g_count[sel])][:-1]
        gen = VectorPCG64(*(x[sel] for x in states))
        perms = shuffle_draws(gen, first, first + g_count[sel], sizes[q_small], law is SlotLaw.DERANGEMENT)
        _place(local, starts[q_small], sizes[q_small], perms)
    rest = np.flatnonzero(~small)
    if rest.size:  # numpy's own generator, seeded from the same state, stream by stream
        _draw_with_numpy(law, states, rest, dq, g_first, g_count, sizes, starts, local)
    return local


def _draw_with_numpy(law: SlotLaw, states: tuple[np.ndarray, ...], rest: np.ndarray, dq: np.ndarray,
                     g_first: np.ndarray, g_count: np.ndarray, sizes: np.ndarray, starts: np.ndarray,
                     local: np.ndarray) -> None:
    """Draw streams ``rest`` (indices into the drawing streams' ``states``, ``g_first``, ``g_count``) with
    numpy's own generator seeded from their PCG64 states, and place their blocks in ``local``.

    Stream g draws its ``g_count[g]`` blocks, the groups ``dq[g_first[g]:g_first[g] + g_count[g]]`` (each of
    2+ slots), in order.  Streams whose blocks all have one size n are drawn together per (n, block count):
    each stream's candidate rows from one ``Generator.permuted`` call (row by row the draws of repeated
    ``permutation(n)``), the fixed-point test of every candidate of every stream in one pass; a stream
    without enough derangements among its candidates, and a stream with mixed sizes, is drawn on its own
    (:func:`_stream_blocks`, from its state again).  Candidates past a stream's last block are left unused
    (its generator draws nothing else).
    """
    bit = np.random.PCG64(0)
    gen = np.random.Generator(bit)
    hi, lo, inc_hi, inc_lo = (x.tolist() for x in states)
    inner: dict[str, int] = {}
    outer: Any = {"bit_generator": "PCG64", "state": inner, "has_uint32": 0, "uinteger": 0}  # reused: set, read

    def seed(g: int) -> None:
        inner["state"], inner["inc"] = (hi[g] << 64) | lo[g], (inc_hi[g] << 64) | inc_lo[g]
        bit.state = outer

    first, count = g_first[rest], g_count[rest]
    size0 = sizes[dq[first]]
    q_of = dq[np.repeat(first, count) + _ramp(count)]  # the groups of rest's streams, stream by stream
    uniform = np.minimum.reduceat(sizes[q_of] == np.repeat(size0, count), np.r_[0, np.cumsum(count)[:-1]]) \
        if count.size else np.zeros(0, dtype=bool)
    done_q: list[np.ndarray] = []
    done: list[np.ndarray] = []
    single: list[int] = []
    kinds = size0 * (int(count.max(initial=0)) + 1) + count
    for kind in np.unique(kinds[uniform]).tolist():
        members = np.flatnonzero(uniform & (kinds == kind))
        n, b = int(size0[members[0]]), int(count[members[0]])
        k = b if law is not SlotLaw.DERANGEMENT else 3 * b + 6  # ~e candidates per derangement
        ramp = np.arange(n, dtype=np.int64)
        cand = np.empty((members.size, k, n), dtype=np.int64)
        cand[:] = ramp
        for view, g in zip(cand, rest[members].tolist(), strict=True):  # seed(g) inline: ~10 µs a stream in all
            inner["state"], inner["inc"] = (hi[g] << 64) | lo[g], (inc_hi[g] << 64) | inc_lo[g]
            bit.state = outer
            gen.permuted(view, axis=1, out=view)  # row by row: k successive permutation(n) (_shuffled_rows)
        if law is SlotLaw.DERANGEMENT:
            ok = ~(cand == ramp).any(axis=2)
            rank = np.cumsum(ok, axis=1)
            enough = rank[:, -1] >= b
            single.extend(rest[members[~enough]].tolist())
            take = ok & (rank <= b) & enough[:, None]
            chosen = cand[take]
            members = members[enough]
        else:
            chosen = cand.reshape(-1, n)
        done_q.append(dq[(first[members][:, None] + np.arange(b)).reshape(-1)])
        done.append(chosen.reshape(-1))
    single.extend(rest[~uniform].tolist())
    size_list = sizes.tolist()
    for g in single:
        seed(g)
        qs = dq[g_first[g] : g_first[g] + g_count[g]].tolist()
        done_q.append(np.asarray(qs, dtype=np.int64))
        done.append(np.concatenate(_stream_blocks(law, [size_list[q] for q in qs], gen)))
    if done_q:
        q_arr = np.concatenate(done_q)
        at = np.repeat(starts[q_arr], sizes[q_arr])
        local[at + _ramp(sizes[q_arr])] = np.concatenate(done) + at


def _ramp(sizes: np.ndarray) -> np.ndarray:
    """0, 1, ..., n−1 for every n in ``sizes``, concatenated."""
    ends = np.cumsum(sizes)
    return np.arange(int(ends[-1]) if ends.size else 0, dtype=np.int64) - np.repeat(ends - sizes, sizes)


def _stream_blocks(law: SlotLaw, sizes: list[int], gen: np.random.Generator) -> list[np.ndarray]:
    """One stream's block permutations (sizes >= 2), in order: ``[draw_block(law, n, gen) for n in sizes]``.

    The leading blocks are drawn one at a time; the trailing run of equal-size blocks is drawn from
    ``gen.permuted`` on a stack of ``arange(n)`` rows, which draws row by row exactly as repeated
    ``permutation(n)`` calls do (so a derangement, the first fixed-point-free candidate after the previous
    block's, is the same one).  Candidates past the last block's are drawn and left unused: only valid
    when ``gen`` is not used again afterwards (each (role, stream) generator draws one stream).
    """
    k = len(sizes)
    n = sizes[-1]
    lead = k - 1
    while lead > 0 and sizes[lead - 1] == n:
        lead -= 1
    out = [draw_block(law, size, gen) for size in sizes[:lead]]
    need = k - lead
    ramp = np.arange(n, dtype=np.int64)
    if law is not SlotLaw.DERANGEMENT:
        out.extend(_shuffled_rows(gen, ramp, need))
        return out
    while need:
        cand = _shuffled_rows(gen, ramp, 3 * need + 6)  # ~e candidates per derangement
        ok = np.flatnonzero(~(cand == ramp).any(axis=1))[:need]
        out.extend(cand[ok])
        need -= ok.size
    return out


def _shuffled_rows(gen: np.random.Generator, ramp: np.ndarray, rows: int) -> np.ndarray:
    """``rows`` successive ``gen.permutation(ramp.size)`` draws as the rows of one array."""
    buf = np.empty((rows, ramp.size), dtype=np.int64)
    buf[:] = ramp
    return gen.permuted(buf, axis=1, out=buf)


def _per_stream(spec: SlotSpec, roles: Sequence[str], streams: Sequence[str],
                block_local: np.ndarray) -> dict[str, np.ndarray]:
    """The reference: :func:`stream_perm` stream by stream, padded rows mapping to themselves."""
    s_n, t_n = block_local.shape
    out = {role: np.tile(np.arange(t_n, dtype=np.int64), (s_n, 1)) for role in roles}
    for i, name in enumerate(streams):
        row = block_local[i]
        n = int(np.count_nonzero(row >= 0))
        for role in roles:
            out[role][i, :n] = stream_perm(spec, role, name, row[:n])
    return out


@functools.cache
def vector_draws_match_numpy() -> bool:
    """Whether the vectorized seeding and draws reproduce this numpy's generators, on a probe that takes both
    batch paths (many short streams, one long block) and every law; where they do not, :func:`stream_perms`
    draws stream by stream with numpy's own generators (the same permutations, slower)."""
    sizes = np.random.default_rng(0).integers(1, 4, size=(64, 2))  # 64 streams >= 8 per drawn slot
    rows = [np.repeat(np.arange(2), s) for s in sizes] + [np.repeat(np.arange(2), (VEC_MAX_BLOCK + 6, 3))]
    padded = np.full((len(rows), max(r.size for r in rows)), -1, dtype=np.int64)
    for i, r in enumerate(rows):
        padded[i, : r.size] = r
    names = [f"probe-{i}" for i in range(len(rows))]
    spec = SlotSpec(value_seed=11, time_seed=12, reorder_seed=13, pair_shares_value=False, pair_seed=14,
                    pair_law=SlotLaw.PERMUTATION)
    roles = ("value", "pair", "time", "reorder")
    got = _batched(spec, roles, names, padded)
    want = _per_stream(spec, roles, names, padded)
    return all(np.array_equal(got[r], want[r]) for r in roles)


def stream_perms(spec: SlotSpec, roles: Sequence[str], streams: Sequence[str],
                 block_local: np.ndarray) -> dict[str, np.ndarray]:
    """``role -> (S, T)`` source positions: row ``i`` is ``stream_perm(spec, role, streams[i], row_blocks)``
    where ``row_blocks`` is row ``i`` of ``block_local`` before its ``-1`` padding (padding maps to itself)."""
    if not vector_draws_match_numpy():
        return _per_stream(spec, roles, streams, block_local)
    return _batched(spec, roles, streams, block_local)


def _batched(spec: SlotSpec, roles: Sequence[str], streams: Sequence[str],
             block_local: np.ndarray) -> dict[str, np.ndarray]:
    """:func:`stream_perms` on the vectorized generators (:mod:`._pcg`)."""
    s_n, t_n = block_local.shape
    positions, starts, sizes = _block_groups(block_local)
    row_of = positions[starts] // t_n if starts.size else starts
    name_ints: np.ndarray | None = None
    out: dict[str, np.ndarray] = {}
    done: dict[tuple[int, str, SlotLaw], np.ndarray] = {}
    for role in roles:
        seed, law = spec._role(role)
        gen_role = "value" if (role == "pair" and spec.pair_shares_value) else role
        key = (seed, gen_role, law)
        if key not in done:
            if name_ints is None and law is not SlotLaw.IDENTITY:
                name_ints = stable_ints(list(streams))
            local = _role_local(seed, gen_role, law, streams,
                                name_ints if name_ints is not None else np.zeros(0, dtype=np.uint64),
                                starts, sizes, row_of, positions.size)
            perm = np.arange(s_n * t_n, dtype=np.int64)
            perm[positions] = positions[local]
            perm %= max(t_n, 1)  # flat source index -> position within its row (padding stays put)
            done[key] = perm.reshape(s_n, t_n)
        out[role] = done[key]
    return out
