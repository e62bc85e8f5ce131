"""Issue 48, point 5: a huge action label or task id is shortened in report.html and report.md (to a documented
length, with its full length said), while decisions.parquet keeps the full value."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from replaylens.bandit import make_bandit
from replaylens.cli._main import cli
from replaylens.records import write_evaluator, write_futures, write_history
from replaylens.report._html import LABEL_CHARS

HUGE = "c" * 10**6


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("long-labels")
    sub = make_bandit(n_streams=3, slots_per_block=8, n_future=2, rng=3)
    files = [write_history(sub.history, d / "h.jsonl"), write_futures(sub.futures, d / "f.jsonl"),
             write_evaluator(sub.evaluator, d / "u.jsonl")]
    for p in files:  # one action label and one task id a million characters long
        p.write_text(Path(p).read_text().replace('"coverage"', f'"{HUGE}"')
                     .replace('"s00-easy-future-00"', f'"s00-{HUGE}"'))
    args = ["audit", "--history", str(files[0]), "--future", str(files[1]), "--utilities", str(files[2]),
            "--agent", "mean", "--cells", "value,pair", "--resamples", "50", "--quiet"]
    res = CliRunner().invoke(cli, [*args, "--out", str(d / "out")])
    assert res.exit_code == 0, res.output[-2000:]
    return d / "out"


def test_reports_stay_small_and_the_decisions_keep_the_full_label(run: Path) -> None:
    out = run
    html = (out / "report.html").read_text(encoding="utf-8")
    md = (out / "report.md").read_text(encoding="utf-8")
    assert len(html) < 600_000 and len(md) < 60_000, (len(html), len(md))
    assert "c" * (LABEL_CHARS + 1) not in html and "c" * (LABEL_CHARS + 1) not in md
    assert f"… ({10**6:,} characters)" in html
    dec = pd.read_parquet(out / "decisions.parquet")
    labels = {v for c in dec.columns if dec[c].dtype.kind not in "fiub" for v in dec[c].astype(str).unique()}
    assert HUGE in labels and f"s00-{HUGE}" in labels
