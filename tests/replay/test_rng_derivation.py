"""Issue 23 (1, 2): a decision's generator is a function of names (seed, stream, task, cell, map,
draw, repeat), never of positions; ``rng="common"`` shares draws across cells, maps and draws."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from replaylens.agents import Agent, QueryBatch, RecordBatch, from_callables
from replaylens.bandit import make_bandit
from replaylens.cli._main import cli
from replaylens.records import write_evaluator, write_futures, write_history
from replaylens.replay import Decisions, replay


def _mean(state: dict[str, tuple[float, int]], key: str) -> float:
    s, n = state.get(key, (0.0, 0))
    return s / n if n else 0.0


def _update(state: dict[str, tuple[float, int]], task: object, key: str, u: float) -> dict[str, tuple[float, int]]:
    if u != u:  # masked
        return state
    s, n = state.get(key, (0.0, 0))
    return {**state, key: (s + u, n + 1)}


def _eps_act(state: dict[str, tuple[float, int]], task: object, menu: tuple[str, ...],
             rng: np.random.Generator) -> str:
    """Epsilon-greedy on running means: reads the history and draws from the per-decision rng."""
    if rng.random() < 0.3:
        return menu[int(rng.integers(len(menu)))]
    return max(menu, key=lambda a: _mean(state, a))


class _BlindArray:
    """History-blind uniform choice from the per-decision seed (array form of ``_blind_act``)."""

    def act_batch(self, records: RecordBatch, queries: QueryBatch) -> np.ndarray:
        out = np.empty(queries.menu.shape[0], dtype=np.int64)
        for q in range(out.shape[0]):
            menu = queries.menu[q][queries.menu[q] >= 0]
            out[q] = menu[int(np.random.default_rng(int(queries.seed[q])).integers(menu.shape[0]))]
        return out


def _blind_act(state: object, task: object, menu: tuple[str, ...], rng: np.random.Generator) -> str:
    return menu[int(rng.integers(len(menu)))]


def epsilon_greedy() -> Agent:
    return from_callables(dict, _update, _eps_act, name="eps", stochastic=True)


def blind() -> Agent:
    return from_callables(tuple, lambda s, t, k, u: s, _blind_act, name="blind", stochastic=True,
                          array=_BlindArray())


@pytest.fixture(scope="module")
def bandit():
    return make_bandit(n_streams=4, slots_per_block=8, n_future=3)


def _by_name(dec: Decisions) -> dict[tuple[str, str], np.ndarray]:
    """{(cell, map name): (draws, repeats, tasks) decisions}."""
    return {(c, m): dec.actions[i, k] for i, c in enumerate(dec.plan.cell_names)
            for k, m in enumerate(dec.plan.map_names)}


ORDERS = [("value,pair,key_slot,mask,reorder,rename", "derangements"),
          ("reorder,pair", "1,0,3,2+2,3,0,1"),                     # subset, reordered
          ("rename,mask,pair,value", "3,2,1,0+2,3,0,1+1,0,3,2")]      # other order, other map order


@pytest.mark.parametrize("path,make", [("reference", epsilon_greedy), ("reference", blind), ("array", blind)])
def test_reordered_and_subset_cells_and_maps_give_identical_decisions(bandit, path, make) -> None:
    h, f, e = bandit.history, bandit.futures, bandit.evaluator
    runs = [_by_name(replay(h, f, e, make(), cells=c, maps=m, repeats=2, seed=5, path=path)) for c, m in ORDERS]
    shared = set(runs[0]) & set(runs[1]) & set(runs[2])
    assert {c for c, _ in shared} == {"aligned", "pair"} and len({m for _, m in shared}) == 3
    for key in shared:
        for other in runs[1:]:
            assert np.array_equal(runs[0][key], other[key]), key
    # the generators really differ between cells (independent draws): not a degenerate test
    assert not np.array_equal(runs[0][("aligned", "id")], runs[0][("pair", "id")])


def test_array_path_equals_reference_path(bandit) -> None:
    h, f, e = bandit.history, bandit.futures, bandit.evaluator
    for rng in ("independent", "common"):
        a = replay(h, f, e, blind(), cells="pair,mask,rename", repeats=2, seed=3, path="array", rng=rng)
        r = replay(h, f, e, blind(), cells="pair,mask,rename", repeats=2, seed=3, path="reference", rng=rng)
        assert np.array_equal(a.actions, r.actions)


def _write(tmp: Path, sub: object) -> list[str]:
    write_history(sub.history, tmp / "h.jsonl")  # type: ignore[attr-defined]
    write_futures(sub.futures, tmp / "f.jsonl")  # type: ignore[attr-defined]
    write_evaluator(sub.evaluator, tmp / "u.jsonl")  # type: ignore[attr-defined]
    return ["--history", str(tmp / "h.jsonl"), "--future", str(tmp / "f.jsonl"), "--utilities", str(tmp / "u.jsonl")]


def _cli_decisions(out: Path) -> dict[tuple[str, str, str, int], str]:
    import pyarrow.parquet as pq

    t = pq.read_table(out / "decisions.parquet").to_pylist()
    return {(r["cell"], r["map"], r["task"], r["repeat"]): r["action"] for r in t}


def test_cli_reordered_cells_give_identical_decisions(bandit, tmp_path: Path) -> None:
    files = _write(tmp_path, bandit)
    agent = ["--agent", f"{Path(__file__).resolve()}:epsilon_greedy", "--resamples", "200", "--quiet"]
    got = []
    for i, (cells, maps) in enumerate(ORDERS):
        out = tmp_path / f"out{i}"
        r = CliRunner().invoke(cli, ["audit", *files, *agent, "--cells", cells, "--maps", maps, "--out", str(out)])
        assert r.exit_code == 0, r.output
        got.append(_cli_decisions(out))
    shared = set(got[0]) & set(got[1]) & set(got[2])
    assert len(shared) > 0 and {k[0] for k in shared} >= {"aligned", "pair"}
    assert all(got[0][k] == got[1][k] == got[2][k] for k in shared)
    manifest = json.loads((tmp_path / "out0" / "manifest.json").read_text())
    assert "independent" in json.dumps(manifest)


# --------------------------------------------------------------------------- 2. common random numbers


@pytest.mark.parametrize("path", ["reference", "array"])
def test_common_rng_reads_a_history_blind_random_agent_as_exactly_zero(bandit, path) -> None:
    from replaylens.report import audit

    h, f, e = bandit.history, bandit.futures, bandit.evaluator
    res = audit(h, f, e, blind(), rng="common", repeats=1, path=path, n_resamples=200)
    assert res.decisions.plan.repeats == 1 and res.settings["rng"] == "common"
    assert {r.cell for r in res.rows} >= {"value", "pair", "key_slot", "mask", "reorder", "rename", "rekey"}
    for r in res.rows:
        assert r.n_changed == 0 and r.action.estimate == 0.0, r.cell
    # independent generators with one repeat: the same agent reads as dependent on every cell (noise)
    with pytest.warns(UserWarning, match="--repeats 2"):
        ind = audit(h, f, e, blind(), rng="independent", repeats=1, path=path, n_resamples=200)
    assert all(r.n_changed > 0 for r in ind.rows)


def test_common_rng_shares_the_draws_of_one_task_and_repeat_only(bandit) -> None:
    h, f, e = bandit.history, bandit.futures, bandit.evaluator
    dec = replay(h, f, e, blind(), cells="pair,rename", repeats=2, seed=1, path="reference", rng="common")
    a = dec.actions  # (cells, maps, draws, repeats, tasks)
    assert (a == a[:1, :1]).all()                       # every cell and map: the aligned draws
    assert not np.array_equal(a[0, 0, 0, 0], a[0, 0, 0, 1])  # repeats stay independent


def test_cli_rng_common(bandit, tmp_path: Path) -> None:
    files = _write(tmp_path, bandit)
    out = tmp_path / "out"
    r = CliRunner().invoke(cli, ["audit", *files, "--agent", f"{Path(__file__).resolve()}:blind", "--rng", "common",
                                 "--resamples", "200", "--out", str(out), "--expect-invariant",
                                 "value,pair,key_slot,mask,reorder,rename,rekey"])
    assert r.exit_code == 0, r.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["repeats"] == 1 and summary["rng"] == "common"
    assert all(row["n_changed"] == 0 for row in summary["rows"])
    r = CliRunner().invoke(cli, ["audit", *files, "--agent", "mean", "--rng", "shared", "--out", str(out)])
    assert r.exit_code == 2 and "shared" in r.output
