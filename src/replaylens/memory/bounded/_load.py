"""Loading a user's memory pipeline factory (``module:factory``) or a built-in memory by name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..._imports import import_target
from ...errors import ConfigError
from ._memories import MEMORIES

__all__ = ["load_memory_factory"]


def load_memory_factory(spec: str) -> Callable[[], Any]:
    """A zero-argument factory of fresh memories; checks that one instance has ingest/export/retrieve."""
    if ":" not in spec:
        if spec not in MEMORIES:
            raise ConfigError(f"unknown memory {spec!r}; built-in memories: {', '.join(MEMORIES)}; "
                              "or give module:factory")
        factory: Callable[[], Any] = MEMORIES[spec]
    else:
        factory = import_target(spec, "memory")
        if not callable(factory):
            raise ConfigError(f"{spec} is not callable (it must return a fresh memory)")
    try:
        probe = factory()
    except Exception as exc:  # user code: one clear line instead of a traceback
        raise ConfigError(f"calling the memory factory {spec} failed: {type(exc).__name__}: {exc}") from None
    missing = [m for m in ("ingest", "export", "retrieve") if not callable(getattr(probe, m, None))]
    if missing:
        raise ConfigError(f"{spec} returned {type(probe).__name__}, which lacks {', '.join(missing)}() "
                          "(see docs/guide/memory.md)")
    return factory
