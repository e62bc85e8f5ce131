"""Agents on measured outcomes: the cross-fitted persistent recurrent agent and the count–sum ledger.

* :class:`PersistentAgent` / :func:`cross_fit`: the 16-dimensional recurrent agent of the paper's
  "cross-fitted persistent agent on measured outcomes" (fit on one half of the streams, frozen, then run
  closed-loop on the other half; replayable with exact per-record and array paths).
* :func:`count_sum_agent`: the commutative count–sum ledger with an observed-mean readout (structural replay
  on measured outcomes; pair transport leaves it exactly unchanged).
* :func:`build_changed`: the changed-substrate reconstruction (hypothesis screening and model validation), with
  its OCRR ledger (:func:`changed_ocrr_agent`) and the fitted order-invariant selected-outcome-only writer
  (:func:`fit_selected_only`).
"""

from ._changed import (
    CHANGED_ARMS,
    CHANGED_STRATA,
    ChangedWorld,
    build_changed,
    hs_utility,
    mv_utility,
    probe_allocation,
)
from ._changed_agents import (
    ChangedLedgerState,
    ChangedOCRR,
    SelectedOnlyFit,
    SelectedOnlyWriter,
    changed_ocrr_agent,
    fit_selected_only,
)
from ._ledger import CountSumLedger, count_sum_agent
from ._recurrent import (
    PARAMETER_SEEDS,
    WARMUP,
    PersistentAgent,
    PersistentFit,
    PersistentFold,
    PersistentParams,
    PersistentSettings,
    adaptation_trace,
    cross_fit,
    fit_persistent,
    round_robin_actions,
)

__all__ = [
    "CHANGED_ARMS",
    "CHANGED_STRATA",
    "PARAMETER_SEEDS",
    "WARMUP",
    "ChangedLedgerState",
    "ChangedOCRR",
    "ChangedWorld",
    "CountSumLedger",
    "PersistentAgent",
    "PersistentFit",
    "PersistentFold",
    "PersistentParams",
    "PersistentSettings",
    "SelectedOnlyFit",
    "SelectedOnlyWriter",
    "adaptation_trace",
    "build_changed",
    "changed_ocrr_agent",
    "count_sum_agent",
    "cross_fit",
    "fit_persistent",
    "fit_selected_only",
    "hs_utility",
    "mv_utility",
    "probe_allocation",
    "round_robin_actions",
]
