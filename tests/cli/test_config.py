"""The project config (issue 24): ``replaylens audit`` with no arguments runs ``replaylens.toml`` or
``[tool.replaylens]``; the same audit from the command line writes byte-identical results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from replaylens.bandit import make_bandit
from replaylens.cli._main import cli
from replaylens.records import write_evaluator, write_futures, write_history


@pytest.fixture()
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project directory with the built-in bandit's inputs under data/, as the working directory."""
    sub = make_bandit(n_streams=4, n_future=4)
    write_history(sub.history, tmp_path / "data" / "history.jsonl")
    write_futures(sub.futures, tmp_path / "data" / "future.jsonl")
    write_evaluator(sub.evaluator, tmp_path / "data" / "utilities.jsonl")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("REPLAYLENS_CONFIG", raising=False)
    return tmp_path


CONFIG = """
history = "data/history.jsonl"
future = "data/future.jsonl"
utilities = "data/utilities.jsonl"
agent = "order-sensitive"
out = "{out}"
cells = ["value", "pair", "reorder"]
maps = "1032"
resamples = 300
quiet = true

[expect]
pair = "invariant"
reorder = {{ kind = "invariant", tolerance = 0.5 }}
value = "responds"
"""

ARGS = ["audit", "--history", "data/history.jsonl", "--future", "data/future.jsonl", "--utilities",
        "data/utilities.jsonl", "--agent", "order-sensitive", "--cells", "value,pair,reorder", "--maps", "1032",
        "--resamples", "300", "--quiet", "--expect", "pair=invariant", "--expect", "reorder=invariant:0.5",
        "--expect", "value=responds"]


def test_config_audit_equals_the_command_line_audit_byte_for_byte(project: Path) -> None:
    (project / "replaylens.toml").write_text(CONFIG.format(out="from-config"), encoding="utf-8")
    by_config = CliRunner().invoke(cli, ["audit"])
    (project / "replaylens.toml").unlink()
    by_cli = CliRunner().invoke(cli, [*ARGS, "--out", "from-cli"])
    assert by_config.exit_code == by_cli.exit_code == 1, (by_config.output, by_cli.output)
    assert by_config.stdout == by_cli.stdout and by_config.stderr == by_cli.stderr
    for name in ("summary.json", "decisions.parquet"):
        assert (project / "from-config" / name).read_bytes() == (project / "from-cli" / name).read_bytes(), name
    ma = json.loads((project / "from-config" / "manifest.json").read_text())
    mb = json.loads((project / "from-cli" / "manifest.json").read_text())
    assert ma["arguments"] == mb["arguments"] and ma["plan"] == mb["plan"]
    v = json.loads((project / "from-config" / "summary.json").read_text())["verdict"]
    judged = {e["cell"]: e for e in v["expectations"]}
    # this agent follows recency, barely outcomes: "responds" to value fails as well as pair's invariance
    assert v["declared"] == ["pair", "reorder", "value"] and v["failed"] == ["value", "pair"]
    assert judged["reorder"]["expectation"] == {"cell": "reorder", "kind": "invariant", "tolerance": 0.5,
                                                "declared": True, "reason": ""}
    assert judged["value"]["status"] == "UNSAFE" and judged["reorder"]["status"] == "SAFE"
    failures = [ln for ln in by_config.stderr.splitlines() if ln.startswith("expectation failed")]
    assert failures == [judged["value"]["failure"], judged["pair"]["failure"]]
    assert failures[0] == ("expectation failed: value declared responsive, but 0 of 48 decisions changed "
                           "(0.0% <= margin 0%)")
    # every expectation with its measured value and interval, in summary.json and first in report.md
    for e in v["expectations"]:
        assert e["value"] is not None and len(e["interval"]) == 2 and isinstance(e["passed"], bool)
    md = (project / "from-config" / "report.md").read_text()
    assert md.index("## Verdict") < md.index("## What the replay shows") and "**UNSAFE**" in md


def test_command_line_options_override_the_config(project: Path) -> None:
    (project / "pyproject.toml").write_text("[project]\nname = 'x'\n\n[tool.replaylens]\n"
                                            + CONFIG.format(out="o").replace("[expect]", "[tool.replaylens.expect]"),
                                            encoding="utf-8")
    res = CliRunner().invoke(cli, ["audit", "--seed", "3", "--out", "override", "--expect", "pair=free"])
    assert res.exit_code == 0, res.output  # --expect replaces the config's expect table: nothing gates
    man = json.loads((project / "override" / "manifest.json").read_text())
    assert man["arguments"]["seed"] == 3 and man["arguments"]["cells"] == "value,pair,reorder"
    assert not (project / "o").exists()
    v = json.loads((project / "override" / "summary.json").read_text())["verdict"]
    assert v["declared"] == ["pair"] and v["passed"]


def test_a_bad_config_is_one_line_naming_file_and_key(project: Path) -> None:
    (project / "replaylens.toml").write_text(CONFIG.format(out="o") + "\n", encoding="utf-8")
    text = (project / "replaylens.toml").read_text().replace('maps = "1032"', 'maps = "1032"\nrepeat = 2')
    (project / "replaylens.toml").write_text(text, encoding="utf-8")
    res = CliRunner().invoke(cli, ["audit"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert res.stderr.strip().splitlines() == [
        f"replaylens: error: {project / 'replaylens.toml'}: unknown key 'repeat' (known: agent, agent_params, "
        "backend, base_url, baseline, cache, cells, concurrency, draws, expect, expect_invariant, fail_on, future, "
        "history, junit_xml, keep_runs, level, maps, model, namespace, on_inconclusive, out, overwrite, path, quiet, "
        "repeats, resamples, seed, tolerance, utilities, workers)"]
    (project / "replaylens.toml").write_text(CONFIG.format(out="o").replace('"invariant", tol', '"always", tol'),
                                             encoding="utf-8")
    bad = CliRunner().invoke(cli, ["audit"])
    assert bad.exit_code == 2 and "expect.reorder: expectation must be one of invariant, responds, free" in bad.stderr
    (project / "replaylens.toml").write_text(CONFIG.format(out="o").replace("pair = ", "key_slot = "),
                                             encoding="utf-8")
    unknown = CliRunner().invoke(cli, ["audit"])
    assert unknown.exit_code == 2 and "'key_slot' is not a replayed cell" in unknown.stderr


def test_no_config_and_no_arguments_names_the_missing_option(project: Path) -> None:
    res = CliRunner().invoke(cli, ["audit"])   # issue 48: one line naming what is missing and the config looked for
    assert res.exit_code == 2 and res.stdout == "" and len(res.stderr.splitlines()) == 1, res.output
    assert "--history" in res.stderr and "replaylens.toml" in res.stderr


@pytest.mark.parametrize("broken", ["seed = [\n", "repeat = 2\n", 'seed = "x"\n', "[expect]\npair = 'always'\n"])
def test_every_help_flag_works_whatever_the_config_says(project: Path, broken: str) -> None:
    (project / "replaylens.toml").write_text(broken, encoding="utf-8")
    for flag in ("-h", "--help", "--help-all"):
        res = CliRunner().invoke(cli, ["audit", flag])
        assert res.exit_code == 0 and res.stderr == "", (flag, res.output)
        assert res.stdout.startswith("Usage: cli audit"), (flag, res.stdout[:200])
    assert "Execution:" in CliRunner().invoke(cli, ["audit", "--help-all"]).stdout   # the whole list, not the short
    res = CliRunner().invoke(cli, ["audit"])   # without a help flag the config's error is the one line it was
    assert res.exit_code == 2 and len(res.stderr.splitlines()) == 1 and "replaylens.toml" in res.stderr, res.output
    assert "Traceback" not in res.output


def test_help_works_with_a_missing_config_file(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPLAYLENS_CONFIG", str(project / "nowhere.toml"))
    assert CliRunner().invoke(cli, ["audit", "--help-all"]).exit_code == 0
    assert CliRunner().invoke(cli, ["audit", "--config", "nowhere.toml", "--help-all"]).exit_code == 0
    res = CliRunner().invoke(cli, ["audit"])
    assert res.exit_code == 2 and res.stderr.strip() == f"replaylens: error: {project / 'nowhere.toml'}: config file " \
                                                        "not found"


def test_a_config_value_of_the_wrong_type_is_one_line_naming_file_and_key(project: Path) -> None:
    (project / "pyproject.toml").write_text("[tool.replaylens]\n" + CONFIG.format(out="o").split("[expect]")[0]
                                            + 'seed = "x"\n', encoding="utf-8")
    res = CliRunner().invoke(cli, ["audit"])
    assert res.exit_code == 2 and res.stdout == "", res.output
    assert res.stderr.splitlines() == [f"replaylens: error: {project / 'pyproject.toml'}: tool.replaylens.seed: 'x' "
                                       "is not a valid integer range."]
    ok = CliRunner().invoke(cli, ["audit", "--seed", "1", "--help"])   # help, and the command line wins over it
    assert ok.exit_code == 0
    cli_bad = CliRunner().invoke(cli, ["audit", "--seed", "y"])   # the command line's own error stays click's
    assert cli_bad.exit_code == 2 and "Invalid value for '--seed'" in cli_bad.stderr


def test_any_eager_flag_exits_before_the_config_error(project: Path) -> None:
    """The config's error is said once the arguments are parsed, so an eager flag the help check does not know
    (here a --version) still works; without it the error is the one line."""
    import click

    from replaylens.cli._config import ConfigCommand

    @click.command(cls=ConfigCommand)
    @click.version_option("9.9", "--version")
    @click.option("--seed", default=0, type=int)
    def cmd(seed: int) -> None:
        click.echo(f"seed {seed}")

    (project / "replaylens.toml").write_text("seed = [\n", encoding="utf-8")
    res = CliRunner().invoke(cmd, ["--version"])
    assert res.exit_code == 0 and "9.9" in res.stdout, res.output
    bad = CliRunner().invoke(cmd, [])
    assert bad.exit_code == 2 and bad.stderr.startswith("replaylens: error: ") and "seed" not in bad.stdout
