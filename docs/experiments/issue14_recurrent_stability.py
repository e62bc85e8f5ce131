"""Issue 14 (c): why the learned recurrent writer's interactions are not the paper's near-zero values.

Run (about 6 minutes on one core)::

    PYTHONPATH=src python docs/experiments/issue14_recurrent_stability.py

Uses the committed fit (``fit_recurrent``, PAPER_FIT: Adam lr 0.015, 4,800 full-batch updates, clip 5,
init N(0, 0.05²), λ = 1e-4) on the training pool's OCRR blocks and the committed replay of
``learned-recurrent-check`` (primary pool, OCRR trace, σ*, nine derangements).  Prints markdown tables:

A. run-to-run determinism on this machine (the same fit twice, parameter bytes hashed);
B. the training-loss trajectory of R1–R5 (the loss is not monotone: gradient spikes);
C. a one-ulp change of one initial parameter (R1, R4) at lr 0.015 and at lr 0.0015;
D. the distribution of Γ_U over 20 further initialization seeds (committed settings);
E. R1–R5 refitted at lr 0.0015 (a smooth, near-monotone loss), for comparison only.

Nothing here changes the committed reproduction; the extra seeds and the lower learning rate are
diagnostics, not candidates.
"""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np

import replaylens.paper.experiments.fitted_controls as F
from replaylens.paper.fitted import PAPER_FIT, FitSettings, FittedWriter, fit_recurrent
from replaylens.paper.fitted._fit import _RecurrentProblem, adam, init_params
from replaylens.readouts import a_rekey, delta, gamma

PAPER_R = ((0.001, 0.005), (0.000, 0.001), (0.001, 0.000), (0.003, 0.002), (-0.003, -0.003))
EXTRA_SEEDS = tuple(F.SEED + 100 + k for k in range(20))
CHECK = (300, 1000, 2400, 4800)

pool = F.pools()["training"]
blocks = pool.blocks(pool.ocrr)
problem = _RecurrentProblem(blocks)


def readouts(params: dict[str, np.ndarray]) -> dict[str, float]:
    dec = F._replay(FittedWriter("recurrent", "diag", params, 0, 0.0, 0.0).agent(name="diag"))
    return {"GvU": gamma(dec, "U", "value").estimate, "GtU": gamma(dec, "U", "key_slot").estimate,
            "dU": delta(dec, "U", "aligned").estimate, "Ar": a_rekey(dec).estimate}


def fit(seed: int, settings: FitSettings = PAPER_FIT, nudge: bool = False) -> tuple[dict[str, np.ndarray],
                                                                                 np.ndarray, dict[int, np.ndarray]]:
    """One fit; returns the parameters, the per-update (loss, gradient norm) and flat snapshots at CHECK."""
    p0 = init_params("recurrent", [seed], blocks.n_labels, settings)
    if nudge:
        p0["A"][0, 0, 0] = np.nextafter(p0["A"][0, 0, 0], np.inf)
    trace: list[tuple[float, float]] = []
    snaps: dict[int, np.ndarray] = {}

    def loss_grad(q: dict[str, np.ndarray]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        if len(trace) in CHECK:
            snaps[len(trace)] = np.concatenate([v.ravel() for _, v in sorted(q.items())])
        loss, g = problem(q, settings.l2)
        trace.append((float(loss[0]), float(np.sqrt(sum((gi ** 2).sum() for gi in g.values())))))
        return loss, g

    p, _, _ = adam(loss_grad, p0, settings)
    snaps[settings.updates] = np.concatenate([v.ravel() for _, v in sorted(p.items())])
    return {k: v[0] for k, v in p.items()}, np.array(trace[: settings.updates]), snaps


def final_loss(params: dict[str, np.ndarray], l2: float = PAPER_FIT.l2) -> float:
    return float(problem({n: v[None] for n, v in params.items()}, l2)[0][0])


def digest(params: dict[str, np.ndarray]) -> str:
    return hashlib.sha256(b"".join(params[k].tobytes() for k in sorted(params))).hexdigest()[:16]


print("A. Determinism on this machine (R1 fitted twice in one process, and the cached committed fit)\n")
committed = F.recurrent_fits()
h = [digest(fit_recurrent(blocks, F.REFIT_SEEDS[:1])[0].params) for _ in range(2)]
print(f"| run 1 | run 2 | committed R1 |\n|---|---|---|\n| {h[0]} | {h[1]} | {digest(committed[0].params)} |\n")

print("B. Training-loss trajectory of the committed refits (loss = data + penalty; 'rises' = updates whose loss")
print("   exceeds the previous update's by > 0.01; gradient norm before clipping)\n")
print("| refit | loss @300 | @1000 | @2400 | @4800 (final) | min (update) | rises | max ‖g‖ | Γ_U value | Γ_U time |")
print("|---|---|---|---|---|---|---|---|---|---|")
for k, s in enumerate(F.REFIT_SEEDS):
    params, tr, _ = fit(s)
    assert digest(params) == digest(committed[k].params)
    r = readouts(params)
    loss = tr[:, 0]
    final = final_loss(params)
    print(f"| R{k + 1} | {loss[299]:.3f} | {loss[999]:.3f} | {loss[2399]:.3f} | {final:.3f} | "
          f"{loss.min():.3f} ({loss.argmin()}) | {int((np.diff(loss) > 0.01).sum())} | {tr[:, 1].max():.1f} | "
          f"{r['GvU']:+.3f} | {r['GtU']:+.3f} |")

print("\nC. One-ulp change of one initial parameter (A[0,0] → nextafter): max |Δθ| after n updates, Γ_U\n")
print("| lr | refit | Δθ @300 | @1000 | @2400 | @4800 | Γ_U value / time | nudged Γ_U value / time |")
print("|---|---|---|---|---|---|---|---|")
for lr in (0.015, 0.0015):
    st = dataclasses.replace(PAPER_FIT, learning_rate=lr)
    for k in (0, 3):
        pa, _, sa = fit(F.REFIT_SEEDS[k], st)
        pb, _, sb = fit(F.REFIT_SEEDS[k], st, nudge=True)
        ra, rb = readouts(pa), readouts(pb)
        d = " | ".join(f"{np.abs(sa[c] - sb[c]).max():.1e}" for c in CHECK)
        print(f"| {lr} | R{k + 1} | {d} | {ra['GvU']:+.3f} / {ra['GtU']:+.3f} | {rb['GvU']:+.3f} / {rb['GtU']:+.3f} |")

print(f"\nD. Γ_U over {len(EXTRA_SEEDS)} further initialization seeds (committed settings) and R1–R5\n")
extra = [fit(s)[0] for s in EXTRA_SEEDS]
rows = [readouts(q) for q in extra]
ours = [readouts(w.params) for w in committed]
losses = np.array([final_loss(w.params) for w in committed] + [final_loss(q) for q in extra])
print("| set | Γ_U value mean (sd) [min, max] | Γ_U time mean (sd) [min, max] | both |Γ_U| ≤ 0.009 | A_rekey mean |")
print("|---|---|---|---|---|")
for name, rs in ((f"{len(EXTRA_SEEDS)} extra seeds", rows), ("R1–R5 (committed)", ours)):
    v = np.array([r["GvU"] for r in rs])
    t = np.array([r["GtU"] for r in rs])
    both = int(np.sum((np.abs(v) <= 0.009) & (np.abs(t) <= 0.009)))
    print(f"| {name} | {v.mean():+.3f} ({v.std(ddof=1):.3f}) [{v.min():+.3f}, {v.max():+.3f}] | "
          f"{t.mean():+.3f} ({t.std(ddof=1):.3f}) [{t.min():+.3f}, {t.max():+.3f}] | {both}/{len(rs)} | "
          f"{np.mean([r['Ar'] for r in rs]):.3f} |")
pv = np.array(PAPER_R)
print(f"| paper R1–R5 | {pv[:, 0].mean():+.3f} ({pv[:, 0].std(ddof=1):.3f}) [{pv[:, 0].min():+.3f}, "
      f"{pv[:, 0].max():+.3f}] | {pv[:, 1].mean():+.3f} ({pv[:, 1].std(ddof=1):.3f}) [{pv[:, 1].min():+.3f}, "
      f"{pv[:, 1].max():+.3f}] | 5/5 | — |")

allr = ours + rows
rank = [np.argsort(np.argsort(x)) for x in (losses, [abs(r["GvU"]) for r in allr], [abs(r["GtU"]) for r in allr])]
print(f"\nSpearman correlation over the {len(allr)} fits of the final training loss with |Γ_U value|: "
      f"{np.corrcoef(rank[0], rank[1])[0, 1]:+.2f}, with |Γ_U time|: {np.corrcoef(rank[0], rank[2])[0, 1]:+.2f} "
      f"(final losses {losses.min():.3f}–{losses.max():.3f})")

print("\nE. R1–R5 refitted at lr 0.0015 (4,800 updates; diagnostic only)\n")
print("| refit | final loss | minimum | rises | Γ_U value | Γ_U time | δ_U aligned | A_rekey |")
print("|---|---|---|---|---|---|---|---|")
slow = dataclasses.replace(PAPER_FIT, learning_rate=0.0015)
for k, s in enumerate(F.REFIT_SEEDS):
    params, tr, _ = fit(s, slow)
    r = readouts(params)
    final = final_loss(params, slow.l2)
    print(f"| R{k + 1} | {final:.3f} | {tr[:, 0].min():.3f} | {int((np.diff(tr[:, 0]) > 0.01).sum())} | "
          f"{r['GvU']:+.3f} | {r['GtU']:+.3f} | {r['dU']:+.3f} | {r['Ar']:.3f} |")
