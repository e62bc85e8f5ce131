"""CPU cost of the learned fits' pinned floating-point path against numpy/BLAS (issue 28, third pass).

One fit of each learned kind, at the data sizes of its reproduction section and a reduced number of updates
(a fit's cost is linear in its updates), run under numpy/BLAS and then under the pinned path
(``replaylens.paper.numerics``) in this one process; process CPU seconds, so a busy host slows both alike.

    OPENBLAS_NUM_THREADS=1 python bench/pinned_fits.py            # about 1-2 CPU min
    OPENBLAS_NUM_THREADS=1 python bench/pinned_fits.py --scale 3  # 3x the updates

Printed last: pinned / numpy CPU time summed over the kinds.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from replaylens.paper import numerics as nx
from replaylens.paper.experiments.learned_interface import N_TRAIN, generator
from replaylens.paper.fitted import INTERFACE_FIT, FitSettings, TrainingBlocks, fit_interface, fit_recurrent
from replaylens.paper.learned import (
    PAPER_SETTINGS,
    make_control_episodes,
    make_sequences,
    train_control_models,
    train_recurrent_models,
)
from replaylens.paper.persistent import PersistentSettings, fit_persistent
from replaylens.rng import derive_rng


def _kinds(scale: int) -> dict[str, Callable[[], object]]:
    seqs = [make_sequences(512, s) for s in (1, 2)]
    train, dev = make_control_episodes(512, derive_rng(1, "bench")), make_control_episodes(128, derive_rng(2, "bench"))
    episodes = generator().episodes(N_TRAIN, derive_rng(3, "bench"))
    rng = np.random.default_rng(4)
    blocks = TrainingBlocks(rng.integers(0, 4, (96, 48)), np.round(rng.uniform(size=(96, 48)), 6), 4,
                            np.round(rng.uniform(size=(96, 4)), 6))
    adapt, future = rng.uniform(size=(24, 4, 24, 4)), rng.uniform(size=(24, 4, 8, 4))
    strata = [("f", "low"), ("f", "high"), ("g", "low"), ("g", "high")]
    return {
        "learned pair (4 recurrent models, 512 sequences)": lambda: train_recurrent_models(
            seqs * 2, [1, 2, 3, 4], replace(PAPER_SETTINGS, updates=20 * scale, restart_offsets=(0,))),
        "learned control (5 augmented models, 512 episodes)": lambda: train_control_models(
            train, dev, [1, 2, 3, 4, 5], "augmented", replace(PAPER_SETTINGS, updates=4 * scale)),
        "learned interface (1 fit, 256 episodes)": lambda: fit_interface(
            episodes, [1], replace(INTERFACE_FIT, updates=60 * scale)),
        "fitted recurrent writer (1 fit, 96 blocks)": lambda: fit_recurrent(
            blocks, [5], FitSettings(updates=60 * scale)),
        "persistent agent (1 fit, 96 streams x strata)": lambda: fit_persistent(
            adapt, future, arms=["a", "b", "c", "d"], strata=strata, seed=4,
            settings=PersistentSettings(epochs=40 * scale)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=int, default=1, help="multiply every fit's updates")
    args = ap.parse_args()
    tot = {False: 0.0, True: 0.0}
    for name, run in _kinds(args.scale).items():
        cpu = {}
        for pinned in (False, True):
            with nx.pinned_numerics(pinned):
                t0 = time.process_time()
                run()
                cpu[pinned] = time.process_time() - t0
            tot[pinned] += cpu[pinned]
        print(f"{name:52s} numpy/BLAS {cpu[False]:6.2f} CPU s  pinned {cpu[True]:6.2f} CPU s  "
              f"ratio {cpu[True] / cpu[False]:.2f}")
    print(f"pinned / numpy CPU time, all kinds: {tot[True] / tot[False]:.2f} "
          f"({tot[True]:.1f} vs {tot[False]:.1f} CPU s)")


if __name__ == "__main__":
    main()
