"""The ``replaylens`` console script: the command group with every command module registered."""

from __future__ import annotations

from . import (  # noqa: F401  (importing a command module registers its commands)
    _audit,
    _check,
    _compare,
    _data,
    _llm,
    _migration,
    _reproduce,
    _tools,
    _validate,
    _view,
)
from ._app import cli, main

__all__ = ["cli", "main"]
