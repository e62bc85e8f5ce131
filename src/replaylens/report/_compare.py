"""Paired comparison of two audits on the same plan (agent v1 vs v2, model A vs model B).

Both runs replayed the same transformed histories on the same future tasks, so every summary row has
one value per stream in each run.  The comparison takes the per-stream differences B − A of the action
response, ΔU and ΔO and puts a Student-t interval (``S - 1`` degrees of freedom, issue 47) on their mean; the
stream-cluster percentile bootstrap interval (one paired resampling for the three columns, seeded from the runs'
root seed) is kept beside it as ``bootstrap_ci``.  Runs on different plans, inputs or
seeds are refused: their streams are not paired.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..inference import cluster_bootstrap, mean_inference
from ..rng import derive_seed
from ._render import AuditFiles

__all__ = ["check_comparable", "compare_audits", "compare_summaries", "plan_digest", "render_comparison"]

_KEYS = ["stream", "task", "cell", "map", "draw", "repeat"]


def plan_digest(plan: dict[str, Any]) -> str:
    """The digest of a plan as recorded in manifest.json (equals :meth:`ReplayPlan.digest`)."""
    return hashlib.sha256(json.dumps(plan, sort_keys=True).encode()).hexdigest()


def _inputs(man: dict[str, Any]) -> dict[str, str]:
    return {f["role"]: f.get("content_fingerprint") or f["sha256"] for f in man["inputs"]}


def check_comparable(a: AuditFiles, b: AuditFiles) -> None:
    """Refuse (one line) unless both audits ran the same plan on the same inputs with the same seed."""
    where = f"{a.root} vs {b.root}"
    da, db = plan_digest(a.manifest["plan"]), plan_digest(b.manifest["plan"])
    if da != db:
        diff = [k for k in sorted(set(a.manifest["plan"]) | set(b.manifest["plan"]))
                if a.manifest["plan"].get(k) != b.manifest["plan"].get(k)]
        raise ConfigError(f"cannot compare {where}: different replay plans (plan digest {da[:12]} vs {db[:12]}; "
                          f"differs in {', '.join(diff)}); rerun both with the same cells, maps, draws, repeats "
                          "and seed")
    ia, ib = _inputs(a.manifest), _inputs(b.manifest)
    if ia != ib:
        roles = sorted(r for r in set(ia) | set(ib) if ia.get(r) != ib.get(r))
        raise ConfigError(f"cannot compare {where}: different inputs ({', '.join(roles)} differ by content "
                          "fingerprint/sha256)")
    if a.manifest["seeds"].get("root") != b.manifest["seeds"].get("root"):
        raise ConfigError(f"cannot compare {where}: different seeds ({a.manifest['seeds'].get('root')} vs "
                          f"{b.manifest['seeds'].get('root')})")
    if [r["cell"] for r in a.summary["rows"]] != [r["cell"] for r in b.summary["rows"]]:
        raise ConfigError(f"cannot compare {where}: the summaries have different rows")


def compare_summaries(sa: dict[str, Any], sb: dict[str, Any], fa: Any, fb: Any, *, seed: int,
                      n_resamples: int, level: float) -> dict[str, Any]:
    """Per row: B − A of the per-stream action response, ΔU and ΔO with a paired stream-cluster interval,
    and how many of the row's decisions differ between the two decision tables ``fa``/``fb``."""
    ka, kb = fa[_KEYS].reset_index(drop=True), fb[_KEYS].reset_index(drop=True)
    if len(ka) != len(kb) or not ka.astype(str).equals(kb.astype(str)):
        raise ConfigError("cannot compare: the decision tables do not list the same decisions")
    differ = fa["action"].to_numpy() != fb["action"].to_numpy()
    cell = fa["cell"].astype(str).to_numpy()
    mp = fa["map"].astype(str).to_numpy()
    from ._baseline import response_masks  # issue 24: which decisions *respond* in each run, paired

    resp_a = response_masks(sa, fa["action"].astype(str).to_numpy())
    resp_b = response_masks(sb, fb["action"].astype(str).to_numpy())
    rows = []
    for index, (ra, rb) in enumerate(zip(sa["rows"], sb["rows"], strict=True)):
        cols = ("action", "delta_utility", "delta_oracle")
        diff = np.column_stack([np.asarray(rb["per_stream"][k], float) - np.asarray(ra["per_stream"][k], float)
                                for k in cols])
        est = diff.mean(axis=0)
        if diff.shape[0] >= 2 and np.isfinite(diff).all():
            iv = cluster_bootstrap(diff, n_resamples=n_resamples, level=level,
                                   rng=derive_seed(seed, "compare", index))
            blo, bhi = np.asarray(iv.low), np.asarray(iv.high)
        else:
            blo = bhi = np.full(3, math.nan)
        inf = [mean_inference(diff[:, j]) for j in range(3)]
        lo, hi = (np.array([x.interval(level)[k] for x in inf]) for k in (0, 1))
        maps = list(ra["by_map"]["action"])
        sel = (cell == ("aligned" if ra["cell"] == "rekey" else ra["cell"])) & np.isin(mp, maps)
        rows.append({"cell": ra["cell"], "migration": ra["migration"],
                     **{k: float(est[j]) for j, k in enumerate(cols)},
                     **{f"{k}_ci": [float(lo[j]), float(hi[j])] for j, k in enumerate(cols)},
                     "bootstrap_ci": {k: [float(blo[j]), float(bhi[j])] for j, k in enumerate(cols)},
                     "se": {k: inf[j].se for j, k in enumerate(cols)},
                     "stochastic": str(ra["action_readout"]).startswith("T_gr")
                     or str(rb["action_readout"]).startswith("T_gr"),
                     "a": {k: ra[k] for k in cols}, "b": {k: rb[k] for k in cols},
                     "n_differ": int(differ[sel].sum()), "n_decisions": int(sel.sum()),
                     "n_a_only": int((resp_a[ra["cell"]] & ~resp_b[ra["cell"]]).sum()),
                     "n_b_only": int((resp_b[ra["cell"]] & ~resp_a[ra["cell"]]).sum()),
                     "n_compared": int(resp_a[ra["cell"]].size)})
    aligned = (cell == "aligned") & (mp == "id")
    return {"a": sa["agent"], "b": sb["agent"], "seed": seed, "level": level, "n_resamples": n_resamples,
            "n_streams": sa["n_streams"], "rows": rows, "aligned_a": sa["aligned"]["mean_utility"],
            "aligned_b": sb["aligned"]["mean_utility"], "n_differ_aligned": int(differ[aligned].sum()),
            "n_aligned": int(aligned.sum()), "verdicts_a": sa["verdicts"], "verdicts_b": sb["verdicts"]}


def compare_audits(a: AuditFiles, b: AuditFiles, *, n_resamples: int | None = None,
                   level: float | None = None) -> dict[str, Any]:
    """Compare two loaded audit directories (see :func:`~replaylens.report.load_results`); refuses unless
    they share plan, inputs and seed.  Defaults: A's bootstrap draws and level."""
    check_comparable(a, b)
    seed = int(a.manifest["seeds"]["root"])
    out = compare_summaries(a.summary, b.summary, a.decisions, b.decisions, seed=seed,
                            n_resamples=n_resamples or int(a.summary["n_resamples"]),
                            level=level or float(a.summary["level"]))
    if out["a"] == out["b"]:
        out["a"], out["b"] = f"A ({out['a']})", f"B ({out['b']})"
    return out | {"dir_a": str(a.root), "dir_b": str(b.root), "plan_digest": plan_digest(a.manifest["plan"]),
                  "id": "ab"}


def render_comparison(comparison: dict[str, Any], manifest_a: dict[str, Any]) -> str:
    """The self-contained HTML comparison page (same template library and style as report.html)."""
    from ._html import render_template

    return render_template("compare.html.j2", c=comparison, manifest_a=manifest_a)
