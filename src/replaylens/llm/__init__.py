"""LLM agents and textual replay: serialization, back-ends, provenance-recording acquisition.

* :func:`make_agent` — an LLM-backed ReplayLens agent (``--agent replaylens.llm:make_agent``);
* :mod:`serialization <replaylens.llm._serialize>` — the paper's prompt layout, namespaces, output schema;
* back-ends — :class:`OpenAIBackend` (any OpenAI-compatible endpoint), :class:`ScriptedBackend`;
* :class:`RunStore` / :class:`Acquirer` — frozen manifest, seeded plan, append-only attempts, gate;
* :class:`JointDesign` / :func:`run_joint` — the joint history–menu challenge (four items per request);
* :class:`Budget` / :func:`estimate_requests` — run budgets and the no-call cost estimate;
* :class:`FakeOpenAIServer` — a fault-injecting local endpoint for tests and benchmarks.

See docs/llm.md.
"""

from ._acquire import AcquireProgress, Acquirer, AcquireSettings, AcquireSummary, acquisition_progress
from ._agent import LLMAgent, make_agent
from ._backends import Backend, OpenAIBackend, ScriptedBackend, make_backend, scripted_tokens
from ._budget import Budget, Pricing, TokenCounter, estimate_requests, load_pricing
from ._cache import CachedBackend, RequestCache, default_cache_path, with_cache
from ._fake import FAULTS, FakeOpenAIServer
from ._joint import (
    CELLS,
    FORMS,
    PAPER_ACTIONS,
    PAPER_CONTEXTS,
    PAPER_DOMAINS,
    JointBlock,
    JointDesign,
    JointResults,
    JointRun,
    blocks_from_arrays,
    run_joint,
)
from ._local import embedded_model_path, llama_available
from ._run import acquire_run, amend, backend_for, validate
from ._secrets import Redactor, load_api_key
from ._serialize import (
    DECISION_INSTRUCTION,
    NAMESPACES,
    Binding,
    ItemDecoder,
    MenuRow,
    PromptItem,
    PromptTemplate,
    ShownRecord,
    TextNamespace,
    decode_response,
    format_utility,
    output_schema,
    parse_prompt,
    render_item,
    render_prompt,
)
from ._store import RunStore, ValidationReport, open_store
from ._toolcall import (
    FormatError,
    LlamaToolBackend,
    OpenAIToolBackend,
    ScriptedToolBackend,
    ToolCall,
    ToolSpec,
    ToolTurn,
    ToolTurnBackend,
    ToolTurnRequest,
    make_tool_backend,
    parse_tool_call,
    tool_call_grammar,
)
from ._types import (
    AccessError,
    BackendError,
    BudgetExhausted,
    CapacityError,
    Completion,
    ModelSettings,
    Request,
    TransportError,
    make_request,
)

__all__ = [
    "Budget",
    "BudgetExhausted",
    "Pricing",
    "TokenCounter",
    "estimate_requests",
    "load_pricing",
    "CachedBackend",
    "RequestCache",
    "default_cache_path",
    "with_cache",
    "FormatError",
    "LlamaToolBackend",
    "OpenAIToolBackend",
    "ScriptedToolBackend",
    "ToolCall",
    "ToolSpec",
    "ToolTurn",
    "ToolTurnBackend",
    "ToolTurnRequest",
    "make_tool_backend",
    "parse_tool_call",
    "tool_call_grammar",
    "CELLS",
    "DECISION_INSTRUCTION",
    "FAULTS",
    "FORMS",
    "NAMESPACES",
    "PAPER_ACTIONS",
    "PAPER_CONTEXTS",
    "PAPER_DOMAINS",
    "AccessError",
    "AcquireProgress",
    "AcquireSettings",
    "AcquireSummary",
    "Acquirer",
    "Backend",
    "BackendError",
    "Binding",
    "CapacityError",
    "Completion",
    "FakeOpenAIServer",
    "ItemDecoder",
    "JointBlock",
    "JointDesign",
    "JointResults",
    "JointRun",
    "LLMAgent",
    "MenuRow",
    "ModelSettings",
    "OpenAIBackend",
    "PromptItem",
    "PromptTemplate",
    "Redactor",
    "Request",
    "RunStore",
    "ScriptedBackend",
    "ShownRecord",
    "TextNamespace",
    "TransportError",
    "ValidationReport",
    "acquire_run",
    "acquisition_progress",
    "amend",
    "backend_for",
    "embedded_model_path",
    "llama_available",
    "blocks_from_arrays",
    "decode_response",
    "format_utility",
    "load_api_key",
    "make_agent",
    "make_backend",
    "make_request",
    "open_store",
    "output_schema",
    "parse_prompt",
    "render_item",
    "render_prompt",
    "run_joint",
    "scripted_tokens",
    "validate",
]
