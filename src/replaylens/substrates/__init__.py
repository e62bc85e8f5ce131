"""Substrates: seeded environments with histories, future tasks and counterfactual tables."""

from ._bandit import BANDIT_ARMS, BanditSubstrate, make_bandit

__all__ = ["BANDIT_ARMS", "BanditSubstrate", "make_bandit"]
