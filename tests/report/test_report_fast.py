"""The report's faster paths give what the direct formulations gave (issue 27): the utility consequences per
row counted on the changed decisions only."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from replaylens.agents import load_agent
from replaylens.bandit import make_bandit
from replaylens.replay import replay
from replaylens.report import consequences
from replaylens.report._explain import comparisons


def _reference_consequences(d) -> dict:
    """The whole-array formulation (every decision's utility before and after)."""
    out = {}
    rows = np.arange(d.n_tasks)
    for cmp in comparisons(d):
        after = d.actions[cmp.c][np.asarray(cmp.maps)]
        before = np.broadcast_to(d.actions[0, 0][None], after.shape)
        changed = after != before
        diff = d.utility[rows, after][changed] - d.utility[rows, before][changed]
        n = int(changed.sum())
        harm, gain = int((diff < -1e-12).sum()), int((diff > 1e-12).sum())
        out[cmp.row] = {"n_decisions": int(changed.size), "n_changed": n, "harm": harm, "tie": n - harm - gain,
                        "gain": gain}
    return out


@pytest.mark.parametrize("draws", [1, 3])
def test_consequences_equal_the_whole_array_count(draws: int) -> None:
    b = make_bandit(n_streams=6, slots_per_block=6, n_future=4)
    d = replay(b.history, b.futures, b.evaluator, load_agent("mean"), cells="value,pair,mask,rename",
               maps="derangements", draws=draws, seed=2)
    rng = np.random.default_rng(5)   # more changes, repeats axis too: scramble a copy's non-aligned actions
    acts = np.concatenate([d.actions] * 2, axis=3)
    acts[1:] = np.where(rng.random(acts[1:].shape) < 0.3, rng.integers(0, 4, acts[1:].shape), acts[1:])
    for dec in (d, replace(d, actions=acts.astype(d.actions.dtype))):
        got, ref = consequences(dec), _reference_consequences(dec)
        assert set(got) == set(ref)
        for row, counts in ref.items():
            assert {k: got[row][k] for k in counts} == counts
            n = counts["n_changed"]
            assert got[row]["harm_share"] == counts["harm"] / n if n else np.isnan(got[row]["harm_share"])


def _audit_out(out, **kw):
    from replaylens.report import audit

    b = make_bandit(n_streams=12, slots_per_block=6, n_future=3, rng=4)
    return b, audit(b.history, b.futures, b.evaluator, load_agent("mean"), cells="value,pair,rename", maps="1032",
                    n_resamples=60, seed=1, out=out, **kw)


def test_report_parts_made_beside_the_statistics_give_the_same_files(tmp_path) -> None:
    """An audit makes matplotlib's import, the consequences, examples, heatmap and per-stream JSON text on a
    thread while its statistics run; writing the same result without that thread gives the same bytes."""
    from replaylens.report import RunManifest, write_results

    b, res = _audit_out(tmp_path / "a")
    manifest = RunManifest.model_validate_json((tmp_path / "a" / "manifest.json").read_text())
    write_results(res, manifest, tmp_path / "b", history=b.history, futures=b.futures)
    for name in ("summary.json", "report.html", "report.md", "forest.png", "manifest.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


@pytest.mark.parametrize(("module", "part", "message"), [
    ("_ahead", "changed_examples", "examples failed"),     # a report part on the report thread
    ("_audit", "_inference", "statistics failed"),         # the statistics, while the report thread runs
])
def test_a_failing_run_stops_the_report_thread_and_writes_nothing(tmp_path, monkeypatch, module: str, part: str,
                                                                  message: str) -> None:
    import importlib
    import threading

    def broken(*a, **k):
        raise RuntimeError(message)

    monkeypatch.setattr(importlib.import_module(f"replaylens.report.{module}"), part, broken)
    with pytest.raises(RuntimeError, match=message):
        _audit_out(tmp_path / "a")
    assert not [t for t in threading.enumerate() if t.name.startswith("replaylens-report")]
    assert not (tmp_path / "a" / "summary.json").exists()
