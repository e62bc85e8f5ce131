"""A small 4-arm contextual bandit substrate with a counterfactual table (the demo and test fixture).

Per stream r and block (family ``bandit``, contexts ``easy`` / ``hard``), arm means μ_{r,c,a} are
drawn around context-specific centres; an ε-greedy logger on running means picks actions and
observes y = clip(μ + noise, 0, 1).  Future strata are the two blocks plus ``bandit/shifted``, which
has no block of its own and so reads the whole stream (prefix rule).  Future utilities
g̃(x, a) = clip(μ_{r,c,a} + task noise) form the counterfactual table; the oracle is the first maximum.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..records import Evaluator, FutureTask, FutureTasks, History
from ..rng import RngLike, check_rng

__all__ = ["BANDIT_ARMS", "BanditSubstrate", "make_bandit"]

BANDIT_ARMS = ("coverage", "adaptive", "replicate", "mixed")
_CENTRES = {"easy": np.array([0.35, 0.45, 0.55, 0.70]), "hard": np.array([0.50, 0.56, 0.53, 0.48]),
            "shifted": np.array([0.60, 0.40, 0.50, 0.45])}


@dataclass(frozen=True)
class BanditSubstrate:
    """History, future tasks and evaluator of one seeded bandit draw."""

    history: History
    futures: FutureTasks
    evaluator: Evaluator
    seed: int | None


def make_bandit(
    *,
    n_streams: int = 16,
    slots_per_block: int = 24,
    n_future: int = 16,
    epsilon: float = 0.3,
    noise: float = 0.15,
    contexts: tuple[str, ...] = ("easy", "hard"),
    held_out: tuple[str, ...] = ("shifted",),
    rng: RngLike = 20261121,
) -> BanditSubstrate:
    """Draw the demo substrate (every draw from a Generator derived from ``rng``).

    ``contexts`` are the learning blocks (in slot order) and also future strata; ``held_out`` are
    future strata without a block (they read the whole stream).  Context centres other than the
    three built-in ones are drawn from the generator.
    """
    seed = int(rng) if isinstance(rng, int) else None
    g = check_rng(rng)
    cols: dict[str, list[object]] = {k: [] for k in ("stream", "family", "context", "slot", "task", "key", "outcome")}
    tasks: list[FutureTask] = []
    table: dict[tuple[str, str], dict[str, float]] = {}
    n_arms = len(BANDIT_ARMS)
    for r in range(n_streams):
        stream = f"s{r:02d}"
        names = tuple(dict.fromkeys(contexts + held_out))
        centres = {c: _CENTRES[c] if c in _CENTRES else g.uniform(0.3, 0.7, n_arms) for c in names}
        mu = {c: np.clip(v + g.normal(0.0, 0.06, n_arms), 0.02, 0.98) for c, v in centres.items()}
        slot = 0
        for ctx in contexts:
            sums, counts = np.zeros(n_arms), np.zeros(n_arms)
            for t in range(slots_per_block):
                if t < n_arms:
                    a = t
                elif g.random() < epsilon:
                    a = int(g.integers(n_arms))
                else:
                    a = int(np.argmax(sums / np.maximum(counts, 1)))
                y = float(np.clip(mu[ctx][a] + g.normal(0.0, noise), 0.0, 1.0))
                y = round(y, 6)
                sums[a] += y
                counts[a] += 1
                cols["stream"].append(stream)
                cols["family"].append("bandit")
                cols["context"].append(ctx)
                cols["slot"].append(slot)
                cols["task"].append(f"{stream}-{ctx}-adapt-{t:02d}")
                cols["key"].append(BANDIT_ARMS[a])
                cols["outcome"].append(y)
                slot += 1
        for ctx in names:
            for j in range(n_future):
                tid = f"{stream}-{ctx}-future-{j:02d}"
                tasks.append(FutureTask(stream, "bandit", ctx, tid, BANDIT_ARMS, j))
                u = np.clip(mu[ctx] + g.normal(0.0, 0.05, n_arms), 0.0, 1.0)
                table[(stream, tid)] = {a: round(float(x), 6) for a, x in zip(BANDIT_ARMS, u, strict=True)}
    history = History.from_columns(**cols, source="<bandit>")  # type: ignore[arg-type]
    return BanditSubstrate(history, FutureTasks(tuple(tasks), source="<bandit>"), Evaluator(table, "<bandit>"), seed)
