"""Memory operations that rewrite records (deduplication, consolidation, forgetting, merging), judged by the
relations of the records they preserve, their canaries and properties, and the agent's decision response.

``check_operation(history, "keep-latest", futures=..., evaluator=..., agents=[...])`` audits one operation: a
built-in (``OPERATIONS``: ``dedup``, ``keep-latest``, ``forget-age:AGE``, ``forget-count:N``, ``merge-text``) or a
user's ``file.py:factory`` (records → records, once per stream).  ``replaylens check-operation`` is the command.
"""

from ._audit import OperationReport, check_operation, check_operations
from ._decisions import (
    DEFAULT_STOCHASTIC_MARGIN,
    INCONCLUSIVE,
    SAFE,
    UNSAFE,
    DecisionResponse,
    decision_response,
    judge_responses,
)
from ._example import EXAMPLE_SEED, OperationExample, build_operation_example
from ._ops import (
    OPERATIONS,
    Operation,
    OperationError,
    OperationRaised,
    apply_operation,
    load_operation,
    record_text,
    run_operation,
    stream_records,
)
from ._properties import PROPERTIES, Finding, check_canaries, check_properties
from ._relations import RELATIONS, RelationResult, check_relations
from ._retrieval import RetrievalResponse, retrieval_response

__all__ = [
    "DEFAULT_STOCHASTIC_MARGIN",
    "EXAMPLE_SEED",
    "INCONCLUSIVE",
    "OPERATIONS",
    "PROPERTIES",
    "RELATIONS",
    "SAFE",
    "UNSAFE",
    "DecisionResponse",
    "Finding",
    "Operation",
    "OperationError",
    "OperationExample",
    "OperationRaised",
    "OperationReport",
    "RelationResult",
    "RetrievalResponse",
    "apply_operation",
    "build_operation_example",
    "check_canaries",
    "check_operation",
    "check_operations",
    "check_properties",
    "check_relations",
    "decision_response",
    "judge_responses",
    "load_operation",
    "record_text",
    "retrieval_response",
    "run_operation",
    "stream_records",
]
