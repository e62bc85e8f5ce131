"""ReplayLens in pytest (issue 24): ``assert_invariant`` / ``assert_responds`` and a ``replaylens`` fixture.

Installed with the package (entry point ``pytest11``), so a project's tests can write::

    from replaylens.pytest_plugin import assert_invariant

    @pytest.mark.replaylens_audit
    def test_my_agent_ignores_record_order():
        assert_invariant(make_my_agent(), cells="pair,reorder", tolerance=0.0)

Each helper audits the agent (on ``history``/``futures``/``evaluator`` when given, else on the built-in
4-arm bandit), judges every named cell and raises :class:`AssertionError` — as pytest's own assertions
do — with a message naming the cell, the share of changed decisions and one changed decision with the
records before and after the intervention.  It returns the :class:`~replaylens.report.AuditResult`.

Never flaky by default: the plan, the bandit and every draw are seeded (``seed``), and a stochastic agent
(``agent.stochastic``) is replayed with ``repeats=2`` and judged on the repeat-corrected T_gr interval
(invariant: its lower bound must not exceed the tolerance; responds: it must).  The interval's level is
family-wise over the checked cells (default 99%, Bonferroni: each cell at 1 − 0.01/k), so decoding noise
alone fails an invariance assertion with probability at most 0.5% — and, being seeded, the same way on
every run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

__all__ = ["AuditHelpers", "assert_invariant", "assert_responds", "replaylens"]

MARKER = "replaylens_audit: a ReplayLens audit (replays the agent; deselect with -m 'not replaylens_audit')"


def _agent(agent: Any) -> Any:
    from .agents import as_agent, load_agent

    return load_agent(agent) if isinstance(agent, str) else as_agent(agent)


def _check(kind: str, agent: Any, cells: str | Sequence[str], *, tolerance: float, history: Any, futures: Any,
           evaluator: Any, maps: str | None, repeats: int | None, seed: int, n_streams: int, n_future: int,
           n_resamples: int, level: float = 0.99) -> Any:
    from .report import Expectation, audit, changed_examples, example_line, example_records, judge

    a = _agent(agent)
    names = [c.strip() for c in (cells.split(",") if isinstance(cells, str) else cells) if c.strip()]
    if history is None:
        from .bandit import make_bandit

        sub = make_bandit(n_streams=n_streams, n_future=n_future)
        history, futures, evaluator = sub.history, sub.futures, sub.evaluator
    elif futures is None or evaluator is None:
        raise TypeError("assert_invariant/assert_responds: give history, futures and evaluator together")
    replayed = [c for c in names if c != "rekey"]
    if "rekey" in names or "rename" in names:
        maps = maps or "cyclic"
    res = audit(history, futures, evaluator, a, cells=",".join(replayed) or "value", maps=maps,
                repeats=repeats if repeats is not None else (2 if a.stochastic else 1), seed=seed,
                n_resamples=n_resamples, level=1 - (1 - level) / max(len(names), 1))
    rows = {r.cell: r for r in res.rows}
    failures = []
    for c in names:
        if c not in rows:
            raise ValueError(f"cell {c!r} has no row in this audit (rows: {', '.join(rows)})")
        j = judge(rows[c].to_dict(), Expectation(c, kind, tolerance))  # type: ignore[arg-type]
        if not j.passed:
            failures.append(j)
    if failures:
        examples = changed_examples(res.decisions, history, futures, per_row=1, max_records=8)
        parts = []
        for j in failures:
            c, e = j.expectation.cell, j.expectation
            if j.measure == "changed_share":
                share = (f"{j.n_changed} of {j.n_decisions} decisions changed ({100 * j.value:.1f}%, tolerance "
                         f"{100 * e.tolerance:g}%)")
            else:
                share = (f"{j.measure} {100 * j.value:+.1f}% [{100 * j.interval[0]:+.1f}, "
                         f"{100 * j.interval[1]:+.1f}] (tolerance {100 * e.tolerance:g}%)")
            want = "is not invariant to" if kind == "invariant" else "does not respond to"
            lines = [f"agent {a.name!r} {want} {c} ({rows[c].migration.rsplit(' (', 1)[0]}): {share}"]
            ex = examples.get(c) or []
            if ex:
                lines += [f"  changed decision: {example_line(ex[0])}", "  records before -> after:",
                          *(f"  {x}" for x in example_records(ex[0]))]
            parts.append("\n".join(lines))
        raise AssertionError("ReplayLens: " + "\n".join(parts))
    return res


def assert_invariant(agent: Any, cells: str | Sequence[str] = "pair,reorder,rename", *, tolerance: float = 0.0,
                     history: Any = None, futures: Any = None, evaluator: Any = None, maps: str | None = None,
                     repeats: int | None = None, seed: int = 0, n_streams: int = 8, n_future: int = 8,
                     n_resamples: int = 2000) -> Any:
    """Assert that no decision of ``agent`` changes (beyond ``tolerance``, a share) under each cell.

    ``agent``: an :class:`~replaylens.agents.Agent`, anything :func:`~replaylens.agents.as_agent` accepts,
    or a built-in name / ``module:factory``.  Without ``history`` the built-in bandit (``n_streams``
    streams, ``n_future`` future tasks per stream) is used."""
    return _check("invariant", agent, cells, tolerance=tolerance, history=history, futures=futures,
                  evaluator=evaluator, maps=maps, repeats=repeats, seed=seed, n_streams=n_streams,
                  n_future=n_future, n_resamples=n_resamples)


def assert_responds(agent: Any, cells: str | Sequence[str] = "value,mask", *, tolerance: float = 0.0,
                    history: Any = None, futures: Any = None, evaluator: Any = None, maps: str | None = None,
                    repeats: int | None = None, seed: int = 0, n_streams: int = 8, n_future: int = 8,
                    n_resamples: int = 2000) -> Any:
    """Assert that decisions of ``agent`` change (more than ``tolerance``) under each cell: the agent
    uses what the cell moves (e.g. ``value``: which outcome belongs to which action)."""
    return _check("responds", agent, cells, tolerance=tolerance, history=history, futures=futures,
                  evaluator=evaluator, maps=maps, repeats=repeats, seed=seed, n_streams=n_streams,
                  n_future=n_future, n_resamples=n_resamples)


class AuditHelpers:
    """What the ``replaylens`` fixture gives a test: the two assertions and the built-in bandit."""

    assert_invariant = staticmethod(assert_invariant)
    assert_responds = staticmethod(assert_responds)

    @staticmethod
    def bandit(n_streams: int = 8, n_future: int = 8) -> Any:
        """The built-in 4-arm bandit (history, futures, evaluator) the helpers use by default."""
        from .bandit import make_bandit

        return make_bandit(n_streams=n_streams, n_future=n_future)


@pytest.fixture()
def replaylens() -> AuditHelpers:
    """ReplayLens assertions for a test (``replaylens.assert_invariant(agent, cells=...)``)."""
    return AuditHelpers()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)
