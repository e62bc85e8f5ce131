"""Command-line interface (``replaylens``)."""

from ._main import main

__all__ = ["main"]
