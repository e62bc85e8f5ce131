"""Moved: :mod:`replaylens.memory.stores` (vector stores, memory frameworks and embedders) is one package of
the memory family.

This alias keeps ``from replaylens.stores import X`` working; a name read through it warns
(DeprecationWarning) with its new path.
"""

from __future__ import annotations

import warnings
from typing import Any

from .memory import stores as _target

__all__: list[str] = list(_target.__all__)


def __getattr__(name: str) -> Any:
    if name not in _target.__all__:
        raise AttributeError(f"module 'replaylens.stores' has no attribute {name!r}")
    warnings.warn(f"replaylens.stores.{name} moved to replaylens.memory.stores.{name}", DeprecationWarning,
                  stacklevel=2)
    return getattr(_target, name)


def __dir__() -> list[str]:
    return sorted(__all__)
