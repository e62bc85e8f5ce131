"""Learned writers: the independent learned endpoint pair (paper L756–848, core spec §10).

* :mod:`data <replaylens.paper.learned._data>` — sequences of four contiguous eight-slot key blocks with one
  winner block, the endpoint target a†(D) and its soft target, future evaluator rows;
* training — full-batch Adam with hand-written BPTT (numpy only), batched over models:
  :func:`train_recurrent_models`, :func:`train_additive_models`, :data:`PAPER_SETTINGS`;
* frozen writers — :class:`AdditiveWriter`, :class:`RecurrentWriter`, each usable as a ReplayLens
  agent (``writer.agent()``) with exact per-record and array paths;
* the same-architecture learned control (:mod:`_control <replaylens.paper.learned._control>`):
  :func:`run_learned_control` trains the ordinary and permutation-augmented regimens and replays the
  frozen fits under the nine derangements;
* the paper's protocol — :func:`run_learned_pair`: endpoint gate before labels are opened,
  endpoint contrasts, nine-permutation pair-transport replay with a calibration/holdout split, and
  the threshold decoder.  Episode-bootstrap intervals are added in
  ``replaylens.paper.experiments.learned_pair`` (inference sits in a higher layer).
"""

from ._control import (
    CONTROL_SEEDS,
    CONTROL_SETTINGS,
    REGIMENS,
    ControlConfig,
    ControlEpisodes,
    ControlEvaluation,
    ControlResult,
    control_scores,
    evaluate_control,
    make_control_episodes,
    run_learned_control,
    train_control_models,
)
from ._data import (
    BLOCK_SLOTS,
    ENDPOINT_KEYS,
    LOSER_RANGE,
    N_SLOTS,
    TARGET_ENTROPY,
    TARGET_HIGH,
    TARGET_LOW,
    WINNER_RANGE,
    EndpointSequences,
    canonical_keys,
    make_future_rows,
    make_sequences,
    micro_centered,
)
from ._pair import (
    DEFAULT_SEED,
    PROTOCOLS,
    SEED_PURPOSES,
    EndpointGate,
    FitResult,
    FitSeeds,
    LearnedPairConfig,
    LearnedPairResult,
    WriterEvaluation,
    endpoint_gate,
    evaluate_fit,
    run_learned_pair,
)
from ._train import (
    PAPER_SETTINGS,
    TrainedModel,
    TrainSettings,
    additive_loss_grad,
    init_additive,
    init_recurrent,
    numerical_path,
    recurrent_loss_grad,
    train_additive_models,
    train_recurrent_models,
)
from ._writers import AdditiveWriter, RecurrentWriter, writer_from_model

__all__ = [
    "BLOCK_SLOTS",
    "CONTROL_SEEDS",
    "CONTROL_SETTINGS",
    "DEFAULT_SEED",
    "ENDPOINT_KEYS",
    "LOSER_RANGE",
    "N_SLOTS",
    "PAPER_SETTINGS",
    "PROTOCOLS",
    "REGIMENS",
    "SEED_PURPOSES",
    "TARGET_ENTROPY",
    "TARGET_HIGH",
    "TARGET_LOW",
    "WINNER_RANGE",
    "AdditiveWriter",
    "ControlConfig",
    "ControlEpisodes",
    "ControlEvaluation",
    "ControlResult",
    "EndpointGate",
    "EndpointSequences",
    "FitResult",
    "FitSeeds",
    "LearnedPairConfig",
    "LearnedPairResult",
    "RecurrentWriter",
    "TrainSettings",
    "TrainedModel",
    "WriterEvaluation",
    "additive_loss_grad",
    "canonical_keys",
    "control_scores",
    "endpoint_gate",
    "evaluate_control",
    "evaluate_fit",
    "init_additive",
    "init_recurrent",
    "make_control_episodes",
    "make_future_rows",
    "make_sequences",
    "micro_centered",
    "recurrent_loss_grad",
    "run_learned_control",
    "run_learned_pair",
    "numerical_path",
    "train_additive_models",
    "train_control_models",
    "train_recurrent_models",
    "writer_from_model",
]
