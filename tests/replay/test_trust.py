"""Issue 13: trustworthy audits of a user's own agent (resume, locks, agent errors, stochastic readouts,
the rng contract, the CI gate, small CLI things and plugging in)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import click
import numpy as np
import pytest
from click.testing import CliRunner

from replaylens._durable import atomic_write, locked_dir
from replaylens.agents import HistoryReader, ReferenceRule, from_callables, load_agent
from replaylens.bandit import make_bandit
from replaylens.cli._main import cli
from replaylens.errors import AgentRaised, ConfigError, JournalError
from replaylens.records import write_evaluator, write_futures, write_history
from replaylens.replay import decision_seeds, replay
from replaylens.replay._journal import Journal
from replaylens.replay._seeds import task_keys
from replaylens.report import audit
from replaylens.testing import check_writer

FAST = ["--maps", "1032", "--resamples", "200", "--cells", "value,pair", "--quiet"]


@pytest.fixture(scope="module")
def small():
    return make_bandit(n_streams=4, slots_per_block=8, n_future=4, rng=5)


@pytest.fixture()
def inputs(small, tmp_path: Path) -> list[str]:
    h = write_history(small.history, tmp_path / "history.jsonl")
    f = write_futures(small.futures, tmp_path / "future.jsonl")
    u = write_evaluator(small.evaluator, tmp_path / "utilities.jsonl")
    return ["--history", str(h), "--future", str(f), "--utilities", str(u)]


AGENT = """\
from replaylens.agents import from_callables

def make():
    def update(s, task, key, outcome):
        return {**s, key: s.get(key, 0.0) + outcome}
    def act(s, task, menu):
        {CRASH}
        return max(menu, key=lambda a: (s.get(a, 0.0), a))
    return from_callables(dict, update, act, name="summer")
"""


def _agent_file(tmp_path: Path, crash: str = "pass", name: str = "myagent.py") -> Path:
    p = tmp_path / name
    p.write_text(AGENT.replace("{CRASH}", crash))
    return p


def _run(args: list[str]):
    return CliRunner().invoke(cli, args)


# ---------------------------------------------------------------- 1. resume never mixes code versions


def test_changed_agent_code_becomes_a_new_run_with_one_line(inputs, tmp_path: Path) -> None:
    agent = _agent_file(tmp_path)
    out = tmp_path / "out"
    base = ["audit", *inputs, "--agent", f"{agent}:make", "--out", str(out), *FAST]
    first = _run(base)
    assert first.exit_code == 0, first.output
    again = _run(base)
    assert again.exit_code == 0 and "replay already complete: all 4 shards read from the journal" in again.stderr
    assert "resuming" not in again.stderr
    _agent_file(tmp_path, crash="s = dict(s)")  # the user edits the agent between two runs
    edited = _run(base)   # issue 48: a new run beside the first, one line saying why (never a refused resume)
    assert edited.exit_code == 0, edited.output
    notes = [ln for ln in edited.stderr.splitlines() if ln.startswith("replaylens: new run")]
    assert len(notes) == 1 and "agent code changed (myagent.py)" in notes[0] and "kept" in notes[0]
    assert "resuming" not in edited.stderr and len(list((out / "runs").iterdir())) == 2
    restarted = _run([*base, "--restart"])
    assert restarted.exit_code == 0, restarted.output
    assert "resuming" not in restarted.stderr and "already complete" not in restarted.stderr


def test_journal_key_names_the_changed_engine(tmp_path: Path) -> None:
    Journal(tmp_path, {"plan": "p", "code": {"a.py": "1"}, "engine": "0.1.0+aaa"})
    with pytest.raises(JournalError, match=r"ReplayLens changed .*--restart"):
        Journal(tmp_path, {"plan": "p", "code": {"a.py": "1"}, "engine": "0.1.0+bbb"})
    Journal(tmp_path, {"plan": "p", "code": {"a.py": "1"}, "engine": "0.1.0+bbb"}, restart=True)


# ---------------------------------------------------------------- 2. one run per output directory


def test_second_run_into_a_locked_out_is_refused(inputs, tmp_path: Path) -> None:
    out = tmp_path / "out"
    with locked_dir(out):
        res = _run(["audit", *inputs, "--agent", "mean", "--out", str(out), *FAST])
    assert res.exit_code == 2
    assert "in use by another replaylens run" in res.stderr and "Traceback" not in res.output


def test_temp_names_are_unique_per_write(tmp_path: Path) -> None:
    (tmp_path / ".data.bin.tmp").mkdir()  # the old fixed temp name is occupied (by another process)
    atomic_write(tmp_path / "data.bin", b"x")
    assert (tmp_path / "data.bin").read_bytes() == b"x"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp") and p.is_file()]


def test_corrupt_journal_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "journal.json").write_text("{not json")
    with pytest.raises(JournalError, match=r"corrupt JSON.*--restart"):
        Journal(tmp_path, {"plan": "p"})


def test_stale_writing_dirs_cleaned_and_overwrite_needed(inputs, tmp_path: Path) -> None:
    out = tmp_path / "out"
    base = ["audit", *inputs, "--agent", "mean", "--out", str(out), *FAST]
    assert _run(base).exit_code == 0
    stale = out / ".writing-killed"
    stale.mkdir()
    (stale / "summary.json").write_text("{")
    (stale / ".replaylens").write_text("staging\n")   # a directory ReplayLens made (issue 48: its marker)
    users = out / ".writing-mine"
    users.mkdir()   # one of the user's own: never removed
    assert _run(base).exit_code == 0
    assert not stale.exists() and users.is_dir()
    other = _run([*base, "--seed", "1"])   # issue 48: a different run is a new run beside the first
    assert other.exit_code == 0 and json.loads((out / "summary.json").read_text())["seed"] == 1
    assert len(list((out / "runs").iterdir())) == 2
    assert _run([*base, "--seed", "2", "--overwrite"]).exit_code == 0   # replaces the latest run
    assert json.loads((out / "summary.json").read_text())["seed"] == 2
    assert len(list((out / "runs").iterdir())) == 2


# ---------------------------------------------------------------- 3. an agent that raises


def test_agent_error_is_one_line_exit_3_and_finished_shards_stay(inputs, tmp_path: Path) -> None:
    agent = _agent_file(tmp_path, crash="if task.stream == 's03': 1 / 0", name="crashy.py")
    out = tmp_path / "out"
    res = _run(["audit", *inputs, "--agent", f"{agent}:make", "--out", str(out), *FAST])
    assert res.exit_code == 3, res.output
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("replaylens: agent error")]
    assert len(errors) == 1 and "Traceback" not in res.stderr
    msg = errors[0]
    assert "ZeroDivisionError" in msg and "stream s03" in msg and "future task" in msg and "cell" in msg
    assert f"{agent}:7" in msg  # the user's own frame
    (run,) = (out / "runs").iterdir()   # issue 48: the run's own directory
    done = (run / "journal" / "done.jsonl").read_text().splitlines()
    assert len(done) == 3  # s00..s02 stay journaled; a rerun resumes them
    full = _run(["audit", *inputs, "--agent", f"{agent}:make", "--out", str(out), *FAST, "--traceback"])
    assert full.exit_code == 3 and "Traceback" in full.stderr
    assert "resuming: 3 of 4 shards done, 1 to replay" in full.stderr


def test_agent_raised_carries_its_context(small) -> None:
    def act(s, t, m):
        raise KeyError("boom")

    agent = from_callables(lambda: 0, lambda s, t, k, u: s, act, name="bad")
    with pytest.raises(AgentRaised) as info:
        replay(small.history, small.futures, small.evaluator, agent, cells="value", maps="")
    err = info.value
    assert err.where["stream"] == "s00" and err.where["cell"] == "aligned" and "future task" in err.where
    assert isinstance(err.exc, KeyError) and err.frame is not None and err.frame.startswith(__file__)


NAN_AGENT = """\
import math
from replaylens.agents import from_callables

def make():
    def update(s, task, key, outcome):
        if math.isnan(outcome):
            raise ValueError("cannot take NaN")
        return s + outcome
    return from_callables(lambda: 0.0, update, lambda s, t, m: m[0], name="nanhater")
"""


def test_check_writer_names_the_mask_cell_and_takes_cells(tmp_path: Path) -> None:
    p = tmp_path / "nanhater.py"
    p.write_text(NAN_AGENT)
    res = _run(["check-writer", f"{p}:make", "--streams", "2"])
    # issue 23: the mask cell's finding, the other cells still checked (no abort, no second run)
    assert res.exit_code == 0, res.output
    assert "note: mask: cannot take masked (NaN) outcomes (ValueError in update)" in res.output
    assert "Traceback" not in res.output
    ok = _run(["check-writer", f"{p}:make", "--streams", "2", "--cells", "value,pair,key_slot,reorder,rename"])
    assert ok.exit_code == 0, ok.output


# ---------------------------------------------------------------- 4. stochastic agents read out correctly


def test_history_blind_random_agent_reads_zero_everywhere() -> None:
    sub = make_bandit(n_streams=8, slots_per_block=8, n_future=8, rng=2)
    agent = from_callables(lambda: 0, lambda s, t, k, u: s, lambda s, t, m, rng: m[int(rng.integers(len(m)))],
                           name="random", stochastic=True)
    res = audit(sub.history, sub.futures, sub.evaluator, agent, cells="value,pair,rename", maps="1032+2301",
                repeats=2, n_resamples=300)
    rekey = res.row("rekey")
    assert rekey.action_name.startswith("T_gr")
    for row in res.rows:
        assert abs(row.action.estimate) < 0.08, (row.cell, row.action.estimate)
    for v in res.verdicts():
        assert "-0.0" not in v and "changes decisions on" not in v
    assert any("no change beyond decoding noise" in v for v in res.verdicts())


# ---------------------------------------------------------------- 5. the rng contract


def test_every_decision_gets_its_own_generator(small) -> None:
    draws: dict[tuple[str, str], list[float]] = {}

    def act(s, t, m, rng):
        draws.setdefault((t.stream, t.task), []).append(float(rng.random()))
        return m[0]

    agent = from_callables(lambda: 0, lambda s, t, k, u: s, act, name="peek")  # not declared stochastic
    replay(small.history, small.futures, small.evaluator, agent, cells="value", maps="", path="reference")
    first = {k: list(v) for k, v in draws.items()}
    draws.clear()
    replay(small.history, small.futures, small.evaluator, agent, cells="value", maps="", path="reference")
    assert draws == first  # identical for the same decision
    flat = [x for v in first.values() for x in v]
    assert len(set(flat)) == len(flat)  # independent across decisions (cells, tasks, streams)


def test_array_path_passes_seeds_to_deterministic_agents(small, monkeypatch) -> None:
    seen: list[tuple[tuple[str, ...], np.ndarray]] = []   # (the call's streams, its seeds), calls in any order
    orig = ReferenceRule.act_batch

    def spy(self, records, queries):
        seen.append((queries.stream_names, queries.seed.copy()))
        return orig(self, records, queries)

    monkeypatch.setattr(ReferenceRule, "act_batch", spy)
    dec = replay(small.history, small.futures, small.evaluator, load_agent("mean"), cells="", maps="",
                 path="array", shard_size=1)
    p = dec.plan
    want = decision_seeds(p.seed, p.rng, "s00", task_keys([f.task for f in small.futures.of("s00")]), p.repeats,
                          p.cells[0], p.maps[0], p.draws[0])
    # one shard a stream, run on up to two threads: s00's call is found by its stream, not by its place in `seen`
    got = [seeds for names, seeds in seen if names == ("s00",)]
    assert len(got) == 1 and got[0].size and set(got[0].tolist()) <= set(want.reshape(-1).tolist())  # real seeds


def test_check_writer_flags_an_undeclared_stochastic_agent() -> None:
    agent = from_callables(lambda: 0, lambda s, t, k, u: s, lambda s, t, m, rng: m[int(rng.integers(len(m)))],
                           name="secretly-random")
    rep = check_writer(agent, n_streams=2, cells="value")
    bad = [c for c in rep.checks if not c.passed]
    assert not rep.passed and any("stochastic but not declared" in c.detail for c in bad)


# ---------------------------------------------------------------- 6. the CI gate and exit codes


def test_expect_invariant_gate(inputs, tmp_path: Path) -> None:
    base = ["audit", *inputs, "--agent", "mean", *FAST]
    ok = _run([*base, "--out", str(tmp_path / "a"), "--expect-invariant", "pair"])
    assert ok.exit_code == 0, ok.output
    bad = _run([*base, "--out", str(tmp_path / "b"), "--expect-invariant", "value,pair"])
    assert bad.exit_code == 1, bad.output
    lines = [ln for ln in bad.stderr.splitlines() if ln.startswith("expectation failed")]
    assert len(lines) == 1 and lines[0].startswith("expectation failed: value declared invariant")
    assert (tmp_path / "b" / "summary.json").exists()  # the report is written all the same
    verdict = json.loads((tmp_path / "b" / "summary.json").read_text())["verdict"]
    assert verdict["overall"] == "UNSAFE" and not verdict["passed"] and verdict["failed"] == ["value"]
    judged = {e["cell"]: e for e in verdict["expectations"]}
    assert judged["value"]["gate"] and judged["value"]["status"] == "UNSAFE"
    assert judged["value"]["failure"] == lines[0]  # the stderr line is the one summary.json records
    assert judged["pair"]["gate"] and judged["pair"]["status"] == "SAFE" and judged["pair"]["passed"]
    assert all(not e["gate"] for c, e in judged.items() if c not in ("value", "pair"))  # defaults never gate
    loose = _run([*base, "--out", str(tmp_path / "c"), "--expect-invariant", "value", "--tolerance", "1"])
    assert loose.exit_code == 0
    unknown = _run([*base, "--out", str(tmp_path / "d"), "--expect-invariant", "mask"])
    assert unknown.exit_code == 2 and "not a replayed cell" in unknown.stderr


def test_exit_codes_in_help() -> None:
    text = _run(["--help"]).output
    assert "Exit codes" in text and "3  the audited agent raised" in text and "1  an expectation failed" in text


# ---------------------------------------------------------------- 7. small things


def test_summary_json_is_strict_and_few_streams_warn(tmp_path: Path) -> None:
    sub = make_bandit(n_streams=1, slots_per_block=8, n_future=4, rng=1)
    h = write_history(sub.history, tmp_path / "h.jsonl")
    f = write_futures(sub.futures, tmp_path / "f.jsonl")
    u = write_evaluator(sub.evaluator, tmp_path / "u.jsonl")
    res = _run(["audit", "--history", str(h), "--future", str(f), "--utilities", str(u), "--agent", "mean",
                "--out", str(tmp_path / "o"), *FAST])
    assert res.exit_code == 0, res.output
    assert "only 1 stream" in res.stderr and "n/a" in res.stderr

    def no_nan(x: str) -> None:
        raise AssertionError(f"non-strict JSON constant {x}")

    summary = json.loads((tmp_path / "o" / "summary.json").read_text(), parse_constant=no_nan)
    assert summary["rows"][0]["action_ci"] == [None, None]
    assert "only 1 stream" in (tmp_path / "o" / "report.md").read_text()


def test_every_option_has_help() -> None:
    for name in ("audit", "check-writer", "demo"):
        cmd = cli.commands[name]
        missing = [p.name for p in cmd.params if isinstance(p, click.Option) and not p.help and not p.hidden]
        assert not missing or name == "demo", (name, missing)
    assert "file.py:factory" in _run(["audit", "--help"]).output


def test_agent_file_without_factory_gets_a_hint_and_siblings_import(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"give .*myagents.py:FACTORY"):
        load_agent(str(tmp_path / "myagents.py"))
    (tmp_path / "helper_mod_trust.py").write_text("def pick(menu):\n    return menu[-1]\n")
    (tmp_path / "uses.py").write_text(textwrap.dedent("""\
        from helper_mod_trust import pick
        from replaylens.agents import from_callables

        def make():
            return from_callables(lambda: 0, lambda s, t, k, u: s, lambda s, t, m: pick(m), name="uses")
        """))
    assert load_agent(f"{tmp_path / 'uses.py'}:make").name == "uses"


def test_menu_errors_show_plain_labels(small) -> None:
    agent = from_callables(lambda: 0, lambda s, t, k, u: s, lambda s, t, m: np.str_("Rerank"), name="np")
    with pytest.raises(Exception, match="chose 'Rerank'") as info:
        replay(small.history, small.futures, small.evaluator, agent, cells="", maps="")
    assert "np.str_" not in str(info.value)


# ---------------------------------------------------------------- 8. plugging in is one step


def test_history_reader_plugs_in_directly(small) -> None:
    reader = HistoryReader(lambda recs, task, menu, rng: menu[len(recs) % len(menu)], name="counter",
                           invariant_to="value,key_slot", task_invariant=True)
    res = audit(small.history, small.futures, small.evaluator, reader, cells="value,key_slot", maps="",
                n_resamples=100)
    assert res.agent.name == "counter" and res.agent.task_invariant
    assert replay(small.history, small.futures, small.evaluator, reader, cells="", maps="").n_tasks > 0
    rep = check_writer(reader, n_streams=2, cells="value,key_slot")
    assert rep.passed and {r.relation for r in rep.relations if r.declared_invariant} == {"value", "key_slot"}
    fc = from_callables(lambda: 0, lambda s, t, k, u: s, lambda s, t, m: m[0], invariant_to=("pair",),
                        task_invariant=True)
    assert fc.invariant_to == ("pair",) and fc.task_invariant


# ---------------------------------------------------------------- 9. resolution: the state-level response


class _RecencyWriter:
    """Per-key mean plus a 1e-4 recency weight: the state moves under pair, decisions do not."""

    name = "recency"

    def init_state(self):
        return ()

    def update(self, state, task, key, outcome):
        d = dict(state)
        n, m, r = d.get(key, (0, 0.0, 0.0))
        d[key] = (n + 1, m + (outcome - m) / (n + 1), 0.9999 * r + 1e-4 * outcome)
        return tuple(sorted(d.items()))

    def act(self, state, task, menu, rng):
        d = dict(state)
        return max(menu, key=lambda a: (d.get(a, (0, 0.0, 0.0))[1], a))

    def state_fingerprint(self, state):
        return state


def test_state_level_response_catches_a_false_invariance(small) -> None:
    from replaylens.agents import Agent

    w = _RecencyWriter()
    agent = Agent("recency", w, w, invariant_to=("pair",))
    rep = check_writer(agent, n_streams=4, cells="pair,value")
    pair = next(r for r in rep.relations if r.relation == "pair")
    assert pair.changed == 0 and pair.state_changed is not None and pair.state_changed > 0
    # issue 23: the declaration is about decisions; the state-level finding is information on its own line
    assert rep.passed and not pair.violated and "the state changes" in pair.status
    assert any(n.startswith("pair: the state changed in") for n in rep.notes())
    res = audit(small.history, small.futures, small.evaluator, agent, cells="pair", maps="", n_resamples=100)
    st = res.summary()["state_response"]["pair"]
    assert st["changed"] > 0 and st["total"] >= st["changed"]
    honest = Agent("mean-like", w, w)  # same writer without the declaration: reported, not failed
    assert check_writer(honest, n_streams=2, cells="pair").relations[0].status.startswith("no decision change")


def test_tables_are_not_wrapped_on_a_pipe(inputs, tmp_path: Path) -> None:
    res = _run(["audit", *inputs, "--agent", "mean", "--out", str(tmp_path / "o"), "--maps", "1032",
                "--resamples", "200", "--cells", "value,pair"])
    assert res.exit_code == 0, res.output
    rows = [ln for ln in res.stdout.splitlines() if ln.startswith("│ value") or ln.startswith("│ rekey")]
    assert len(rows) == 2 and all(len(r) > 80 for r in rows)


def test_lock_is_held_across_processes(inputs, tmp_path: Path) -> None:
    import subprocess
    import sys
    import time

    out = tmp_path / "out"
    code = ("import sys, time, pathlib; from replaylens._durable import locked_dir\n"
            "with locked_dir(pathlib.Path(sys.argv[1])):\n    print('locked', flush=True); time.sleep(30)\n")
    holder = subprocess.Popen([sys.executable, "-c", code, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        res = _run(["audit", *inputs, "--agent", "mean", "--out", str(out), *FAST])
        assert res.exit_code == 2 and "in use by another replaylens run" in res.stderr
    finally:
        holder.kill()
        holder.communicate()
    time.sleep(0.1)
    assert _run(["audit", *inputs, "--agent", "mean", "--out", str(out), *FAST]).exit_code == 0


def test_batched_query_seeds_equal_the_per_decision_seeds(small) -> None:
    """The array path's vectorized seeds are byte-for-byte :func:`decision_seeds` of each query."""
    from replaylens.replay import plan_replay
    from replaylens.replay._seeds import combo_key, query_seeds

    plan = plan_replay(small.history, small.futures, cells="value,pair", repeats=3, seed=7)
    assert len(plan.maps) > 1 and len(plan.cells) > 1
    names = ["s00", "s01", "s02"]
    tasks = task_keys([f"t{j}" for j in range(6)])
    rng = np.random.default_rng(0)
    cc, dd, mm = (g.reshape(-1) for g in np.indices((len(plan.cells), len(plan.draws), len(plan.maps))))
    combos = np.array([combo_key(plan.rng, plan.cells[c], plan.maps[m], plan.draws[d])
                       for c, d, m in zip(cc, dd, mm, strict=True)], dtype=np.uint64)
    q_stream, q_f = rng.integers(0, 3, 500), rng.integers(0, cc.size, 500)
    q_j, q_p = rng.integers(0, 6, 500), rng.integers(0, 3, 500)
    got = query_seeds(plan.seed, plan.rng, names, combos, q_stream, q_f, tasks[q_j], q_p)
    want = [decision_seeds(plan.seed, plan.rng, names[s], tasks, plan.repeats, plan.cells[int(cc[f])],
                           plan.maps[int(mm[f])], plan.draws[int(dd[f])])[j, p]
            for s, f, j, p in zip(q_stream, q_f, q_j, q_p, strict=True)]
    assert got.dtype == np.uint64 and got.tolist() == [int(w) for w in want]
