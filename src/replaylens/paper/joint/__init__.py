"""The paper's joint history–menu challenge design (partC C2 / C6.3): five history forms under four
history/menu label cells, four block items per request, run through any ``replaylens.llm`` back-end."""

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

__all__ = [
    "CELLS",
    "FORMS",
    "PAPER_ACTIONS",
    "PAPER_CONTEXTS",
    "PAPER_DOMAINS",
    "JointBlock",
    "JointDesign",
    "JointResults",
    "JointRun",
    "blocks_from_arrays",
    "run_joint",
]
