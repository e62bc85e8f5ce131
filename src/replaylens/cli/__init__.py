"""Command-line interface (``replaylens``).

Besides :func:`main`, this package exports the pieces a command module of another package (the paper
wing's ``replaylens paper ...`` group) builds on: one-line user errors, model names, progress, cost options.
"""

from ._app import F, cli, model_progress, resolve_model, table_console, user_errors
from ._llmcost import (
    BUDGET_EXIT,
    CostOptions,
    cache_options,
    cost_options,
    pop_cost,
    print_estimate,
    response_format_option,
    token_counter,
)
from ._main import main

__all__ = [
    "BUDGET_EXIT",
    "F",
    "CostOptions",
    "cache_options",
    "cli",
    "cost_options",
    "main",
    "model_progress",
    "pop_cost",
    "print_estimate",
    "resolve_model",
    "response_format_option",
    "table_console",
    "token_counter",
    "user_errors",
]
