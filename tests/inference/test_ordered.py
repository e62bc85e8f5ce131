"""The CSR-ordered sums (issue 27) give the bytes of the reference elementwise sums, from the same draws."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from replaylens.inference import cluster_bootstrap, sign_flip_test

ordered = importlib.import_module("replaylens.inference._ordered")
boot_mod = importlib.import_module("replaylens.inference._bootstrap")
flip_mod = importlib.import_module("replaylens.inference._signflip")


def test_this_installation_takes_the_fast_path() -> None:
    assert ordered.ordered_sums_available()


def _values(n: int, k: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.standard_t(2, size=(n, k)) * 10.0 ** rng.integers(-8, 9, size=(n, k))
    v[: n // 4, 0] = -0.0
    return v


@pytest.mark.parametrize("n,k", [(2, 1), (9, 3), (257, 2), (4001, 3)])
def test_ordered_row_sums_equal_the_reference_weighted_sums(n: int, k: int) -> None:
    rng = np.random.default_rng(n + k)
    w = rng.integers(0, 4, size=(13, n)).astype(np.float64)
    x = _values(n, k, n)
    got = ordered.ordered_row_sums(w, x)
    want = boot_mod._weighted_sums(np.ascontiguousarray(w.T), x)
    assert got.shape == (13, k) and got.tobytes() == want.tobytes()


@pytest.mark.parametrize("n,k,strata", [(5, 1, False), (300, 3, False), (1000, 3, True), (20_000, 2, False)])
def test_bootstrap_fast_path_bytes_equal_the_reference_path(
    monkeypatch: pytest.MonkeyPatch, n: int, k: int, strata: bool
) -> None:
    values = _values(n, k, 3 * n + k)
    lab = np.arange(n) % 4 if strata else None
    fast = cluster_bootstrap(values, n_resamples=701, rng=5, strata=lab)
    monkeypatch.setattr(boot_mod, "ordered_sums_available", lambda: False)
    ref = cluster_bootstrap(values, n_resamples=701, rng=5, strata=lab)
    assert fast.distribution.tobytes() == ref.distribution.tobytes()
    for name in ("low", "high", "estimate", "standard_error"):
        assert np.asarray(getattr(fast, name)).tobytes() == np.asarray(getattr(ref, name)).tobytes(), name


@pytest.mark.parametrize("n", [25, 333, 20_000])
def test_sign_flip_fast_path_bytes_equal_the_reference_path(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    v = _values(n, 1, n)[:, 0]
    fast = sign_flip_test(v, n_resamples=903, rng=8, exact=False)
    monkeypatch.setattr(flip_mod, "ordered_sums_available", lambda: False)
    ref = sign_flip_test(v, n_resamples=903, rng=8, exact=False)
    assert fast.null_distribution.tobytes() == ref.null_distribution.tobytes()
    assert fast.pvalue == ref.pvalue


def test_a_failed_check_keeps_the_reference_path(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_a: object) -> np.ndarray:
        raise AssertionError("fast path taken")

    monkeypatch.setattr(boot_mod, "ordered_sums_available", lambda: False)
    monkeypatch.setattr(flip_mod, "ordered_sums_available", lambda: False)
    monkeypatch.setattr(boot_mod, "ordered_row_sums", refuse)
    monkeypatch.setattr(flip_mod, "ordered_row_sums", refuse)
    v = _values(40, 2, 1)
    assert cluster_bootstrap(v, n_resamples=50, rng=1).n_resamples == 50
    assert sign_flip_test(v[:, 0], n_resamples=50, rng=1, exact=False).n_resamples == 50


def test_summary_rows_are_the_same_bytes_in_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    from replaylens.agents import load_agent
    from replaylens.bandit import make_bandit
    from replaylens.replay import replay

    audit_mod = importlib.import_module("replaylens.report._audit")
    sub = make_bandit(n_streams=12, slots_per_block=5, n_future=2)
    dec = replay(sub.history, sub.futures, sub.evaluator, load_agent("mean"))
    monkeypatch.setattr(audit_mod, "statistics_threads", lambda: 4)
    threaded = audit_mod.summarize(dec, seed=3, n_resamples=999)
    monkeypatch.setattr(audit_mod, "statistics_threads", lambda: 1)
    serial = audit_mod.summarize(dec, seed=3, n_resamples=999)
    assert len(threaded) == len(serial) > 1
    for a, b in zip(threaded, serial, strict=True):
        assert a.cell == b.cell
        assert a.interval.distribution.tobytes() == b.interval.distribution.tobytes()
        assert a.utility_test.null_distribution.tobytes() == b.utility_test.null_distribution.tobytes()
        assert a.oracle_test.pvalue == b.oracle_test.pvalue


@pytest.mark.parametrize("skip", [0, 1, 2, 3])
@pytest.mark.parametrize("sizes", [[7], [4, 5, 1], [1000, 999, 2]])
def test_pcg64_words_are_the_draws_of_integers(skip: int, sizes: list[int]) -> None:
    ref = np.random.default_rng(21)
    new = np.random.default_rng(21)
    ref.integers(0, 2, size=skip)  # leave a half word buffered (odd skip) or not
    new.integers(0, 2, size=skip)
    words = flip_mod._Words(new)
    for m in sizes:
        got = (words.take(m) >> 31).astype(np.int64)
        assert got.tolist() == ref.integers(0, 2, size=m).tolist()
    words.close()
    # the generator is left as integers() leaves it: the following draws agree, 32- and 64-bit alike
    assert new.integers(0, 2, size=5).tolist() == ref.integers(0, 2, size=5).tolist()
    assert new.integers(0, 1000, size=3).tolist() == ref.integers(0, 1000, size=3).tolist()
    assert new.random(3).tolist() == ref.random(3).tolist()


def test_sign_flip_with_another_bit_generator_keeps_its_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    v = _values(300, 1, 4)[:, 0]
    fast = sign_flip_test(v, n_resamples=301, rng=np.random.Generator(np.random.MT19937(3)), exact=False)
    monkeypatch.setattr(flip_mod, "ordered_sums_available", lambda: False)
    ref = sign_flip_test(v, n_resamples=301, rng=np.random.Generator(np.random.MT19937(3)), exact=False)
    assert fast.null_distribution.tobytes() == ref.null_distribution.tobytes()
