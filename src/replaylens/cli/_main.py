"""The ``replaylens`` console script: the command group with every command module registered."""

from __future__ import annotations

from . import _audit, _check, _compare, _llm, _migration, _operations, _prune, _validate, _view  # noqa: F401  (registers the commands)
from ._app import cli, main

__all__ = ["cli", "main"]
