"""Issue 14 (e): why is Generic memory's adaptation utility 0.421 (paper 0.555)?

Run (about a minute on 2 cores)::

    PYTHONPATH=src python docs/experiments/issue14_generic_memory.py

Part 1 prints the world's per-arm adaptation means and P(u >= 0.56) per learning block, and the
committed Generic memory's action frequencies and utilities per block next to other controllers'.
Part 2 re-runs Generic memory on the same 48-stream world under readings of "stores the last
successful arm" (and threshold sensitivities that are *not* readings: the paper states 0.56), and
prints tab:condition-summary's four cells for each.  Part 3 explains the committed rule's adaptation
utility from the world's arm means and success rates.  Part 4 replays the policy-reverse writer on
other traces of the training pool (tab:policy-reverse-associative-interactions, value-null rows).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from replaylens.paper.controllers import GenericMemory, NoUpdate, run_closed_loop
from replaylens.paper.experiments.synthetic_suite import SEED, _matrix, suite

PAPER = {"Generic memory": (0.555, 0.211, 0.421, 0.199), "No update": (0.544, 0.222, 0.461, 0.158)}


@dataclass(frozen=True)
class MemoryVariant(GenericMemory):
    """Generic memory with the reading's free details as fields (defaults = committed rule)."""

    name: str = "generic-memory-variant"
    first: int = 0                  # arm of the first decision of a key (0 coverage, 2 replicate, 3 mixed)
    key: str = "stratum"            # "stratum" (family, context), "family", "stream" (one memory)
    sticky: bool = False            # True: keep choosing the stored successful arm even after it fails
    back: bool = False              # True: after a failure of another arm, go back to the stored success
    future_last: bool = False       # True: future repeats the last arm tried, not the last successful
    future_none: int = 0            # future arm when the key has no success

    def _k(self, stratum: tuple[str, str]) -> Any:
        return stratum if self.key == "stratum" else stratum[0] if self.key == "family" else "all"

    def choose(self, state: Any, stratum: tuple[str, str], clock: int, rng: np.random.Generator) -> int:
        last = state.get(self._k(stratum))
        if last is None:
            return self.first
        arm, u, success = last
        if self.sticky and success is not None:
            return int(success)
        if self.back and u < self.threshold and success is not None and success != arm:
            return int(success)
        return arm if u >= self.threshold else (arm + 1) % len(self.arms)

    def observe(self, state: Any, stratum: tuple[str, str], arm: int, u: float, clock: int,
                rng: np.random.Generator) -> Any:
        k = self._k(stratum)
        prev = state.get(k)
        success = arm if u >= self.threshold else (prev[2] if prev else None)
        new = dict(state)
        new[k] = (arm, u, success)
        return new

    def choose_future(self, state: Any, stratum: tuple[str, str], clock: int, rng: np.random.Generator) -> int:
        last = state.get(self._k(stratum))
        if last is None:
            return self.future_none
        if self.future_last:
            return int(last[0])
        return int(last[2]) if last[2] is not None else self.future_none

    def predict(self, state: Any, stratum: tuple[str, str], arm: int) -> float:
        last = state.get(self._k(stratum))
        return float(last[1]) if last is not None and last[0] == arm else 0.5


VARIANTS: dict[str, MemoryVariant] = {
    "committed (spec REC)": MemoryVariant(()),
    "first decision replicate (empty-state tie rule)": MemoryVariant((), first=2),
    "first decision mixed": MemoryVariant((), first=3),
    "sticky: stored success kept after a failure": MemoryVariant((), sticky=True),
    "after a failure, back to the stored success (else round-robin)": MemoryVariant((), back=True),
    "memory per family": MemoryVariant((), key="family"),
    "one memory per stream": MemoryVariant((), key="stream"),
    "future = last arm tried": MemoryVariant((), future_last=True),
    "future fallback mixed (no success)": MemoryVariant((), future_none=3),
    "empty key -> replicate (lex tie rule), adaptation and future": MemoryVariant((), first=2, future_none=2),
    **{f"[sensitivity, not a reading] threshold {t:.2f}": MemoryVariant((), threshold=t)
       for t in (0.0, 0.3, 0.46, 0.5, 0.6, 0.66, 0.75)},
}


def cells(world: Any, res: Any) -> tuple[float, float, float, float]:
    ao, fo = world.adapt_utility.max(-1), world.future_utility.max(-1)
    return (float(res.adapt_utility.mean()), float((ao - res.adapt_utility).mean()),
            float(res.future_utility.mean()), float((fo - res.future_utility).mean()))


def main() -> None:
    s = suite()
    w = s.world
    arms = tuple(w.arms)
    au = w.adapt_utility
    print("Part 1a. Adaptation arm means and P(u >= 0.56) per learning block (48 streams x 48 tasks)")
    print("| block | " + " | ".join(f"{a} mean / P(u≥0.56)" for a in arms) + " |")
    print("|---|" + "---|" * len(arms))
    for b, st in enumerate(w.learning_blocks):
        x = au[:, b]
        print(f"| {st[0]}/{st[1]} | " + " | ".join(
            f"{x[..., a].mean():.3f} / {(x[..., a] >= 0.56).mean():.3f}" for a in range(len(arms))) + " |")
    mats = _matrix()
    print("\nPart 1b. Adaptation: arm frequencies and utility per block")
    print("| block | controller | " + " | ".join(arms) + " | utility |")
    print("|---|---|" + "---|" * (len(arms) + 1))
    for b, st in enumerate(w.learning_blocks):
        for name in ("No update", "Generic memory", "Generic skill", "OCRR"):
            r = mats[name]
            f = np.bincount(r.adapt_actions[:, b].ravel(), minlength=len(arms)) / r.adapt_actions[:, b].size
            print(f"| {st[0]}/{st[1]} | {name} | " + " | ".join(f"{v:.3f}" for v in f)
                  + f" | {r.adapt_utility[:, b].mean():.3f} |")
    gm = mats["Generic memory"]
    a = gm.adapt_actions
    switch = (a[..., 1:] != a[..., :-1]).mean()
    bad = np.isin(a, [arms.index("adaptive"), arms.index("replicate")]).mean()
    print(f"\nGeneric memory: switches between consecutive adaptation tasks {switch:.3f}; "
          f"share of adaptation tasks on adaptive/replicate {bad:.3f}; "
          f"utility on those tasks {gm.adapt_utility[np.isin(a, [1, 2])].mean():.3f}, "
          f"on coverage/mixed {gm.adapt_utility[np.isin(a, [0, 3])].mean():.3f}")
    print("\nPart 2. tab:condition-summary cells under each reading (same world, same seed)")
    print("| Generic memory variant | adapt U | adapt gap | future U | future gap |")
    print("|---|---|---|---|---|")
    for name, pa in PAPER.items():
        print(f"| paper: {name} | " + " | ".join(f"{v:.3f}" for v in pa) + " |")
    print("| ours: No update | " + " | ".join(f"{v:.3f}" for v in cells(w, mats["No update"])) + " |")
    for name, ctl in VARIANTS.items():
        ctl = MemoryVariant(arms, **{f: getattr(ctl, f) for f in
                                     ("first", "key", "sticky", "back", "future_last", "future_none", "threshold")})
        res = run_closed_loop(w, ctl, seed=SEED)
        print(f"| {name} | " + " | ".join(f"{v:.3f}" for v in cells(w, res)) + " |")


def stationary(world: Any, threshold: float = 0.56) -> np.ndarray:
    """Per block, the utility the committed rule gets if each task were an independent draw: run lengths
    on arm a are geometric with success probability p_a = P(u >= threshold), so arm a holds a share
    proportional to 1 / (1 - p_a) of the tasks and U = sum_a share_a * mean_a."""
    au = world.adapt_utility
    p = (au >= threshold).mean(axis=(0, 2))          # [B, A]
    m = au.mean(axis=(0, 2))
    share = 1.0 / np.maximum(1.0 - p, 1e-9)
    share /= share.sum(axis=1, keepdims=True)
    return np.asarray((share * m).sum(axis=1))


def shrunk(world: Any, lam: float) -> Any:
    """Counterfactual world: every adaptation utility pulled towards its (stream, block, arm) mean over the
    48 tasks, u' = m + lam * (u - m).  Arm means (hence No update's utility) are unchanged; only the
    task-to-task dispersion, i.e. how often an arm's outcome crosses 0.56, changes."""
    from replaylens.paper.substrates.synthetic import SyntheticWorld

    au = world.adapt_utility
    m = au.mean(axis=2, keepdims=True)
    return SyntheticWorld(world.n_streams, world.seed, world.dev_utility, m + lam * (au - m), world.future_utility)


def part3(world: Any, gm: Any) -> None:
    arms = tuple(world.arms)
    print("\nPart 3a. Committed rule: realized adaptation utility per block vs the independent-draw prediction")
    pred = stationary(world)
    print("| block | realized | predicted from P(u≥0.56) and arm means | No update |")
    print("|---|---|---|---|")
    for b, st in enumerate(world.learning_blocks):
        print(f"| {st[0]}/{st[1]} | {gm.adapt_utility[:, b].mean():.3f} | {pred[b]:.3f} | "
              f"{world.adapt_utility[:, b, :, arms.index('mixed')].mean():.3f} |")
    print(f"| all | {gm.adapt_utility.mean():.3f} | {pred.mean():.3f} | "
          f"{world.adapt_utility[..., arms.index('mixed')].mean():.3f} |")
    au = world.adapt_utility
    p, m = (au >= 0.56).mean(axis=(0, 2)), au.mean(axis=(0, 2))
    best = m.argmax(axis=1)
    sb = au.mean(axis=2).max(axis=-1)
    print(f"\nPart 3b. Stream-blocks in which no arm's mean over the 48 tasks reaches 0.56: {(sb < 0.56).mean():.3f} "
          f"(per block {', '.join(f'{v:.3f}' for v in (sb < 0.56).mean(axis=0))})")
    print("Independent-draw prediction if the best arm of every block cleared 0.56 with probability q "
          "(other arms and all means as in our world):")
    for q in (0.8, 0.9, 0.95, 0.97):
        pp = p.copy()
        pp[np.arange(len(best)), best] = q
        sh = 1.0 / (1.0 - pp)
        sh /= sh.sum(axis=1, keepdims=True)
        print(f"  q = {q:.2f}: adaptation utility {(sh * m).sum(axis=1).mean():.3f}")
    print("\nPart 3c. Same arm means, less task-to-task dispersion (u' = m + λ(u − m)), adaptation utility")
    print("| λ | P(u'≥0.56) best arm, mean over blocks | No update | Generic memory (committed) | oracle |")
    print("|---|---|---|---|---|")
    for lam in (1.0, 0.75, 0.5, 0.25):
        w2 = shrunk(world, lam)
        res = run_closed_loop(w2, GenericMemory(arms), seed=SEED)
        au = w2.adapt_utility
        best = au.mean(axis=(0, 2)).argmax(axis=1)
        pb = np.mean([(au[:, b, :, best[b]] >= 0.56).mean() for b in range(au.shape[1])])
        print(f"| {lam:.2f} | {pb:.3f} | {au[..., arms.index('mixed')].mean():.3f} | {res.adapt_utility.mean():.3f} "
              f"| {au.max(-1).mean():.3f} |")


def part4() -> None:
    """tab:policy-reverse: the OCRR-fit selected-only writer replayed on different training-pool traces."""
    from replaylens.paper.experiments import fitted_controls as F
    from replaylens.readouts import gamma
    from replaylens.replay import replay

    pool = F.pools()["training"]
    arms = tuple(pool.world.arms)
    agent = F.policy_fit("reverse").agent(name="policy-reverse")
    traces = {"Generic memory, committed (the reproduction)": pool.memory,
              "Generic memory, sticky reading": run_closed_loop(pool.world, MemoryVariant(arms, sticky=True),
                                                                seed=SEED),
              "OCRR (training pool)": pool.ocrr,
              "No update (all mixed)": run_closed_loop(pool.world, NoUpdate(arms), seed=SEED)}
    print("\nPart 4. tab:policy-reverse (paper: value-null U 0.063, A 0.023, O −0.214): the reverse-fit writer "
          "replayed on other traces of the same 48 training-pool streams")
    print("| evaluation trace | share of tasks on the block's modal arm | blocks with all 4 arms | "
          "Γ^value U | Γ^value A | Γ^value O |")
    print("|---|---|---|---|---|---|")
    for name, tr in traces.items():
        a = tr.adapt_actions.reshape(-1, tr.adapt_actions.shape[2])
        modal = np.mean([np.bincount(row, minlength=4).max() / row.size for row in a])
        all4 = np.mean([len(set(row.tolist())) == 4 for row in a])
        dec = replay(pool.history(tr.adapt_actions), pool.futures(), pool.evaluator(), agent,
                     cells="value,pair,key_slot", maps="derangements", draws=[F.SIGMA], seed=SEED)
        g = [float(gamma(dec, y, "value").values.mean()) for y in ("U", "A", "O")]
        print(f"| {name} | {modal:.3f} | {all4:.3f} | " + " | ".join(f"{v:.3f}" for v in g) + " |")


if __name__ == "__main__":
    main()
    part3(suite().world, _matrix()["Generic memory"])
    part4()
