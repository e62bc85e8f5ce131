"""Issue 14 point 3(d): why the public-data OCRR trace stays on `replicate` on breast cancer.

Run (needs the verified data copies; ~1 min)::

    REPLAYLENS_DATA_DIR=... PYTHONPATH=src python docs/experiments/issue14_breast_ocrr.py

Prints four tables (pasted into docs/reproduction-notes.md):

1. the four arms' mean held-out utilities per stratum under our executor (adaptation and future splits), the
   oracle level and how often each arm is the oracle, next to the paper's No update (= `mixed`) level;
2. the committed OCRR trace on breast cancer: first-decision scores, arms held per block, quarantine events, and
   the lowest running mean of the held arm against the unvisited-arm score 0.78;
3. the endpoint tables with the committed block order (breast cancer first) and with the same world, seed and
   controllers but the red-wine blocks visited first (the order in which the paper's appendix names the data
   sets); nothing else changes: every task's pools come from their own (family, context, stream, split, index)
   generator, so the per-task utility tables are identical under both orders;
4. the count–sum structural replay of each order's OCRR trace (tab:public-structural-replay-strata rekey rows and
   the pooled rekey interval).

With ``--seeds`` it prints instead the breast-cancer and pooled contrasts of both orders on two other substrate
seeds (a robustness check; the seeds were not chosen by their results).
"""

from __future__ import annotations

import numpy as np

from replaylens.agents import TaskInput
from replaylens.paper.controllers import OCRR, LedgerController
from replaylens.paper.experiments.public_data import N_STREAMS, SEED, STRUCTURAL_SIGMA, _cell_values, _ci, run_matrix
from replaylens.paper.persistent import count_sum_agent
from replaylens.replay import replay
from replaylens.paper.substrates.public import build_public

PAPER_NOUPD = {("breast-cancer", "iid"): 0.834, ("breast-cancer", "shifted"): 0.755,
               ("wine-red", "iid"): 0.544, ("wine-red", "shifted"): 0.557}
PAPER_STRATA = {("breast-cancer", "iid"): (0.834, -0.240, -0.660, 0.084),
                ("breast-cancer", "shifted"): (0.755, -0.007, -0.021, 0.000),
                ("wine-red", "iid"): (0.541, -2.780, -5.243, -0.487),
                ("wine-red", "shifted"): (0.552, -4.705, -7.793, -1.927)}
PAPER_POOLED = {"OCRR − No update (U)": (-1.933, -2.774, -1.165), "OCRR − Shuffled outcome (U)": (5.666, 3.416, 8.063),
                "OCRR − Extra sampling (U/c)": (18.702, 18.660, 18.743)}
PAPER_REKEY = {("breast-cancer", "iid"): (-0.015, -0.057), ("breast-cancer", "shifted"): (0.002, 0.090),
               ("wine-red", "iid"): (-0.006, -0.049), ("wine-red", "shifted"): (-0.006, -0.044)}
ORDERS = {"committed (breast cancer first)": ("breast-cancer", "wine-red"),
          "red wine first": ("wine-red", "breast-cancer")}


def fmt(x: float, d: int = 3) -> str:
    return f"{x:+.{d}f}" if x < 0 or d == 1 else f"{x:.{d}f}"


def arm_table() -> None:
    w = build_public(N_STREAMS, seed=SEED)
    print("## 1. Arm utilities per stratum (our executor, 48 streams x 24 tasks)\n")
    print("| stratum | split | coverage | adaptive | replicate | mixed | oracle | oracle arm share C/A/R/M |"
          " paper No update (= mixed) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for s, st in enumerate(w.strata):
        for split, util in (("adaptation", w.adapt_utility), ("future", w.future_utility)):
            x = util[:, s]
            share = np.bincount(x.argmax(-1).ravel(), minlength=4) / x[..., 0].size
            paper = f"{PAPER_NOUPD[st]:.3f}" if split == "future" else ""
            print(f"| {'/'.join(st)} | {split} | " + " | ".join(f"{v:.4f}" for v in x.mean(axis=(0, 1)))
                  + f" | {x.max(-1).mean():.4f} | " + " / ".join(f"{v:.3f}" for v in share) + f" | {paper} |")
    # exact ties between arms (why `adaptive` and `mixed` coincide so often on breast cancer)
    for s, st in enumerate(w.strata):
        u = w.future_utility[:, s]
        print(f"\n{'/'.join(st)} future: adaptive == mixed exactly on {np.mean(u[..., 1] == u[..., 3]):.3f} of "
              f"tasks, coverage == mixed on {np.mean(u[..., 0] == u[..., 3]):.3f}; "
              f"min replicate adaptation utility {w.adapt_utility[:, s, :, 2].min():.3f}")


def trace_table(name: str, datasets: tuple[str, str]) -> dict[str, object]:
    w = build_public(N_STREAMS, seed=SEED, datasets=datasets)
    m = run_matrix(w)
    o = m["OCRR"]
    print(f"\n## 2/3. OCRR trace and endpoint, block order: {name} {w.strata}\n")
    # replay each stream's trace through the OCRR ledger in visiting order: the scores before every decision
    ctl = LedgerController(OCRR)
    margin = np.full((w.n_streams, len(w.strata)), np.inf)
    for r in range(w.n_streams):
        state = ctl.init_state()
        for s, st in enumerate(w.strata):
            for t in range(o.adapt_actions.shape[2]):
                a = int(o.adapt_actions[r, s, t])
                sc = ctl.scores(state, st[0], st[1], w.arms)
                if t > 0:  # the first decision of a block is reported separately (stream 0 below)
                    margin[r, s] = min(margin[r, s], sc[a] - np.delete(sc, a).max())
                if r == 0 and t == 0 and st[0] == "breast-cancer":
                    print(f"stream 0, first decision of {'/'.join(st)}: scores C/A/R/M = "
                          + " / ".join(f"{v:.3f}" for v in sc) + f" -> {w.arms[a]}")
                state = ctl.update(state, TaskInput(f"r{r:02d}", st[0], st[1], t, f"{st[0]}/{st[1]}/{t}"),
                                   w.arms[a], float(o.adapt_utility[r, s, t]))
        if state.expiry and any(k[0] == "breast-cancer" for k in state.expiry):
            print(f"stream {r}: breast-cancer quarantine {dict(state.expiry)}")
    print("\n| stratum | adaptation arm shares C/A/R/M | single-label blocks | future arm shares C/A/R/M |"
          " smallest score margin of the chosen arm over the best other arm (48 streams, decisions 2–24) |")
    print("|---|---|---|---|---|")
    for s, st in enumerate(w.strata):
        aa = o.adapt_actions[:, s]
        single = np.array([len(np.unique(aa[r])) == 1 for r in range(w.n_streams)])
        sh_a = np.bincount(aa.ravel(), minlength=4) / aa.size
        sh_f = np.bincount(o.future_actions[:, s].ravel(), minlength=4) / o.future_actions[:, s].size
        print(f"| {'/'.join(st)} | " + " / ".join(f"{v:.3f}" for v in sh_a) + f" | {int(single.sum())} of 48 | "
              + " / ".join(f"{v:.3f}" for v in sh_f) + f" | {margin[:, s].min():+.3f} |")
    print("\n| stratum | OCRR U | paper | No update U | paper | ΔU_O−N (10^-3) [95% CI] | paper |")
    print("|---|---|---|---|---|---|---|")
    ou, nu = o.future_utility, m["No update"].future_utility
    for s, st in enumerate(w.strata):
        est = _ci((ou[:, s] - nu[:, s]).mean(axis=1) * 1e3, f"strata-{'/'.join(st)}")
        p = PAPER_STRATA[st]
        print(f"| {'/'.join(st)} | {ou[:, s].mean():.4f} | {p[0]:.3f} | {nu[:, s].mean():.4f} | "
              f"{PAPER_NOUPD[st]:.3f} | {est[0]:+.3f} [{est[1]:+.3f}, {est[2]:+.3f}] | "
              f"{p[1]:+.3f} [{p[2]:+.3f}, {p[3]:+.3f}] |")
    fut = {k: v.future_utility.mean(axis=(1, 2)) for k, v in m.items()}
    print("\n| pooled contrast (10^-3) | ours [95% CI] | paper |")
    print("|---|---|---|")
    for lab, (a, b, metric) in {"OCRR − No update (U)": ("OCRR", "No update", "U"),
                                "OCRR − Shuffled outcome (U)": ("OCRR", "Shuffled outcome", "U"),
                                "OCRR − Extra sampling (U/c)": ("OCRR", "Extra sampling", "U/c")}.items():
        if metric == "U":
            vals = (fut[a] - fut[b]) * 1e3
        else:
            vals = (fut[a] / m[a].cost - fut[b] / m[b].cost) * 1e3
        est = _ci(vals, f"pooled-{lab.split(' (')[0]}")
        p = PAPER_POOLED[lab]
        print(f"| {lab} | {est[0]:+.3f} [{est[1]:+.3f}, {est[2]:+.3f}] | {p[0]:+.3f} [{p[1]:+.3f}, {p[2]:+.3f}] |")
    ora = w.future_utility.max(axis=-1)
    print(f"\nOCRR future utility {ou.mean():.4f} (paper 0.671), regret {(ora - ou).mean():.4f} (paper 0.019); "
          f"Shuffled outcome {m['Shuffled outcome'].future_utility.mean():.4f} (paper 0.665)")

    dec = replay(w.history(o.adapt_actions), w.futures(), w.evaluator(), count_sum_agent(),
                 cells="value,pair,key_slot", maps="derangements", draws=[STRUCTURAL_SIGMA], seed=SEED)
    u, oc = dec.chosen_utility(), dec.correct().astype(np.float64)
    print("\n| count–sum ledger on this OCRR trace | Rekey ΔU | paper | Rekey ΔO | paper |")
    print("|---|---|---|---|---|")
    for s, st in enumerate(w.strata):
        du = float((u[0, 1:] - u[0, :1])[..., dec.stratum_idx == s].mean())
        do = float((oc[0, 1:] - oc[0, :1])[..., dec.stratum_idx == s].mean())
        p = PAPER_REKEY[st]
        print(f"| {'/'.join(st)} | {du:+.3f} | {p[0]:+.3f} | {do:+.3f} | {p[1]:+.3f} |")
    vals = _cell_values(dec, "rekey")
    e = _ci(vals["ΔU"], "struct-rekey-ΔU")
    print(f"| pooled Rekey ΔU [95% CI] | {e[0]:+.4f} [{e[1]:+.4f}, {e[2]:+.4f}] | −0.006 [−0.008, −0.005] | | |")
    return {}


def seed_check(seeds: tuple[int, ...] = (20260902, 20260903)) -> None:
    """Robustness (``--seeds``): the same comparison on two other substrate seeds (point estimates only)."""
    print("\n| substrate seed | order | BC ΔU_O−N iid / shifted (10^-3) | pooled O − N | pooled O − Shuffled |")
    print("|---|---|---|---|---|")
    for seed in seeds:
        for name, ds in ORDERS.items():
            w = build_public(N_STREAMS, seed=seed, datasets=ds)
            m = run_matrix(w)
            o, nu, sh = (m[k].future_utility for k in ("OCRR", "No update", "Shuffled outcome"))
            bc = [s for s, st in enumerate(w.strata) if st[0] == "breast-cancer"]
            d = " / ".join(f"{(o[:, s] - nu[:, s]).mean() * 1e3:+.3f}" for s in bc)
            print(f"| {seed} | {name} | {d} | {(o - nu).mean() * 1e3:+.3f} | {(o - sh).mean() * 1e3:+.3f} |")


if __name__ == "__main__":
    import sys
    if "--seeds" in sys.argv:
        seed_check()
    else:
        arm_table()
        for name, ds in ORDERS.items():
            trace_table(name, ds)
