"""Reproduction framework: paper value vs ours, side by side."""

from ._registry import REPRODUCTIONS, Comparison, Reproduction, compare, get_reproduction, register_reproduction

__all__ = ["REPRODUCTIONS", "Comparison", "Reproduction", "compare", "get_reproduction", "register_reproduction"]
