"""Typed errors raised by ReplayLens.

Every error a user can cause derives from :class:`ReplayLensError`.  Input problems are
:class:`InputError` and always name the source (file or object), the 1-based line (row)
and the offending field, so the CLI can print one line and exit with status 2.
"""

from __future__ import annotations

__all__ = [
    "AgentError",
    "AgentRaised",
    "BudgetExhausted",
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


class BudgetExhausted(ReplayLensError):
    """A ``--max-requests`` / ``--max-cost`` budget was reached: the run stopped cleanly (journaled; a rerun with a
    higher budget resumes)."""


class JournalError(ReplayLensError):
    """A run journal cannot be resumed (different inputs or a corrupted journal)."""


class AgentError(ReplayLensError):
    """A writer or policy misbehaved (e.g. chose an action outside the menu)."""


class AgentRaised(AgentError):
    """The audited agent's own code raised while ReplayLens was replaying it (CLI exit status 3).

    Carries where the replay was (``where``: stream, cell, map, draw and the future task or history
    record), the original exception (also chained as ``__cause__``) and the innermost frame of the
    user's code outside ReplayLens (``frame``, ``file:line``).
    """

    def __init__(self, agent: str, call: str, where: dict[str, object], exc: BaseException, *,
                 hint: str | None = None) -> None:
        self.hint = hint
        self.agent = agent
        self.call = call
        self.where = dict(where)
        self.exc = exc
        self.frame = user_frame(exc)
        super().__init__(self.one_line())

    def one_line(self) -> str:
        ctx = ", ".join(f"{k} {v!s}" for k, v in self.where.items())
        at = f" at {self.frame}" if self.frame else ""
        msg = str(self.exc).strip().splitlines()[0] if str(self.exc).strip() else ""
        what = f"{type(self.exc).__name__}{': ' + msg if msg else ''}{at}"
        if self.hint:
            return f"{self.hint} [{what}; in {self.call}; {ctx}]"
        return f"agent {self.agent!s} raised {what} (in {self.call}; {ctx}); rerun with --traceback for the full trace"


def user_frame(exc: BaseException) -> str | None:
    """``file:line`` of the innermost traceback frame outside ReplayLens, preferring the user's own files
    over installed libraries (site-packages) and the standard library."""
    import os
    import sys
    import traceback

    pkg = os.path.dirname(os.path.abspath(__file__)) + os.sep
    lib_roots = {os.path.abspath(p) + os.sep for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not os.path.abspath(f.filename).startswith(pkg)]
    own = [f for f in frames if "site-packages" not in f.filename and "dist-packages" not in f.filename
           and not any(os.path.abspath(f.filename).startswith(r) for r in lib_roots)]
    chosen = own or frames
    return f"{chosen[-1].filename}:{chosen[-1].lineno}" if chosen else None
