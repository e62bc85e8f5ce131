"""Compact, self-checking exports of finished LLM runs (shared by the experiments that ship one).

An export is gzip-compressed canonical JSON (``mtime=0``, so the bytes are reproducible) holding, per
run directory, the frozen manifest and its sha256, the validation gate's report, token usage and one
row per decision; the experiment adds its own fields.  What a repository commits so its tables are
recomputed with zero model calls; the full run directory (prompts, attempts) stays with the run.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..._durable import atomic_write
from ...errors import ConfigError
from ...llm import Request

__all__ = ["RowFn", "read_export", "run_section", "section_rows", "write_export"]

RowFn = Callable[[Request, int, str | None, str, str | None], Sequence[Any]]
"""(request, item index, displayed token, decoded action, attempt kind) -> one export row."""


def run_section(run_dir: str | os.PathLike[str], columns: Sequence[str], row: RowFn) -> dict[str, Any]:
    """Manifest, manifest sha256, the gate's report (re-run now), usage and decision rows of one run."""
    from ...llm import RunStore, open_store
    from ...llm import validate as validate_run

    rep = validate_run(run_dir)
    with open_store(run_dir) as store:
        manifest = store.manifest
        usage = store.usage_summary()
        msha = RunStore.manifest_sha256(Path(run_dir) / "manifest.json")
        rows = []
        for rid in store.scheduled():
            d = store.decisions(rid)
            if d is None:
                continue
            req = store.request(rid)
            sel = store.selected(rid) or {}
            toks = sel.get("parsed_decisions") or []
            for i, act in enumerate(d):
                rows.append(list(row(req, i, toks[i] if i < len(toks) else None, act, sel.get("kind"))))
    return {"manifest": manifest, "manifest_sha256": msha, "validation": rep.to_dict(), "usage": usage,
            "columns": list(columns), "rows": rows}


def write_export(doc: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write ``doc`` as gzip canonical JSON, atomically."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    data = gzip.compress(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode("utf-8"), mtime=0)
    atomic_write(out, data)
    return out


def read_export(path: str | os.PathLike[str], fmt: str) -> dict[str, Any]:
    """Read an export and check its ``format`` field (ConfigError naming the file and field otherwise)."""
    p = Path(path)
    try:
        doc = json.loads(gzip.decompress(p.read_bytes()))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{p}: not a ReplayLens export ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != fmt:
        got = doc.get("format") if isinstance(doc, dict) else None
        raise ConfigError(f"{p}: field 'format' is {got!r}, expected {fmt!r}")
    return doc


def section_rows(doc: Mapping[str, Any], where: str) -> list[dict[str, Any]]:
    """The decision rows of one run section as dicts (ConfigError naming the field when malformed)."""
    try:
        cols = list(doc["columns"])
        return [dict(zip(cols, r, strict=True)) for r in doc["rows"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: field 'rows' is malformed ({exc})") from None
