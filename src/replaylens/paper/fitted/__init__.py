"""Continuous representation controls and fitted associative controls (paper L1587–2004).

* continuous controls, fixed before replay (n_fit = 0): :func:`dense_agent` (h ← 0.985h + (u − ½)e_ℓ),
  :func:`cross_namespace_agent` (disjoint producer/action keys, orthogonal binding p_a = B q_a),
  :func:`online_commutative_agent` (h = Σ (u − ½)p_ℓ, no decay);
* fitted writers, trained on disjoint training blocks and frozen before replay: the low-rank
  associative writer h = Σ (u − ½)p_ℓ with readout sigmoid(q_aᵀh) fitted with the privileged, the
  selected-only leave-one-out or the prefix objective (:func:`fit_associative`), the additive
  nuisance writer (:func:`fit_additive`) and the learned recurrent writer (:func:`fit_recurrent`);
* every writer is a ReplayLens :class:`~replaylens.agents.Agent` with an exact array form; the
  commutative ones obey the pair zero law bit for bit (fixed-point sums).
"""

from ._data import Observations, TrainingBlocks, observations
from ._features import FeatureSource, FixedFeatures, StreamFeatures, haar_orthogonal, unit_vectors
from ._fit import (
    PAPER_FIT,
    FitSettings,
    FittedWriter,
    adam,
    associative_loss_grad,
    fit_additive,
    fit_associative,
    fit_recurrent,
    init_params,
    recurrent_loss_grad,
)
from ._interface import (
    INTERFACE_FIT,
    InterfaceEpisodes,
    InterfaceFit,
    fit_interface,
    init_interface,
    interface_loss_grad,
    interface_scores,
)
from ._writers import (
    ARMS,
    RecurrentWriter,
    VectorWriter,
    additive_nuisance_agent,
    associative_agent,
    cross_namespace_agent,
    dense_agent,
    online_commutative_agent,
    recurrent_agent,
    seq_dot,
    seq_matvec,
)

__all__ = [
    "ARMS",
    "INTERFACE_FIT",
    "PAPER_FIT",
    "FeatureSource",
    "FitSettings",
    "FittedWriter",
    "FixedFeatures",
    "InterfaceEpisodes",
    "InterfaceFit",
    "Observations",
    "RecurrentWriter",
    "StreamFeatures",
    "TrainingBlocks",
    "VectorWriter",
    "adam",
    "additive_nuisance_agent",
    "associative_agent",
    "associative_loss_grad",
    "cross_namespace_agent",
    "dense_agent",
    "fit_additive",
    "fit_associative",
    "fit_interface",
    "fit_recurrent",
    "haar_orthogonal",
    "init_interface",
    "init_params",
    "interface_loss_grad",
    "interface_scores",
    "observations",
    "online_commutative_agent",
    "recurrent_agent",
    "recurrent_loss_grad",
    "seq_dot",
    "seq_matvec",
    "unit_vectors",
]
