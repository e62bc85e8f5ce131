"""``replaylens check-migration --out DIR`` writes the same self-contained report.html as an audit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_memory import ROOT, _events
from test_report_html import offline_problems

from replaylens.cli._main import cli
from replaylens.memory.bounded import write_events


def test_check_migration_writes_an_offline_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ev = tmp_path / "events.jsonl"
    write_events({("s0", "b0"): _events(32, 1), ("s1", "b0"): _events(32, 2)}, ev)
    monkeypatch.chdir(ROOT)
    out = tmp_path / "mig"
    res = CliRunner().invoke(cli, ["check-migration", "--memory", "docs.examples.deque_memory:make",
                                   "--events", str(ev), "--out", str(out)])
    assert res.exit_code == 1, res.output   # reorder and merge are UNSAFE (exit 1); the report is still written
    assert {p.name for p in out.iterdir()} == {"report.html", "migration.json", "manifest.json"}
    html = (out / "report.html").read_text(encoding="utf-8")
    assert offline_problems(html) == []
    rows = {r["op"]: r for r in json.loads((out / "migration.json").read_text())}
    for op, r in rows.items():
        assert f'id="op-{op}"' in html and r["verdict"].split(" — ")[0] in html
    assert not rows["reorder"]["safe"] and rows["reindex"]["safe"]
    assert "--- aligned" in html  # the retrieved-text diff of an unsafe operation
    man = json.loads((out / "manifest.json").read_text())
    assert man["command"] == "check-migration" and man["inputs"][0]["sha256"] in html
