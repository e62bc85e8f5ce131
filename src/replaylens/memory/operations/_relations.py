"""Which declared relations of the records an operation preserves, stream by stream.

Equality relations go through the interventions' law checks (:func:`replaylens.interventions.check_law`) on
padded integer codes: the block is folded into the key code, so a per-row multiset is a per-block multiset, and
a shorter output's padding never equals a record.  Inclusion relations (an operation that drops or merges
records can keep them) are checked here:

=======================  ======================================================================================
relation                 holds when, in every block of every stream
=======================  ======================================================================================
``record_count``         the number of records is unchanged
``pair_multiset``        the multiset of (key, outcome) pairs is unchanged (law ``pair_multiset``)
``key_outcome_binding``  every output (key, outcome) pair is an input record's pair: no outcome moved to another
                         key, averaged or invented
``key_sequence``         the key at every position of the stream's ingestion order (law ``key_sequence``)
``visibility``           the keys with a visible outcome and the keys with a masked one are the same sets
``order``                the records kept intact (block, text, key, outcome) keep their relative order
=======================  ======================================================================================
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ...interventions import Law, check_law, outcome_codes
from ...records import Record
from ._ops import record_text as _text

__all__ = ["RELATIONS", "RelationResult", "check_relations"]

RELATIONS = ("record_count", "pair_multiset", "key_outcome_binding", "key_sequence", "visibility", "order")

Streams = dict[str, list[Record]]


@dataclass(frozen=True)
class RelationResult:
    """One relation over every stream: whether it held, in how many streams it broke, and the first example."""

    relation: str
    held: bool
    streams_broken: int
    n_streams: int
    example: str = ""

    def line(self) -> str:
        if self.held:
            return f"{self.relation}: preserved in all {self.n_streams} streams"
        return f"{self.relation}: BROKEN in {self.streams_broken}/{self.n_streams} streams ({self.example})"

    def to_dict(self) -> dict[str, object]:
        return {"relation": self.relation, "held": self.held, "streams_broken": self.streams_broken,
                "n_streams": self.n_streams, "example": self.example}


def _ou(u: float) -> object:
    return "nan" if math.isnan(u) else u


def _fmt(u: float) -> str:
    return "masked" if math.isnan(u) else f"{u:g}"


class _Codes:
    """Integer codes of both sides (reference ``a``, operated ``b``), padded to (S, T) with −1."""

    def __init__(self, a: Streams, b: Streams) -> None:
        self.streams = list(a)
        recs = [r for s in self.streams for r in a[s]] + [r for s in self.streams for r in b.get(s, [])]
        self.n_a = sum(len(a[s]) for s in self.streams)

        def code(values: list[object]) -> tuple[np.ndarray, int]:
            index: dict[object, int] = {}
            out = np.fromiter((index.setdefault(v, len(index)) for v in values), dtype=np.int64, count=len(values))
            return out, max(len(index), 1)

        self.block, self.nb = code([r.block for r in recs])
        self.key, self.nk = code([r.key for r in recs])
        self.task, self.nt = code([(r.block, _text(r)) for r in recs])
        ys = np.fromiter((r.outcome for r in recs), dtype=np.float64, count=len(recs))
        self.ocode: np.ndarray
        self.ocode, self.no = outcome_codes(ys) if len(recs) else (np.zeros(0, dtype=np.int64), 1)
        self.visible = ~np.isnan(ys)
        lens_a = [len(a[s]) for s in self.streams]
        lens_b = [len(b.get(s, [])) for s in self.streams]
        self.t_n = max([1, *lens_a, *lens_b])
        s_n = len(self.streams)
        self.row = np.concatenate([np.repeat(np.arange(s_n), lens_a), np.repeat(np.arange(s_n), lens_b)])
        self.pos = np.concatenate([np.arange(n) for n in lens_a + lens_b]) if recs else np.zeros(0, dtype=np.int64)
        self.shape = (s_n, self.t_n)

    def grid(self, values: np.ndarray, side: str) -> np.ndarray:
        sl = slice(0, self.n_a) if side == "a" else slice(self.n_a, None)
        g = np.full(self.shape, -1, dtype=np.int64)
        g[self.row[sl], self.pos[sl]] = values[sl]
        return g


def _law(c: _Codes, law: Law, keys: np.ndarray, size_k: int, with_outcome: bool) -> np.ndarray:
    zeros = np.zeros(c.shape, dtype=np.int64)
    oc_a = c.grid(c.ocode, "a") if with_outcome else zeros
    oc_b = c.grid(c.ocode, "b") if with_outcome else zeros
    return np.asarray(check_law(law, block=zeros, keys=c.grid(keys, "b"), ocodes=oc_b, tasks=zeros,
                                ref_keys=c.grid(keys, "a"), ref_ocodes=oc_a, ref_tasks=zeros, masked_code=-2,
                                sizes=(1, c.t_n, size_k, c.no + 1)))


def _inclusion(c: _Codes, cols: Sequence[np.ndarray], *, equal: bool) -> np.ndarray:
    """Per stream: is the set of ``cols`` tuples of the output within (``equal``: equal to) the input's?"""
    rows = np.column_stack([c.row, *cols]) if len(c.row) else np.zeros((0, len(cols) + 1), dtype=np.int64)
    _, inv = np.unique(rows, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    ia, ib = inv[: c.n_a], inv[c.n_a:]
    ok = np.ones(len(c.streams), dtype=bool)
    bad_b = ~np.isin(ib, ia)
    ok[c.row[c.n_a:][bad_b]] = False
    if equal:
        bad_a = ~np.isin(ia, ib)
        ok[c.row[: c.n_a][bad_a]] = False
    return ok


def _order_ok(a: list[Record], b: list[Record]) -> tuple[bool, str]:
    """Greedy subsequence match of the intact output records against the input (optimal for a subsequence)."""
    where: dict[tuple[object, ...], list[int]] = {}
    for i, r in enumerate(a):
        where.setdefault((r.block, _text(r), r.key, _ou(r.outcome)), []).append(i)
    last, last_r = -1, None
    for r in b:
        pos = where.get((r.block, _text(r), r.key, _ou(r.outcome)))
        if not pos:
            continue
        nxt = next((p for p in pos if p > last), None)
        if nxt is None:
            return False, (f"record slot {r.slot} (key {r.key}, {_fmt(r.outcome)}) now follows slot "
                           f"{last_r.slot if last_r else '?'}, which came after it")
        last, last_r = nxt, r
    return True, ""


def _example(rel: str, s: str, a: list[Record], b: list[Record]) -> str:
    """A short description of how ``rel`` broke in stream ``s``."""
    by_a: dict[tuple[str, str], list[Record]] = {}
    by_b: dict[tuple[str, str], list[Record]] = {}
    for r in a:
        by_a.setdefault(r.block, []).append(r)
    for r in b:
        by_b.setdefault(r.block, []).append(r)
    blocks = list(dict.fromkeys([*by_a, *by_b]))
    for blk in blocks:
        ra, rb = by_a.get(blk, []), by_b.get(blk, [])
        where = f"stream {s}, block {'/'.join(blk)}"
        if rel == "record_count" and len(ra) != len(rb):
            return f"{where}: {len(ra)} -> {len(rb)} records"
        if rel == "pair_multiset":
            ca, cb = Counter((r.key, _ou(r.outcome)) for r in ra), Counter((r.key, _ou(r.outcome)) for r in rb)
            if ca != cb:
                k, u = next(iter((ca - cb) or (cb - ca)))
                return f"{where}: pair ({k}, {u}) x{ca.get((k, u), 0)} -> x{cb.get((k, u), 0)}"
        if rel == "key_outcome_binding":
            pairs = {(r.key, _ou(r.outcome)) for r in ra}
            for r in rb:
                if (r.key, _ou(r.outcome)) not in pairs:
                    return f"{where}: (key {r.key}, outcome {_fmt(r.outcome)}) at slot {r.slot} is no input record's"
        if rel == "visibility":
            for vis in (True, False):
                ka = {r.key for r in ra if math.isnan(r.outcome) != vis}
                kb = {r.key for r in rb if math.isnan(r.outcome) != vis}
                if ka != kb:
                    what = "a visible" if vis else "a masked"
                    lost, new = sorted(ka - kb), sorted(kb - ka)
                    return f"{where}: keys with {what} outcome " + (f"lost {', '.join(lost)}" if lost else
                                                                  f"gained {', '.join(new)}")
    if rel == "key_sequence":
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            if (x.block, x.key) != (y.block, y.key):
                return f"stream {s}: position {i} key {x.key} -> {y.key}"
        return f"stream {s}: {len(a)} -> {len(b)} keys"
    if rel == "order":
        return f"stream {s}: " + _order_ok(a, b)[1]
    return f"stream {s}"


def check_relations(before: Streams, after: Streams) -> list[RelationResult]:
    """Every relation of :data:`RELATIONS`, judged on each stream of ``before`` against ``after``."""
    c = _Codes(before, after)
    blk_key = c.block * c.nk + c.key
    results: dict[str, np.ndarray] = {
        "record_count": _law(c, Law.KEY_MULTISET, c.block, c.nb, False),
        "pair_multiset": _law(c, Law.PAIR_MULTISET, blk_key, c.nb * c.nk, True),
        "key_outcome_binding": _inclusion(c, [c.block, c.key, c.ocode], equal=False),
        "key_sequence": _law(c, Law.KEY_SEQUENCE, blk_key, c.nb * c.nk, False),
        "visibility": _inclusion(c, [c.block, c.key, c.visible.astype(np.int64)], equal=True),
        "order": np.array([_order_ok(before[s], after.get(s, []))[0] for s in c.streams], dtype=bool),
    }
    out = []
    for rel in RELATIONS:
        ok = results[rel]
        bad = np.flatnonzero(~ok)
        ex = ""
        if bad.size:
            s = c.streams[int(bad[0])]
            ex = _example(rel, s, before[s], after.get(s, []))
        out.append(RelationResult(rel, not bad.size, int(bad.size), len(c.streams), ex))
    return out
