"""The run index (issues 24, 48): one self-contained page listing every audit under a directory — agent, date,
seed, rng, repeats, cells, verdicts, inputs hash — sortable and filterable, each row linking to its report.html,
to a comparison with the previous run of the same plan and to per-cell pages of the decisions that changed
(``replaylens view DIR``).  Runs in progress are listed too, and the page then reloads itself.

Sorting and filtering take one small inline script allowed by its sha256 in the page's Content-Security-Policy
(nothing else may run, nothing is fetched); without it the table is simply newest first.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import markupsafe

from ._viewpages import INDEX_FILES

__all__ = ["INDEX_FILES", "REFRESH_S", "find_runs", "render_index", "write_index"]

MAX_DEPTH = 4
REFRESH_S = 5
"""Seconds between reloads of an index page that lists a run in progress."""
_SCRIPT = Path(__file__).with_name("templates") / "index.js"


def _read_json(p: Path) -> Any:
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return None


def _plan_key(m: dict[str, Any]) -> str | None:
    """The plan, inputs and root seed a comparison needs equal (see :func:`~replaylens.report.check_comparable`)."""
    try:
        from ._compare import plan_digest

        inputs = sorted((f["role"], f.get("content_fingerprint") or f["sha256"]) for f in m["inputs"])
        key = [plan_digest(m["plan"]), inputs, m["seeds"].get("root")]
    except (KeyError, TypeError, AttributeError):
        return None
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _statuses(v: dict[str, Any]) -> list[tuple[str, str]]:
    """(cell, status) of every judged expectation, whatever the status words are."""
    out = []
    for e in v.get("expectations") or []:
        if isinstance(e, dict):
            out.append((str(e.get("cell", "?")), str(e.get("status", "?"))))
    return out


def _run(summary_path: Path, root: Path) -> dict[str, Any] | None:
    d = summary_path.parent
    s, m = _read_json(summary_path), _read_json(d / "manifest.json")
    if not isinstance(s, dict) or not isinstance(m, dict) or "rows" not in s:
        return None
    inputs = sorted((str(f.get("role", "")), str(f.get("sha256", ""))) for f in m.get("inputs", [])
                    if isinstance(f, dict))
    digest = hashlib.sha256(json.dumps(inputs).encode()).hexdigest()[:12] if inputs else "n/a"
    got = s.get("verdict")
    v: dict[str, Any] = got if isinstance(got, dict) else {}
    statuses = _statuses(v)
    counts: dict[str, int] = {}
    for _, st in statuses:
        counts[st] = counts.get(st, 0) + 1
    rel = d.relative_to(root).as_posix()
    return {"dir": rel, "agent": str(s.get("agent", "?")), "created": str(m.get("created", "")),
            "seed": s.get("seed"), "rng": s.get("rng", "n/a"), "repeats": s.get("repeats"),
            "inputs_hash": digest, "inputs": [f"{r} {h[:12]}" for r, h in inputs], "cells": s.get("cells", [])[1:],
            "n_streams": s.get("n_streams"), "overall": str(v.get("overall", "n/a")), "statuses": statuses,
            "status_counts": sorted(counts.items()), "unsafe": v.get("unsafe", []), "declared": v.get("declared", []),
            "passed": v.get("passed", True),
            "report": f"{rel}/report.html" if (d / "report.html").exists() else None,
            "command": m.get("command", ""), "plan_key": _plan_key(m), "real": os.path.realpath(summary_path),
            "also": [], "state": "done", "compare": None, "changes": {}}


def _locked_inodes() -> set[tuple[int, int, int]] | None:
    """(major, minor, inode) of every file or directory with a ``flock`` held now (Linux), None when unknown."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        text = Path("/proc/locks").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    held = set()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5].count(":") == 2:
            maj, mnr, ino = parts[5].split(":")
            try:
                held.add((int(maj, 16), int(mnr, 16), int(ino)))
            except ValueError:
                continue
    return held


def _unfinished(d: Path, root: Path, held: set[tuple[int, int, int]] | None) -> dict[str, Any] | None:
    """A run directory with a journal but no published results: in progress (its OUT is locked) or interrupted."""
    journal = d / "journal"
    if not journal.is_dir() or (d / "summary.json").exists():
        return None
    out = d.parent.parent if d.parent.name == "runs" else d
    try:
        st = out.stat()
        done = sum(1 for ln in (journal / "done.jsonl").read_bytes().splitlines() if ln.strip()) \
            if (journal / "done.jsonl").is_file() else 0
        started = os.path.getmtime(journal)
    except OSError:
        return None
    running = held is not None and (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino) in held
    key = _read_json(journal / "journal.json")
    agent = "?"
    if isinstance(key, dict):
        spec = key.get("agent")
        agent = str((spec.get("name") or spec.get("spec") or "?") if isinstance(spec, dict) else spec or "?")
    state = "running" if running else "interrupted"
    return {"dir": d.relative_to(root).as_posix(), "agent": agent,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)), "seed": None, "rng": "",
            "repeats": None, "inputs_hash": "", "inputs": [], "cells": [], "n_streams": None, "overall": state,
            "statuses": [], "status_counts": [], "unsafe": [], "declared": [], "passed": True, "report": None,
            "command": "", "plan_key": None, "real": str(d.resolve()), "also": [], "state": state,
            "shards_done": done, "compare": None, "changes": {}}


def find_runs(root: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every audit under ``root`` (at most 4 levels deep), newest first: finished ones (summary.json +
    manifest.json; a run reached both through OUT's links and its own directory is listed once, at its own
    directory, with OUT in ``also``) and unfinished ones (``state`` running or interrupted)."""
    base = Path(root)
    held = _locked_inodes()
    found: dict[str, dict[str, Any]] = {}
    for dirpath, dirnames, filenames in os.walk(base):
        here = Path(dirpath)
        depth = len(here.relative_to(base).parts)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != INDEX_FILES and depth < MAX_DEPTH)
        r = None
        if "summary.json" in filenames and "manifest.json" in filenames:
            r = _run(here / "summary.json", base)
        elif "journal" in dirnames:
            r = _unfinished(here, base, held)
        if r is None:
            continue
        seen = found.get(r["real"])
        if seen is None:
            found[r["real"]] = r
        else:  # the same result set twice: keep the deeper path (the run's own directory), note the other
            keep, other = (r, seen) if r["dir"].count("/") > seen["dir"].count("/") else (seen, r)
            keep["also"] = sorted({*keep["also"], *other["also"], other["dir"]})
            found[r["real"]] = keep
    runs = sorted(found.values(), key=lambda r: (r["created"], r["dir"]), reverse=True)
    _link_previous(runs)
    return runs


def _link_previous(runs: list[dict[str, Any]]) -> None:
    """Give each finished run the previous finished run of the same plan (``previous``: its dir) and the group size."""
    last: dict[str, dict[str, Any]] = {}
    sizes: dict[str, int] = {}
    for r in runs:
        if r["plan_key"]:
            sizes[r["plan_key"]] = sizes.get(r["plan_key"], 0) + 1
    for r in reversed(runs):  # oldest first
        k = r["plan_key"]
        r["previous"] = last[k]["dir"] if k and k in last else None
        r["plan_runs"] = sizes.get(k, 1) if k else 1
        if k:
            last[k] = r


def _script() -> tuple[markupsafe.Markup, markupsafe.Markup]:
    """The index's inline script and its CSP source expression (``'sha256-…'``)."""
    text = _SCRIPT.read_text(encoding="utf-8")
    digest = base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")
    return markupsafe.Markup(text), markupsafe.Markup(f"'sha256-{digest}'")  # base64: nothing to escape


def render_index(root: str | os.PathLike[str], runs: list[dict[str, Any]] | None = None, *,
                 served: bool = False) -> str:
    """The index page's HTML (same stylesheet and offline rules as report.html, plus its one hashed script);
    ``served``: the page is rewritten at each request (``view --serve``), so its reload shows progress."""
    from ._html import render_template

    runs = find_runs(root) if runs is None else runs
    script, source = _script()
    live = any(r["state"] == "running" for r in runs)
    return render_template("index.html.j2", root=str(root), runs=runs, script=script, script_src=source,
                           refresh=REFRESH_S if live else None, served=served)


def write_index(root: str | os.PathLike[str], *, pages: bool = True, served: bool = False) -> Path:
    """Write ROOT/index.html (atomically) and, with ``pages``, the comparison and changed-decision pages it links
    to under ROOT/index_files/ (each made once per pair of result sets); its path."""
    from .._durable import atomic_write

    runs = find_runs(root)
    if pages:
        from ._viewpages import write_pair_pages

        write_pair_pages(Path(root), runs)
    path = Path(root) / "index.html"
    atomic_write(path, render_index(root, runs, served=served).encode("utf-8"))
    return path
