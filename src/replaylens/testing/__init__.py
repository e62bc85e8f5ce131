"""Public conformance kit for writers and policies."""

from ._checks import CheckResult, RelationCheck, WriterReport, check_writer

__all__ = ["CheckResult", "RelationCheck", "WriterReport", "check_writer"]
