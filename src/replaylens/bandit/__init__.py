"""The built-in 4-arm bandit: a seeded history, future tasks and utility table for the demo, the tests and
``replaylens.testing`` (the default substrate of ``replaylens demo`` and ``check-writer``)."""

from ._bandit import BANDIT_ARMS, BanditSubstrate, make_bandit

__all__ = ["BANDIT_ARMS", "BanditSubstrate", "make_bandit"]
