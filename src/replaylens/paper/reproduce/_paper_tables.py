"""Every ``tab:`` label of the paper, in the paper's order, and how a label no reproduction compares is covered.

The lists are committed data (the paper is not needed at run time); ``test_paper_tables`` checks them
against the paper (with :func:`label_groups`) when the paper is present beside the checkout.
"""

from __future__ import annotations

import re

__all__ = ["DISPOSITION_KINDS", "PAPER_TABLES", "SHARED_TABLES", "UNREPRODUCED", "label_groups"]

PAPER_TABLES: tuple[str, ...] = (
    "tab:endpoint-separation",
    "tab:content-calibration",
    "tab:joint-main-effects",
    "tab:joint-main-reference",
    "tab:memory-development",
    "tab:memory-test",
    "tab:sequential-main",
    "tab:code-debugging-main",
    "tab:cross-model-summary",
    "tab:typed-cells",
    "tab:endpoint-matched-witness",
    "tab:diagnostic-dominance-appendix",
    "tab:content-endpoint",
    "tab:independent-endpoint-pair-endpoint",
    "tab:content-fit-pairs",
    "tab:independent-endpoint-pair-replay",
    "tab:independent-endpoint-pair-classification",
    "tab:main-transport-summary",
    "tab:fitted-transport-summary",
    "tab:content-contrasts",
    "tab:action-divergence",
    "tab:content-controls",
    "tab:representation-controls",
    "tab:representation-interaction",
    "tab:semantic-null-interaction",
    "tab:semantic-null-detail",
    "tab:pair-preserving-detail",
    "tab:representation-writer-interactions",
    "tab:hidden-operator-signatures",
    "tab:hidden-operator-holdout",
    "tab:random-operator-stress",
    "tab:readout-invariance",
    "tab:content-nonlinear",
    "tab:nonlinear-operator-holdout",
    "tab:content-blind",
    "tab:blind-relation-challenge",
    "tab:blind-threshold-sensitivity",
    "tab:dense-associative-interactions",
    "tab:cross-namespace-uncertainty",
    "tab:learned-associative-interactions",
    "tab:selected-only-associative-interactions",
    "tab:selected-only-fit-objective",
    "tab:selected-only-fit-stability",
    "tab:permutation-draw-sensitivity",
    "tab:learned-recurrent-check",
    "tab:learned-recurrent-fit-stability",
    "tab:independent-learned-interface",
    "tab:policy-disjoint-associative-interactions",
    "tab:policy-reverse-associative-interactions",
    "tab:independent-gate-interactions",
    "tab:training-label-null",
    "tab:condition-summary",
    "tab:secondary-comparison",
    "tab:cross-substrate-replay",
    "tab:content-substrate-strata",
    "tab:cross-substrate-selected-only",
    "tab:public-data-strata",
    "tab:public-data-pooled",
    "tab:public-data-conditions",
    "tab:public-persistent-agent-folds",
    "tab:content-interfaces",
    "tab:llm-blackbox-transfer",
    "tab:llm-blackbox-typed-intervals",
    "tab:trajectory-association",
    "tab:full-history-repeat",
    "tab:sol-reference-rules",
    "tab:tracebank-reference-agreement",
    "tab:tracebank-reference-utility",
    "tab:winner-strata",
    "tab:content-tracebank",
    "tab:llm-tracebank",
    "tab:llm-state-off",
    "tab:llm-opaque-control",
    "tab:public-ucb1-pooled",
    "tab:public-structural-replay-strata",
    "tab:public-structural-replay-intervals",
    "tab:primary-operator-robustness",
    "tab:changed-substrate-map-summary",
    "tab:global-renaming-ci",
    "tab:global-renaming-raw",
    "tab:global-renaming-utility",
    "tab:content-composite",
    "tab:content-measured",
    "tab:utility-resolution-compact",
    "tab:verification-scope",
    "tab:sol-reference-main",
    "tab:global-renaming",
    "tab:memory-test-contrasts",
    "tab:memory-test-artifacts",
    "tab:learned-control-all-fits",
    "tab:learned-control-primary-contrasts",
    "tab:learned-control-secondary-contrasts",
    "tab:sequential-responses",
    "tab:sequential-gaps",
    "tab:sequential-utility",
    "tab:sequential-utility-contrasts",
    "tab:sequential-references",
    "tab:sequential-exploration",
    "tab:code-debugging-intervals",
    "tab:joint-app-reference-subgroup-metadata",
)

#: labels the paper puts on ONE table (one caption, one tabular; a second ``\label`` after the first):
#: a label of such a group without compared rows of its own is "covered" when another label of its group
#: is reproduced ("same table as tab:X (second \label)").  Two captioned tables side by side in one float
#: (``\captionof`` in two minipages: tab:joint-main-effects / tab:joint-main-reference,
#: tab:memory-development / tab:memory-test) are separate tables and are not listed.
SHARED_TABLES: tuple[tuple[str, ...], ...] = (
    ("tab:content-fit-pairs", "tab:independent-endpoint-pair-replay"),
    ("tab:content-controls", "tab:representation-controls"),
    ("tab:content-nonlinear", "tab:nonlinear-operator-holdout"),
    ("tab:content-substrate-strata", "tab:cross-substrate-selected-only"),
    ("tab:content-tracebank", "tab:llm-tracebank"),
    ("tab:learned-control-primary-contrasts", "tab:learned-control-secondary-contrasts"),
)

_FLOAT = re.compile(r"\\begin\{(table\*?)\}(.*?)\\end\{\1\}", re.S)
_CAPTION = re.compile(r"\\caption(?:of)?\b")
_TAB_LABEL = re.compile(r"\\label\{(tab:[^}]*)\}")


def label_groups(tex: str) -> tuple[tuple[str, ...], ...]:
    """The ``tab:`` labels of a LaTeX text grouped by the table they label, in the text's order.

    A table is one caption (``\\caption`` or ``\\captionof``) inside a ``table`` / ``table*`` float with
    the labels that follow it up to the next caption; a float with two captioned minipages holds two
    tables.  Labels outside any float are a group of their own each."""
    groups: list[tuple[str, ...]] = []
    pos = 0
    for m in _FLOAT.finditer(tex):
        groups += [(lab,) for lab in _TAB_LABEL.findall(tex, pos, m.start())]
        for i, part in enumerate(_CAPTION.split(m.group(2))):
            labels = tuple(_TAB_LABEL.findall(part))
            if i == 0:  # before the first caption: labels without a caption, one table each
                groups += [(lab,) for lab in labels]
            elif labels:
                groups.append(labels)
        pos = m.end()
    groups += [(lab,) for lab in _TAB_LABEL.findall(tex, pos)]
    return tuple(groups)


#: the kinds a label without compared rows may have (a label with compared rows is "reproduced")
DISPOSITION_KINDS = ("covered", "hosted", "no numbers", "not reproduced")

#: label -> (kind, what covers it / which model it needs and what the embedded model shows instead); a label
#: listed here whose rows become compared (match/differs/self-check) is reported "reproduced" instead
UNREPRODUCED: dict[str, tuple[str, str]] = {
    "tab:memory-test": (
        "hosted",
        "hosted GPT-6 Astra's memory test; the scripted memory agents' values are shown next to the "
        "paper's (n/a), the embedded SmolLM2 model's in `memory-test-embedded`",
    ),
    "tab:sequential-main": (
        "covered",
        "tab:sequential-responses and tab:sequential-utility (section `sequential-planning`: First/Final "
        "T_gr and U); the hosted model's values are n/a there, the embedded model's run is `sequential-"
        "planning-embedded`",
    ),
    "tab:code-debugging-main": (
        "hosted",
        "hosted GPT-6 Astra's debugging trajectories; the scripted debugger's values are shown next to "
        "the paper's (n/a) and the embedded SmolLM2 model's run is `code-debugging-embedded`",
    ),
    "tab:cross-model-summary": (
        "hosted",
        "GPT-5.6 (hosted) and Qwen3-8B (frozen, 8B weights) typed replay responses; the embedded SmolLM2 "
        "model's typed responses are in `joint-embedded`",
    ),
    "tab:typed-cells": (
        "no numbers",
        "the definition of the replay cells (key-utility map), symbols only",
    ),
    "tab:semantic-null-interaction": (
        "covered",
        "tab:semantic-null-detail and tab:representation-writer-interactions (section `semantic-null`)",
    ),
    "tab:hidden-operator-signatures": (
        "covered",
        "tab:content-blind and tab:blind-relation-challenge (section `family-blind`: blinded per-writer "
        "signatures and the Correct counts)",
    ),
    "tab:content-interfaces": (
        "hosted",
        "three hosted GPT-5.6 deployments (Arm/Opaque keys); the embedded SmolLM2 model's typed replay "
        "responses are in `joint-embedded` and `memory-test-embedded`",
    ),
    "tab:llm-blackbox-transfer": (
        "hosted",
        "GPT-5.6 future-readout family (hosted); the embedded model's endpoint and trajectory readouts "
        "are in `memory-test-embedded`",
    ),
    "tab:llm-blackbox-typed-intervals": (
        "hosted",
        "GPT-5.6 typed-response intervals (hosted); the embedded model's typed responses are in `joint-"
        "embedded`",
    ),
    "tab:trajectory-association": (
        "hosted",
        "cross-readout association (Pearson r) of the hosted GPT-5.6 readouts on the measured-outcome "
        "bridge; no embedded counterpart",
    ),
    "tab:full-history-repeat": (
        "hosted",
        "two logged executions of the hosted Sol/Arm model (GPT-6 Sol); repeat noise of the embedded "
        "model is in `joint-embedded` (joint repeat noise)",
    ),
    "tab:sol-reference-rules": (
        "hosted",
        "reference-rule agreement with logged hosted Sol/Arm choices; the embedded model's is in `joint-"
        "embedded` (tab:joint-main-reference, model run)",
    ),
    "tab:tracebank-reference-agreement": (
        "hosted",
        "fixed-rule agreement on three logged hosted Sol/Arm trace sets; the embedded model's reference "
        "agreement is in `joint-embedded`",
    ),
    "tab:tracebank-reference-utility": (
        "hosted",
        "reference-minus-model utility on logged hosted Sol/Arm traces; no embedded counterpart",
    ),
    "tab:winner-strata": (
        "hosted",
        "logged hosted Sol/Arm value responses by winning-set change; no embedded counterpart",
    ),
    "tab:content-tracebank": (
        "hosted",
        "adaptation traces of the hosted Sol readout (GPT-6 Sol); the scripted and embedded memory traces"
        " are in `memory-test` / `memory-test-embedded`",
    ),
    "tab:llm-tracebank": (
        "hosted",
        "same table as tab:content-tracebank (second \\label): adaptation traces of the hosted Sol readout "
        "(GPT-6 Sol); the scripted and embedded memory traces are in `memory-test` / `memory-test-embedded`",
    ),
    "tab:llm-state-off": (
        "hosted",
        "hosted GPT-6 Sol's repeated-call state-off reference (shown); the scripted Mean's empty-ledger "
        "comparator is an exact self-check in `joint-state-off`, the embedded model's is in `joint-"
        "embedded`",
    ),
    "tab:llm-opaque-control": (
        "hosted",
        "frozen Qwen3-8B (8B open weights, not the embedded model); the embedded SmolLM2 model's opaque-"
        "key namespace is in `joint-embedded` (Opq columns)",
    ),
    "tab:global-renaming-ci": (
        "hosted",
        "hosted GPT-6 Astra's assignment-minus-renaming interval; `joint-renaming` shows the scripted "
        "Mean agent's structural values (self-check) and `joint-embedded` the embedded SmolLM2 model's "
        "four-cell control",
    ),
    "tab:global-renaming-raw": (
        "hosted",
        "hosted GPT-6 Astra's cross-call / within-cell disagreement; the scripted Mean's (self-check, 0) "
        "is in `joint-renaming`, the embedded model's in `joint-embedded` (joint repeat noise)",
    ),
    "tab:global-renaming-utility": (
        "hosted",
        "hosted GPT-6 Astra's utility/oracle readouts of the four-cell control; the scripted Mean's are "
        "in `joint-main-effects` (joint utility, ours), the embedded model's in `joint-embedded` (joint "
        "utility)",
    ),
    "tab:content-composite": (
        "covered",
        "tab:hidden-operator-holdout (section `content-composite`: held-out composite families and their "
        "exact checks)",
    ),
    "tab:verification-scope": (
        "no numbers",
        "a scope list of what the new runs verify, no numbers",
    ),
    "tab:sol-reference-main": (
        "hosted",
        "post hoc reference agreement of logged hosted Sol/Arm choices (GPT-6 Sol); the scripted Mean's "
        "reference agreement (self-check) and the embedded model's are in `joint-reference-agreement` / "
        "`joint-embedded`",
    ),
    "tab:global-renaming": (
        "hosted",
        "hosted GPT-6 Astra's pooled four-cell values (shown for reference); `joint-renaming` shows the "
        "scripted Mean agent's structural values (self-check), `joint-embedded` the embedded SmolLM2 "
        "model's",
    ),
    "tab:memory-test-contrasts": (
        "hosted",
        "hosted GPT-6 Astra's memory contrasts; the scripted and embedded (SmolLM2) contrasts are shown "
        "next to them in `memory-test` / `memory-test-embedded`",
    ),
    "tab:sequential-responses": (
        "hosted",
        "hosted GPT-6 Astra's planning responses; the scripted planner's are shown next to them (n/a), "
        "the embedded SmolLM2 planner's run is `sequential-planning-embedded`",
    ),
    "tab:sequential-gaps": (
        "hosted",
        "hosted GPT-6 Astra's planning gaps; the scripted planner's are shown next to them (n/a)",
    ),
    "tab:sequential-utility": (
        "hosted",
        "hosted GPT-6 Astra's final-test utility; the scripted planner's is shown next to it (n/a), the "
        "embedded planner's run is `sequential-planning-embedded`",
    ),
    "tab:sequential-references": (
        "hosted",
        "hosted GPT-6 Astra's reference agreement in planning; the scripted planner's is shown next to it"
        " (n/a)",
    ),
    "tab:sequential-exploration": (
        "hosted",
        "hosted GPT-6 Astra's exploration profile; the scripted planner's is shown next to it (n/a)",
    ),
    "tab:code-debugging-intervals": (
        "hosted",
        "hosted GPT-6 Astra's intervals; the scripted debugger's are shown next to them (n/a), the "
        "embedded model's run is `code-debugging-embedded`",
    ),
}
