"""The readouts gather only the maps they read and pool over task groups computed once per decisions object:
their values are bit-for-bit those of the full-array formulation (every map's chosen utilities, then the
selection), which is what summary.json reported before (issue 27)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from replaylens.agents import load_agent
from replaylens.bandit import make_bandit
from replaylens.readouts import (
    delta,
    delta_o_direct,
    delta_u_direct,
    map_selection,
    mean_utility,
    oracle_agreement,
    pool_tasks,
    utility_decomposition,
)
from replaylens.replay import replay


@pytest.fixture(scope="module")
def dec():
    b = make_bandit(n_streams=5, slots_per_block=8, n_future=5)
    return replay(b.history, b.futures, b.evaluator, load_agent("mean"), cells="value,mask,rename",
                  maps="derangements", draws=2, seed=3)


def _full(dec, y: str, c: int) -> np.ndarray:
    """The reference: readout y of cell c at every map (the whole-array formulation)."""
    return dec.chosen_utility(c) if y == "U" else dec.correct(c).astype(np.float64)


def _pooled(dec, per: np.ndarray, sel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    by_map = pool_tasks(per, dec).mean(axis=(1, 2))
    return by_map.mean(axis=0), by_map


@pytest.mark.parametrize("y", ["U", "O"])
@pytest.mark.parametrize("cell", ["value", "mask", "rename"])
def test_direct_contrasts_bit_identical_to_full_arrays(dec, y: str, cell: str) -> None:
    c = dec.cell_index(cell)
    identity = dec.plan.cells[c].baseline == "identity"
    sel = map_selection(dec, "nonidentity" if identity else "identity")
    r0 = _full(dec, y, 0)
    base = np.broadcast_to(r0[0], r0[sel].shape) if identity else r0[sel]
    values, by_map = _pooled(dec, _full(dec, y, c)[sel] - base, sel)
    got = (delta_u_direct if y == "U" else delta_o_direct)(dec, cell)
    assert np.array_equal(got.values, values) and np.array_equal(got.by_map, by_map)


@pytest.mark.parametrize("y", ["U", "O"])
@pytest.mark.parametrize("cell", ["aligned", "value"])
def test_delta_and_means_bit_identical_to_full_arrays(dec, y: str, cell: str) -> None:
    c = dec.cell_index(cell)
    sel = map_selection(dec, "nonidentity")
    full = _full(dec, y, c)
    per = full[0][None] - full[sel] if y == "U" else full[sel] - full[0][None]
    values, by_map = _pooled(dec, per, sel)
    got = delta(dec, y, cell)
    assert np.array_equal(got.values, values) and np.array_equal(got.by_map, by_map)
    allm = map_selection(dec, "all")
    values, by_map = _pooled(dec, full[allm], allm)
    got = (mean_utility if y == "U" else oracle_agreement)(dec, cell, "all")
    assert np.array_equal(got.values, values) and np.array_equal(got.by_map, by_map)


def test_utility_decomposition_bit_identical_to_full_arrays(dec) -> None:
    c = dec.cell_index("rename")
    sel = map_selection(dec, "nonidentity")
    u0 = dec.chosen_utility(0)
    du = dec.chosen_utility(c)[sel] - np.broadcast_to(u0[0], u0[sel].shape)
    values, _ = _pooled(dec, du, sel)
    got = utility_decomposition(dec, "rename")
    assert np.array_equal(got.net.values, values)


def test_negative_action_codes_index_from_the_end_as_before(dec) -> None:
    """A negative code (never produced by a replay, but representable) reads utility[i, a] as numpy does."""
    acts = dec.actions.copy()
    acts[1, 0, 0, 0, :3] = -1
    odd = replace(dec, actions=acts)
    assert np.array_equal(mean_utility(odd, "value").values,
                          _pooled(odd, odd.chosen_utility(1)[[0]], np.array([0]))[0])


def test_pooling_groups_follow_the_decisions_object(dec) -> None:
    """The task groups are cached per decisions object: another object with other streams pools by its own."""
    x = np.arange(dec.n_tasks, dtype=np.float64)
    first = pool_tasks(x, dec)
    merged = replace(dec, stream_idx=np.zeros_like(dec.stream_idx))   # one stream holding every task
    assert pool_tasks(x, merged).shape == (1,)
    assert np.array_equal(pool_tasks(x, dec), first)


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint8])
def test_small_integer_values_pool_exactly_as_floats(dec, dtype) -> None:
    """0/1 indicators and their differences are pooled by integer sums: the same bits as the float64 pass."""
    rng = np.random.default_rng(11)
    lo = -1 if dtype is np.int8 else 0
    x = rng.integers(lo, 2, size=(3, 2, 1, dec.n_tasks)).astype(dtype)
    got = pool_tasks(x, dec)
    assert got.dtype == np.float64 and np.array_equal(got, pool_tasks(x.astype(np.float64), dec))
