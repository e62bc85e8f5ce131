"""Moved: :mod:`replaylens.memory.stores` (vector stores, memory frameworks and embedders) is one package of
the memory family.

This alias keeps ``from replaylens.stores import X`` working; a name read through it warns
(DeprecationWarning) with its new path.
"""

from __future__ import annotations

from ._moved import forwarding
from .memory import stores as _target

__all__, __getattr__, __dir__ = forwarding("replaylens.stores", _target)
