"""Substrates: seeded environments with histories, future tasks and counterfactual tables."""

from ._bandit import BANDIT_ARMS, BanditSubstrate, make_bandit
from .public import PublicWorld, build_public
from .synthetic import SyntheticWorld, build_synthetic

__all__ = [
    "BANDIT_ARMS",
    "BanditSubstrate",
    "PublicWorld",
    "SyntheticWorld",
    "build_public",
    "build_synthetic",
    "make_bandit",
]
