"""Store audits in reports: ``check-migration --store``'s OUT/report.html, summary.json and manifest.json, and the
retrieval-level section of an audit's report (the two-level cross-tab per cell)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from .._durable import mark
from ._html import render_template
from ._manifest import InputFile, RunManifest, file_sha256, git_revision, package_versions

__all__ = ["write_store_report"]


def write_store_report(out: str | os.PathLike[str], rows: list[dict[str, Any]], *, base: dict[str, Any], k: int,
                       seed: int, records: str | os.PathLike[str], queries: str | os.PathLike[str] | None,
                       arguments: dict[str, Any], tool_version: str,
                       embedding_cache: list[dict[str, Any]] | None = None,
                       policy: str = "best retrieved outcome") -> Path:
    """Write report.html, summary.json (every migration's verdict line, its status SAFE / UNSAFE / INCONCLUSIVE /
    N/A in ``statuses`` and ``migrations[i].status``, and two-level readout; ``embedding_cache``: the
    cached embedders' counts, when any) and manifest.json."""
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    inputs = [InputFile(role="records", path=str(records), sha256=file_sha256(Path(records)))]
    if queries is not None:
        inputs.append(InputFile(role="queries", path=str(queries), sha256=file_sha256(Path(queries))))
    man = RunManifest(tool_version=tool_version, git_revision=git_revision(), command="check-migration --store",
                      arguments=arguments, inputs=inputs, agent={"store": base, "rule": policy},
                      plan={"migrations": [r["migration"] for r in rows], "k": k},
                      seeds={"root": seed, "bootstrap": f"SeedSequence([{seed}, 'two-level', migration])",
                             "slot_draws": []},
                      packages=package_versions()).model_dump(mode="json")
    summary = {"format": 1, "store": base, "k": k, "seed": seed, "policy": policy, "migrations": rows,
               "verdicts": [r["verdict"] for r in rows],
               "statuses": {r["migration"]: r.get("status", "SAFE" if r["safe"] else "UNSAFE") for r in rows}}
    if embedding_cache:
        summary["embedding_cache"] = embedding_cache
    html = render_template("stores.html.j2", s=summary, manifest=man,
                           xt_rows=[(r["migration"], r["readout"]) for r in rows if r["readout"]])
    tmp = Path(tempfile.mkdtemp(dir=root, prefix=".writing-"))
    mark(tmp, "staging")   # ours: a killed run's leftover is removed by the next run's clean_stale
    try:
        (tmp / "report.html").write_text(html, encoding="utf-8")
        (tmp / "summary.json").write_text(json.dumps(summary, indent=2, allow_nan=False) + "\n")
        (tmp / "manifest.json").write_text(json.dumps(man, indent=2) + "\n")
        for name in ("summary.json", "manifest.json", "report.html"):
            os.replace(tmp / name, root / name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return root
