"""The run index (issue 24): one self-contained page listing every audit under a directory — agent, date,
inputs hash, cells and verdict — each linking to its report.html (``replaylens view DIR``)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

__all__ = ["find_runs", "render_index", "write_index"]

MAX_DEPTH = 4


def _run(summary_path: Path, root: Path) -> dict[str, Any] | None:
    d = summary_path.parent
    try:
        s = json.loads(summary_path.read_text(encoding="utf-8"))
        m = json.loads((d / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    if not isinstance(s, dict) or not isinstance(m, dict) or "rows" not in s:
        return None
    inputs = sorted((f.get("role", ""), f.get("sha256", "")) for f in m.get("inputs", []))
    digest = hashlib.sha256(json.dumps(inputs).encode()).hexdigest()[:12] if inputs else "n/a"
    v = s.get("verdict") or {}
    return {"dir": d.relative_to(root).as_posix(), "agent": s.get("agent", "?"), "created": m.get("created", ""),
            "inputs_hash": digest, "inputs": [f"{r} {h[:12]}" for r, h in inputs], "cells": s.get("cells", [])[1:],
            "n_streams": s.get("n_streams"), "overall": v.get("overall", "n/a"),
            "unsafe": v.get("unsafe", []), "declared": v.get("declared", []), "passed": v.get("passed", True),
            "report": (d / "report.html").relative_to(root).as_posix() if (d / "report.html").exists() else None,
            "command": m.get("command", "")}


def find_runs(root: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every finished audit (summary.json + manifest.json) under ``root`` (at most 4 levels deep), newest first."""
    base = Path(root)
    runs = []
    for dirpath, dirnames, filenames in os.walk(base):
        depth = len(Path(dirpath).relative_to(base).parts)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and depth < MAX_DEPTH)
        if "summary.json" in filenames and "manifest.json" in filenames:
            r = _run(Path(dirpath) / "summary.json", base)
            if r is not None:
                runs.append(r)
    return sorted(runs, key=lambda r: (r["created"], r["dir"]), reverse=True)


def render_index(root: str | os.PathLike[str], runs: list[dict[str, Any]] | None = None) -> str:
    """The index page's HTML (same stylesheet and offline rules as report.html)."""
    from ._html import render_template

    return render_template("index.html.j2", root=str(root), runs=find_runs(root) if runs is None else runs)


def write_index(root: str | os.PathLike[str]) -> Path:
    """Write ROOT/index.html (atomically); its path.  ConfigError-free: an empty directory lists no run."""
    from .._durable import atomic_write

    path = Path(root) / "index.html"
    atomic_write(path, render_index(root).encode("utf-8"))
    return path
