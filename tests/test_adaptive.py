"""Issue 18 point 4: adaptive call budget (anytime-valid confidence sequence, stream-cluster stopping)."""

from __future__ import annotations

import numpy as np
import pytest

from replaylens.errors import ConfigError
from replaylens.inference import (
    CHANGES,
    NO_CHANGE,
    UNSETTLED,
    BettingCS,
    adaptive_cells,
    classify,
    cluster_bootstrap,
)
from replaylens.rng import derive_rng

# scripted agents: per-decision change probability of each cell (true responses known)
TRUE = {"invariant": 0.0, "near-margin": 0.04, "clear": 0.6}


def _matrix(seed: int, n: int = 400, d: int = 16) -> dict[str, np.ndarray]:
    u = derive_rng(seed, "streams").random(n)
    return {c: derive_rng(seed, "cell", c).binomial(d, np.clip(p * (0.5 + u), 0, 1)) / d for c, p in TRUE.items()}


def test_classify_rule() -> None:
    assert classify(0.01, 0.3, 0.05) == CHANGES
    assert classify(0.0, 0.04, 0.05) == NO_CHANGE
    assert classify(0.0, 0.06, 0.05) == UNSETTLED


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_adaptive_verdicts_equal_full_matrix_with_fewer_calls(seed: int) -> None:
    m = _matrix(seed)
    asked: list[tuple[str, int]] = []

    def ask(cell: str, idx: np.ndarray) -> np.ndarray:
        asked.extend((cell, int(i)) for i in idx)
        return m[cell][idx]

    res = adaptive_cells(ask, 400, list(TRUE), margin=0.05, rounds=20, seed=seed)
    for cv in res.cells:
        bs = cluster_bootstrap(m[cv.cell], n_resamples=2000, rng=derive_rng(seed, "boot", cv.cell))
        assert cv.verdict == classify(float(bs.low), float(bs.high), 0.05), cv
        assert cv.n_streams < 400
    by = {cv.cell: cv for cv in res.cells}
    assert by["invariant"].verdict == NO_CHANGE and by["clear"].verdict == CHANGES
    assert by["clear"].n_streams < by["near-margin"].n_streams  # clear cells stop first
    assert len(asked) == res.asked and len(set(asked)) == len(asked)  # no (cell, stream) asked twice
    assert res.fraction_asked() < 0.4
    # the stream order is a seeded permutation, the same for every cell (aligned decisions are shared)
    assert sorted(res.order) == list(range(400))
    again = adaptive_cells(lambda c, i: m[c][i], 400, list(TRUE), margin=0.05, rounds=20, seed=seed)
    assert again == res


def test_unsettled_cells_are_reported_as_such() -> None:
    m = _matrix(5, n=40)
    res = adaptive_cells(lambda c, i: m[c][i], 40, ["invariant", "near-margin"], margin=0.05, rounds=4)
    assert all(cv.verdict == UNSETTLED and cv.n_streams == 40 for cv in res.cells)  # 40 streams cannot settle


def test_confidence_sequence_covers_the_mean_uniformly_over_time() -> None:
    # anytime validity: the running-intersection interval misses the true mean at ANY time in <= alpha of runs
    misses = 0
    runs = 200
    for r in range(runs):
        rng = derive_rng(r, "cs-coverage")
        cs = BettingCS(0.1, grid=401)
        for _ in range(10):
            cs.update(rng.binomial(4, 0.3, size=20) / 4)
            lo, hi = cs.interval()
            if not lo <= 0.3 <= hi:
                misses += 1
                break
    assert misses / runs <= 0.1


def test_bad_input_is_one_clear_error() -> None:
    with pytest.raises(ConfigError, match=r"\[0, 1\]"):
        BettingCS().update([1.5])
    with pytest.raises(ConfigError, match="margin"):
        adaptive_cells(lambda c, i: i * 0.0, 10, ["x"], margin=0.0)
    with pytest.raises(ConfigError, match="returned"):
        adaptive_cells(lambda c, i: np.zeros(1), 10, ["x"], rounds=2)


# ---------------------------------------------------------------------------------------------- replay level


@pytest.fixture(scope="module")
def bandit():  # type: ignore[no-untyped-def]
    from replaylens.bandit import make_bandit

    return make_bandit(n_streams=160, slots_per_block=8, n_future=2, rng=3)


@pytest.mark.parametrize("rule", ["mean", "latest"])
def test_adaptive_audit_verdicts_equal_full_matrix(bandit, rule: str) -> None:  # type: ignore[no-untyped-def]
    from replaylens.agents import load_agent
    from replaylens.readouts import direct_action_contrast
    from replaylens.replay import replay
    from replaylens.report._adaptive import adaptive_audit

    agent = load_agent(rule)
    res, asked, n_full = adaptive_audit(bandit.history, bandit.futures, bandit.evaluator, agent, rounds=8,
                                        cells="value,pair,rename", maps="id+ACMR", seed=7)
    dec = replay(bandit.history, bandit.futures, bandit.evaluator, agent, cells="value,pair,rename", maps="id+ACMR",
                 seed=7)
    assert n_full == dec.actions.size and asked < n_full
    for cv in res.cells:
        vals = direct_action_contrast(dec, cv.cell).values
        bs = cluster_bootstrap(vals, n_resamples=2000, rng=derive_rng(7, "full", cv.cell))
        assert cv.verdict == classify(float(bs.low), float(bs.high), 0.05), (rule, cv)


def test_adaptive_llm_agent_makes_fewer_calls(bandit, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from replaylens.llm import make_agent
    from replaylens.report._adaptive import adaptive_audit

    agent = make_agent("scripted/mean", run_dir=str(tmp_path / "run"))
    res, asked, n_full = adaptive_audit(bandit.history, bandit.futures, bandit.evaluator, agent, cells="value,pair",
                                        maps="id+ACMR", rounds=8)
    calls = sum(1 for x in (tmp_path / "run/attempts.jsonl").read_text().splitlines() if x.strip())
    assert calls == asked < 0.6 * n_full
    assert {cv.cell: cv.verdict for cv in res.cells} == {"value": CHANGES, "pair": NO_CHANGE}


def test_cli_adaptive_writes_verdicts_and_reports_unsettled(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    from click.testing import CliRunner

    from replaylens.bandit import make_bandit
    from replaylens.cli._main import cli
    from replaylens.records import write_evaluator, write_futures, write_history

    sub = make_bandit(n_streams=12, slots_per_block=8, n_future=2, rng=3)
    h, f, u = (write_history(sub.history, tmp_path / "h.jsonl"), write_futures(sub.futures, tmp_path / "f.jsonl"),
               write_evaluator(sub.evaluator, tmp_path / "u.jsonl"))
    res = CliRunner().invoke(cli, ["audit", "--history", str(h), "--future", str(f), "--utilities", str(u),
                                   "--agent", "mean", "--out", str(tmp_path / "o"), "--cells", "value,pair",
                                   "--maps", "id+ACMR", "--adaptive", "--rounds", "3", "--margin", "0.05"])
    assert res.exit_code == 0, res.output
    out = json.loads((tmp_path / "o/adaptive.json").read_text())
    by = {c["cell"]: c["verdict"] for c in out["cells"]}
    assert by == {"value": CHANGES, "pair": UNSETTLED}  # 12 invariant streams cannot bound the response below 5 %
    assert "pair: unsettled" in res.output


def test_cli_adaptive_llm_through_the_fake_endpoint_equals_full_verdicts(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    from click.testing import CliRunner

    from replaylens.bandit import make_bandit
    from replaylens.cli._main import cli
    from replaylens.llm import FakeOpenAIServer
    from replaylens.records import write_evaluator, write_futures, write_history

    sub = make_bandit(n_streams=24, slots_per_block=8, n_future=1, rng=3)
    h, f, u = (write_history(sub.history, tmp_path / "h.jsonl"), write_futures(sub.futures, tmp_path / "f.jsonl"),
               write_evaluator(sub.evaluator, tmp_path / "u.jsonl"))
    with FakeOpenAIServer(model="fake-model") as srv:
        def run(out: str, *extra: str) -> None:
            res = CliRunner().invoke(cli, [
                "audit", "--history", str(h), "--future", str(f), "--utilities", str(u), "--agent", "llm",
                "--model", "openai/fake-model", "--base-url", srv.url, "--api-key-env", "", "--no-cache",
                "--cells", "value", "--maps", "id+ACMR", "--resamples", "2000", "--out", str(tmp_path / out),
                "--quiet", *extra])
            assert res.exit_code == 0, res.output

        run("full")
        n_full = srv.n_requests
        run("adaptive", "--adaptive", "--rounds", "4")
        n_adaptive = srv.n_requests - n_full
    ad = json.loads((tmp_path / "adaptive/adaptive.json").read_text())
    assert ad["decisions_full_matrix"] == n_full and ad["decisions_replayed"] == n_adaptive < n_full
    row = json.loads((tmp_path / "full/summary.json").read_text())["rows"][0]
    lo, hi = row["action_ci"]
    assert ad["cells"][0]["verdict"] == classify(lo, hi, 0.05) == CHANGES
