"""Reproduction framework: paper value vs ours, side by side."""

from ._registry import REPRODUCTIONS, Comparison, Reproduction, compare, get_reproduction, register_reproduction


def all_reproductions() -> dict[str, Reproduction]:
    """Every registered reproduction (loads the built-in experiments)."""
    from ._registry import _load_builtin

    _load_builtin()
    return dict(REPRODUCTIONS)


__all__ = ["REPRODUCTIONS", "Comparison", "Reproduction", "all_reproductions", "compare", "get_reproduction",
           "register_reproduction"]
