"""Issue 48, point 8: ``audit --help`` lists the common options; ``--help-all`` every one."""

from __future__ import annotations

from click.testing import CliRunner

from replaylens.cli._audit import AUDIT_COMMON
from replaylens.cli._main import cli


def test_audit_help_is_short_and_the_full_list_one_flag_away() -> None:
    short = CliRunner().invoke(cli, ["audit", "--help"])
    full = CliRunner().invoke(cli, ["audit", "--help-all"])
    assert short.exit_code == 0 and full.exit_code == 0, (short.output, full.output)
    assert len(short.output.splitlines()) <= 90, len(short.output.splitlines())
    for opt in AUDIT_COMMON:
        assert opt in short.output and opt in full.output, opt
    for rare in ("--max-cost", "--workers", "--base-url", "--adaptive", "--traceback", "--resamples"):
        assert rare not in short.output and rare in full.output, rare
    assert " ".join(short.output.split()).endswith("audit --help-all"), short.output[-400:]
    n_more = int(short.output.split("More options:")[1].split()[0])
    assert n_more >= 30
    assert len(full.output.splitlines()) > 150


def test_help_all_lists_every_option_in_sections() -> None:
    full = CliRunner().invoke(cli, ["audit", "--help-all"]).output
    for head in ("Inputs and output:", "Execution:", "LLM agent (--agent llm):", "Cost (--agent llm):", "Output:"):
        assert head in full, head
    assert "More options:" not in full
