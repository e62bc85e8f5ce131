"""Stream-cluster inference: the unit of resampling is a cluster (one replicate stream).

* :func:`cluster_bootstrap` -- percentile interval of the mean over clusters (optionally stratified,
  optionally for ``k`` paired statistics at once);
* :func:`sign_flip_test` -- two-sided sign-flip test of symmetry about 0 (exact or Monte Carlo);
* :func:`shared_bootstrap` / :func:`shared_sign_flip_tests` -- the same intervals and tests for many
  columns from one set of shared resamples (blocks of named seeds, exact resampled sums: the audit's statistics);
* :func:`adjusted_level` -- Bonferroni-adjusted individual level for several contrasts;
* :func:`adaptive_cells` -- adaptive call budget: stop asking a cell once its anytime-valid
  :class:`BettingCS` confidence sequence settles the verdict (:func:`classify`);
* :func:`format_p` -- ``"<0.001"`` / ``"0.023"`` style p-values;
* :func:`mean_inference` / :func:`holm_adjusted` -- the product's verdicts and shown intervals: one-sample
  Student t on per-stream values (``S - 1`` degrees of freedom) and Holm's step-down (issue 47).

Every draw comes from a Generator normalized by :func:`replaylens.rng.check_rng`.
"""

from __future__ import annotations

from ._adaptive import (
    CHANGES,
    NO_CHANGE,
    UNSETTLED,
    AdaptiveResult,
    BettingCS,
    CellVerdict,
    adaptive_cells,
    classify,
)
from ._bootstrap import adjusted_level, cluster_bootstrap
from ._results import BootstrapResult, SignFlipResult
from ._shared import shared_bootstrap, shared_sign_flip_tests, single_thread_blas
from ._signflip import format_p, sign_flip_test
from ._student import MeanInference, holm_adjusted, mean_inference, t_ppf, t_sf

__all__ = [
    "CHANGES",
    "NO_CHANGE",
    "UNSETTLED",
    "AdaptiveResult",
    "BettingCS",
    "CellVerdict",
    "adaptive_cells",
    "classify",
    "BootstrapResult",
    "MeanInference",
    "holm_adjusted",
    "mean_inference",
    "t_ppf",
    "t_sf",
    "SignFlipResult",
    "adjusted_level",
    "cluster_bootstrap",
    "format_p",
    "shared_bootstrap",
    "shared_sign_flip_tests",
    "sign_flip_test",
    "single_thread_blas",
]
