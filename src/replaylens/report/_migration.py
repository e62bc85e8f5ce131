"""check-migration's report: OUT/report.html (same template library and style as the audit report),
OUT/migration.json (the per-operation reports) and OUT/manifest.json (provenance)."""

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

__all__ = ["write_migration_report"]


def write_migration_report(out: str | os.PathLike[str], reports: list[dict[str, Any]], *, memory: str,
                           events: str | os.PathLike[str], arguments: dict[str, Any], seed: int, k: int,
                           policy: str, tool_version: str) -> Path:
    """Write report.html, migration.json and manifest.json into ``out`` (all or nothing)."""
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    man = RunManifest(tool_version=tool_version, git_revision=git_revision(), command="check-migration",
                      arguments=arguments, inputs=[InputFile(role="events", path=str(events),
                                                             sha256=file_sha256(Path(events)))],
                      agent={"memory": memory, "policy": policy}, plan={"ops": [r["op"] for r in reports], "k": k},
                      seeds={"root": seed, "bootstrap": "none", "slot_draws": []},
                      packages=package_versions()).model_dump(mode="json")
    html = render_template("migration.html.j2", reports=reports, memory=memory, k=k, seed=seed, policy=policy,
                           manifest=man)
    tmp = Path(tempfile.mkdtemp(dir=root, prefix=".writing-"))
    mark(tmp, "staging")   # ours: a killed run's leftover is removed by the next run's clean_stale
    try:
        (tmp / "report.html").write_text(html, encoding="utf-8")
        (tmp / "migration.json").write_text(json.dumps(reports, indent=2) + "\n")
        (tmp / "manifest.json").write_text(json.dumps(man, indent=2) + "\n")
        for name in ("migration.json", "manifest.json", "report.html"):
            os.replace(tmp / name, root / name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return root
