"""Training blocks of the fitted writers and the observation tensors of their objectives.

A training block e is one (stream, learning block) of a *training* pool: its selected labels a_{e,i}
and outcomes y_{e,i} in a recorded within-block order (i = 1..T), plus — for the privileged writer
only — the mean counterfactual future utility ū_{e,a} of every arm in the matching stratum.

Every associative objective is linear in one matrix M = P Qᵀ: the score of observation n is
s_n = Σ_ℓ X[n, ℓ] M[ℓ, a_n], where X[n] holds the state's per-label weights of c(y) = y − ½:

* leave-one-out (selected-only): X = C_e − c_i e_{a_i}, C_e = Σ_j c_j e_{a_j} (terminal batch);
* prefix: X = Σ_{j<i} c_j e_{a_j} in the block's recorded order;
* privileged: one observation per (block, arm a), X = C_e, target ū_{e,a};
* additive nuisance (LOO): X = (N_e − e_{a_i}, Σ_j c_j − c_i) with label counts N_e, and M built from
  the block matrix [[P, 0], [0, 1]].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import ConfigError

__all__ = ["Observations", "TrainingBlocks", "observations"]

OBJECTIVES = ("loo", "prefix", "privileged", "additive-loo")


@dataclass(frozen=True, eq=False)
class TrainingBlocks:
    """E blocks × T selected pairs: ``labels`` (E, T) label indices, ``outcomes`` (E, T) in [0, 1],
    optional privileged ``targets`` (E, n_labels); ``n_labels`` labels in canonical order."""

    labels: np.ndarray
    outcomes: np.ndarray
    n_labels: int
    targets: np.ndarray | None = None

    def __post_init__(self) -> None:
        a = np.asarray(self.labels)
        y = np.asarray(self.outcomes, dtype=np.float64)
        if a.ndim != 2 or a.shape != y.shape:
            raise ConfigError(f"labels and outcomes must be (E, T) arrays of one shape; got {a.shape}, {y.shape}")
        if a.dtype.kind not in "iu" or (a.size and (a.min() < 0 or a.max() >= self.n_labels)):
            raise ConfigError(f"labels must be integer indices in [0, {self.n_labels})")
        if not np.isfinite(y).all() or (y.size and (y.min() < 0 or y.max() > 1)):
            raise ConfigError("training outcomes must be finite and lie in [0, 1]")
        if self.targets is not None and np.shape(self.targets) != (a.shape[0], self.n_labels):
            raise ConfigError(f"targets must have shape {(a.shape[0], self.n_labels)}; got {np.shape(self.targets)}")
        object.__setattr__(self, "labels", a.astype(np.int64))
        object.__setattr__(self, "outcomes", y)

    @property
    def n_blocks(self) -> int:
        return int(self.labels.shape[0])

    @property
    def n_slots(self) -> int:
        return int(self.labels.shape[1])

    def arm_sorted(self) -> TrainingBlocks:
        """Each block reordered by canonical label index, stable in the recorded (chronological) order."""
        order = np.argsort(self.labels, axis=1, kind="stable")
        return TrainingBlocks(np.take_along_axis(self.labels, order, 1), np.take_along_axis(self.outcomes, order, 1),
                              self.n_labels, self.targets)

    def permute_labels(self, rng: np.random.Generator) -> TrainingBlocks:
        """Training-label null: labels permuted independently within every block (outcome sequence and
        block label multiset preserved); one permutation per block, drawn in block order."""
        lab = self.labels.copy()
        for e in range(lab.shape[0]):
            lab[e] = lab[e, rng.permutation(lab.shape[1])]
        return TrainingBlocks(lab, self.outcomes, self.n_labels, self.targets)

    def label_sums(self) -> np.ndarray:
        """C_e: per-label sums of c(y) = y − ½, shape (E, n_labels)."""
        onehot = np.eye(self.n_labels)[self.labels]
        return np.einsum("etl,et->el", onehot, self.outcomes - 0.5)


@dataclass(frozen=True, eq=False)
class Observations:
    """Observation tensors of one objective: ``X`` (N, L), query label ``a`` (N,), target ``y`` (N,),
    and ``weight`` = 1/E (the loss averages blocks, summing observations within a block)."""

    X: np.ndarray
    a: np.ndarray
    y: np.ndarray
    weight: float
    objective: str


def observations(blocks: TrainingBlocks, objective: str) -> Observations:
    """Build the observation tensors of ``objective`` (``loo``, ``prefix``, ``privileged``, ``additive-loo``)."""
    if objective not in OBJECTIVES:
        raise ConfigError(f"objective must be one of {OBJECTIVES}; got {objective!r}")
    n = blocks.n_labels
    e_n, t_n = blocks.labels.shape
    onehot = np.eye(n)[blocks.labels]                       # (E, T, n)
    c = blocks.outcomes - 0.5
    terms = onehot * c[..., None]                           # c_i e_{a_i}
    w = 1.0 / e_n
    if objective == "privileged":
        if blocks.targets is None:
            raise ConfigError("the privileged objective needs counterfactual targets (TrainingBlocks.targets)")
        x = np.repeat(blocks.label_sums(), n, axis=0)       # (E·n, n)
        a = np.tile(np.arange(n), e_n)
        return Observations(x, a, np.asarray(blocks.targets, dtype=np.float64).reshape(-1), w, objective)
    if objective == "loo":
        x = terms.sum(axis=1, keepdims=True) - terms
    elif objective == "prefix":
        x = np.concatenate([np.zeros_like(terms[:, :1]), np.cumsum(terms, axis=1)[:, :-1]], axis=1)
    else:  # additive-loo
        counts = onehot.sum(axis=1, keepdims=True) - onehot
        csum = c.sum(axis=1, keepdims=True) - c
        x = np.concatenate([counts, csum[..., None]], axis=-1)
    return Observations(x.reshape(e_n * t_n, -1), blocks.labels.reshape(-1), blocks.outcomes.reshape(-1), w,
                        objective)
