"""The CPUs a process may use and the thread counts derived from them (replaylens._cpus)."""

from __future__ import annotations

import os

import pytest

import replaylens._cpus as cpus
from replaylens.settings import STATISTICS_THREADS


def test_available_cpus_is_the_affinity_mask() -> None:
    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no affinity mask on this platform")
    assert cpus.available_cpus() == len(os.sched_getaffinity(0)) >= 1


@pytest.mark.parametrize("n", [1, 2, 3, 64])
def test_statistics_threads_follow_the_cpus_up_to_the_setting(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    monkeypatch.setattr(cpus, "available_cpus", lambda: n)
    assert cpus.statistics_threads() == min(n, STATISTICS_THREADS)


def test_shared_resamples_default_to_statistics_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    from replaylens.inference import _shared

    monkeypatch.setattr(_shared, "statistics_threads", lambda: 3)
    assert _shared._threads(None) == 3 and _shared._threads(2) == 2
