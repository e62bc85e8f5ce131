"""Writer/policy protocols, adapters, known-law writers and reference rules."""

from ._adapters import AGENTS, HistoryReader, Visible, as_agent, from_callables, load_agent, register_agent
from ._known import (
    BlockLinearWriter,
    SupportLookup,
    block_key_sums,
    commutative_agent,
    invariant_agent,
    key_only_agent,
    order_sensitive_agent,
    relation_agent,
)
from ._protocols import (
    Agent,
    ArrayAgent,
    FutureInput,
    Namespace,
    Policy,
    PrefixPolicy,
    QueryBatch,
    RecordBatch,
    TaskInput,
    Writer,
)
from ._reference import REFERENCE_RULES, ReferenceRule, reference_agent
from ._ties import FIXED_SCALE, TieRule, choose, choose_batch, to_fixed, to_micro

for _rule in REFERENCE_RULES:
    register_agent(_rule, lambda _r=_rule: reference_agent(_r))
register_agent("invariant", invariant_agent)
register_agent("key-only", key_only_agent)
register_agent("commutative", commutative_agent)
register_agent("relation", relation_agent)
register_agent("order-sensitive", order_sensitive_agent)
del _rule

__all__ = [
    "AGENTS",
    "FIXED_SCALE",
    "as_agent",
    "REFERENCE_RULES",
    "Agent",
    "ArrayAgent",
    "BlockLinearWriter",
    "FutureInput",
    "HistoryReader",
    "Namespace",
    "Policy",
    "PrefixPolicy",
    "QueryBatch",
    "RecordBatch",
    "ReferenceRule",
    "SupportLookup",
    "TaskInput",
    "TieRule",
    "Visible",
    "Writer",
    "block_key_sums",
    "choose",
    "choose_batch",
    "commutative_agent",
    "from_callables",
    "invariant_agent",
    "key_only_agent",
    "load_agent",
    "order_sensitive_agent",
    "reference_agent",
    "register_agent",
    "relation_agent",
    "to_fixed",
    "to_micro",
]
