"""Encode the planned streams by columns: one pass over the history and one over the future tasks.

:func:`prepare_columnar` gives the same :class:`StreamData` as the per-stream loop it replaces
(``_engine._prepare_streams_loop``, kept as the tests' oracle): label codes, blocks in first-appearance
order within each stream, each future task's visible prefix, menu codes and stratum code; every
per-stream array is a slice of a table-wide one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..records import FutureRows
from ._streams import EncodedStreams, StreamData

if TYPE_CHECKING:
    from ..records import FutureTasks, History
    from ._plan import ReplayPlan

__all__ = ["prepare_columnar"]


def _codes_of(vocab: np.ndarray, codes: np.ndarray, lookup: dict[str, int]) -> np.ndarray:
    """``lookup[v]`` for every value of the coded column ``vocab[codes]`` (looked up once per distinct value;
    ``KeyError`` for the smallest value not in ``lookup``)."""
    table = np.array([lookup.get(v, -1) for v in vocab.tolist()], dtype=np.int64)
    out = table[codes]
    missing = np.flatnonzero(out < 0)
    if missing.size:
        raise KeyError(min(vocab[np.unique(codes[missing])].tolist()))
    return out


def _block_codes(fam: tuple[np.ndarray, np.ndarray], ctx: tuple[np.ndarray, np.ndarray],
                 bcode: dict[tuple[str, str], int]) -> np.ndarray:
    """``bcode[(family, context)]`` for every row of the coded columns ``fam`` and ``ctx`` (each a
    ``(vocab, codes)``), looked up once per run of equal (family, context) rows."""
    (fv, fc), (cv, cc) = fam, ctx
    n = fc.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    start = np.flatnonzero(np.r_[True, (fc[1:] != fc[:-1]) | (cc[1:] != cc[:-1])])
    width = max(cv.size, 1)
    pair_u, pair_i = np.unique(fc[start].astype(np.int64) * width + cc[start], return_inverse=True)
    pair_code = np.array([bcode[(str(fv[p // width]), str(cv[p % width]))] for p in pair_u.tolist()],
                         dtype=np.int64)
    return np.repeat(pair_code[pair_i.reshape(-1)], np.diff(np.r_[start, n]))


def prepare_columnar(plan: ReplayPlan, history: History, futures: FutureTasks,
                     bcode: dict[tuple[str, str], int]) -> dict[str, StreamData]:
    """``stream -> StreamData`` for ``plan.streams`` (``bcode``: the block vocabulary's codes)."""
    code = {lab: i for i, lab in enumerate(plan.labels)}
    m_max = futures.menu_width
    st = history.text_codes("stream")[1]   # sorted by stream: each stream's rows are one run
    first = np.r_[0, np.flatnonzero(st[1:] != st[:-1]) + 1] if st.size else np.zeros(0, dtype=np.int64)
    counts = np.diff(np.r_[first, st.size])
    where = {n: (f, c) for n, f, c in zip(history.streams, first.tolist(), counts.tolist(), strict=True)}
    for s in plan.streams:
        if s not in where:
            raise KeyError(s)
    spans = [where[s] for s in plan.streams]
    starts = np.array([f for f, _ in spans], dtype=np.int64)
    lengths = np.array([c for _, c in spans], dtype=np.int64)
    rows = (np.repeat(starts - np.r_[0, np.cumsum(lengths)[:-1]], lengths) + np.arange(int(lengths.sum()))
            if lengths.size else np.zeros(0, dtype=np.int64))
    sid = np.repeat(np.arange(len(spans), dtype=np.int64), lengths)   # planned-stream index of each row
    offset = np.r_[0, np.cumsum(lengths)]                             # its rows' range in ``rows``
    # every stream planned, in the history's order (the usual case): the rows are the history's, and its
    # columns are used as they are (no copy of the outcomes and slots for the run)
    whole = rows.size == st.size and np.array_equal(starts, offset[:-1])

    def planned(col: np.ndarray) -> np.ndarray:
        return col.view() if whole else col[rows]   # (a view: made read-only below, the history's own is not)

    k_vocab, k_codes = history.text_codes("key")
    key_codes = _codes_of(k_vocab, planned(k_codes), code)
    (fv, fc), (cv, cc) = history.text_codes("family"), history.text_codes("context")
    block_global = _block_codes((fv, planned(fc)), (cv, planned(cc)), bcode)

    # blocks of each stream: first and last row (positions in ``rows``), rank by first appearance
    nb = len(bcode)
    key = sid * nb + block_global
    uk, first_at, inverse = np.unique(key, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    last_at = np.zeros(uk.size, dtype=np.int64)
    np.maximum.at(last_at, inverse, np.arange(key.size))
    by_first = np.lexsort((first_at, uk // max(nb, 1)))
    rank = np.empty(uk.size, dtype=np.int64)
    group_start = np.searchsorted(uk[by_first] // max(nb, 1), uk[by_first] // max(nb, 1), "left")
    rank[by_first] = np.arange(uk.size) - group_start
    block_local = rank[inverse]

    # future tasks of the planned streams, in the order of ``futures``
    cols = futures.columns
    pos = {s: i for i, s in enumerate(plan.streams)}
    f_sid = np.array([pos.get(s, -1) for s in cols.streams], dtype=np.int64)[cols.stream]
    keep = np.flatnonzero(f_sid >= 0)
    keep = keep[np.argsort(f_sid[keep], kind="stable")]
    f_sid = f_sid[keep]
    strata, s_code = cols.stratum_codes()
    stratum = np.array([bcode[r] for r in strata], dtype=np.int64)[s_code[keep]]
    feed_of = np.array([bcode.get(f, -1) for f in cols.feeds] + [-1], dtype=np.int64)
    feed_kept = cols.feed[keep]
    explicit = feed_kept >= 0
    feed = np.where(explicit, feed_of[feed_kept], stratum)
    want = f_sid * nb + feed
    found = np.zeros(feed.size, dtype=bool)
    at = np.zeros(feed.size, dtype=np.int64)
    if uk.size:
        at = np.searchsorted(uk, want).clip(0, uk.size - 1)
        found = (feed >= 0) & (uk[at] == want)
    missing = np.flatnonzero(explicit & ~found)
    if missing.size:  # a feeds block the stream lacks: the loop's last_pos[feed] lookup
        raise KeyError(cols.feeds[int(feed_kept[int(missing[0])])])
    # visible prefix: up to the feed block's last record (slots are unique and sorted within a stream)
    prefix = np.where(found, last_at[at] - offset[f_sid] + 1, lengths[f_sid]).astype(np.int64)
    # menu codes: each distinct menu encoded once
    table = np.full((max(len(cols.menus), 1), m_max), -1, dtype=np.int64)
    for i, m in enumerate(cols.menus):
        table[i, : len(m)] = [code[a] for a in m]
    menus = table[cols.menu[keep]]
    f_off = np.r_[0, np.cumsum(np.bincount(f_sid, minlength=len(spans)))].tolist()

    enc = EncodedStreams(codes=key_codes, outcomes=planned(history.outcome),
                         block_local=block_local, block_global=block_global, slots=planned(history.slot),
                         prefix=prefix, menus=menus, stratum_code=stratum)
    for a in (enc.codes, enc.outcomes, enc.block_local, enc.block_global, enc.slots, enc.prefix, enc.menus,
              enc.stratum_code):
        a.flags.writeable = False   # shared by every stream's view
    off = offset.tolist()
    out: dict[str, StreamData] = {}
    for i, s in enumerate(plan.streams):
        f0, n = spans[i]
        a, b = f_off[i], f_off[i + 1]
        out[s] = StreamData.view(s, history, slice(f0, f0 + n), FutureRows(cols, keep[a:b]), enc,
                                 (off[i], off[i + 1]), (a, b))
    return out
