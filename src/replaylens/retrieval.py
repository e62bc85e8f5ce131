"""Moved: :mod:`replaylens.memory.retrieval` (retrieval-memory agents and store audits) is one package of the
memory family.

This alias keeps ``from replaylens.retrieval import X`` and the agent spec ``replaylens.retrieval:make_agent``
working; a name read through it warns (DeprecationWarning) with its new path.
"""

from __future__ import annotations

from ._moved import forwarding
from .memory import retrieval as _target

__all__, __getattr__, __dir__ = forwarding("replaylens.retrieval", _target)
