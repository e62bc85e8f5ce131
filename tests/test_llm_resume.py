"""Kill -9 at random points during an LLM audit, resume, and check that no decision is lost or duplicated."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import replaylens as rl
from replaylens.bandit import make_bandit
from replaylens.llm import FakeOpenAIServer, validate

CHILD = r"""
import sys
import numpy as np
import replaylens as rl
from replaylens.llm import make_agent
from replaylens.bandit import make_bandit

url, run, journal, out = sys.argv[1:5]
sub = make_bandit(n_streams=3, slots_per_block=8, n_future=2, rng=3)
agent = make_agent("openai/fake-model", run_dir=run, base_url=url, api_key_env=None, concurrency=8,
                   timeout_s=5.0, retries=0)
dec = rl.replay(sub.history, sub.futures, sub.evaluator, agent, cells="value,pair,rename", maps="id+ACMR+ARMC",
                seed=2, journal=journal)
np.save(out, dec.actions)
"""


def _lines(p: Path) -> list[dict[str, object]]:
    if not p.exists():
        return []
    out = []
    for raw in p.read_bytes().splitlines():
        try:
            out.append(json.loads(raw))
        except json.JSONDecodeError:
            continue  # a line torn by the kill
    return out


def _spawn(script: Path, url: str, tmp: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(Path(rl.__file__).parents[1])}
    return subprocess.Popen([sys.executable, str(script), url, str(tmp / "llm"), str(tmp / "journal"),
                             str(tmp / "actions.npy")], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_sigkill_at_random_points_then_resume_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    run = tmp_path / "llm"
    g = np.random.default_rng(20260911)
    thresholds = [0, *sorted(int(x) for x in g.integers(20, 190, size=2))]   # 0 = as soon as the plan exists
    kills = 0
    with FakeOpenAIServer(latency_s=0.02, seed=1) as srv:
        for th in thresholds:
            child = _spawn(script, srv.url, tmp_path)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and child.poll() is None:
                if (run / "plan.jsonl").exists() and len(_lines(run / "attempts.jsonl")) >= th:
                    time.sleep(float(g.uniform(0.0, 0.05)))
                    break
                time.sleep(0.005)
            if child.poll() is None:
                child.send_signal(signal.SIGKILL)
                kills += 1
            child.communicate(timeout=30)
        starts = _lines(run / "starts.jsonl")
        before = _lines(run / "attempts.jsonl")
        assert kills >= 2 and 0 < len(before) < 216
        # final resume runs to completion
        child = _spawn(script, srv.url, tmp_path)
        _, err = child.communicate(timeout=120)
        assert child.returncode == 0, err.decode()[-2000:]
        calls = srv.n_requests
    atts = _lines(run / "attempts.jsonl")
    plan = _lines(run / "plan.jsonl")
    starts = _lines(run / "starts.jsonl")
    ids = [p["request_id"] for p in plan]
    assert len(ids) == len(set(ids)) == 216                     # every decision planned exactly once
    by_req: dict[str, list[dict[str, object]]] = {}
    for a in atts:
        by_req.setdefault(str(a["request_id"]), []).append(a)
    assert set(by_req) == set(ids)
    for rid, xs in by_req.items():
        oks = [x for x in xs if x["status"] == "ok"]
        assert len(oks) == 1 and xs[-1] is oks[0], rid         # never re-asked once decided, never duplicated
    assert len({a["attempt_id"] for a in atts}) == len(atts)
    interrupted = {s["attempt_id"] for s in starts} - {a["attempt_id"] for a in atts}
    recoveries = [a for a in atts if a["kind"] == "recovery"]
    assert all(a["recovers"] in interrupted for a in recoveries)
    assert len(atts) <= calls <= len(atts) + len(interrupted)   # no unrecorded call except those in flight
    rep = validate(run)
    assert rep.ok, rep.problems
    sub = make_bandit(n_streams=3, slots_per_block=8, n_future=2, rng=3)
    ref = rl.replay(sub.history, sub.futures, sub.evaluator, rl.reference_agent("mean"), cells="value,pair,rename",
                    maps="id+ACMR+ARMC", seed=2)
    got = np.load(tmp_path / "actions.npy")
    assert np.array_equal(got, ref.actions)                     # the resumed audit equals an uninterrupted one
