"""Audit orchestration, run manifests, reports (markdown, forest plot, self-contained HTML) and result loading."""

from ._adaptive import adaptive_audit, adaptive_summary
from ._audit import AuditResult, CellSummary, pct, state_responses, stream_warning, summarize
from ._compare import check_comparable, compare_audits, compare_summaries, plan_digest, render_comparison
from ._explain import changed_examples, consequences
from ._html import render_report
from ._manifest import InputFile, RunManifest, file_sha256, git_revision, package_versions
from ._migration import write_migration_report
from ._render import AuditFiles, forest_plot, load_results, read_decisions, render_markdown, write_results
from ._run import audit, run_audit

__all__ = [
    "AuditFiles",
    "AuditResult",
    "CellSummary",
    "InputFile",
    "RunManifest",
    "adaptive_audit",
    "adaptive_summary",
    "audit",
    "changed_examples",
    "check_comparable",
    "compare_audits",
    "compare_summaries",
    "consequences",
    "file_sha256",
    "forest_plot",
    "git_revision",
    "load_results",
    "package_versions",
    "pct",
    "plan_digest",
    "read_decisions",
    "render_comparison",
    "render_markdown",
    "render_report",
    "run_audit",
    "state_responses",
    "stream_warning",
    "summarize",
    "write_migration_report",
    "write_results",
]
