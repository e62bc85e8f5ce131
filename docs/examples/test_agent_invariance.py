"""Example: ReplayLens assertions in a project's own tests (run it with ``pytest docs/examples``).

The ``replaylens`` pytest plugin is installed with the package: ``assert_invariant`` and
``assert_responds`` audit an agent (here on the built-in 4-arm bandit) and raise AssertionError naming
the cell, the share of changed decisions and one changed decision with its records before and after.
"""

from __future__ import annotations

import pytest

from replaylens.agents import load_agent
from replaylens.pytest_plugin import assert_invariant


@pytest.mark.replaylens_audit
def test_mean_agent_ignores_record_order_and_names() -> None:
    # the running mean per action: the order of records and consistent renaming cannot matter
    assert_invariant(load_agent("mean"), cells="pair,reorder,rename")


@pytest.mark.replaylens_audit
def test_mean_agent_uses_the_outcomes(replaylens) -> None:  # type: ignore[no-untyped-def]
    # the same check through the fixture: moving scores across actions or hiding them must matter
    replaylens.assert_responds("mean", cells="value,mask")
