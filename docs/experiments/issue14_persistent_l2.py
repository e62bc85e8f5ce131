"""Issue 14 (a): which fitting detail keeps the persistent recurrent agent from responding to rekey?

Run (needs the public data: `replaylens paper data fetch breast-cancer wine-red`, a few minutes on 2 cores)::

    PYTHONPATH=src python docs/experiments/issue14_persistent_l2.py

Prints, per fit variant and fold, the action responses A of the four cells next to the paper's.
"""

from __future__ import annotations

import numpy as np

import replaylens.paper.experiments.public_data as P
from replaylens.paper.persistent import PersistentSettings

VARIANTS = {"committed (1e-4·Σθ²)": PersistentSettings(), "l2 = 0": PersistentSettings(l2=0.0),
            "3,000 epochs": PersistentSettings(epochs=3000)}

world = P.public_world()
for name, settings in VARIANTS.items():
    pr = P.run_persistent(world, settings=settings)
    for i, fold in enumerate(pr.folds):
        cells = []
        for label, cell in P.CELL_ROWS:
            a = float(np.mean(P._fold_values(pr, i, cell)["A"]))
            cells.append(f"{label} {a:.3f} (paper {P.PAPER_FOLDS[(label, 'A')][i][0]:.3f})")
        actions = [np.bincount(fold.future_actions[0][:, b], minlength=4).tolist() for b in range(4)]
        print(f"{name:22s} fold {fold.name}: " + "; ".join(cells) + f"; seed-1 future actions per stratum {actions}")
