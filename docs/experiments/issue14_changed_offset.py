"""Issue 14 (b): where does the +0.10 of the changed-substrate hypothesis-strata placebo Γ_U come from?

Run (about a minute and a half on 2 cores)::

    PYTHONPATH=src python docs/experiments/issue14_changed_offset.py

For both readings of the hypothesis-screening future offset "from −0.18 to 0.18" (paper l.2116; partB §2.2:
``candidate`` = the committed CHOICE z_i += linspace(−0.18, 0.18, 12)[i]; ``task`` = the §2.2 FLAG alternative,
future task ℓ gets linspace(−0.18, 0.18, 48)[ℓ] on every candidate) it rebuilds the changed substrate with the
committed seed, runs the OCRR and No update closed loops, the fixed-label replay (nine derangements) and the
time-preserving placebo (draw 0, as `changed-substrate-placebo`), and prints

1. per stratum: the four arms' mean future utility, OCRR's and the placebo's future-action distributions;
2. per stratum: OCRR − No update, the direct aligned − placebo contrast, Γ_U and its two terms
   T_aligned = ⟨δU_aligned⟩ and T_placebo = ⟨δU_placebo⟩ (Γ_U = T_aligned − T_placebo), and Γ_O;
3. pooled: the nine fixed-label OCRR − replay contrasts, Γ_U, Γ_O, labels changed;
4. executor only: pooled C − A / C − R / C − M under three readings of "the selected three candidates";
5. the status of every registered changed-substrate row under each offset reading (rows whose status changes).

The identity used in the write-up: for an equivariant argmax ledger, a future choice x under ρ becomes ρ(x), and
each arm is sent to each other arm by exactly 3 of the 9 derangements, so ⟨U(x) − U(ρx)⟩ = (4/3)(U(x) − Ū) with Ū
the four-arm mean; hence Γ_U = (4/3)(U(aligned) − U(placebo)) per task, i.e. 4/3 × the direct contrast.
"""

from __future__ import annotations

import numpy as np

import replaylens.paper.experiments.public_data as P
from replaylens.paper.controllers import AgentController, NoUpdate, run_closed_loop
from replaylens.maps import stream_perm
from replaylens.paper.persistent import build_changed, changed_ocrr_agent
from replaylens.readouts import pool_tasks
from replaylens.replay import replay

PAPER = {  # stratum: OCRR − No update, Γ_U, Γ_O (paper l.2155, tab:changed-substrate-map-summary)
    ("hypothesis", "low"): (0.094, 0.245, -1.231), ("hypothesis", "high"): (0.069, 0.178, -0.741),
    ("validation", "low"): (0.436, 0.722, -1.333), ("validation", "high"): (0.103, 0.163, -0.615),
    "pooled": (0.175, 0.327, -0.980)}
PAPER_MAPS = [0.223, 0.218, 0.223, 0.268, 0.268, 0.263, 0.177, 0.176, 0.171]
PAPER_DIRECT = 0.246


def run(hs_offset: str) -> None:
    w = build_changed(P.N_STREAMS, seed=P.CHANGED_SEED, hs_offset=hs_offset)
    ocrr = run_closed_loop(w, AgentController(changed_ocrr_agent(), w.arms, cost=12.0), seed=P.CHANGED_SEED)
    nou = run_closed_loop(w, NoUpdate(w.arms, cost=12.0), seed=P.CHANGED_SEED)
    h, f, e = w.history(ocrr.adapt_actions), w.futures(), w.evaluator()
    fixed = replay(h, f, e, changed_ocrr_agent(), cells="", maps="derangements", seed=P.CHANGED_SEED)
    plac = replay(h, f, e, changed_ocrr_agent(), cells="key_slot", maps="derangements",
                  draws=[P.placebo_draws()[0]], seed=P.CHANGED_SEED)
    shape = ocrr.future_actions.shape
    ali = plac.actions[0, 0, 0, 0].reshape(shape)
    pla = plac.actions[1, 0, 0, 0].reshape(shape)
    fu = w.future_utility
    print(f"\n=== hs_offset = {hs_offset!r} ===")
    print("stratum          | U C / A / R / M            | OCRR actions C/A/R/M | placebo actions C/A/R/M")
    for s, st in enumerate(w.strata):
        dist = [np.bincount(a[:, s].ravel(), minlength=4) / a[:, s].size for a in (ali, pla)]
        print(f"{'/'.join(st):16s} | " + " / ".join(f"{x:.3f}" for x in fu[:, s].mean(axis=(0, 1)))
              + " | " + " / ".join(f"{x:.2f}" for x in dist[0]) + " | " + " / ".join(f"{x:.2f}" for x in dist[1]))
    gu = P._gamma_per_task(plac, "U", "key_slot")
    go = P._gamma_per_task(plac, "O", "key_slot")
    ut = plac.chosen_utility()[:, :, 0, 0]
    t_al = (ut[0, :1] - ut[0, 1:]).mean(axis=0)  # ⟨δU_aligned⟩ per task
    t_pl = (ut[1, :1] - ut[1, 1:]).mean(axis=0)  # ⟨δU_placebo⟩ per task
    direct = ut[0, 0] - ut[1, 0]
    endpoint = (ocrr.future_utility - nou.future_utility)
    print("stratum          | OCRR−NoUpd (paper) | direct a−p | T_aligned | T_placebo | Γ_U (paper)     "
          "| Γ_O (paper)")
    for s, st in enumerate(w.strata):
        m = plac.stratum_idx == s
        pe, pu, po = PAPER[st]
        print(f"{'/'.join(st):16s} | {endpoint[:, s].mean():.3f} ({pe:.3f})     | {direct[m].mean():.3f}      "
              f"| {t_al[m].mean():.3f}     | {t_pl[m].mean():.3f}    | {gu[:, m].mean():.3f} ({pu:.3f}) "
              f"| {go[:, m].mean():.3f} ({po:.3f})")
    pe, pu, po = PAPER["pooled"]
    print(f"{'pooled':16s} | {endpoint.mean():.3f} ({pe:.3f})     | {pool_tasks(direct, plac).mean():.3f} "
          f"({PAPER_DIRECT})| {pool_tasks(t_al, plac).mean():.3f}     | {pool_tasks(t_pl, plac).mean():.3f}    "
          f"| {pool_tasks(gu, plac).mean():.3f} ({pu:.3f}) | {pool_tasks(go, plac).mean():.3f} ({po:.3f})")
    uf = fixed.chosen_utility()[0, :, 0, 0]
    maps = [float(pool_tasks(uf[0] - uf[k], fixed).mean()) for k in range(1, uf.shape[0])]
    print("fixed-label OCRR − replay, maps 1–9: " + ", ".join(f"{m:.3f}" for m in maps)
          + f"  (mean {np.mean(maps):.3f}; paper " + ", ".join(f"{m:.3f}" for m in PAPER_MAPS)
          + f", mean {np.mean(PAPER_MAPS):.3f})")
    acts = ocrr.adapt_actions
    blocks = np.repeat(np.arange(acts.shape[1]), acts.shape[2])
    spec = P.placebo_draws()[0]
    changed = sum(int((acts[r].reshape(-1)[stream_perm(spec, "time", w.streams[r], blocks)]
                       != acts[r].reshape(-1)).sum()) for r in range(acts.shape[0]))
    counts = np.stack([np.bincount(acts[:, b].ravel(), minlength=4) / acts[:, b].size for b in range(acts.shape[1])])
    print(f"labels changed by placebo draw 0: {changed} of {acts.size} (paper 2,802); OCRR adaptation arm shares "
          "C/A/R/M per stratum: " + "; ".join(" / ".join(f"{x:.2f}" for x in row) for row in counts))


def hs_selection_variants() -> None:
    """Executor only: pooled C − A, C − R, C − M (OCRR picks C) under other readings of "the selected three"."""
    from replaylens.paper.persistent import _changed as c
    from replaylens.rng import derive_rng

    def arm_means(context: str, offset: str, rule: str) -> np.ndarray:
        n, t_n, r_n = c.HS_N, c.TASKS["future"], P.N_STREAMS
        z = np.empty((r_n * t_n, n))
        uni = np.empty_like(z)
        noise = np.empty((4, r_n * t_n, n, c.BUDGET))
        for r in range(r_n):
            for q in range(t_n):
                g = derive_rng(P.CHANGED_SEED, "changed", "hypothesis", context, r, "future", q)
                j = r * t_n + q
                z[j] = g.normal(0.0, c.HS_TAU["future"], n) + (np.linspace(-0.18, 0.18, n) if offset == "candidate"
                                                               else np.linspace(-0.18, 0.18, t_n)[q])
                uni[j] = g.random(n)
                for a in range(4):
                    noise[a, j] = g.normal(0.0, c.HS_ETA[context], (n, c.BUDGET))
        out = []
        for a, arm in enumerate(c.CHANGED_ARMS):
            counts, sums = c.probe_allocation(arm, z, noise[a], uni)
            mean = np.where(counts > 0, sums / np.maximum(counts, 1), 0.0)
            key = {"probe mean, fill lowest index (committed)": np.where(counts > 0, -mean, np.inf),
                   "probe mean, unprobed mean 0": -mean,
                   "final allocation score": -np.where(counts > 0, mean + 0.30 / np.sqrt(np.maximum(counts, 1)),
                                                       0.50 + 0.08 * uni)}[rule]
            top = np.argsort(key, axis=1, kind="stable")[:, :3]
            sel = np.take_along_axis(z, top, axis=1).mean(axis=1)
            out.append(np.clip(0.5 + 0.22 * (sel - z.mean(axis=1)) / (z.std(axis=1) + 1e-6), 0, 1).mean())
        return np.array(out)

    w = build_changed(P.N_STREAMS, seed=P.CHANGED_SEED)
    mv = [w.future_utility[:, s].mean(axis=(0, 1)) for s in (2, 3)]
    print("\nHS selection rule x offset reading (validation strata as committed); paper: HS C − M 0.094 / 0.069, "
          "pooled C − A 0.221, C − R 0.266, C − M 0.175 (maps 1–3, 4–6, 7–9)")
    for offset in ("candidate", "task"):
        for rule in ("probe mean, fill lowest index (committed)", "probe mean, unprobed mean 0",
                     "final allocation score"):
            ms = [arm_means(ctx, offset, rule) for ctx in ("low", "high")] + mv
            print(f"{offset:9s} | {rule:42s} | HS C − M {ms[0][0] - ms[0][3]:.3f} / {ms[1][0] - ms[1][3]:.3f} | "
                  + ", ".join(f"pooled C − {x} {np.mean([m[0] - m[k] for m in ms]):.3f}"
                              for k, x in ((1, "A"), (2, "R"), (3, "M"))))


def status_changes() -> None:
    """The registered changed-substrate rows (endpoint, selected-only, placebo, placebo ranges) under each reading."""
    from collections import Counter

    res = {}
    for reading in ("candidate", "task"):
        P.CHANGED_HS_OFFSET = reading  # the suite reads this module constant
        P.changed_suite.cache_clear()
        res[reading] = (P.changed_substrate_endpoint() + P.changed_substrate_selected_only()
                        + P.changed_substrate_placebo() + P._placebo_range_rows())
    P.CHANGED_HS_OFFSET = "candidate"
    P.changed_suite.cache_clear()
    print("\nregistered rows: " + "; ".join(f"{k}: {dict(Counter(r.status for r in v))}" for k, v in res.items()))
    for a, b in zip(res["candidate"], res["task"], strict=True):
        if a.status != b.status:
            print(f"  {a.table} | {a.row} | {a.column} | paper {a.paper} | {a.ours:.3f} -> {b.ours:.3f} | "
                  f"{a.status} -> {b.status}")


if __name__ == "__main__":
    for reading in ("candidate", "task"):
        run(reading)
    hs_selection_variants()
    status_changes()
