"""The measured-outcome (public-data) executor: breast-cancer and red-wine sampling tasks.

:func:`build_public` turns the verified data copies (:mod:`replaylens.paper.data`) into a :class:`PublicWorld`:
counterfactual utility tables [stream, stratum, task, arm] for 24 development, 24 adaptation and 24 future
tasks per (data set, context) stratum and stream, with the four sampling arms (coverage, adaptive,
replicate, mixed) scored by a frozen ridge-logistic evaluator (utility = exp(−held-out log loss)).
"""

from ._design import ARMS, CoverageMode, adaptive_fill, coverage_order, select_designs
from ._evaluator import EvaluatorConfig, ridge_logistic_utility
from ._world import (
    BUDGET,
    CONTEXTS,
    DATASETS,
    SPLITS,
    PublicConfig,
    PublicWorld,
    build_public,
    draw_pools,
    effective_cost,
    standardize,
)

__all__ = [
    "ARMS",
    "BUDGET",
    "CONTEXTS",
    "DATASETS",
    "SPLITS",
    "CoverageMode",
    "EvaluatorConfig",
    "PublicConfig",
    "PublicWorld",
    "adaptive_fill",
    "build_public",
    "coverage_order",
    "draw_pools",
    "effective_cost",
    "ridge_logistic_utility",
    "select_designs",
    "standardize",
]
