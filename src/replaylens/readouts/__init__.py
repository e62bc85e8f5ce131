"""Readouts in the paper's notation, pooled tasks → strata → maps → streams."""

from ._pool import StreamValues, map_selection, pool_tasks
from ._readouts import (
    UtilityDecomposition,
    a_rekey,
    action_response,
    delta,
    delta_o_direct,
    delta_u_direct,
    direct_action_contrast,
    disagreement,
    gamma,
    mean_utility,
    oracle_agreement,
    pair_residual,
    pi_pair_minus_value,
    t_gr,
    utility_decomposition,
    value_time_contrast,
)

__all__ = [
    "StreamValues",
    "UtilityDecomposition",
    "a_rekey",
    "action_response",
    "delta",
    "delta_o_direct",
    "delta_u_direct",
    "direct_action_contrast",
    "disagreement",
    "gamma",
    "map_selection",
    "mean_utility",
    "oracle_agreement",
    "pair_residual",
    "pi_pair_minus_value",
    "pool_tasks",
    "t_gr",
    "utility_decomposition",
    "value_time_contrast",
]
