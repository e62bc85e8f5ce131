"""Paper experiments: thin compositions of the public API, registered as reproductions.

Every module in this package is imported on first use of :func:`all_reproductions`, so a new
experiment only needs its own module with ``@register_reproduction`` functions.
"""

from __future__ import annotations

import importlib
import pkgutil

from ..reproduce import REPRODUCTIONS, Reproduction

_loaded = False


def load_all() -> None:
    """Import every experiment module (each registers its reproductions once)."""
    global _loaded
    if _loaded:
        return
    for mod in sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")):
        importlib.import_module(f"{__name__}.{mod}")
    _loaded = True


def all_reproductions() -> dict[str, Reproduction]:
    """Every registered reproduction, in registration order."""
    load_all()
    return dict(REPRODUCTIONS)


__all__ = ["all_reproductions", "load_all"]
