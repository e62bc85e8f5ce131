"""Issue 23 (5): exit codes (130 interrupted and resumable, 3 any agent misbehaviour, 2 inputs), strings
where numbers belong and utilities of unknown tasks rejected with file:line:field, no numpy repr."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from replaylens.bandit import make_bandit
from replaylens.cli._main import cli
from replaylens.records import write_evaluator, write_futures, write_history

AGENTS = '''
import os
import numpy as np
from replaylens.agents import from_callables


def _agent(act, name):
    return from_callables(lambda: 0, lambda s, t, k, u: s + 1, act, name=name)


def raises():
    def act(s, t, m):
        raise RuntimeError("boom")
    return _agent(act, "raiser")


def off_menu():
    return _agent(lambda s, t, m: np.str_("explore"), "off-menu")


def wrong_type():
    return _agent(lambda s, t, m: np.int64(3), "wrong-type")


def interrupted():
    def act(s, t, m):
        if t.stream == "s02" and os.path.exists(os.environ["RL_STOP_FLAG"]):
            raise KeyboardInterrupt
        return m[0]
    return _agent(act, "interrupted")
'''


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, Path]:
    sub = make_bandit(n_streams=4, slots_per_block=4, n_future=2, rng=3)
    out = {"h": tmp_path / "h.jsonl", "f": tmp_path / "f.jsonl", "u": tmp_path / "u.jsonl",
           "a": tmp_path / "my_agents.py"}
    write_history(sub.history, out["h"])
    write_futures(sub.futures, out["f"])
    write_evaluator(sub.evaluator, out["u"])
    out["a"].write_text(AGENTS)
    return out


def _audit(files: dict[str, Path], agent: str, out: Path, *extra: str):
    return CliRunner().invoke(cli, ["audit", "--history", str(files["h"]), "--future", str(files["f"]),
                                    "--utilities", str(files["u"]), "--agent", agent, "--out", str(out),
                                    "--cells", "value,pair", "--maps", "1032", "--resamples", "100", "--quiet",
                                    "--backend", "serial", *extra])


def _lines(p: Path) -> list[dict[str, object]]:
    return [json.loads(x) for x in p.read_text().splitlines() if x.strip()]


def _write(p: Path, rows: list[dict[str, object]]) -> None:
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_every_error_path_has_its_exit_code_and_no_numpy_repr(files: dict[str, Path], tmp_path: Path) -> None:
    messages = []
    for factory, code, needle in [("raises", 3, "raised RuntimeError: boom"),
                                  ("off_menu", 3, "chose 'explore', which is not in the menu"),
                                  ("wrong_type", 3, "chose 3, which is not in the menu")]:
        r = _audit(files, f"{files['a']}:{factory}", tmp_path / factory)
        assert r.exit_code == code, (factory, r.output)
        assert needle in r.output and "Traceback" not in r.output, r.output
        messages.append(r.output)

    h = _lines(files["h"])
    bad = [dict(r) for r in h]
    bad[4]["outcome"] = "0.7"
    _write(tmp_path / "h_str.jsonl", bad)
    files_str = {**files, "h": tmp_path / "h_str.jsonl"}
    r = _audit(files_str, "mean", tmp_path / "o1")
    assert r.exit_code == 2
    assert f"{tmp_path / 'h_str.jsonl'}:5: field 'outcome': expected a number, got the string '0.7'" in r.output
    messages.append(r.output)

    bad = [dict(r) for r in h]
    bad[6]["key"] = "explore"
    _write(tmp_path / "h_key.jsonl", bad)
    r = _audit({**files, "h": tmp_path / "h_key.jsonl"}, "mean", tmp_path / "o2")
    assert r.exit_code == 2 and f"{tmp_path / 'h_key.jsonl'}:7: field 'key': key 'explore'" in r.output, r.output
    messages.append(r.output)

    u = _lines(files["u"])
    _write(tmp_path / "u_extra.jsonl", [*u, {"stream": "s00", "task": "no-such-task", "key": "coverage",
                                             "utility": 0.5}])
    r = _audit({**files, "u": tmp_path / "u_extra.jsonl"}, "mean", tmp_path / "o3")
    assert r.exit_code == 2, r.output
    assert f"u_extra.jsonl:{len(u) + 1}: field 'task': utilities for task 'no-such-task'" in r.output
    messages.append(r.output)

    for m in messages:
        assert "np." not in m and "numpy" not in m, m


def test_keyboard_interrupt_exits_130_and_the_rerun_resumes(files: dict[str, Path], tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    flag = tmp_path / "stop"
    flag.write_text("1")
    monkeypatch.setenv("RL_STOP_FLAG", str(flag))
    out = tmp_path / "run"
    r = _audit(files, f"{files['a']}:interrupted", out)
    assert r.exit_code == 130, r.output
    assert "rerun the same command to resume" in r.output
    flag.unlink()
    r = _audit(files, f"{files['a']}:interrupted", out)
    assert r.exit_code == 0, r.output
    assert "resuming: 2 of 4 shards done" in r.output
