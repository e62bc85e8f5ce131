"""Shared pieces of the tool-agent tests."""

from __future__ import annotations

import re

from replaylens.paper.tools import Suite, build_suite

LEDGER_ROW = re.compile(r"^\d\d \| (\S+) \|", re.MULTILINE)
"""A ledger row of a tool prompt: ``NN | ID | value``; group 1 is the shown candidate / configuration ID."""


def small_debug_suite() -> Suite:
    """Two dictionary-lookup tasks: the smallest code-debugging suite that exercises every tool."""
    return build_suite(11, families=("dict-lookup",), instances=(2,))
