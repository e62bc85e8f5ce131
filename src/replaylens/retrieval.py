"""Moved: :mod:`replaylens.memory.retrieval` (retrieval-memory agents and store audits) is one package of the
memory family.

This alias keeps ``from replaylens.retrieval import X`` and the agent spec ``replaylens.retrieval:make_agent``
working; a name read through it warns (DeprecationWarning) with its new path.
"""

from __future__ import annotations

import warnings
from typing import Any

from .memory import retrieval as _target

__all__: list[str] = list(_target.__all__)


def __getattr__(name: str) -> Any:
    if name not in _target.__all__:
        raise AttributeError(f"module 'replaylens.retrieval' has no attribute {name!r}")
    warnings.warn(f"replaylens.retrieval.{name} moved to replaylens.memory.retrieval.{name}", DeprecationWarning,
                  stacklevel=2)
    return getattr(_target, name)


def __dir__() -> list[str]:
    return sorted(__all__)
