"""Audit orchestration, run manifests, reports (markdown, forest plot, self-contained HTML) and result loading."""

from ._adaptive import adaptive_audit, adaptive_summary
from ._audit import (
    AuditResult,
    CellSummary,
    extra_readouts,
    pct,
    state_responses,
    stream_warning,
    strict_json,
    summarize,
)
from ._baseline import Threshold, baseline_dir, parse_fail_on, regression_verdicts, regressions, response_masks
from ._ci import example_line, example_records, junit_xml, step_summary
from ._compare import check_comparable, compare_audits, compare_summaries, plan_digest, render_comparison
from ._explain import changed_examples, consequences
from ._html import render_report
from ._index import find_runs, render_index, write_index
from ._manifest import (
    CORE_PACKAGES,
    INTEGRATION_PACKAGES,
    InputFile,
    RunManifest,
    file_sha256,
    git_revision,
    package_versions,
)
from ._migration import write_migration_report
from ._publish import prune_runs
from ._render import AuditFiles, forest_plot, load_results, read_decisions, render_markdown, write_results
from ._run import audit, run_audit
from ._runs import agents_run, most_recent, named_agent_outs, prune_agent_runs
from ._stochastic import distinct_answers, resolve_repeats, stochastic_warnings
from ._stores import write_store_report
from ._verdict import (
    DEFAULT_STOCHASTIC_MARGIN,
    INCONCLUSIVE,
    MIN_STREAMS_WITHIN,
    Expectation,
    JudgeContext,
    Judgement,
    default_expectation,
    failure_lines,
    judge,
    judge_rows,
    parse_expect_specs,
    parse_expectations,
    verdict_lines,
    verdict_summary,
)

__all__ = [
    "CORE_PACKAGES",
    "INTEGRATION_PACKAGES",
    "DEFAULT_STOCHASTIC_MARGIN",
    "MIN_STREAMS_WITHIN",
    "INCONCLUSIVE",
    "JudgeContext",
    "judge_rows",
    "AuditFiles",
    "AuditResult",
    "CellSummary",
    "Expectation",
    "InputFile",
    "Judgement",
    "RunManifest",
    "Threshold",
    "adaptive_audit",
    "adaptive_summary",
    "agents_run",
    "audit",
    "baseline_dir",
    "changed_examples",
    "check_comparable",
    "compare_audits",
    "compare_summaries",
    "consequences",
    "extra_readouts",
    "distinct_answers",
    "default_expectation",
    "example_line",
    "example_records",
    "failure_lines",
    "file_sha256",
    "find_runs",
    "forest_plot",
    "git_revision",
    "judge",
    "junit_xml",
    "load_results",
    "package_versions",
    "parse_expect_specs",
    "parse_expectations",
    "parse_fail_on",
    "pct",
    "plan_digest",
    "most_recent",
    "named_agent_outs",
    "prune_agent_runs",
    "prune_runs",
    "read_decisions",
    "regression_verdicts",
    "regressions",
    "render_comparison",
    "render_index",
    "render_markdown",
    "render_report",
    "resolve_repeats",
    "response_masks",
    "run_audit",
    "state_responses",
    "stochastic_warnings",
    "step_summary",
    "stream_warning",
    "strict_json",
    "summarize",
    "verdict_lines",
    "verdict_summary",
    "write_index",
    "write_migration_report",
    "write_store_report",
    "write_results",
]
