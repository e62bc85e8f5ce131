"""The ``replaylens paper`` command group (the paper's reproductions, data and designs)."""

from __future__ import annotations

import click


@click.group()
def paper() -> None:
    """The paper's reproductions: tables, public data, the joint and memory challenges, the closed-loop tools.

    \b
    Needs the paper extra: pip install 'replaylens[paper]'.
    """
