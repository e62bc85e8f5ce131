"""Replay cells: declared preservation laws hold (and are not vacuous), the vectorized transform agrees
with the per-record cell functional, and the paper's cell table holds on hand examples."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from replaylens.errors import ConfigError, LawViolation
from replaylens.interventions import (
    CELLS,
    Cell,
    Law,
    TransformedBatch,
    cell_record,
    check_law,
    check_laws_plain,
    get_cell,
    outcome_codes,
    register_cell,
    resolve_cells,
    transform_batch,
)
from replaylens.maps import SlotLaw, SlotSpec, stream_perm

ROLES = ("value", "pair", "time", "reorder")
BUILTIN = ("aligned", "value", "pair", "key_slot", "mask", "reorder", "rename")
OUTCOME_VALUES = (0.0, 0.25, 0.5, 1.0, math.nan)
COMMON = {Law.BLOCK_MEMBERSHIP, Law.KEY_MULTISET, Law.RECORD_COUNT}

# ---------------------------------------------------------------- random encoded histories


@dataclass
class Stream:
    codes: np.ndarray     # (T,) label codes
    outcomes: np.ndarray  # (T,) utilities, NaN masked
    block: np.ndarray     # (T,) block index (first-appearance order)


@dataclass
class Batch:
    streams: list[Stream]
    n_labels: int
    maps: np.ndarray      # (M, n_labels)
    spec: SlotSpec
    codes: np.ndarray     # (S, T) padded −1
    outcomes: np.ndarray  # (S, T) padded NaN
    block: np.ndarray     # (S, T) padded −1
    perms: dict[str, np.ndarray]  # role -> (S, T), padding maps to itself

    def stream_perms(self, s: int) -> dict[str, np.ndarray]:
        n = self.streams[s].codes.size
        return {r: p[s, :n] for r, p in self.perms.items()}


def _first_appearance(raw: list[int]) -> np.ndarray:
    rank: dict[int, int] = {}
    return np.array([rank.setdefault(b, len(rank)) for b in raw], dtype=np.int64)


@st.composite
def streams(draw: st.DrawFn, n_labels: int) -> Stream:
    t = draw(st.integers(1, 40))
    nb = draw(st.integers(1, min(4, t)))
    if draw(st.booleans()):  # contiguous blocks
        cuts = sorted(draw(st.sets(st.integers(1, t - 1), min_size=nb - 1, max_size=nb - 1))) if nb > 1 else []
        sizes = np.diff([0, *cuts, t])
        block = np.repeat(np.arange(nb), sizes)
    else:  # interleaved
        block = _first_appearance(draw(st.lists(st.integers(0, nb - 1), min_size=t, max_size=t)))
    codes = np.array(draw(st.lists(st.integers(0, n_labels - 1), min_size=t, max_size=t)), dtype=np.int64)
    outcomes = np.array(draw(st.lists(st.sampled_from(OUTCOME_VALUES), min_size=t, max_size=t)), dtype=np.float64)
    return Stream(codes, outcomes, block.astype(np.int64))


def build_batch(ss: list[Stream], n_labels: int, maps: np.ndarray, spec: SlotSpec) -> Batch:
    s_n = len(ss)
    t_n = max(s.codes.size for s in ss)
    codes = np.full((s_n, t_n), -1, dtype=np.int64)
    outcomes = np.full((s_n, t_n), np.nan)
    block = np.full((s_n, t_n), -1, dtype=np.int64)
    perms = {r: np.tile(np.arange(t_n, dtype=np.int64), (s_n, 1)) for r in ROLES}
    for i, s in enumerate(ss):
        n = s.codes.size
        codes[i, :n], outcomes[i, :n], block[i, :n] = s.codes, s.outcomes, s.block
        for r in ROLES:
            perms[r][i, :n] = stream_perm(spec, r, f"stream-{i}", s.block)
    return Batch(ss, n_labels, maps, spec, codes, outcomes, block, perms)


@st.composite
def batches(draw: st.DrawFn) -> Batch:
    n_labels = draw(st.integers(2, 5))
    ss = draw(st.lists(streams(n_labels), min_size=1, max_size=3))
    maps = np.array(draw(st.lists(st.permutations(list(range(n_labels))), min_size=1, max_size=3)),
                    dtype=np.int64)
    laws = st.sampled_from([SlotLaw.DERANGEMENT, SlotLaw.PERMUTATION])
    spec = SlotSpec.from_seed(draw(st.integers(0, 2**20)), draw(st.integers(0, 3)),
                              pair_shares_value=draw(st.booleans()), value_law=draw(laws), time_law=draw(laws),
                              reorder_law=draw(laws), pair_law=draw(laws))
    return build_batch(ss, n_labels, maps, spec)


# ---------------------------------------------------------------- independent law checks


def sources_of(cell: Cell, perms: Mapping[str, np.ndarray], shape: tuple[int, ...]) -> list[np.ndarray]:
    ident = np.broadcast_to(np.arange(shape[-1], dtype=np.int64), shape)
    return [ident if r == "id" else perms[r] for r in (cell.key_from, cell.outcome_from, cell.task_from)]


def failing_laws_vectorized(cell: Cell, b: Batch, out: TransformedBatch) -> set[Law]:
    """Check every law on the *output* (keys under every map) against aligned at the same map."""
    pad = b.block < 0
    s_n, t_n = b.codes.shape
    ref_keys = np.where(pad[:, None, :], -1, b.maps[:, np.maximum(b.codes, 0)].transpose(1, 0, 2))
    both, n_oc = outcome_codes(np.stack([b.outcomes, out.outcomes]))
    both = np.where(pad[None], -1, both)
    nan_codes = np.unique(both[0][np.isnan(b.outcomes) & ~pad].tolist() + both[1][np.isnan(out.outcomes) & ~pad]
                          .tolist())
    masked_code = int(nan_codes[0]) if nan_codes.size else n_oc
    ref_tasks = np.where(pad, -1, np.broadcast_to(np.arange(t_n), (s_n, t_n)))
    failing = set()
    for law in Law:
        ok = check_law(law, block=b.block, keys=out.keys, ocodes=both[1], tasks=out.tasks, ref_keys=ref_keys,
                       ref_ocodes=both[0], ref_tasks=ref_tasks, masked_code=masked_code,
                       sizes=(int(b.block.max()) + 1, t_n, b.n_labels, n_oc + 1),
                       sources=tuple(sources_of(cell, b.perms, (s_n, t_n))), menu_changed=cell.menu_map)
        assert ok.shape == (s_n, b.maps.shape[0])
        if not ok.all():
            failing.add(law)
    return failing


def failing_laws_plain(cell: Cell, b: Batch, out: TransformedBatch) -> set[Law]:
    failing = set()
    for s, stream in enumerate(b.streams):
        n = stream.codes.size
        srcs = [x.tolist() for x in sources_of(cell, b.stream_perms(s), (n,))]
        for m, rho in enumerate(b.maps):
            for law in Law:
                bad = check_laws_plain(
                    {law}, block=stream.block.tolist(), keys=out.keys[s, m, :n].tolist(),
                    outcomes=out.outcomes[s, :n].tolist(), tasks=out.tasks[s, :n].tolist(),
                    ref_keys=rho[stream.codes].tolist(), ref_outcomes=stream.outcomes.tolist(), sources=srcs,
                    menu_changed=cell.menu_map)
                if bad is not None:
                    assert bad is law
                    failing.add(law)
    return failing


def same_float(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


# ---------------------------------------------------------------- property tests


def test_builtin_cells_registered() -> None:
    assert set(BUILTIN) <= set(CELLS)
    for name in BUILTIN:
        assert CELLS[name].preserves >= COMMON


@given(batches())
def test_declared_laws_hold_for_every_cell(b: Batch) -> None:
    for cell in list(CELLS.values()):
        out = transform_batch(cell, codes=b.codes, outcomes=b.outcomes, block=b.block, perms=b.perms, maps=b.maps)
        # independent re-checks on the output itself, under every map
        assert not (failing_laws_vectorized(cell, b, out) & cell.preserves), cell.name
        assert not (failing_laws_plain(cell, b, out) & cell.preserves), cell.name
        # the two checkers agree on every law, declared or not
        assert failing_laws_vectorized(cell, b, out) == failing_laws_plain(cell, b, out), cell.name
        # padding stays padding
        pad = b.block < 0
        assert (out.keys[np.broadcast_to(pad[:, None, :], out.keys.shape)] == -1).all()
        assert np.isnan(out.outcomes[pad]).all() and (out.tasks[pad] == -1).all()
        assert out.keys.shape == (b.codes.shape[0], b.maps.shape[0], b.codes.shape[1])


@given(batches())
def test_cell_record_agrees_with_transform_batch(b: Batch) -> None:
    for cell in list(CELLS.values()):
        out = transform_batch(cell, codes=b.codes, outcomes=b.outcomes, block=b.block, perms=b.perms, maps=b.maps)
        for s, stream in enumerate(b.streams):
            perms = b.stream_perms(s)
            for m, rho in enumerate(b.maps):
                for t in range(stream.codes.size):
                    key, u, task = cell_record(cell, stream.codes, stream.outcomes, t, rho, perms)
                    assert key == out.keys[s, m, t], (cell.name, s, m, t)
                    assert same_float(u, float(out.outcomes[s, t])), (cell.name, s, t)
                    assert task == out.tasks[s, t], (cell.name, s, t)


@given(batches())
def test_batch_rows_equal_single_stream_transforms(b: Batch) -> None:
    for name in BUILTIN:
        cell = CELLS[name]
        out = transform_batch(cell, codes=b.codes, outcomes=b.outcomes, block=b.block, perms=b.perms, maps=b.maps)
        for s, stream in enumerate(b.streams):
            n = stream.codes.size
            one = transform_batch(cell, codes=stream.codes[None], outcomes=stream.outcomes[None],
                                  block=stream.block[None], perms={r: p[None] for r, p in b.stream_perms(s).items()},
                                  maps=b.maps)
            np.testing.assert_array_equal(one.keys[0], out.keys[s, :, :n])
            np.testing.assert_array_equal(one.outcomes[0], out.outcomes[s, :n])
            np.testing.assert_array_equal(one.tasks[0], out.tasks[s, :n])


@given(batches())
def test_core_invariants(b: Batch) -> None:
    """core.md §13.1: value and pair share the utility sequence when σ_p = σ_v; time receives the aligned
    utility sequence; value receives the aligned key sequence; x_t never moves (except under reorder)."""
    run = {name: transform_batch(CELLS[name], codes=b.codes, outcomes=b.outcomes, block=b.block, perms=b.perms,
                                 maps=b.maps) for name in BUILTIN}
    al = run["aligned"]
    if b.spec.pair_shares_value:
        np.testing.assert_array_equal(run["pair"].outcomes, run["value"].outcomes)
    np.testing.assert_array_equal(run["key_slot"].outcomes, al.outcomes)
    np.testing.assert_array_equal(run["value"].keys, al.keys)
    np.testing.assert_array_equal(run["mask"].keys, al.keys)
    np.testing.assert_array_equal(run["rename"].keys, al.keys)
    for name in BUILTIN:
        if name != "reorder":
            np.testing.assert_array_equal(run[name].tasks, al.tasks)


# ---------------------------------------------------------------- the checks are not vacuous


def hand_batch(t: int = 4, maps: list[list[int]] | None = None) -> Batch:
    """One block, distinct keys and outcomes, every role a cyclic shift (a derangement)."""
    codes = np.arange(t, dtype=np.int64) % 4
    stream = Stream(codes, np.array([0.0, 0.25, 0.5, 1.0] * (t // 4))[:t], np.zeros(t, dtype=np.int64))
    m = np.array(maps if maps is not None else [list(range(4)), [1, 0, 3, 2]], dtype=np.int64)
    b = build_batch([stream], 4, m, SlotSpec.from_seed(0))
    shift = np.roll(np.arange(t), -1)[None]
    b.perms = {r: shift.copy() for r in ROLES}
    return b


@pytest.mark.parametrize("name", BUILTIN)
def test_undeclared_laws_fail_on_a_generic_example(name: str) -> None:
    cell = CELLS[name]
    b = hand_batch()
    out = transform_batch(cell, codes=b.codes, outcomes=b.outcomes, block=b.block, perms=b.perms, maps=b.maps)
    failing = failing_laws_vectorized(cell, b, out)
    # exactly the laws the cell does not declare fail: the declarations are tight
    assert failing == set(Law) - cell.preserves
    assert failing_laws_plain(cell, b, out) == failing


def test_specific_non_vacuous_examples() -> None:
    b = hand_batch()

    def fails(name: str, law: Law) -> bool:
        out = transform_batch(CELLS[name], codes=b.codes, outcomes=b.outcomes, block=b.block, perms=b.perms,
                              maps=b.maps)
        return law in failing_laws_vectorized(CELLS[name], b, out)

    assert fails("value", Law.PAIR_MULTISET) and Law.PAIR_MULTISET not in CELLS["value"].preserves
    assert fails("key_slot", Law.KEY_SEQUENCE) and Law.KEY_SEQUENCE not in CELLS["key_slot"].preserves
    assert fails("key_slot", Law.PAIR_MULTISET)
    assert fails("pair", Law.OUTCOME_SEQUENCE) and Law.OUTCOME_SEQUENCE not in CELLS["pair"].preserves
    assert fails("pair", Law.KEY_SEQUENCE)
    assert fails("reorder", Law.TASK_SLOTS) and Law.TASK_SLOTS not in CELLS["reorder"].preserves
    assert fails("mask", Law.OUTCOME_MULTISET)
    assert fails("rename", Law.MENU)
    out = transform_batch(CELLS["reorder"], codes=b.codes, outcomes=b.outcomes, block=b.block, perms=b.perms,
                          maps=b.maps)
    assert out.tasks[0].tolist() == [1, 2, 3, 0]  # whole events, task inputs included, moved


def test_broken_cell_raises_law_violation() -> None:
    b = hand_batch()
    broken = Cell("broken", outcome_from="value", preserves=frozenset(COMMON | {Law.PAIR_MULTISET}))
    assert "broken" not in CELLS
    with pytest.raises(LawViolation) as info:
        transform_batch(broken, codes=b.codes, outcomes=b.outcomes, block=b.block, perms=b.perms, maps=b.maps)
    assert info.value.cell == "broken" and info.value.law == Law.PAIR_MULTISET.value
    # without checking, it runs
    transform_batch(broken, codes=b.codes, outcomes=b.outcomes, block=b.block, perms=b.perms, maps=b.maps,
                    check=False)
    cases: list[tuple[Cell, Law]] = [
        (Cell("moves-tasks", key_from="reorder", outcome_from="reorder", task_from="reorder",
              preserves=frozenset({Law.TASK_SLOTS})), Law.TASK_SLOTS),
        (Cell("not-hidden", preserves=frozenset({Law.OUTCOMES_HIDDEN})), Law.OUTCOMES_HIDDEN),
        (Cell("menu", menu_map=True, preserves=frozenset({Law.MENU})), Law.MENU),
        (Cell("keys", key_from="time", preserves=frozenset({Law.KEY_SEQUENCE})), Law.KEY_SEQUENCE),
    ]
    for cell, law in cases:
        with pytest.raises(LawViolation) as info:
            transform_batch(cell, codes=b.codes, outcomes=b.outcomes, block=b.block, perms=b.perms, maps=b.maps)
        assert info.value.law == law.value
    assert not {"broken", "moves-tasks", "not-hidden", "menu", "keys"} & set(CELLS)


def test_cross_block_source_breaks_block_membership() -> None:
    codes = np.array([[0, 1, 2, 3]])
    block = np.array([[0, 0, 1, 1]])
    cross = {r: np.array([[2, 3, 0, 1]]) for r in ROLES}  # moves records across blocks
    with pytest.raises(LawViolation) as info:
        transform_batch(CELLS["value"], codes=codes, outcomes=np.array([[0.0, 0.25, 0.5, 1.0]]), block=block,
                        perms=cross, maps=np.array([[0, 1, 2, 3]]))
    assert info.value.law == Law.BLOCK_MEMBERSHIP.value


# ---------------------------------------------------------------- the paper's cell table


def test_paper_cell_table_hand_example() -> None:
    # core.md §2.5 at ρ = ACMR = (1, 0, 3, 2), one block of four slots
    a = np.array([0, 1, 2, 3])
    y = np.array([0.9, 0.1, 0.7, 0.2])
    rho = np.array([1, 0, 3, 2])
    sv = np.array([1, 2, 3, 0])
    st_ = np.array([3, 0, 1, 2])
    sr = np.array([2, 3, 0, 1])
    perms = {"value": sv, "pair": sv, "time": st_, "reorder": sr}
    expect: dict[str, tuple[list[int], list[float], list[int]]] = {
        "aligned": ([1, 0, 3, 2], [0.9, 0.1, 0.7, 0.2], [0, 1, 2, 3]),
        "value": ([1, 0, 3, 2], [0.1, 0.7, 0.2, 0.9], [0, 1, 2, 3]),
        "pair": ([0, 3, 2, 1], [0.1, 0.7, 0.2, 0.9], [0, 1, 2, 3]),
        "key_slot": ([2, 1, 0, 3], [0.9, 0.1, 0.7, 0.2], [0, 1, 2, 3]),
        "mask": ([1, 0, 3, 2], [math.nan] * 4, [0, 1, 2, 3]),
        "reorder": ([3, 2, 1, 0], [0.7, 0.2, 0.9, 0.1], [2, 3, 0, 1]),
        "rename": ([1, 0, 3, 2], [0.9, 0.1, 0.7, 0.2], [0, 1, 2, 3]),
    }
    for name, (keys, outs, tasks) in expect.items():
        cell = CELLS[name]
        out = transform_batch(cell, codes=a[None], outcomes=y[None], block=np.zeros((1, 4), dtype=np.int64),
                              perms={r: p[None] for r, p in perms.items()}, maps=rho[None])
        assert out.keys[0, 0].tolist() == keys, name
        np.testing.assert_array_equal(out.outcomes[0], outs)
        assert out.tasks[0].tolist() == tasks, name
        for t in range(4):
            k, u, x = cell_record(cell, a, y, t, rho, perms)
            assert (k, x) == (keys[t], tasks[t]) and same_float(u, outs[t])
    assert CELLS["rename"].menu_map and not CELLS["aligned"].menu_map
    assert CELLS["rename"].baseline == "identity" and CELLS["value"].baseline == "same"


def test_worked_example_section_1_3() -> None:
    # (A, 0.9), (B, 0.1) with the swap σ = (1, 0) and ρ = id
    a = np.array([[0, 1]])
    y = np.array([[0.9, 0.1]])
    swap = {r: np.array([[1, 0]]) for r in ROLES}

    def run(name: str) -> list[tuple[str, float]]:
        out = transform_batch(CELLS[name], codes=a, outcomes=y, block=np.zeros((1, 2), dtype=np.int64), perms=swap,
                              maps=np.array([[0, 1]]))
        return [("AB"[k], float(u)) for k, u in zip(out.keys[0, 0], out.outcomes[0], strict=True)]

    assert run("aligned") == [("A", 0.9), ("B", 0.1)]
    assert run("value") == [("A", 0.1), ("B", 0.9)]
    assert run("pair") == [("B", 0.1), ("A", 0.9)]
    assert run("key_slot") == [("B", 0.9), ("A", 0.1)]


def test_outcome_codes_nan_is_one_value() -> None:
    codes, n = outcome_codes(np.array([[0.5, math.nan, 0.5], [math.nan, 1.0, 0.0]]))
    assert n == 4
    assert codes[0, 1] == codes[1, 0] and codes[0, 0] == codes[0, 2]
    assert len({int(codes[0, 0]), int(codes[0, 1]), int(codes[1, 1]), int(codes[1, 2])}) == 4


# ---------------------------------------------------------------- registry


@pytest.mark.parametrize(("alias", "name"), [
    ("time", "key_slot"), (" TIME ", "key_slot"), ("key-slot", "key_slot"), ("keyslot", "key_slot"),
    ("masked", "mask"), ("utility_masked", "mask"), ("consistent", "rename"), ("outcome", "value"),
    ("value_reassignment", "value"), ("pair_transport", "pair"), ("ingestion", "reorder"), ("Aligned", "aligned"),
])
def test_get_cell_aliases(alias: str, name: str) -> None:
    assert get_cell(alias) is CELLS[name]


def test_get_cell_unknown() -> None:
    with pytest.raises(ConfigError):
        get_cell("bogus")
    with pytest.raises(ConfigError):
        resolve_cells("value,bogus")


def test_resolve_cells() -> None:
    got = resolve_cells("value, time,value")
    assert [c.name for c in got] == ["aligned", "value", "key_slot"]
    assert [c.name for c in resolve_cells(["pair"])] == ["aligned", "pair"]
    assert [c.name for c in resolve_cells("all")] == list(CELLS)


def test_register_cell_validation_leaves_registry_untouched() -> None:
    before = dict(CELLS)
    bad: list[dict[str, Any]] = [
        {"name": "value"},                                   # duplicate name
        {"name": "x-role", "key_from": "sideways"},          # unknown role
        {"name": "x-base", "baseline": "elsewhere"},         # unknown baseline
    ]
    for kw in bad:
        with pytest.raises(ConfigError):
            register_cell(Cell(**kw))
    assert before == CELLS


def test_cell_roles() -> None:
    assert CELLS["aligned"].roles == ()
    assert CELLS["pair"].roles == ("pair",)
    assert CELLS["key_slot"].roles == ("time",)
    assert CELLS["reorder"].roles == ("reorder",)


@given(batches())
def test_law_checks_sharing_the_reference_codes_give_the_same_verdicts(b: Batch) -> None:
    """check_law with one ``reference`` dict for every cell of a batch (as the array path passes it) gives each
    law the verdict of a fresh check, declared or not, in any order of cells."""
    pad = b.block < 0
    s_n, t_n = b.codes.shape
    ocodes, n_oc = outcome_codes(b.outcomes)
    ident = np.broadcast_to(np.arange(t_n), (s_n, t_n))
    shared: dict[object, np.ndarray] = {}
    for cell in [*CELLS.values()][::-1]:
        src = sources_of(cell, b.perms, (s_n, t_n))
        keys = np.where(pad, -1, np.take_along_axis(b.codes, src[0], axis=1))
        oc = np.where(pad, -1, np.full_like(ocodes, n_oc) if cell.mask else np.take_along_axis(ocodes, src[1], 1))
        tasks = np.where(pad, -1, np.take_along_axis(ident, src[2], axis=1))
        for law in Law:
            kw: dict[str, Any] = dict(block=b.block, keys=keys, ocodes=oc, tasks=tasks,
                                      ref_keys=np.where(pad, -1, b.codes), ref_ocodes=np.where(pad, -1, ocodes),
                                      ref_tasks=np.where(pad, -1, ident), masked_code=n_oc,
                                      sizes=(int(b.block.max()) + 1, t_n, b.n_labels, n_oc + 1),
                                      sources=tuple(src), menu_changed=cell.menu_map)
            assert check_law(law, **kw, reference=shared).tolist() == check_law(law, **kw).tolist(), (cell, law)


_ROLE = st.sampled_from(["id", "value", "pair", "time", "reorder"])


@given(batches(), _ROLE, _ROLE, _ROLE, st.booleans(), st.sets(st.sampled_from(list(Law))))
def test_transform_batch_raises_exactly_when_a_declared_law_fails(b: Batch, key_from: str, outcome_from: str,
                                                                   task_from: str, mask: bool,
                                                                   laws: set[Law]) -> None:
    """Whatever shortcut transform_batch takes (laws whose columns equal the reference's are not sorted), it
    raises iff check_law finds a declared law failing, and names the first such law."""
    cell = Cell("probe", key_from=key_from, outcome_from=outcome_from, task_from=task_from, mask=mask,
                preserves=frozenset(laws))
    pad = b.block < 0
    s_n, t_n = b.codes.shape
    ocodes, n_oc = outcome_codes(b.outcomes)
    ident = np.broadcast_to(np.arange(t_n), (s_n, t_n))
    src = sources_of(cell, b.perms, (s_n, t_n))
    keys = np.where(pad, -1, np.take_along_axis(b.codes, src[0], axis=1))
    oc = np.where(pad, -1, np.full_like(ocodes, n_oc) if mask else np.take_along_axis(ocodes, src[1], 1))
    tasks = np.where(pad, -1, np.take_along_axis(ident, src[2], axis=1))
    failing = [law for law in sorted(laws, key=lambda x: x.value)
               if not check_law(law, block=b.block, keys=keys, ocodes=oc, tasks=tasks,
                                ref_keys=np.where(pad, -1, b.codes), ref_ocodes=np.where(pad, -1, ocodes),
                                ref_tasks=np.where(pad, -1, ident), masked_code=n_oc,
                                sizes=(int(b.block.max()) + 1, t_n, b.n_labels, n_oc + 1), sources=tuple(src),
                                menu_changed=False).all()]
    try:
        transform_batch(cell, codes=b.codes, outcomes=b.outcomes, block=b.block, perms=b.perms, maps=b.maps)
    except LawViolation as exc:
        assert failing and exc.law == failing[0].value
    else:
        assert not failing


@pytest.mark.parametrize("bad", [-1, 3])
def test_transform_batch_refuses_source_positions_outside_their_row(bad: int) -> None:
    # the gathers read each row through flat positions: a source outside 0..T-1 would read a neighbouring row
    codes = np.array([[0, 1, 0], [1, 0, 1]])
    perm = np.array([[1, 0, 2], [2, bad, 0]])
    with pytest.raises(IndexError, match=r"outside 0\.\.2"):
        transform_batch(CELLS["value"], codes=codes, outcomes=np.array([[0.0, 1.0, 0.5], [1.0, 0.0, 0.25]]),
                        block=np.zeros((2, 3), dtype=np.int64), perms={r: perm for r in ROLES},
                        maps=np.array([[0, 1], [1, 0]]), check=False)
