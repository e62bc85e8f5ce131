"""The pages ``replaylens view DIR`` links from its run index: for each run and the previous run of the same plan,
the comparison page (B − A per cell, :func:`~replaylens.report.compare_audits`) and one page per cell listing the
decisions whose action differs between the two runs (A's record and B's record side by side).

Written under ``DIR/index_files/<pair>/`` where ``<pair>`` digests the two result sets, so a pair is computed once
and a republished run gets fresh pages."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ..errors import ReplayLensError

__all__ = ["CHANGES_MAX", "INDEX_FILES", "write_pair_pages"]

INDEX_FILES = "index_files"
"""Where ``view DIR`` writes the pages the index links to (comparisons, changed decisions), beside index.html."""

CHANGES_MAX = 500
"""Most changed decisions listed on one cell's page (the count says how many there are; decisions.parquet has all)."""
_KEYS = ["stream", "task", "cell", "map", "draw", "repeat"]
_DONE = "pair.json"


def _pair_id(a: dict[str, Any], b: dict[str, Any]) -> str:
    return hashlib.sha256(f"{a['real']}\0{b['real']}".encode()).hexdigest()[:16]


def _changes(da: Any, db: Any) -> dict[str, tuple[int, int, list[dict[str, Any]]]]:
    """Per cell: (decisions whose action differs between A and B, decisions in both, the first CHANGES_MAX)."""
    a = da[[*_KEYS, "task_index", "stratum", "action", "utility"]].copy()
    b = db[[*_KEYS, "action", "utility"]].copy()
    for frame in (a, b):
        for col in ("stream", "task", "cell", "map", "action"):
            frame[col] = frame[col].astype(str)
    both = a.merge(b, on=_KEYS, suffixes=("_a", "_b"))
    out: dict[str, tuple[int, int, list[dict[str, Any]]]] = {}
    for cell, group in both.groupby("cell", sort=False, observed=True):
        diff = group[group["action_a"] != group["action_b"]]
        rows = [{k: (v.item() if hasattr(v, "item") else v) for k, v in rec.items()}
                for rec in diff.head(CHANGES_MAX).to_dict("records")]
        out[str(cell)] = (len(diff), len(group), rows)
    return out


def _make_pair(root: Path, a: dict[str, Any], b: dict[str, Any], where: Path) -> dict[str, Any]:
    from .._durable import atomic_write
    from ._compare import compare_audits, render_comparison
    from ._html import render_template
    from ._render import load_results

    fa, fb = load_results(root / a["dir"]), load_results(root / b["dir"])
    comparison = compare_audits(fa, fb)
    where.mkdir(parents=True, exist_ok=True)
    atomic_write(where / "compare.html", render_comparison(comparison, fa.manifest).encode("utf-8"))
    cells = {}
    for i, (cell, (n, total, rows)) in enumerate(_changes(fa.decisions, fb.decisions).items()):
        name = f"cell-{i:02d}.html"
        page = render_template("changes.html.j2", cell=cell, a=a, b=b, n=n, total=total, rows=rows,
                               limit=CHANGES_MAX, back="../../index.html")
        atomic_write(where / name, page.encode("utf-8"))
        cells[cell] = {"page": name, "changed": n, "decisions": total}
    info = {"a": a["dir"], "b": b["dir"], "cells": cells}
    atomic_write(where / _DONE, json.dumps(info, indent=1).encode("utf-8"))
    return info


def write_pair_pages(root: Path, runs: list[dict[str, Any]]) -> None:
    """Make (or reuse) the pages of every run and its previous run of the same plan; set each run's ``compare``
    (the comparison page) and ``changes`` (cell -> page, changed, decisions), relative to ``root``, or
    ``compare_error`` (one line) when the two cannot be compared."""

    by_dir = {r["dir"]: r for r in runs}
    for b in runs:
        a = by_dir.get(b.get("previous") or "")
        if a is None:
            continue
        pid = _pair_id(a, b)
        where = root / INDEX_FILES / pid
        info = None
        if (where / _DONE).is_file():
            try:
                info = json.loads((where / _DONE).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                info = None
        if info is None:
            try:
                info = _make_pair(root, a, b, where)
            except (ReplayLensError, OSError, KeyError, ValueError) as exc:
                b["compare_error"] = " ".join(str(exc).split())[:300]
                continue
        rel = f"{INDEX_FILES}/{pid}"
        b["compare"] = f"{rel}/compare.html"
        b["changes"] = {c: {**v, "page": f"{rel}/{v['page']}"} for c, v in info["cells"].items()}
