"""Label maps ρ and slot laws σ: enumeration, parsing, uniformity of the samplers, seeded draws."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import chisquare

from replaylens.errors import ConfigError
from replaylens.maps import (
    DERANGEMENTS_4,
    INVOLUTIONS_4,
    LabelMap,
    SlotLaw,
    SlotSpec,
    all_permutations,
    cyclic_shifts,
    derangements,
    draw_block,
    identity,
    parse_map,
    resolve_maps,
    stream_perm,
    uniform_derangement,
    uniform_permutation,
)

ARMS = ("coverage", "adaptive", "replicate", "mixed")
PAPER_D4 = ["ACMR", "ARMC", "AMCR", "RCMA", "RMCA", "RMAC", "MCAR", "MRCA", "MRAC"]
PAPER_D4_TUPLES = [(1, 0, 3, 2), (1, 2, 3, 0), (1, 3, 0, 2), (2, 0, 3, 1), (2, 3, 0, 1), (2, 3, 1, 0),
                   (3, 0, 1, 2), (3, 2, 0, 1), (3, 2, 1, 0)]


# ---------------------------------------------------------------- enumeration


def test_derangements_4_are_the_papers_nine() -> None:
    d4 = derangements(4)
    assert d4 == DERANGEMENTS_4
    assert [m.images for m in d4] == PAPER_D4_TUPLES
    assert [m.images for m in d4] == sorted(m.images for m in d4)  # lexicographic
    assert [m.letters(ARMS) for m in d4] == PAPER_D4
    assert all(m.is_derangement and not m.is_identity for m in d4)


@pytest.mark.parametrize(("n", "count"), [(2, 1), (3, 2), (4, 9), (5, 44), (6, 265)])
def test_derangement_counts(n: int, count: int) -> None:
    d = derangements(n)
    assert len(d) == count
    assert len(set(d)) == count
    assert all(m.is_derangement for m in d)


def test_small_n() -> None:
    assert derangements(0) == () and derangements(1) == ()
    assert len(all_permutations(4)) == 24
    assert [m.images for m in cyclic_shifts(4)] == [(1, 2, 3, 0), (2, 3, 0, 1), (3, 0, 1, 2)]


def test_involutions_4() -> None:
    assert len(INVOLUTIONS_4) == 3
    assert set(INVOLUTIONS_4) == {m for m in DERANGEMENTS_4 if m.compose(m).is_identity}
    assert [m.letters(ARMS) for m in INVOLUTIONS_4] == ["ACMR", "RMCA", "MRAC"]
    for m in INVOLUTIONS_4:
        assert m.inverse == m and m.is_derangement


def test_labelmap_validation_and_names() -> None:
    with pytest.raises(ConfigError):
        LabelMap((0, 0, 1))
    with pytest.raises(ConfigError):
        LabelMap((1, 2))
    assert identity(4).name == "id" and identity(4).is_identity
    assert LabelMap((1, 0, 3, 2)).name == "1032"
    big = LabelMap((*range(1, 12), 0))
    assert big.name == "1,2,3,4,5,6,7,8,9,10,11,0"
    # initials not distinct: letters() falls back to the name
    assert LabelMap((1, 0)).letters(("alpha", "apple")) == "10"


def test_inverse_compose_identities() -> None:
    for a in DERANGEMENTS_4:
        assert a.compose(a.inverse).is_identity and a.inverse.compose(a).is_identity
        assert a.inverse.inverse == a
        assert a.compose(identity(4)) == a == identity(4).compose(a)
        for b in DERANGEMENTS_4:
            codes = np.array([0, 1, 2, 3, 3, 1])
            np.testing.assert_array_equal(a.compose(b)(codes), a(b(codes)))
            assert a.compose(b).inverse == b.inverse.compose(a.inverse)
            for c in INVOLUTIONS_4:
                assert a.compose(b).compose(c) == a.compose(b.compose(c))


@given(st.permutations(list(range(12))).flatmap(lambda p: st.just(LabelMap(tuple(p)))),
       st.lists(st.integers(0, 11), max_size=30))
def test_map_apply_inverse_property(m: LabelMap, codes: list[int]) -> None:
    arr = np.asarray(codes, dtype=np.int64)
    np.testing.assert_array_equal(m.inverse(m(arr)), arr)
    labels = [f"L{i}" for i in range(12)]
    assert parse_map(m.name, labels) == m


# ---------------------------------------------------------------- parse / resolve


@pytest.mark.parametrize("text", ["1,0,3,2", "1032", " 1, 0, 3, 2 ", "ACMR", "acmr",
                                  json.dumps({"coverage": "adaptive", "adaptive": "coverage", "replicate": "mixed",
                                              "mixed": "replicate"})])
def test_parse_map_forms(text: str) -> None:
    assert parse_map(text, ARMS) == LabelMap((1, 0, 3, 2))


def test_parse_map_identity_and_cyclic() -> None:
    assert parse_map("id", ARMS) == identity(4)
    assert parse_map("identity", ARMS) == identity(4)
    assert parse_map("ARMC", ARMS) == LabelMap((1, 2, 3, 0))
    assert parse_map("CARM", ARMS) == identity(4)
    for m in DERANGEMENTS_4:
        assert parse_map(m.letters(ARMS), ARMS) == m
        assert parse_map(m.name, ARMS) == m


@pytest.mark.parametrize("text", [
    "1,1,3,2",                # not a permutation
    "103",                    # wrong length
    "1,0,3,2,4",              # wrong length
    "ACMA",                   # not a bijection of the initials
    "ACMX",                   # unknown initial
    "",                       # empty
    "{not json",              # invalid JSON
    '{"coverage": "adaptive"}',  # not every label
    json.dumps({"coverage": "adaptive", "adaptive": "adaptive", "replicate": "mixed", "mixed": "replicate"}),
    "nonsense",
    json.dumps({"coverage": ["adaptive"], "adaptive": "coverage", "replicate": "mixed", "mixed": "replicate"}),
    json.dumps({"coverage": 1, "adaptive": 0, "replicate": 3, "mixed": 2}),
])
def test_parse_map_rejects(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_map(text, ARMS)


def test_resolve_maps() -> None:
    got = resolve_maps("derangements", ARMS)
    assert got[0] == identity(4) and got[1:] == DERANGEMENTS_4
    got = resolve_maps("involutions+derangements+ACMR+id", ARMS)
    assert got[0] == identity(4)
    assert len(got) == 10 and len(set(got)) == 10
    assert got[1:4] == INVOLUTIONS_4
    assert resolve_maps(["ACMR", "1032", "id"], ARMS) == (identity(4), LabelMap((1, 0, 3, 2)))
    assert resolve_maps("ACMR", ARMS, include_identity=False) == (LabelMap((1, 0, 3, 2)),)
    assert resolve_maps("cyclic", ARMS)[1:] == cyclic_shifts(4)
    assert len(resolve_maps("all", ARMS)) == 24  # identity deduplicated
    assert resolve_maps("", ARMS) == (identity(4),)


def test_resolve_maps_rejects() -> None:
    with pytest.raises(ConfigError):
        resolve_maps("involutions", ("a", "b", "c"))
    with pytest.raises(ConfigError):
        resolve_maps("derangements", [f"l{i}" for i in range(8)])
    with pytest.raises(ConfigError):
        resolve_maps("all", [f"l{i}" for i in range(7)])
    with pytest.raises(ConfigError):
        resolve_maps("derangements+bogus", ARMS)


# ---------------------------------------------------------------- samplers


def _sattolo(n: int, g: np.random.Generator) -> np.ndarray:
    """Sattolo's algorithm: a uniform random n-cycle (NOT uniform on the derangements)."""
    p = np.arange(n)
    for i in range(n - 1, 0, -1):
        j = int(g.integers(0, i))  # j < i
        p[i], p[j] = p[j], p[i]
    return p


def _d4_counts(draws: list[tuple[int, ...]]) -> np.ndarray:
    c = Counter(draws)
    assert set(c) <= set(PAPER_D4_TUPLES)
    return np.array([c[t] for t in PAPER_D4_TUPLES], dtype=float)


def test_uniform_derangement_chi_square() -> None:
    g = np.random.default_rng(20260824)
    draws = [tuple(int(v) for v in uniform_derangement(4, rng=g)) for _ in range(9000)]
    counts = _d4_counts(draws)
    assert (counts > 0).all()
    assert chisquare(counts).pvalue > 1e-3


def test_sattolo_fails_the_same_test() -> None:
    g = np.random.default_rng(20260824)
    draws = [tuple(int(v) for v in _sattolo(4, g)) for _ in range(9000)]
    assert all(all(i != v for i, v in enumerate(d)) for d in draws)  # derangements, but...
    counts = _d4_counts(draws)
    assert int((counts > 0).sum()) == 6  # ...only the six 4-cycles
    assert chisquare(counts).pvalue < 1e-12


def test_uniform_permutation_chi_square() -> None:
    g = np.random.default_rng(7)
    perms = [m.images for m in all_permutations(4)]
    c = Counter(tuple(int(v) for v in uniform_permutation(4, rng=g)) for _ in range(9600))
    assert set(c) == set(perms)
    assert chisquare([c[p] for p in perms]).pvalue > 1e-3


@given(st.integers(2, 60), st.integers(0, 2**32))
def test_uniform_derangement_has_no_fixed_point(n: int, seed: int) -> None:
    d = uniform_derangement(n, rng=seed)
    assert d.dtype == np.int64
    assert sorted(d.tolist()) == list(range(n))
    assert not np.any(d == np.arange(n))


def test_sampler_arguments() -> None:
    with pytest.raises(ConfigError):
        uniform_derangement(1, rng=0)
    with pytest.raises(ConfigError):
        uniform_derangement(4, rng=None)
    with pytest.raises(ConfigError):
        uniform_permutation(4, rng=None)
    with pytest.raises(ConfigError):
        uniform_permutation(4, rng=-1)
    np.testing.assert_array_equal(uniform_derangement(9, rng=5), uniform_derangement(9, rng=5))
    np.testing.assert_array_equal(uniform_derangement(9, rng=np.random.SeedSequence(5)),
                                  uniform_derangement(9, rng=np.random.SeedSequence(5)))


def test_draw_block_laws() -> None:
    g = np.random.default_rng(1)
    np.testing.assert_array_equal(draw_block(SlotLaw.IDENTITY, 5, g), np.arange(5))
    np.testing.assert_array_equal(draw_block(SlotLaw.DERANGEMENT, 1, g), [0])  # one slot: identity
    np.testing.assert_array_equal(draw_block(SlotLaw.PERMUTATION, 0, g), np.zeros(0))
    assert not np.any(draw_block(SlotLaw.DERANGEMENT, 6, g) == np.arange(6))


# ---------------------------------------------------------------- SlotSpec / stream_perm

BLOCKS = np.array([0, 1, 0, 0, 2, 1, 1, 0, 2, 3, 1, 0, 2, 2, 1, 0, 0, 1, 2, 0] * 3)


def test_same_seed_same_bytes() -> None:
    for role in ("value", "pair", "time", "reorder"):
        a = stream_perm(SlotSpec.from_seed(20260822), role, "stream-7", BLOCKS)
        b = stream_perm(SlotSpec.from_seed(20260822), role, "stream-7", BLOCKS)
        assert a.tobytes() == b.tobytes()
    spec = SlotSpec(value_seed=1, time_seed=2, reorder_seed=3)
    assert spec.to_dict() == {"value_seed": 1, "time_seed": 2, "reorder_seed": 3, "pair_shares_value": True,
                              "pair_seed": None, "value_law": "derangement", "time_law": "permutation",
                              "reorder_law": "derangement", "pair_law": "derangement"}


def test_pair_shares_value_draw_and_time_differs() -> None:
    spec = SlotSpec.from_seed(3)
    value = stream_perm(spec, "value", "s", BLOCKS)
    np.testing.assert_array_equal(stream_perm(spec, "pair", "s", BLOCKS), value)
    assert not np.array_equal(stream_perm(spec, "time", "s", BLOCKS), value)
    assert not np.array_equal(stream_perm(spec, "reorder", "s", BLOCKS), value)
    own = SlotSpec.from_seed(3, pair_shares_value=False)
    assert not np.array_equal(stream_perm(own, "pair", "s", BLOCKS), value)
    np.testing.assert_array_equal(stream_perm(own, "value", "s", BLOCKS), value)
    # other draws of the same root seed differ
    assert not np.array_equal(stream_perm(SlotSpec.from_seed(3, 1), "value", "s", BLOCKS), value)
    with pytest.raises(ConfigError):
        stream_perm(spec, "nope", "s", BLOCKS)


def test_stream_draw_depends_only_on_its_own_inputs() -> None:
    spec = SlotSpec.from_seed(11)
    first = stream_perm(spec, "value", "alpha", BLOCKS)
    for other in ("beta", "gamma", "delta"):  # drawing other streams in between changes nothing
        stream_perm(spec, "value", other, BLOCKS)
        stream_perm(spec, "time", other, BLOCKS[:7])
    np.testing.assert_array_equal(stream_perm(spec, "value", "alpha", BLOCKS), first)
    assert not np.array_equal(stream_perm(spec, "value", "beta", BLOCKS), first)


def test_streams_are_independent() -> None:
    # n = 3 has two derangements; across seeds the joint law of two streams' draws is uniform on 2 x 2
    block = np.zeros(3, dtype=np.int64)
    joint: Counter[tuple[tuple[int, ...], tuple[int, ...]]] = Counter()
    for seed in range(2000):
        spec = SlotSpec.from_seed(seed)
        a = tuple(stream_perm(spec, "value", "s1", block).tolist())
        b = tuple(stream_perm(spec, "value", "s2", block).tolist())
        joint[(a, b)] += 1
    assert len(joint) == 4
    assert chisquare(list(joint.values())).pvalue > 1e-3


@given(st.lists(st.integers(0, 4), min_size=1, max_size=50), st.integers(0, 10_000),
       st.sampled_from(["value", "pair", "time", "reorder"]))
def test_blocks_permuted_among_themselves(block_list: list[int], seed: int, role: str) -> None:
    block = np.asarray(block_list, dtype=np.int64)
    spec = SlotSpec.from_seed(seed)
    sigma = stream_perm(spec, role, "s", block)
    assert sorted(sigma.tolist()) == list(range(block.size))
    np.testing.assert_array_equal(block[sigma], block)
    _, law = spec.generator(role, "s")
    if law is SlotLaw.DERANGEMENT:
        sizes = Counter(block_list)
        fixed = sigma == np.arange(block.size)
        # a derangement moves every record of a block with >= 2 records; singletons stay
        assert all(sizes[int(b)] == 1 for b in block[fixed])
