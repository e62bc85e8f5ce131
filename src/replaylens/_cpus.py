"""Private: how many CPUs this process may use, and the thread counts derived from it (one place for both)."""

from __future__ import annotations

import os

from .settings import STATISTICS_THREADS

__all__ = ["available_cpus", "statistics_threads"]


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the platform has one, else ``os.cpu_count()``)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)


def statistics_threads() -> int:
    """Threads for the shared resamples' blocks by default: min(:data:`~replaylens.settings.STATISTICS_THREADS`,
    available CPUs).  Each block draws from its own named seed, so the bytes do not depend on it."""
    return max(1, min(STATISTICS_THREADS, available_cpus()))
