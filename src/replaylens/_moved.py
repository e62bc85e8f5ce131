"""Deprecated aliases of moved modules: a name read through the old path warns with its new one."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any

__all__ = ["forwarding"]


def forwarding(old: str, target: ModuleType) -> tuple[list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """``__all__``, ``__getattr__`` and ``__dir__`` (PEP 562) for the alias module ``old`` of ``target``: every
    public name of ``target`` answers through ``old`` with a :class:`DeprecationWarning`; nothing else does."""
    names = list(target.__all__)
    new = target.__name__

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        warnings.warn(f"{old}.{name} moved to {new}.{name}", DeprecationWarning, stacklevel=2)
        return getattr(target, name)

    def __dir__() -> list[str]:
        return sorted(names)

    return names, __getattr__, __dir__
