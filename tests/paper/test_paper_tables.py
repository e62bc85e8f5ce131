"""Issue 14 point 5: every ``tab:`` label of the paper is accounted for in docs/paper/reproduction.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from replaylens.paper.reproduce import (
    PAPER_TABLES,
    UNREPRODUCED,
    compare,
    paper_table_status,
    render_reproduction_markdown,
)
from replaylens.paper.reproduce._paper_tables import DISPOSITION_KINDS, SHARED_TABLES, label_groups

ROOT = Path(__file__).resolve().parents[2]
PAPER = Path("shared/seed/000_9bc03e2f03e4b7c3.txt")


def _paper() -> Path | None:
    for base in (ROOT, *ROOT.parents):
        if (base / PAPER).is_file():
            return base / PAPER
    return None


def test_committed_label_list_is_the_papers() -> None:
    paper = _paper()
    if paper is None:
        pytest.skip("the paper is not beside this checkout; the committed list stands in for it")
    labels = list(dict.fromkeys(re.findall(r"\\label\{(tab:[^}]*)\}", paper.read_text(encoding="utf-8"))))
    assert list(PAPER_TABLES) == labels


def test_dispositions_name_paper_labels_with_a_known_kind() -> None:
    assert len(set(PAPER_TABLES)) == len(PAPER_TABLES) == 100
    assert set(UNREPRODUCED) <= set(PAPER_TABLES)
    assert all(kind in DISPOSITION_KINDS and len(detail) > 20 for kind, detail in UNREPRODUCED.values())
    hosted = [d for k, d in UNREPRODUCED.values() if k == "hosted"]
    assert all(re.search(r"GPT|Sol|Astra|Qwen", d) for d in hosted)  # names which model it needs


def test_statuses_come_from_the_rendered_rows() -> None:
    rows = [{"reproduction": "demo", **compare("tab:code-debugging-main", "Aligned", "U", 1.0, 1.0, 0.0).to_dict()},
            {"reproduction": "demo", **compare("tab:content-blind", "Aligned", "U", 0.5, None, None).to_dict()}]
    text = render_reproduction_markdown(rows, {"demo": "Demo section"})
    body = text[text.index("## `demo`"):].split("\n")
    by = {t.label: t for t in paper_table_status(body)}
    assert by["tab:code-debugging-main"].status == "reproduced"
    assert by["tab:typed-cells"].status == "no numbers"
    assert by["tab:content-blind"].status == "no measured value"  # shown, no measured value compared (issue 28)
    assert "| tab:code-debugging-main | reproduced | [`demo`](#demo--demo-section) (1 match) |" in text
    assert "## Paper tables" in text and "Every `tab:` label of the paper (100)" in text


def test_the_committed_reproduction_document_accounts_for_every_label() -> None:
    text = (ROOT / "docs" / "paper" / "reproduction.md").read_text(encoding="utf-8")
    body = text[text.index("## `"):].split("\n")
    statuses = paper_table_status(body)
    assert [t.label for t in statuses if t.status == "unaccounted"] == []
    for t in statuses:
        assert f"| {t.label} |" in text


def test_committed_shared_tables_are_the_papers() -> None:
    paper = _paper()
    if paper is None:
        pytest.skip("the paper is not beside this checkout; the committed list stands in for it")
    groups = label_groups(paper.read_text(encoding="utf-8"))
    assert [g for g in groups if len(g) > 1] == list(SHARED_TABLES)
    assert [label for g in groups for label in g] == list(PAPER_TABLES)


def test_label_groups_split_a_float_by_caption() -> None:
    tex = r"""\label{tab:loose}
\begin{table}[ht]\caption{One table.}\label{tab:a}\label{tab:b}\begin{tabular}{l}x\end{tabular}\end{table}
\begin{table*}\begin{minipage}{.5\linewidth}\captionof{table}{Left.}\label{tab:c}\end{minipage}
\begin{minipage}{.5\linewidth}\captionof{table}{Right.}\label{tab:d}\end{minipage}\end{table*}"""
    assert label_groups(tex) == (("tab:loose",), ("tab:a", "tab:b"), ("tab:c",), ("tab:d",))


def test_a_second_label_is_covered_by_its_reproduced_table() -> None:
    assert all(set(g) <= set(PAPER_TABLES) for g in SHARED_TABLES)
    rows = [{"reproduction": "demo", **compare("tab:representation-controls", "OCRR", "U", 0.2, 0.2, 0.0).to_dict()}]
    text = render_reproduction_markdown(rows, {"demo": "Demo section"})
    by = {t.label: t for t in paper_table_status(text[text.index("## `demo`"):].split("\n"))}
    assert by["tab:representation-controls"].status == "reproduced"
    assert by["tab:content-controls"].status == "covered"
    assert by["tab:content-controls"].detail == r"same table as tab:representation-controls (second \label)"
    assert set(by["tab:content-controls"].sections) == {"demo"}
    # without a reproduced mate the declared disposition applies (tab:content-tracebank is hosted)
    assert by["tab:llm-tracebank"].status == "hosted"
    assert "| tab:content-controls | covered under another label | same table as tab:representation-controls " \
           r"(second \label). Rows shown: [`demo`](#demo--demo-section) (1 match). |" in text
