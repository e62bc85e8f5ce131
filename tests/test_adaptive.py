"""Issue 18 point 4: adaptive call budget (anytime-valid confidence sequence, stream-cluster stopping)."""

from __future__ import annotations

import numpy as np
import pytest

from replaylens.errors import ConfigError
from replaylens.inference import (
    CHANGES,
    NO_CHANGE,
    UNSETTLED,
    BettingCS,
    adaptive_cells,
    classify,
    cluster_bootstrap,
)
from replaylens.rng import derive_rng

# scripted agents: per-decision change probability of each cell (true responses known)
TRUE = {"invariant": 0.0, "near-margin": 0.04, "clear": 0.6}


def _matrix(seed: int, n: int = 400, d: int = 16) -> dict[str, np.ndarray]:
    u = derive_rng(seed, "streams").random(n)
    return {c: derive_rng(seed, "cell", c).binomial(d, np.clip(p * (0.5 + u), 0, 1)) / d for c, p in TRUE.items()}


def test_classify_rule() -> None:
    assert classify(0.01, 0.3, 0.05) == CHANGES
    assert classify(0.0, 0.04, 0.05) == NO_CHANGE
    assert classify(0.0, 0.06, 0.05) == UNSETTLED


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_adaptive_verdicts_equal_full_matrix_with_fewer_calls(seed: int) -> None:
    m = _matrix(seed)
    asked: list[tuple[str, int]] = []

    def ask(cell: str, idx: np.ndarray) -> np.ndarray:
        asked.extend((cell, int(i)) for i in idx)
        return m[cell][idx]

    res = adaptive_cells(ask, 400, list(TRUE), margin=0.05, rounds=20, seed=seed)
    for cv in res.cells:
        bs = cluster_bootstrap(m[cv.cell], n_resamples=2000, rng=derive_rng(seed, "boot", cv.cell))
        assert cv.verdict == classify(float(bs.low), float(bs.high), 0.05), cv
        assert cv.n_streams < 400
    by = {cv.cell: cv for cv in res.cells}
    assert by["invariant"].verdict == NO_CHANGE and by["clear"].verdict == CHANGES
    assert by["clear"].n_streams < by["near-margin"].n_streams  # clear cells stop first
    assert len(asked) == res.asked and len(set(asked)) == len(asked)  # no (cell, stream) asked twice
    assert res.fraction_asked() < 0.4
    # the stream order is a seeded permutation, the same for every cell (aligned decisions are shared)
    assert sorted(res.order) == list(range(400))
    again = adaptive_cells(lambda c, i: m[c][i], 400, list(TRUE), margin=0.05, rounds=20, seed=seed)
    assert again == res


def test_unsettled_cells_are_reported_as_such() -> None:
    m = _matrix(5, n=40)
    res = adaptive_cells(lambda c, i: m[c][i], 40, ["invariant", "near-margin"], margin=0.05, rounds=4)
    assert all(cv.verdict == UNSETTLED and cv.n_streams == 40 for cv in res.cells)  # 40 streams cannot settle


def test_confidence_sequence_covers_the_mean_uniformly_over_time() -> None:
    # anytime validity: the running-intersection interval misses the true mean at ANY time in <= alpha of runs
    misses = 0
    runs = 200
    for r in range(runs):
        rng = derive_rng(r, "cs-coverage")
        cs = BettingCS(0.1, grid=401)
        for _ in range(10):
            cs.update(rng.binomial(4, 0.3, size=20) / 4)
            lo, hi = cs.interval()
            if not lo <= 0.3 <= hi:
                misses += 1
                break
    assert misses / runs <= 0.1


def test_bad_input_is_one_clear_error() -> None:
    with pytest.raises(ConfigError, match=r"\[0, 1\]"):
        BettingCS().update([1.5])
    with pytest.raises(ConfigError, match="margin"):
        adaptive_cells(lambda c, i: i * 0.0, 10, ["x"], margin=0.0)
    with pytest.raises(ConfigError, match="returned"):
        adaptive_cells(lambda c, i: np.zeros(1), 10, ["x"], rounds=2)
