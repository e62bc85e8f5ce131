"""Readouts over many maps are taken a few maps at a time (readouts._readouts.CHUNK_DECISIONS, issue 27): every
per-map and pooled value is the same, bit for bit, as with all maps at once."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import replaylens.readouts._readouts as ro
from replaylens.agents import load_agent
from replaylens.bandit import make_bandit
from replaylens.readouts import (
    a_rekey,
    action_response,
    delta,
    delta_o_direct,
    delta_u_direct,
    direct_action_contrast,
    mean_utility,
    oracle_agreement,
    utility_decomposition,
)
from replaylens.replay import replay

READOUTS = {
    "U": lambda d: mean_utility(d, "value", "all"),
    "O": lambda d: oracle_agreement(d, "pair", "nonidentity"),
    "A": lambda d: action_response(d, "aligned"),
    "A_rekey": a_rekey,
    "D_A rename": lambda d: direct_action_contrast(d, "rename"),
    "D_A value all": lambda d: direct_action_contrast(d, "value", "all"),
    "dU rename": lambda d: delta_u_direct(d, "rename"),
    "dO value all": lambda d: delta_o_direct(d, "value", "all"),
    "delta U": lambda d: delta(d, "U", "aligned"),
    "delta O": lambda d: delta(d, "O", "pair"),
    "delta A": lambda d: delta(d, "A", "value"),
}


@pytest.fixture(scope="module")
def dec():
    b = make_bandit(n_streams=7, slots_per_block=6, n_future=5)
    return replay(b.history, b.futures, b.evaluator, load_agent("mean"), cells="value,pair,rename",
                  maps="derangements", draws=2, seed=3)


def _per_map_decisions(dec) -> int:
    return int(np.prod(dec.actions.shape[2:]))


@pytest.mark.parametrize("name", sorted(READOUTS))
def test_readouts_a_map_at_a_time_equal_all_maps_at_once(dec, name: str, monkeypatch) -> None:
    assert len(dec.plan.maps) > 3
    whole = READOUTS[name](dec)
    monkeypatch.setattr(ro, "CHUNK_DECISIONS", 1)   # one map a chunk
    assert len(ro._map_chunks(dec, np.arange(len(dec.plan.maps)))) == len(dec.plan.maps)
    single = READOUTS[name](dec)
    monkeypatch.setattr(ro, "CHUNK_DECISIONS", 2 * _per_map_decisions(dec))   # two maps a chunk, a ragged last one
    pairs = READOUTS[name](dec)
    for got in (single, pairs):
        assert got.maps == whole.maps
        assert got.by_map.tobytes() == whole.by_map.tobytes()
        assert got.values.tobytes() == whole.values.tobytes()


def test_utility_decomposition_a_map_at_a_time(dec, monkeypatch) -> None:
    whole = utility_decomposition(dec, "value", "all")
    assert whole.n_switches > 0
    monkeypatch.setattr(ro, "CHUNK_DECISIONS", 1)
    single = utility_decomposition(dec, "value", "all")
    for f in dataclasses.fields(whole):
        a, b = getattr(whole, f.name), getattr(single, f.name)
        if isinstance(a, ro.StreamValues):
            assert (a.by_map.tobytes(), a.values.tobytes(), a.maps) == (b.by_map.tobytes(), b.values.tobytes(), b.maps)
        else:
            assert a == b, f.name
