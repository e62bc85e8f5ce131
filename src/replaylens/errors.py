"""Typed errors raised by ReplayLens.

Every error a user can cause derives from :class:`ReplayLensError`.  Input problems are
:class:`InputError` and always name the source (file or object), the 1-based line (row)
and the offending field, so the CLI can print one line and exit with status 2.
"""

from __future__ import annotations

__all__ = [
    "AgentError",
    "ConfigError",
    "InputError",
    "JournalError",
    "LawViolation",
    "ReplayLensError",
]


class ReplayLensError(Exception):
    """Root of every error ReplayLens raises on purpose."""


class InputError(ReplayLensError, ValueError):
    """Invalid user input: names the source, the line and the field.

    ``line`` is 1-based (the header of a CSV file is line 1, its first record line 2;
    the first line of a JSONL file is line 1).  ``line`` is ``None`` when the problem
    concerns the whole input (for example an empty file).
    """

    def __init__(self, source: str, line: int | None, field: str | None, message: str) -> None:
        self.source = source
        self.line = line
        self.field = field
        self.message = message
        super().__init__(self.one_line())

    def one_line(self) -> str:
        where = str(self.source)
        if self.line is not None:
            where += f":{self.line}"
        if self.field is not None:
            where += f": field '{self.field}'"
        return f"{where}: {self.message}"


class ConfigError(ReplayLensError, ValueError):
    """An invalid argument to a library function or CLI command (not a data-file problem)."""


class LawViolation(ReplayLensError, AssertionError):
    """A transformed history broke a preservation law its cell declared."""

    def __init__(self, cell: str, law: str, detail: str) -> None:
        self.cell = cell
        self.law = law
        self.detail = detail
        super().__init__(f"cell '{cell}' violated its declared law '{law}': {detail}")


class JournalError(ReplayLensError):
    """A run journal cannot be resumed (different inputs or a corrupted journal)."""


class AgentError(ReplayLensError):
    """A writer or policy misbehaved (e.g. chose an action outside the menu)."""
