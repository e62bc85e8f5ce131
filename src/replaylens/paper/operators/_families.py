"""The operator families of the paper's operator studies, with their exact laws and seeded draw laws.

* :func:`canonical_operators` — the 12 canonical prefix-causal writers (§1.1; the built-in known-law agents);
* :func:`composite_operators` — the 8 held-out composites (value–order, key–value, key–order; §1.2);
* :func:`random_operators` — 24 coefficient-randomized linear writers in ℝ⁴ (§1.3);
* :func:`readout_operators` — 24 linear writers in ℝ^{4,6,8} under three readout bases (§1.4);
* :func:`nonlinear_operators` — 24 nonlinear commutative / recurrent writers with context readouts (§1.5);
* :func:`blind_operators` — the four family-blind challenge laws, 8 writers each (§1.6).

Every coefficient comes from a Generator derived from a recorded seed and a path naming the study,
law, writer index (and draw), so a writer's coefficients do not depend on which other writers exist.
Draw laws (the paper gives none; partA §7 item 4 REC): b_ℓ, v_ℓ ~ N(0, I_d) independently per label;
A = G·r/ρ(G) with G standard Gaussian (r = 0.62 affine, 0.42 nonlinear); B = G/‖G‖₂; readout rows
Gaussian and normalized to unit length, one matrix per stratum for context readouts; M and W_k
Gaussian scaled by 1/√(input dimension); biases N(0, 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ...agents import Agent, commutative_agent, invariant_agent, key_only_agent, order_sensitive_agent
from ...errors import ConfigError
from ...rng import derive_rng
from ._core import ARMS, STRATA, Readout, StateOperator, UpdateLaw
from ._laws import (
    AffineLaw,
    BilinearLaw,
    FeatureSumLaw,
    KeyOrderLaw,
    KeyValueLaw,
    NonlinearRecurrentLaw,
    NonlinearSumLaw,
    PositionMixedLaw,
    SecondOrderLaw,
    ValueOrderLaw,
)

__all__ = [
    "BLIND_DIMS",
    "BLIND_LAWS",
    "OPERATOR_SEED",
    "READOUT_BASES",
    "VALUE_DIRECTION",
    "Operator",
    "blind_operators",
    "canonical_operators",
    "composite_operators",
    "context_readout",
    "haar_rows",
    "nonlinear_operators",
    "random_operators",
    "readout_operators",
    "sign_readout",
    "spectral_scaled",
    "unit_rows",
]

OPERATOR_SEED = 20260830
"""Recorded root seed of every operator coefficient draw (the paper names none; chosen once, never tuned)."""

PAIR_FREE = ("pair", "reorder")
"""Relations a position-free (commutative) sum ignores: pair transport and whole-event reorder."""

BLIND_LAWS: dict[str, str] = {
    "feature-sum": "pair-preserving",
    "second-order": "pair-preserving",
    "bilinear": "pair-displacing",
    "position-mixed": "pair-displacing",
}
"""The four family-blind laws and their construction-defined pair relation (the hidden target)."""

BLIND_DIMS = (6, 6, 6, 8, 8, 8, 10, 10)
"""Base dimensions of the 8 writers per blind law (d ∈ {6, 8, 10}, a 3/3/2 split)."""


@dataclass(frozen=True, eq=False)
class Operator:
    """One operator of a study: its family, parameterization, agent and (for state operators) the operator.

    ``target`` is the construction-defined pair relation (``pair-preserving`` / ``pair-displacing``)
    where the study defines one.  ``state`` is the :class:`StateOperator` (None for built-in agents),
    used for terminal-state diagnostics.
    """

    family: str
    label: str
    agent: Agent
    state: StateOperator | None = None
    target: str | None = None


def _op(law: UpdateLaw, readout: Readout, family: str, label: str, arms: tuple[str, ...],
        invariant_to: tuple[str, ...], params: dict[str, object], target: str | None = None) -> Operator:
    so = StateOperator(law, readout, name=f"{family}[{label}]", family=family, arms=arms, params=params,
                       invariant_to=invariant_to)
    return Operator(family, label, so.agent(), so, target)


# ---------------------------------------------------------------- draw laws


def spectral_scaled(g: np.random.Generator, d: int, radius: float) -> np.ndarray:
    """A = G·radius/ρ(G), G a standard Gaussian d×d matrix (ρ = spectral radius)."""
    m = g.standard_normal((d, d))
    return m * (radius / float(np.max(np.abs(np.linalg.eigvals(m)))))


def _norm_scaled(g: np.random.Generator, d: int) -> np.ndarray:
    """B = G/‖G‖₂ (spectral norm)."""
    m = g.standard_normal((d, d))
    return m / float(np.linalg.norm(m, 2))


def unit_rows(g: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    """A Gaussian matrix with rows normalized to unit L2 norm (the dense 'mixed' readout)."""
    m = g.standard_normal((rows, cols))
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def haar_rows(g: np.random.Generator, rows: int, d: int) -> np.ndarray:
    """The first ``rows`` rows of a Haar-random d×d orthogonal matrix (QR of a Gaussian, sign-fixed)."""
    q, r = np.linalg.qr(g.standard_normal((d, d)))
    q = q * np.where(np.diag(r) < 0, -1.0, 1.0)[None, :]
    return q[:rows]


def context_readout(g: np.random.Generator, n_arms: int, dim: int,
                    strata: Sequence[tuple[str, str]] = STRATA) -> Readout:
    """One row-normalized Gaussian Q_c ∈ ℝ^{n_arms × dim} per stratum, drawn in stratum order."""
    return Readout({s: unit_rows(g, n_arms, dim) for s in strata}, kind="context")


def _features(g: np.random.Generator, n: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Label features b_ℓ and value features v_ℓ, independent N(0, I_d) per label."""
    return g.standard_normal((n, d)), g.standard_normal((n, d))


# ---------------------------------------------------------------- §1.1 canonical


def canonical_operators() -> tuple[Operator, ...]:
    """The 12 canonical writers: invariant / key-only / commutative (α ∈ {0.5, 1, 2}), order-sensitive
    (d ∈ {0.05, 0.20, 0.60}) — the built-in known-law agents (first-canonical argmax, per-block state)."""
    ops: list[Operator] = []
    for fam, make in (("invariant", invariant_agent), ("key-only", key_only_agent),
                      ("commutative", commutative_agent)):
        ops += [Operator(fam, f"α={a:g}", make(a)) for a in (0.5, 1.0, 2.0)]
    ops += [Operator("order-sensitive", f"d={d:.2f}", order_sensitive_agent(d)) for d in (0.05, 0.20, 0.60)]
    return tuple(ops)


# ---------------------------------------------------------------- §1.2 composites

VALUE_DIRECTION = (0.7, 0.2, -0.3, -0.8)


def sign_readout(n_arms: int) -> Readout:
    """Scalar value–order readout: z > 0 → first arm, z < 0 → last arm, z = 0 → tie (first arm)."""
    m = np.zeros((n_arms, 1))
    m[0, 0], m[-1, 0] = 1.0, -1.0
    return Readout.shared(m, "sign")


def composite_operators(arms: tuple[str, ...] = ARMS, gamma_vo: float = 1.0) -> tuple[Operator, ...]:
    """The 8 held-out composites (partA §1.2): value–order d ∈ {0.10, 0.65} × {scalar, vector v};
    key–value (κ, γ) ∈ {(0.50, 0.75), (1.00, 1.25)}; key–order (d, κ, γ) ∈ {(0.15, 0.25, 1), (0.60, 0.25, 1)}.

    The value–order γ is not given by the paper (REC γ = 1; any γ > 0 gives the same sign-based actions).
    """
    n = len(arms)
    if n != len(VALUE_DIRECTION):
        raise ConfigError(f"the value–order direction has {len(VALUE_DIRECTION)} coordinates; got {n} arms")
    ops: list[Operator] = []
    for d in (0.10, 0.65):
        ops.append(_op(ValueOrderLaw(d, gamma_vo, np.array([1.0])), sign_readout(n), "value-order",
                       f"d={d:.2f}, scalar", arms, ("key_slot", "rekey"), {"d": d, "gamma": gamma_vo, "v": "scalar"}))
        ops.append(_op(ValueOrderLaw(d, gamma_vo, np.array(VALUE_DIRECTION)), Readout.coordinate(n), "value-order",
                       f"d={d:.2f}, vector", arms, ("key_slot", "rekey"),
                       {"d": d, "gamma": gamma_vo, "v": list(VALUE_DIRECTION)}))
    for kappa, gamma in ((0.50, 0.75), (1.00, 1.25)):
        ops.append(_op(KeyValueLaw(kappa, gamma, n), Readout.coordinate(n), "key-value",
                       f"κ={kappa:.2f}, γ={gamma:.2f}", arms, ("pair", "reorder", "rename"),
                       {"kappa": kappa, "gamma": gamma}))
    for d, kappa, gamma in ((0.15, 0.25, 1.00), (0.60, 0.25, 1.00)):
        ops.append(_op(KeyOrderLaw(d, kappa, gamma, n), Readout.coordinate(n), "key-order",
                       f"d={d:.2f}, κ={kappa:.2f}, γ={gamma:.2f}", arms, ("rename",),
                       {"d": d, "kappa": kappa, "gamma": gamma}))
    return tuple(ops)


# ---------------------------------------------------------------- §1.3 / §1.4 coefficient-randomized


def _affine(g: np.random.Generator, n: int, d: int, recurrent: bool, radius: float) -> AffineLaw:
    b, v = _features(g, n, d)
    return AffineLaw(b, v, spectral_scaled(g, d, radius) if recurrent else None)


def random_operators(n_per_law: int = 12, *, dim: int = 4, radius: float = 0.62, seed: int = OPERATOR_SEED,
                     arms: tuple[str, ...] = ARMS) -> tuple[Operator, ...]:
    """Coefficient-randomized writers in ℝ^dim with the canonical argmax readout (partA §1.3):
    ``n_per_law`` commutative sums s ← s + b_ℓ + c(u) v_ℓ and as many affine recurrent updates
    s ← A s + b_ℓ + c(u) v_ℓ with spectral radius ``radius``; writer i of a law draws from
    ``derive_rng(seed, "random-operator", law, i)``."""
    n = len(arms)
    if dim < n:
        raise ConfigError(f"the canonical readout needs dim >= {n}; got {dim}")
    ops: list[Operator] = []
    for law, rec in (("commutative", False), ("recurrent", True)):
        for i in range(n_per_law):
            g = derive_rng(seed, "random-operator", law, i)
            ops.append(_op(_affine(g, n, dim, rec, radius), Readout.coordinate(n, dim), f"random-{law}", f"#{i}",
                           arms, PAIR_FREE if not rec else (), {"law": law, "index": i, "seed": seed, "dim": dim},
                           "pair-displacing" if rec else "pair-preserving"))
    return tuple(ops)


READOUT_BASES = ("coordinate", "orthogonal", "mixed")


def readout_operators(per_dim: int = 4, *, dims: Sequence[int] = (4, 6, 8), radius: float = 0.62,
                      seed: int = OPERATOR_SEED, arms: tuple[str, ...] = ARMS) -> tuple[Operator, ...]:
    """partA §1.4: ``per_dim`` commutative and ``per_dim`` affine recurrent writers per state dimension,
    each under three readout bases (coordinate = the first rows of I_d; orthogonal = the first rows of a
    Haar orthogonal matrix; mixed = unit-norm Gaussian rows).  The three readouts of a writer share its
    law object, so its states are identical across readouts.  Labels are ``"<law> d=<d> #<i> <basis>"``."""
    n = len(arms)
    ops: list[Operator] = []
    for law, rec in (("commutative", False), ("recurrent", True)):
        for d in dims:
            for i in range(per_dim):
                g = derive_rng(seed, "readout-operator", law, d, i)
                upd = _affine(g, n, d, rec, radius)
                mats = {"coordinate": np.eye(d)[:n], "orthogonal": haar_rows(g, n, d), "mixed": unit_rows(g, n, d)}
                for basis in READOUT_BASES:
                    ops.append(_op(upd, Readout.shared(mats[basis], basis), f"readout-{law}", f"d={d} #{i} {basis}",
                                   arms, PAIR_FREE if not rec else (),
                                   {"law": law, "dim": d, "index": i, "basis": basis, "seed": seed},
                                   "pair-displacing" if rec else "pair-preserving"))
    return tuple(ops)


# ---------------------------------------------------------------- §1.5 nonlinear


def nonlinear_operators(per_dim: int = 4, *, dims: Sequence[int] = (6, 8, 10), seed: int = OPERATOR_SEED,
                        arms: tuple[str, ...] = ARMS,
                        strata: Sequence[tuple[str, str]] = STRATA) -> tuple[Operator, ...]:
    """partA §1.5: ``per_dim`` nonlinear commutative writers (z ← z + φ, s = (z, tanh z)) and ``per_dim``
    nonlinear recurrent writers (s ← tanh(A s + φ + 0.08 s ⊙ B s), ρ(A) = 0.42, B/‖B‖₂) per base
    dimension, each with its own context readouts Q_c (one per stratum)."""
    n = len(arms)
    ops: list[Operator] = []
    for law in ("commutative", "recurrent"):
        for d in dims:
            for i in range(per_dim):
                g = derive_rng(seed, "nonlinear-operator", law, d, i)
                b, v = _features(g, n, d)
                upd: UpdateLaw
                if law == "commutative":
                    upd = NonlinearSumLaw(b, v)
                else:
                    upd = NonlinearRecurrentLaw(b, v, spectral_scaled(g, d, 0.42), _norm_scaled(g, d))
                ops.append(_op(upd, context_readout(g, n, upd.exposed_dim, strata), f"nonlinear-{law}",
                               f"d={d} #{i}", arms, PAIR_FREE if law == "commutative" else (),
                               {"law": law, "dim": d, "index": i, "seed": seed},
                               "pair-preserving" if law == "commutative" else "pair-displacing"))
    return tuple(ops)


# ---------------------------------------------------------------- §1.6 family-blind laws


def _blind_law(law: str, g: np.random.Generator, n: int, d: int) -> UpdateLaw:
    b, v = _features(g, n, d)
    if law == "feature-sum":
        return FeatureSumLaw(b, v, g.standard_normal((d, d)) / np.sqrt(d), g.standard_normal(d))
    if law == "second-order":
        dd = d * (d + 1) // 2
        return SecondOrderLaw(b, v, g.standard_normal((d, dd)) / np.sqrt(dd), g.standard_normal(d))
    if law == "bilinear":
        return BilinearLaw(b, v, spectral_scaled(g, d, 0.42), _norm_scaled(g, d))
    if law == "position-mixed":
        return PositionMixedLaw(b, v, g.standard_normal((5, d, d)) / np.sqrt(d))
    raise ConfigError(f"unknown blind law {law!r}; known: {', '.join(BLIND_LAWS)}")


def blind_operators(draw: str, *, seed: int = OPERATOR_SEED, dims: Sequence[int] = BLIND_DIMS,
                    arms: tuple[str, ...] = ARMS, strata: Sequence[tuple[str, str]] = STRATA) -> tuple[Operator, ...]:
    """The family-blind challenge writers of one draw (partA §1.6): for each of the four laws, one writer
    per entry of ``dims`` with coefficients and context readouts from
    ``derive_rng(seed, "blind", draw, law, i)``.  ``target`` is the construction-defined pair relation.

    Use :func:`replaylens.paper.operators.blind_challenge` to put them under opaque ids (with a decoder frozen
    before generation); this function only draws them.
    """
    n = len(arms)
    ops: list[Operator] = []
    for law, target in BLIND_LAWS.items():
        for i, d in enumerate(dims):
            g = derive_rng(seed, "blind", draw, law, i)
            upd = _blind_law(law, g, n, d)
            inv = PAIR_FREE if target == "pair-preserving" else ()
            ops.append(_op(upd, context_readout(g, n, upd.exposed_dim, strata), law, f"draw {draw} d={d} #{i}", arms,
                           inv, {"law": law, "draw": draw, "dim": d, "index": i, "seed": seed}, target))
    return tuple(ops)
