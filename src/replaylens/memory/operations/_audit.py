"""``check_operation``: one operation audited on a history — relations, canaries, properties, decisions."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ...agents import Agent
from ...records import Evaluator, FutureTasks, History, Record
from ._decisions import INCONCLUSIVE, UNSAFE, DecisionResponse, decision_response, judge_responses
from ._ops import Operation, apply_operation, load_operation, stream_records
from ._properties import Finding, check_canaries, check_properties
from ._relations import RelationResult, check_relations
from ._retrieval import RetrievalResponse, retrieval_response

__all__ = ["OperationReport", "check_operation", "check_operations"]


@dataclass(frozen=True)
class OperationReport:
    """An operation's audit: records before/after, the relations, the findings and the decision response."""

    op: str
    records_before: int
    records_after: int
    relations: tuple[RelationResult, ...]
    findings: tuple[Finding, ...]
    decisions: tuple[DecisionResponse, ...] = field(default=())
    retrieval: RetrievalResponse | None = None

    @property
    def preserved(self) -> tuple[str, ...]:
        return tuple(r.relation for r in self.relations if r.held)

    @property
    def broken(self) -> tuple[str, ...]:
        return tuple(r.relation for r in self.relations if not r.held)

    def status(self) -> str:
        """The worst decision verdict (UNSAFE > INCONCLUSIVE > SAFE), or ``NOT REPLAYED`` without an agent."""
        words = [d.status for d in self.decisions]
        if not words:
            return "NOT REPLAYED"
        return UNSAFE if UNSAFE in words else INCONCLUSIVE if INCONCLUSIVE in words else "SAFE"

    def failed_findings(self) -> list[Finding]:
        """Declared findings that failed (canaries, declared properties): they gate the exit code."""
        return [f for f in self.findings if f.declared and not f.held]

    def lines(self) -> list[str]:
        verdict = ", ".join(f"{d.status} for {d.agent}" for d in self.decisions) or self.status()
        out = [f"{self.op}: {verdict} — {self.records_before} -> {self.records_after} records; preserves "
               f"{', '.join(self.preserved) or 'none of the relations'}; breaks {', '.join(self.broken) or 'none'}"]
        out += [f"  relation {r.line()}" for r in self.relations if not r.held]
        out += [f"  {self.retrieval.line()}"] if self.retrieval is not None else []
        out += [f"  decisions {d.line()}" for d in self.decisions]
        out += [f"  {f.line()}" for f in self.findings]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "status": self.status(), "records_before": self.records_before,
                "records_after": self.records_after, "preserved": list(self.preserved), "broken": list(self.broken),
                "relations": [r.to_dict() for r in self.relations], "findings": [f.to_dict() for f in self.findings],
                "decisions": [d.to_dict() for d in self.decisions],
                "retrieval": None if self.retrieval is None else self.retrieval.to_dict()}


def check_operation(
    history: History,
    op: str | Operation,
    *,
    futures: FutureTasks | None = None,
    evaluator: Evaluator | None = None,
    agents: Sequence[Agent] = (),
    canaries: Sequence[str] = (),
    canary_where: Callable[[Record], object] | None = None,
    expect_properties: Sequence[str] = (),
    seed: int = 0,
    repeats: int | None = None,
    rng: str = "independent",
    margin: float | None = None,
    level: float = 0.95,
    name: str | None = None,
    records: dict[str, list[Record]] | None = None,
    store: str | None = None,
    store_embedder: str = "hashing:256",
    store_k: int = 5,
    store_params: Mapping[str, object] | None = None,
) -> OperationReport:
    """Audit ``op`` (a built-in ``NAME[:ARG]``, ``file.py:factory`` or an :class:`Operation`) on ``history``.

    Reports the relations it preserves (:data:`RELATIONS`), the canaries (``canaries`` ids, ``canary_where``) and
    properties (idempotency, order independence, monotonicity where declared), and, for each of ``agents`` (with
    ``futures`` and ``evaluator``), the decision-level response; with ``store`` (a backend name, and ``futures``),
    the retrieval-level response of that store (:func:`retrieval_response`).  ``records``: the history's records
    per stream, when the caller already has them (several operations on one history).
    """
    if isinstance(op, str):
        label, operation = load_operation(op)
    else:
        label, operation = str(getattr(op, "name", type(op).__name__)), op
    label = name or label
    before = records if records is not None else stream_records(history)
    operated, after = apply_operation(history, operation, label, before)
    relations = check_relations(before, after)
    findings: list[Finding] = []
    if canaries or canary_where is not None:
        findings.append(check_canaries(before, after, canaries, canary_where))
    findings += check_properties(operation, label, before, after, seed=seed, declared=expect_properties)
    decisions: list[DecisionResponse] = []
    if agents:
        if futures is None or evaluator is None:
            from ...errors import ConfigError

            raise ConfigError("replaying an agent needs the future tasks and the evaluator")
        decisions = judge_responses([decision_response(history, operated, futures, evaluator, a, seed=seed,
                                                       repeats=repeats, rng=rng, margin=margin, level=level,
                                                       op=label) for a in agents], level=level)
    retrieval = None
    if store is not None:
        if futures is None:
            from ...errors import ConfigError

            raise ConfigError("the retrieval-level response needs the future tasks (their texts are the queries)")
        retrieval = retrieval_response(before, after, futures, backend=store, embedder=store_embedder, k=store_k,
                                       params=store_params)
    return OperationReport(label, len(history), len(operated), tuple(relations), tuple(findings), tuple(decisions),
                           retrieval)


def check_operations(history: History, ops: Sequence[str | Operation], *, level: float = 0.95,
                     **kwargs: Any) -> list[OperationReport]:
    """Audit several operations on one history (keyword arguments as :func:`check_operation`) and judge their
    decision responses as one family: the stochastic agents' "exceeds the margin" tests of every operation are
    Holm-adjusted together, so the chance of any false UNSAFE in the whole check stays at ``1 - level``."""
    if "records" not in kwargs or kwargs["records"] is None:
        kwargs["records"] = stream_records(history)
    reports = [check_operation(history, op, level=level, **kwargs) for op in ops]
    flat = [d for r in reports for d in r.decisions]
    judged = iter(judge_responses(flat, level=level))
    return [replace(r, decisions=tuple(next(judged) for _ in r.decisions)) for r in reports]
