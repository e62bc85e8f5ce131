"""ReplayLens in pytest (issues 24, 47, 48): ``assert_invariant`` / ``assert_responds`` and a ``replaylens`` fixture.

Installed with the package (entry point ``pytest11``), so a project's tests can write::

    from replaylens.pytest_plugin import assert_invariant

    @pytest.mark.replaylens_audit
    def test_my_agent_ignores_record_order():
        assert_invariant(make_my_agent(), cells="pair,reorder")

Each helper audits the agent (on ``history``/``futures``/``evaluator`` when given, else on the built-in
4-arm bandit), judges every named cell with the audit's verdicts (SAFE / UNSAFE / INCONCLUSIVE,
docs/guide/verdicts.md) and raises :class:`AssertionError` -- as pytest's own assertions do, with the
plugin's frames hidden -- naming the cell, the verdict's evidence and one changed decision with the records
before and after the intervention.  It returns the :class:`~replaylens.report.AuditResult`.

Never flaky: the plan, the bandit and every draw are seeded.  A deterministic agent is a census (0 changed
decisions is SAFE exactly).  A stochastic agent (``agent.stochastic``) is replayed with ``repeats=2`` and
judged on the repeat-corrected T_gr by Student t over the streams, Holm-adjusted over the checked cells at
``1 - level`` (default 1 %): decoding noise alone fails an assertion with probability at most 1 %
(measured: docs/guide/verdicts.md).  INCONCLUSIVE passes unless ``on_inconclusive="fail"``, as in the CLI.

Within one pytest session an audit is run once for identical (agent object or spec, inputs, plan) and reused.
Command-line options: ``--replaylens-seed N`` and ``--replaylens-resamples N`` (the defaults of every helper
call that does not pass its own), ``--replaylens-report-dir DIR`` (each audited test writes its report to
``DIR/<test id>/report.html``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

__all__ = ["AuditHelpers", "assert_invariant", "assert_responds", "replaylens"]

MARKER = "replaylens_audit: a ReplayLens audit (replays the agent; deselect with -m 'not replaylens_audit')"

#: the session's option values (``--replaylens-seed`` ...), and the test being run (its report directory)
_SESSION: dict[str, Any] = {"seed": None, "resamples": None, "report_dir": None, "test": None}
#: audits run in this session, by (agent, inputs, plan); the agent object is kept so its id is never reused
_CACHE: dict[tuple[Any, ...], tuple[Any, Any]] = {}


def _agent(agent: Any) -> Any:
    from .agents import as_agent, load_agent

    return load_agent(agent) if isinstance(agent, str) else as_agent(agent)


def _inputs(history: Any, futures: Any, evaluator: Any, n_streams: int, n_future: int) -> tuple[Any, Any, Any, Any]:
    """The audited inputs and their cache key: the user's objects (by identity), else the seeded bandit."""
    if history is None:
        key = ("bandit", n_streams, n_future)
        hit = _CACHE.get(key)
        if hit is None:
            from .bandit import make_bandit

            sub = make_bandit(n_streams=n_streams, n_future=n_future)
            hit = _CACHE[key] = ((sub.history, sub.futures, sub.evaluator), None)
        history, futures, evaluator = hit[0]
        return history, futures, evaluator, key
    if futures is None or evaluator is None:
        raise TypeError("assert_invariant/assert_responds: give history, futures and evaluator together")
    return history, futures, evaluator, ("user", id(history), id(futures), id(evaluator))


def _audit(agent: Any, a: Any, inputs: tuple[Any, Any, Any, Any], **plan: Any) -> Any:
    """The audit of ``a`` on ``inputs`` under ``plan``: run once per session for identical arguments."""
    from .report import audit

    history, futures, evaluator, in_key = inputs
    who = agent if isinstance(agent, str) else ("object", id(agent))
    key = (who, in_key, tuple(sorted(plan.items())))
    hit = _CACHE.get(key)
    out = _report_dir()
    if hit is not None and out is None:
        return hit[0]
    res = audit(history, futures, evaluator, a, out=out, overwrite=True, **plan)
    _CACHE[key] = (res, (agent, history, futures, evaluator))   # the objects stay alive: their ids stay theirs
    return res


def _report_dir() -> Path | None:
    base, test = _SESSION["report_dir"], _SESSION["test"]
    if base is None:
        return None
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(test or "outside-a-test")).strip("_")[:150]
    return Path(base) / name


def _check(kind: str, agent: Any, cells: str | Sequence[str], *, tolerance: float | None, history: Any,
           futures: Any, evaluator: Any, maps: str | None, repeats: int | None, seed: int | None, n_streams: int,
           n_future: int, n_resamples: int | None, level: float, on_inconclusive: str) -> Any:
    __tracebackhide__ = True
    from .report import Expectation, JudgeContext, changed_examples, example_line, example_records, judge_rows

    if on_inconclusive not in ("pass", "fail"):
        raise ValueError(f"on_inconclusive must be 'pass' or 'fail'; got {on_inconclusive!r}")
    a = _agent(agent)
    names = [c.strip() for c in (cells.split(",") if isinstance(cells, str) else cells) if c.strip()]
    inputs = _inputs(history, futures, evaluator, n_streams, n_future)
    replayed = [c for c in names if c != "rekey"]
    if "rekey" in names or "rename" in names:
        maps = maps or "cyclic"
    seed = seed if seed is not None else (_SESSION["seed"] if _SESSION["seed"] is not None else 0)
    n_resamples = n_resamples or _SESSION["resamples"] or 2000
    res = _audit(agent, a, inputs, cells=",".join(replayed) or "value", maps=maps,
                 repeats=repeats if repeats is not None else (2 if a.stochastic else 1), seed=seed,
                 n_resamples=n_resamples, level=level)
    rows = {r.cell: r for r in res.rows}
    for c in names:
        if c not in rows:
            raise ValueError(f"cell {c!r} has no row in this audit (rows: {', '.join(rows)})")
    plan = res.decisions.plan
    ctx = JudgeContext(level=level, on_inconclusive=on_inconclusive,
                       one_repeat_stochastic=bool(a.stochastic) and plan.repeats < 2 and plan.rng == "independent")
    judged = judge_rows([rows[c].to_dict() for c in names],
                        [Expectation(c, kind, tolerance) for c in names], ctx)  # type: ignore[arg-type]
    failures = [j for j in judged if not j.passed]
    if failures:
        examples = changed_examples(res.decisions, inputs[0], inputs[1], per_row=1, max_records=8)
        parts = []
        for j in failures:
            c = j.expectation.cell
            if j.measure == "changed_share":
                share = (f"{j.n_changed} of {j.n_decisions} decisions changed ({100 * j.value:.1f}%, margin "
                         f"{100 * j.margin:g}%)" + (f"; {j.status}: {j.evidence()}" if j.note else ""))
            else:
                share = f"{j.status}: {j._got()}; {j.evidence()}"
            want = "is not invariant to" if kind == "invariant" else "does not respond to"
            lines = [f"agent {a.name!r} {want} {c} ({rows[c].migration.rsplit(' (', 1)[0]}): {share}"]
            ex = examples.get(c) or []
            if ex:
                lines += [f"  changed decision: {example_line(ex[0])}", "  records before -> after:",
                          *(f"  {x}" for x in example_records(ex[0]))]
            parts.append("\n".join(lines))
        where = _report_dir()
        if where is not None:
            parts.append(f"report: {where / 'report.html'}")
        raise AssertionError("ReplayLens: " + "\n".join(parts))
    return res


def assert_invariant(agent: Any, cells: str | Sequence[str] = "pair,reorder,rename", *,
                     tolerance: float | None = None, history: Any = None, futures: Any = None,
                     evaluator: Any = None, maps: str | None = None, repeats: int | None = None,
                     seed: int | None = None, n_streams: int = 8, n_future: int = 8, n_resamples: int | None = None,
                     level: float = 0.99, on_inconclusive: str = "pass") -> Any:
    """Assert that ``agent``'s decisions do not change beyond the margin ``tolerance`` under each cell.

    ``agent``: an :class:`~replaylens.agents.Agent`, anything :func:`~replaylens.agents.as_agent` accepts,
    or a built-in name / ``module:factory``.  Without ``history`` the built-in bandit (``n_streams``
    streams, ``n_future`` future tasks per stream) is used.  ``tolerance=None``: the default margin (0 for a
    deterministic agent, 0.05 of T_gr for a stochastic one).  ``seed``/``n_resamples`` default to
    ``--replaylens-seed`` / ``--replaylens-resamples`` (else 0 and 2,000)."""
    __tracebackhide__ = True
    return _check("invariant", agent, cells, tolerance=tolerance, history=history, futures=futures,
                  evaluator=evaluator, maps=maps, repeats=repeats, seed=seed, n_streams=n_streams,
                  n_future=n_future, n_resamples=n_resamples, level=level, on_inconclusive=on_inconclusive)


def assert_responds(agent: Any, cells: str | Sequence[str] = "value,mask", *, tolerance: float | None = None,
                    history: Any = None, futures: Any = None, evaluator: Any = None, maps: str | None = None,
                    repeats: int | None = None, seed: int | None = None, n_streams: int = 8, n_future: int = 8,
                    n_resamples: int | None = None, level: float = 0.99, on_inconclusive: str = "pass") -> Any:
    """Assert that decisions of ``agent`` change (more than the margin ``tolerance``) under each cell: the agent
    uses what the cell moves (e.g. ``value``: which outcome belongs to which action)."""
    __tracebackhide__ = True
    return _check("responds", agent, cells, tolerance=tolerance, history=history, futures=futures,
                  evaluator=evaluator, maps=maps, repeats=repeats, seed=seed, n_streams=n_streams,
                  n_future=n_future, n_resamples=n_resamples, level=level, on_inconclusive=on_inconclusive)


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


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("replaylens", "ReplayLens audits (assert_invariant / assert_responds)")
    group.addoption("--replaylens-seed", type=int, default=None, metavar="N",
                    help="root seed of every ReplayLens helper call that does not pass its own (default 0)")
    group.addoption("--replaylens-resamples", type=int, default=None, metavar="N",
                    help="bootstrap draws of every ReplayLens helper call that does not pass its own (default 2000)")
    group.addoption("--replaylens-report-dir", default=None, metavar="DIR",
                    help="write each audited test's report to DIR/<test id>/report.html")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)
    _SESSION.update(seed=config.getoption("replaylens_seed", None),
                    resamples=config.getoption("replaylens_resamples", None),
                    report_dir=config.getoption("replaylens_report_dir", None))


def pytest_unconfigure(config: pytest.Config) -> None:
    _CACHE.clear()
    _SESSION.update(seed=None, resamples=None, report_dir=None, test=None)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _SESSION["test"] = item.nodeid
