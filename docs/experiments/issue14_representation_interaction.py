"""Issue 14 point 5: where does the OCRR − time-placebo interaction (tab:representation-interaction) differ?

Run (about 10 s on 2 cores)::

    PYTHONPATH=src python docs/experiments/issue14_representation_interaction.py

The interaction is, per readout, the OCRR row minus the TP-placebo row of tab:representation-controls
(the same derangements and streams; a mean of paired differences is the difference of the means).
Prints both rows and the interaction, ours next to the paper's, and how much of the gap in the
interaction comes from each row.
"""

from __future__ import annotations

from replaylens.paper.experiments.synthetic_suite import (
    PAPER_CONTROLS,
    representation_controls,
    representation_interaction,
)

COLS = {"U": ("Mean utility", 0, "Future utility"), "A": ("Action", 3, "Future actions changed"),
        "O": ("Oracle", 4, "Oracle-match change")}
ctl = {(r.row, r.column): float(r.ours) for r in representation_controls() if r.ours is not None}
inter = {(r.row, r.column): float(r.ours) for r in representation_interaction() if r.ours is not None}

print("| readout | OCRR ours / paper | TP ours / paper | OCRR − TP ours / paper | gap from OCRR | gap from TP |")
print("|---|---|---|---|---|---|")
for col, i, metric in COLS.values():
    o, t = ctl[("OCRR", col)], ctl[("TP placebo", col)]
    po, pt = PAPER_CONTROLS["OCRR"][i], PAPER_CONTROLS["TP placebo"][i]
    est = inter[(metric, "estimate")]
    assert abs(est - (o - t)) < 1e-12
    print(f"| {metric} | {o:.3f} / {po:.3f} | {t:.3f} / {pt:.3f} | {est:.3f} / {po - pt:.3f} | "
          f"{o - po:+.3f} | {-(t - pt):+.3f} |")
