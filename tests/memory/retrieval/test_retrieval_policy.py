"""``check-migration --store ... --policy MODEL``: the decisions of every migration made by a model reading the
retrieved records in its prompt (the retrieval agent's ModelDecider), journaled under OUT/llm or --run-dir."""

from __future__ import annotations

import json
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
from _retrievalcases import example
from click.testing import CliRunner

from replaylens.cli import _main
from replaylens.records import write_futures, write_history
from replaylens.report import INTEGRATION_PACKAGES


def _inputs(tmp: Path) -> list[str]:
    h, f, _ = example("tool-use", 1)
    hp, fp = write_history(h, tmp / "history.jsonl"), write_futures(f, tmp / "future.jsonl")
    return ["check-migration", "--store", "exact", "--events", str(hp), "--queries", str(fp), "-k", "3"]


def _rows(out: Path) -> list[dict]:  # type: ignore[type-arg]
    return list(json.loads((out / "summary.json").read_text())["migrations"])


def test_a_scripted_model_decides_journaled_and_a_rerun_is_identical(tmp_path: Path) -> None:
    base = _inputs(tmp_path)
    runner = CliRunner()
    rule = runner.invoke(_main.cli, [*base, "--ops", "reorder,relabel", "--out", str(tmp_path / "rule")])
    assert rule.exit_code == 0, rule.output
    # the manifest records every installed store backend's, embedder's and model runtime's version
    installed = {}
    for dist in INTEGRATION_PACKAGES.values():
        try:
            installed[dist] = version(dist)
        except PackageNotFoundError:
            continue
    packages = json.loads((tmp_path / "rule" / "manifest.json").read_text())["packages"]
    assert installed and {d: packages.get(d) for d in installed} == installed
    first = runner.invoke(_main.cli, [*base, "--ops", "reorder,relabel", "--policy", "scripted/mean",
                                      "--out", str(tmp_path / "a")])
    assert first.exit_code == 0, first.output
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["policy"] == "model scripted/mean"
    assert json.loads((tmp_path / "rule" / "summary.json").read_text())["policy"] == "best retrieved outcome"
    assert any((tmp_path / "a" / "llm").iterdir())  # the calls are journaled under OUT/llm
    rows = _rows(tmp_path / "a")
    assert [r["migration"] for r in rows] == ["rebuild", "reorder", "relabel"]
    # relabel keeps every retrieval (ids mapped back): a model that reads the records decides the same
    relabel = rows[2]
    assert relabel["readout"]["counts"]["retrieval_changed"] == 0 and relabel["decisions_changed_beyond_control"] == 0
    # the same retrievals as under the rule: only the decisions come from elsewhere
    assert [r["retrieval_changed_beyond_control"] for r in rows] == \
        [r["retrieval_changed_beyond_control"] for r in _rows(tmp_path / "rule")]
    again = runner.invoke(_main.cli, [*base, "--ops", "reorder,relabel", "--policy", "scripted/mean",
                                      "--run-dir", str(tmp_path / "a" / "llm"), "--out", str(tmp_path / "b")])
    assert again.exit_code == 0, again.output
    assert _rows(tmp_path / "b") == rows


def test_policy_errors_are_one_line(tmp_path: Path) -> None:
    base = _inputs(tmp_path)
    runner = CliRunner()
    bad = runner.invoke(_main.cli, [*base, "--ops", "reorder", "--policy", "mean"])
    assert bad.exit_code == 2 and "with --store, --policy is none" in bad.output
    assert "Traceback" not in bad.output
    unjournaled = runner.invoke(_main.cli, [*base, "--ops", "reorder", "--policy", "openai/x",
                                            "--base-url", "http://127.0.0.1:9/v1"])
    assert unjournaled.exit_code == 2 and "needs --run-dir DIR or --out DIR" in unjournaled.output


def _colour_inputs(tmp: Path) -> list[str]:
    """A small log whose actions are single tokens for the embedded model (its local readout needs them; the
    shipped examples' menus, e.g. 'duckdb', are several tokens), with repeated texts (ties)."""
    texts = ["paint the north fence", "paint the garden shed", "paint the north fence", "varnish the oak door",
             "paint the garden shed", "varnish the oak door", "paint the kitchen wall", "paint the north fence"]
    acts = ["red", "blue", "green", "red", "green", "blue", "red", "blue"]
    hist = [{"context": "jobs", "event_id": f"s/r{i}", "event_time": float(i), "family": "paint", "key": a,
             "metadata": {"text": t}, "outcome": round(0.1 + 0.1 * ((3 * i) % 8), 2), "slot": i, "stream": "s",
             "task": f"s/r{i}"} for i, (t, a) in enumerate(zip(texts, acts, strict=True))]
    fut = [{"context": "jobs", "family": "paint", "menu": ["red", "blue", "green"], "metadata": {"text": t},
            "stream": "s", "task": f"s/f{j}"}
           for j, t in enumerate(["paint the north fence again", "varnish a door", "paint the shed"])]
    (tmp / "history.jsonl").write_text("".join(json.dumps(r) + "\n" for r in hist))
    (tmp / "future.jsonl").write_text("".join(json.dumps(r) + "\n" for r in fut))
    return ["check-migration", "--store", "exact", "--events", str(tmp / "history.jsonl"), "--queries",
            str(tmp / "future.jsonl"), "-k", "3"]


@pytest.mark.slow
def test_the_embedded_model_decides_with_the_retrieved_records(tmp_path: Path) -> None:
    from replaylens.llm import embedded_model_path, llama_available

    if not llama_available() or embedded_model_path() is None:
        from conftest import require

        require("local", "llama-cpp-python and the embedded model (the local extra) are not installed")
    base = _colour_inputs(tmp_path)
    runner = CliRunner()
    r = runner.invoke(_main.cli, [*base, "--ops", "relabel", "--policy", "local/embedded", "--threads", "2",
                                  "--out", str(tmp_path / "a")])
    assert r.exit_code == 0, r.output
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["policy"] == "model local/embedded"
    rows = summary["migrations"]
    # greedy local decoding of identical prompts: the same retrievals give the same decisions
    assert rows[1]["migration"] == "relabel" and rows[1]["safe"], rows[1]["verdict"]
    assert rows[0]["readout"]["counts"]["decision_changed"] == 0
    again = runner.invoke(_main.cli, [*base, "--ops", "relabel", "--policy", "local/embedded", "--threads", "2",
                                      "--out", str(tmp_path / "b"), "--run-dir", str(tmp_path / "a" / "llm")])
    assert again.exit_code == 0, again.output
    assert _rows(tmp_path / "b") == rows


@pytest.mark.slow
def test_the_embedded_model_decides_over_the_shipped_examples_multi_token_actions(tmp_path: Path) -> None:
    """The shipped tool-use example's actions (pandas, duckdb, …) are several tokens for the embedded model: the
    logits readout refuses them in one line naming --local-readout grammar, and the grammar readout decides."""
    from replaylens.llm import embedded_model_path, llama_available

    if not llama_available() or embedded_model_path() is None:
        from conftest import require

        require("local", "llama-cpp-python and the embedded model (the local extra) are not installed")
    from replaylens.memory.retrieval import example_path

    futures = example_path("future.jsonl", "tool-use").read_text().splitlines()[:4]  # one stream's first requests
    (tmp_path / "future.jsonl").write_text("\n".join(futures) + "\n")
    base = ["check-migration", "--store", "exact", "--example", "tool-use", "--queries", str(tmp_path / "future.jsonl"),
            "--ops", "relabel", "--policy", "local/embedded", "--threads", "2", "-k", "4"]
    runner = CliRunner()
    refused = runner.invoke(_main.cli, [*base, "--out", str(tmp_path / "logits")])
    assert refused.exit_code == 2, refused.output
    assert "--local-readout grammar" in refused.output and "Traceback" not in refused.output
    r = runner.invoke(_main.cli, [*base, "--local-readout", "grammar", "--out", str(tmp_path / "g")])
    assert r.exit_code == 0, r.output
    summary = json.loads((tmp_path / "g" / "summary.json").read_text())
    assert summary["policy"] == "model local/embedded"
    menu = set(json.loads(futures[0])["menu"])
    assert menu == {"pandas", "duckdb", "polars", "awk"}
    rows = summary["migrations"]
    assert rows[1]["migration"] == "relabel" and rows[1]["safe"], rows[1]["verdict"]
    assert rows[0]["readout"]["counts"]["decision_changed"] == 0
    attempts = [json.loads(line) for f in (tmp_path / "g" / "llm").rglob("attempts.jsonl")
                for line in f.read_text().splitlines()]
    decided = [a["decoded_semantic_actions"] for a in attempts if a["status"] == "ok"]
    assert decided and all(len(d) == 1 and d[0] in menu for d in decided)
    again = runner.invoke(_main.cli, [*base, "--local-readout", "grammar", "--out", str(tmp_path / "h"),
                                      "--run-dir", str(tmp_path / "g" / "llm")])
    assert again.exit_code == 0, again.output
    assert _rows(tmp_path / "h") == rows
