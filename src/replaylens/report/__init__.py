"""Audit orchestration, run manifests, reports (markdown, forest plot, self-contained HTML) and result loading."""

from ._audit import AuditResult, CellSummary, audit, summarize
from ._compare import check_comparable, compare_audits, compare_summaries, plan_digest, render_comparison
from ._explain import changed_examples, consequences
from ._html import render_report
from ._manifest import InputFile, RunManifest, file_sha256, git_revision, package_versions
from ._migration import write_migration_report
from ._render import AuditFiles, forest_plot, load_results, read_decisions, render_markdown, write_results

__all__ = [
    "AuditFiles",
    "AuditResult",
    "CellSummary",
    "InputFile",
    "RunManifest",
    "audit",
    "check_comparable",
    "compare_audits",
    "compare_summaries",
    "changed_examples",
    "consequences",
    "file_sha256",
    "forest_plot",
    "git_revision",
    "load_results",
    "package_versions",
    "plan_digest",
    "read_decisions",
    "render_comparison",
    "render_markdown",
    "render_report",
    "summarize",
    "write_migration_report",
    "write_results",
]
