"""Audit orchestration, run manifests, reports (markdown + forest plot) and result loading."""

from ._audit import AuditResult, CellSummary, audit, summarize
from ._manifest import InputFile, RunManifest, file_sha256, git_revision, package_versions
from ._render import AuditFiles, forest_plot, load_results, read_decisions, render_markdown, write_results

__all__ = [
    "AuditFiles",
    "AuditResult",
    "CellSummary",
    "InputFile",
    "RunManifest",
    "audit",
    "file_sha256",
    "forest_plot",
    "git_revision",
    "load_results",
    "package_versions",
    "read_decisions",
    "render_markdown",
    "summarize",
    "write_results",
]
