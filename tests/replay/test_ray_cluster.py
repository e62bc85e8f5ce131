"""The Ray backend on a real two-node cluster bound to 127.0.0.1 (issue 51; the cluster: ``_ray_cluster.py``).

Each numbered point of the issue fails on the backend as it was before: (1) a ``file.py:factory`` agent (with a
sibling module) runs on the workers, shipped by value, and gives the local path's decisions.parquet and
summary.json byte for byte; (2) a running cluster is joined without ``--ray-address`` (the one ``ray start``
recorded, ``RAY_ADDRESS``); (3) Ray's failures are one line with the README's exit status (a worker crash: 3; a
cluster not answering, a bad runtime env, workers running other code than the driver fingerprinted: 2) and
Ray's log lines stay out of the console (``ray.log`` under OUT); (4) as many shards run at once as the cluster
has CPUs (six here, where 2 x --workers was four); (5) ``--ray-runtime-env`` reaches the workers.  A ``ray://``
address runs the audit through the head's Ray Client server, a worker crash there one line too.  The last test
kills the second node mid-audit, then the driver, and resumes: the same bytes again.  (Ray's other failures,
brought about on a cluster or a local instance of their own: ``test_ray_failures.py``.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _ray_cluster import Cluster, listening, make_root
from click.testing import CliRunner

pytestmark = pytest.mark.slow

ray = pytest.importorskip("ray", reason="the ray extra is not installed")

CPUS = 3   # per node: six shards at once on the cluster, more than the 2 x --workers (4) of the old backend

HELPER = '''
import glob
import os
import sys
import time


def choose(state, task, menu):
    """The menu entry of the largest total outcome so far (ties: the last name), after the test's controls."""
    ctl = os.environ.get("REPLAYLENS_TEST_CONTROL")
    if ctl:
        _control(ctl, task.stream)
    totals = {}
    for key, outcome in state:
        totals[key] = totals.get(key, 0.0) + outcome
    return max(menu, key=lambda a: (totals.get(a, 0.0), a))


def _control(ctl, stream):
    if os.path.exists(os.path.join(ctl, "crash-" + stream)):
        os._exit(3)
    if os.path.exists(os.path.join(ctl, "hold-" + stream)):
        _hold(ctl, stream)
    if "default_worker" in sys.argv[0] and os.path.exists(os.path.join(ctl, "barrier")):
        _barrier(ctl)
    try:
        with open(os.path.join(ctl, "delay_ms")) as fh:
            ms = float(fh.read())
    except OSError:
        ms = 0.0
    start = time.time()
    if ms:
        time.sleep(ms / 1000)
    with open(os.path.join(ctl, f"trace-{os.getpid()}"), "a") as fh:
        fh.write(f"{start} {time.time()}\\n")


def _hold(ctl, stream):
    """Say where the shard runs (``run-SID``: its node's session id; in it the node's address and the cluster's
    GCS address) and wait until ``release`` exists, the hold is lifted or a minute has passed."""
    import ray

    mark = os.path.join(ctl, f"run-{os.getsid(0)}")
    with open(mark + ".tmp", "w") as fh:
        fh.write(f"{ray.util.get_node_ip_address()} {ray.get_runtime_context().gcs_address}")
    os.replace(mark + ".tmp", mark)
    end = time.time() + 60
    while (time.time() < end and os.path.exists(os.path.join(ctl, "hold-" + stream))
           and not os.path.exists(os.path.join(ctl, "release"))):
        time.sleep(0.05)


def _barrier(ctl):
    """A worker's first shard waits here until as many shards hold at once as ``barrier`` says (``met`` then
    written) or a minute has passed."""
    mark = os.path.join(ctl, f"arrived-{os.getpid()}")
    if os.path.exists(mark):
        return
    with open(os.path.join(ctl, "barrier")) as fh:
        want = int(fh.read())
    open(mark, "w").close()
    end = time.time() + 60
    while time.time() < end:
        held = len(glob.glob(os.path.join(ctl, "arrived-*"))) - len(glob.glob(os.path.join(ctl, "left-*")))
        if held >= want:
            open(os.path.join(ctl, "met"), "w").close()
            break
        time.sleep(0.02)
    open(os.path.join(ctl, f"left-{os.getpid()}"), "w").close()
'''

AGENT = '''
from helper import choose

from replaylens import from_callables


def _init():
    return ()


def _update(state, task, key, outcome):
    return (*state, (key, 0.0 if outcome != outcome else float(outcome)))


def make():
    return from_callables(_init, _update, lambda state, task, menu: choose(state, task, menu), name="traced")
'''


SITECUSTOMIZE = '''
import os
import sys

if "--mode=specific-server" in sys.argv:   # a Ray Client server the head's proxy starts for one driver
    _tokens = os.path.join(os.environ.get("REPLAYLENS_TEST_CONTROL", ""), "client-aborts")
    try:
        with open(_tokens) as _fh:
            _n = int(_fh.read() or 0)
    except (OSError, ValueError):
        _n = 0
    if _n > 0:   # fail as it fails under load (SIGABRT), once per token
        with open(_tokens, "w") as _fh:
            _fh.write(str(_n - 1))
        os.abort()
'''

CHANNEL_TIMEOUT_S = 10   # how long the head's proxy waits for a Ray Client server it started (Ray's default: 30)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    root = make_root()
    hooks = root / "hooks"   # on the nodes' path: a Ray Client server aborts while control/client-aborts > 0
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(SITECUSTOMIZE)
    path = os.pathsep.join(p for p in (str(hooks), os.environ.get("PYTHONPATH", "")) if p)   # (ahead of the rest)
    c = Cluster(root, CPUS, node_env={"PYTHONPATH": path,
                                      "RAY_CLIENT_SERVER_CHECK_CHANNEL_TIMEOUT_S": str(CHANNEL_TIMEOUT_S)})
    try:
        try:
            c.start()
        except Exception as exc:
            from conftest import require

            require("ray", f"a two-node Ray cluster cannot start here: {exc}")
        yield c
    finally:
        c.stop()
        subprocess.run(["rm", "-rf", str(root)], check=False)


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return inputs(tmp_path_factory.mktemp("ray51"))


def inputs(d: Path) -> Path:
    """Inputs (24 streams: 24 shards on the reference path), the agent file and its sibling module, in ``d``."""
    from replaylens.bandit import make_bandit
    from replaylens.records import write_evaluator, write_futures, write_history

    b = make_bandit(n_streams=24, slots_per_block=6, n_future=3)
    write_history(b.history, d / "history.jsonl")
    write_futures(b.futures, d / "future.jsonl")
    write_evaluator(b.evaluator, d / "utilities.jsonl")
    (d / "agentdir").mkdir()
    (d / "agentdir" / "helper.py").write_text(HELPER)
    (d / "agentdir" / "traced.py").write_text(AGENT)
    return d


def _args(work: Path, out: Path, agent: str = "agentdir/traced.py:make") -> list[str]:
    return ["audit", "--history", str(work / "history.jsonl"), "--future", str(work / "future.jsonl"),
            "--utilities", str(work / "utilities.jsonl"), "--agent", agent, "--out", str(out),
            "--cells", "value,pair", "--maps", "1032+2301", "--resamples", "200", "--quiet"]


@pytest.fixture(scope="module")
def local(work: Path) -> Path:
    return serial(work)


def serial(work: Path) -> Path:
    """The local (serial) path's result set, in this process (no controls: no delay, no trace)."""
    old = os.getcwd()
    os.chdir(work)
    try:
        from replaylens.cli import cli

        res = CliRunner().invoke(cli, [*_args(work, work / "local"), "--backend", "serial"])
    finally:
        os.chdir(old)
    assert res.exit_code == 0, res.output
    return work / "local"


def _cli(cluster: Cluster, work: Path, args: list[str], **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "replaylens", *args], cwd=work, env={**cluster.env, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _run(cluster: Cluster, work: Path, args: list[str], timeout: float = 120, **env: str) -> tuple[int, str]:
    p = _cli(cluster, work, args, **env)
    _, err = p.communicate(timeout=timeout)
    return p.returncode, err


def _same(out: Path, local: Path) -> None:
    for name in ("decisions.parquet", "summary.json"):
        assert (out / name).read_bytes() == (local / name).read_bytes(), name


def _done(out: Path) -> int:
    """Shards the journal under ``out`` holds (whole lines of done.jsonl: a kill may tear the last one)."""
    n = 0
    for p in out.rglob("done.jsonl"):
        for line in p.read_text().splitlines():
            try:
                json.loads(line)
            except ValueError:
                continue
            n += 1
    return n


def test_the_cluster_listens_on_loopback_only(cluster: Cluster) -> None:
    addrs = listening(cluster.pids("head") | cluster.pids("node2"))
    assert addrs, "no listening socket found"
    assert all(a.startswith(("127.", "::1:", "::ffff:127.")) for a in addrs), addrs


def test_file_agent_runs_on_a_running_cluster_found_without_an_address(cluster: Cluster, work: Path,
                                                                       local: Path) -> None:
    """Points 1, 2, 4 and 3's noise: no --ray-address, no RAY_ADDRESS: the cluster ``ray start`` recorded.  Each
    worker's first shard waits until six hold at once (``met``): the old backend kept four in flight."""
    (cluster.control / "barrier").write_text(str(2 * CPUS))
    out = work / "found"
    try:
        code, err = _run(cluster, work, [*_args(work, out), "--backend", "ray"])
    finally:
        (cluster.control / "barrier").unlink()
    assert code == 0, err
    assert err.strip() == "", err   # nothing of Ray's on the console
    _same(out, local)
    log = next(out.rglob("ray.log")).read_text()
    assert "Connecting to existing Ray cluster at address: " + cluster.address in log
    assert (cluster.control / "met").exists()   # six shards at once (the old backend: at most 4, 2 x --workers)


def test_worker_crash_is_one_line_exit_3_with_the_journal_kept(cluster: Cluster, work: Path) -> None:
    (cluster.control / "delay_ms").write_text("0")
    crash = cluster.control / "crash-s03"
    crash.write_text("")
    out = work / "crash"
    try:
        code, err = _run(cluster, work, [*_args(work, out), "--backend", "ray", "--ray-address", cluster.address,
                                         "--workers", "1"])   # one shard at a time on a cluster joined: one worker
    finally:
        crash.unlink()
    assert code == 3, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Ray worker running shard 3 (stream s03) died" in lines[0], err
    assert _done(out) == 3   # shards 0-2, finished before it (one at a time), stay journaled


def _package(root: Path, body: str) -> Path:
    """An installed-looking package ``rlpkg`` (its dist-info says version 1.0) whose agent picks ``body``."""
    (root / "rlpkg").mkdir(parents=True)
    (root / "rlpkg" / "__init__.py").write_text("")
    (root / "rlpkg" / "agent.py").write_text(   # top-level functions: pickled by reference, imported on workers
        "from replaylens import from_callables\n\n\n"
        "def init():\n    return ()\n\n\n"
        "def update(state, task, key, outcome):\n    return state\n\n\n"
        f"def act(state, task, menu):\n    return {body}\n\n\n"
        "def make():\n    return from_callables(init, update, act, name='pkg')\n")
    (root / "rlpkg-1.0.dist-info").mkdir()
    (root / "rlpkg-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: rlpkg\nVersion: 1.0\n")
    return root


def _path(first: Path) -> str:
    """``first`` ahead of this process's own PYTHONPATH (kept where the suite runs with one)."""
    return os.pathsep.join(p for p in (str(first), os.environ.get("PYTHONPATH", "")) if p)


def test_runtime_env_reaches_workers_and_other_code_there_is_refused(cluster: Cluster, work: Path) -> None:
    """Point 5 and the code check: an installed package the workers import themselves.  The driver imports one
    copy; --ray-runtime-env (a JSON file) puts another on the workers' path, so they can import it at all, and
    then they find it is not the code the driver fingerprinted: one line, exit 2, before any shard runs."""
    mine = _package(work / "mine", "menu[0]")
    other = _package(work / "other", "menu[-1]")
    env_file = work / "env.json"
    env_file.write_text(json.dumps({"env_vars": {"PYTHONPATH": _path(other)}}))
    args = [*_args(work, work / "pkg", "rlpkg.agent:make"), "--backend", "ray", "--ray-address", cluster.address,
            "--ray-runtime-env", str(env_file), "--workers", "1"]
    code, err = _run(cluster, work, args, PYTHONPATH=_path(mine))
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "differs from what the driver fingerprinted (rlpkg==1.0:agent.py)" in lines[0], err
    assert _done(work / "pkg") == 0


def test_a_ray_client_address_runs_the_audit_and_its_failures_are_one_line(cluster: Cluster, work: Path,
                                                                         local: Path) -> None:
    """``--ray-address ray://...`` (Ray Client, the head's client server): a worker crash through it is the one
    line and exit 3 of a direct join, the shards before it journaled; the same command resumes to the local
    path's bytes, with Ray's lines in ray.log only."""
    (cluster.control / "delay_ms").write_text("0")
    crash = cluster.control / "crash-s03"
    crash.write_text("")
    out = work / "client"
    args = [*_args(work, out), "--backend", "ray", "--ray-address", cluster.client_address, "--workers", "1"]
    try:
        code, err = _run(cluster, work, args)
    finally:
        crash.unlink()
    assert code == 3, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Ray worker running shard 3 (stream s03) died" in lines[0], err
    assert _done(out) == 3 and not (out / "summary.json").exists()
    code, err = _run(cluster, work, args)
    assert code == 0, err
    assert err.strip() == "resuming: 3 of 24 shards done, 21 to replay", err
    _same(out, local)
    assert "ray.init() on the server" in next(out.rglob("ray.log")).read_text()   # Ray Client's own line


def test_a_ray_client_server_that_fails_to_start_is_tried_again_then_one_line(cluster: Cluster, work: Path,
                                                                          local: Path) -> None:
    """The head's proxy forks one Ray Client server per driver; under load that child can abort (SIGABRT, seen in
    CI: the audit stopped with exit 2).  ReplayLens tries the connection again, ``CLIENT_ATTEMPTS`` times in all,
    each failure a line of ray.log; when every try fails, one line naming the server's own reason, exit 2.  (Each
    failed try costs Ray Client about 40 s here: the proxy's channel wait and its log stream's retries.)"""
    from replaylens.replay._ray import CLIENT_ATTEMPTS

    (cluster.control / "delay_ms").write_text("0")
    tokens = cluster.control / "client-aborts"

    def client(out: Path) -> tuple[int, str]:
        args = [*_args(work, out), "--backend", "ray", "--ray-address", cluster.client_address, "--workers", "1"]
        return _run(cluster, work, args, timeout=60 + CLIENT_ATTEMPTS * 60)

    tokens.write_text("1")
    code, err = client(work / "retried")
    assert code == 0, err
    assert err.strip() == "", err
    assert tokens.read_text() == "0"   # every abort happened
    _same(work / "retried", local)
    log = next((work / "retried").rglob("ray.log")).read_text()
    tried = [ln for ln in log.splitlines() if f" of {CLIENT_ATTEMPTS}: ConnectionAbortedError: " in ln]
    assert len(tried) == 1 and f"try 1 of {CLIENT_ATTEMPTS}" in tried[0], log
    assert _transient(tried[0]), tried[0]

    tokens.write_text(str(CLIENT_ATTEMPTS))
    out = work / "refused"
    try:
        code, err = client(out)
    finally:
        tokens.unlink()
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"replaylens: error: cannot join the Ray cluster at {cluster.client_address} "
                               "(from --ray-address): ConnectionAbortedError: "), err
    assert _transient(lines[0]), err   # the server's own reason
    assert "is a Ray Client server listening there?" not in err   # one is: the server it started failed
    assert not (out / "summary.json").exists()
    log = next(out.rglob("ray.log")).read_text()
    assert all(f"try {k} of {CLIENT_ATTEMPTS}: " in log for k in range(1, CLIENT_ATTEMPTS)), log


def _transient(line: str) -> bool:
    """Whether ``line`` names one of the ways the proxy reports a server that did not start (which of them depends
    on when the aborted process is seen: ended, waited for in vain, or gone before its command line was read)."""
    from replaylens.replay._ray import _CLIENT_TRANSIENT

    _, found, reason = line.partition("Initialization failure from server: ")
    return bool(found) and any(s in reason for s in _CLIENT_TRANSIENT)


def test_bad_runtime_env_and_unreachable_cluster_are_one_line_exit_2(work: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from replaylens.cli import cli

    monkeypatch.chdir(work)
    runner = CliRunner()
    base = [*_args(work, tmp_path / "o"), "--backend", "ray"]
    for env, says in (("{not json", "--ray-runtime-env is not valid JSON"), ("missing.json", "is neither"),
                      ("[1]", "is neither")):
        res = runner.invoke(cli, [*base, "--ray-runtime-env", env])
        assert res.exit_code == 2 and says in res.output and len(res.output.strip().splitlines()) == 1, res.output
    import socket

    with socket.socket() as s:   # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    res = runner.invoke(cli, [*base, "--ray-address", f"127.0.0.1:{port}"])
    assert res.exit_code == 2, res.output
    assert f"cannot reach the Ray cluster at 127.0.0.1:{port} (from --ray-address)" in res.output
    assert len(res.output.strip().splitlines()) == 1 and time.monotonic() - t0 < 30


def test_a_node_lost_then_the_driver_killed_resumes_to_the_same_bytes(cluster: Cluster, work: Path,
                                                                      local: Path) -> None:
    """The second node is killed mid-audit (Ray reruns its shards on the head), then the driver (kill -9); the
    same command resumes from the journal and finishes with the local path's bytes.  (Runs last: it ends the
    second node.)"""
    (cluster.control / "delay_ms").write_text("10")
    for trace in cluster.control.glob("trace-*"):
        trace.unlink()
    out = work / "killed"
    args = [*_args(work, out), "--backend", "ray"]
    p = _cli(cluster, work, args, RAY_ADDRESS=cluster.address)
    node2 = cluster.pids("node2")
    end = time.monotonic() + 90
    while not any(int(t.name[6:]) in node2 for t in cluster.control.glob("trace-*")):   # node2 runs a shard
        assert p.poll() is None and time.monotonic() < end, p.communicate()[1]
        time.sleep(0.05)
        node2 = cluster.pids("node2")
    cluster.kill("node2")
    first = _done(out)
    while _done(out) < first + 2:
        assert p.poll() is None and time.monotonic() < end, p.communicate()[1]
        time.sleep(0.05)
    p.send_signal(signal.SIGKILL)
    p.communicate()
    kept = _done(out)
    assert 0 < kept < 24
    code, err = _run(cluster, work, args, RAY_ADDRESS=cluster.address)
    assert code == 0, err
    assert err.strip() == f"resuming: {kept} of 24 shards done, {24 - kept} to replay", err
    _same(out, local)
