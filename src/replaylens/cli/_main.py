"""The ``replaylens`` console script: the command group with every command module registered."""

from __future__ import annotations

from . import _audit, _check, _data, _llm, _migration, _reproduce, _tools, _validate  # noqa: F401  (register)
from ._app import cli, main

__all__ = ["cli", "main"]
