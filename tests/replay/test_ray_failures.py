"""The Ray backend's failures that the README maps to one line, each brought about for real (no Ray mocked): the
object store full, a node lost beyond Ray's retries (and the last node with CPUs lost), and a ``ray://`` (Ray
Client) address that answers with no Ray Client server or not at all.  Each failing run is checked for its one
line, its exit status, no traceback, no result written (no decisions.parquet, no summary.json) and the shards
journaled before it; where the run stopped after shards ran, the same command then resumes to the local path's
bytes.  (A ``ray://`` run through a real Ray Client server, and its worker crash, is in ``test_ray_cluster.py``,
whose cluster has one.)

* **Object store full.**  Ray (2.60 here) never reports a full object store while a node's disk has room: an
  object the store cannot hold is written to disk instead ("fallback allocation"), so a job or a result larger
  than a tiny ``object_store_memory`` simply succeeds.  The store is full to Ray when its disk is too, which
  Ray judges by ``local_fs_capacity_threshold`` (the used share of the disk above which it writes no more
  objects there).  The test therefore starts the local instance with an 80 MiB store
  (``RAY_DEFAULT_OBJECT_STORE_MAX_MEMORY_BYTES``) whose disk counts as full (``RAY_local_fs_capacity_threshold=0``)
  and an agent that carries 90 MiB (a numpy array it closes over, which travels inside the job): Ray's
  ``OutOfDiskError`` on putting the job.  ``ObjectStoreFullError`` itself (the store full and writing to disk
  failing for another reason than the threshold) cannot be brought about without filling a real disk; a shard
  *result* larger than the store neither: a shard's result is its decisions (a byte or two each), so it takes
  tens of millions of decisions in one shard, minutes of replay on this machine.  Both map through the same
  branch of ``_as_error`` as the job's ``OutOfDiskError`` (a result's arrives wrapped in the worker's
  ``RayTaskError``, which is unwrapped).
* **A node lost beyond Ray's retries.**  Ray reruns a shard whose node died up to ``MAX_RETRIES`` (3) times, on
  other nodes.  The cluster here is a head with no CPUs (no shard runs on it) and two nodes of two CPUs; the
  agent holds shard 5 and says in which node's session it runs; the test kills that node, and starts another
  so that the cluster always has CPUs, four times (``--workers 1``: one shard in flight, so no other shard is
  lost with the node); 40-90 s, a node taking 6-8 s to start on two shared cores.  Then the cluster's last
  nodes with CPUs are killed under shard 7: the driver stops within its 2 s look at the cluster (Ray itself
  would wait for a node forever).
* **A local instance** (no cluster, no address) listens on 127.0.0.1 only; the test runs here because it needs
  a local instance of its own (its own RAY_TMPDIR, as the failures above).
* **``ray://``.**  A port nothing listens on is refused at once (exit 2 within seconds, no 15 s wait); a port
  where something listens that is not a Ray Client server makes Ray Client wait its own connection timeout
  (5 + 10 + 15 s by default; ``RAY_CLIENT_*_CONNECTION_TIMEOUT_S`` shorten it to 3 s here) and warn, the
  warning going to ray.log, not the console.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _ray_cluster import Cluster, listening, make_root, marked, sweep
from click.testing import CliRunner
from test_ray_cluster import _args, _cli, _done, _run, _same, inputs, serial

ray = pytest.importorskip("ray", reason="the ray extra is not installed")

BALLAST_AGENT = '''
import numpy as np
from helper import choose

from replaylens import from_callables

BALLAST = np.ones(90 * 2**20, np.uint8)   # travels inside the job (its function closes over it): 90 MiB


def _init():
    return ()


def _update(state, task, key, outcome):
    return (*state, (key, 0.0 if outcome != outcome else float(outcome)))


def make():
    return from_callables(_init, _update, lambda state, task, menu: choose(state, task, menu) if BALLAST.size
                          else menu[0], name="ballast")
'''


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return inputs(tmp_path_factory.mktemp("rayfail"))


@pytest.fixture(scope="module")
def local(work: Path) -> Path:
    return serial(work)


def _no_result(out: Path) -> None:
    assert not (out / "decisions.parquet").exists() and not (out / "summary.json").exists()


def _one_line(err: str, says: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], err
    assert "Traceback" not in err


def _local_env(root: Path, **env: str) -> dict[str, str]:
    """A driver's environment in which ReplayLens starts a local instance of its own: no RAY_ADDRESS, and a Ray
    temporary folder of its own (no cluster a `ray start` recorded)."""
    out = {**os.environ, "RAY_TMPDIR": str(root), "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled",
           "REPLAYLENS_TEST_CONTROL": str(root / "control"), **env}
    out.pop("RAY_ADDRESS", None)
    return out


@pytest.fixture
def root() -> Iterator[Path]:
    """A local instance's RAY_TMPDIR (with the agent's control folder); its processes ended after the test."""
    d = make_root()
    (d / "control").mkdir()
    try:
        yield d
    finally:
        sweep(d)
        subprocess.run(["rm", "-rf", str(d)], check=False)


def _local_run(work: Path, root: Path, args: list[str], **env: str) -> tuple[int, str]:
    p = subprocess.run([sys.executable, "-m", "replaylens", *args], cwd=work, env=_local_env(root, **env),
                       capture_output=True, text=True, timeout=180)
    return p.returncode, p.stderr


@pytest.mark.slow
def test_a_job_larger_than_a_full_object_store_is_one_line_exit_2_and_a_rerun_finishes(work: Path,
                                                                                       root: Path) -> None:
    (work / "agentdir" / "ballast.py").write_text(BALLAST_AGENT)
    out = work / "store"
    args = [*_args(work, out, "agentdir/ballast.py:make"), "--backend", "ray", "--workers", "1"]
    code, err = _local_run(work, root, args, RAY_DEFAULT_OBJECT_STORE_MAX_MEMORY_BYTES=str(80 * 2**20),
                           RAY_local_fs_capacity_threshold="0")
    assert code == 2, err
    _one_line(err, "Ray's object store is full and its node's disk too (over Ray's local_fs_capacity_threshold): "
                   "it cannot hold the job (9")
    assert _done(out) == 0
    _no_result(out)
    code, err = _local_run(work, root, args)   # an object store of Ray's default size
    assert code == 0, err
    assert _done(out) == 24 and (out / "decisions.parquet").exists()


@pytest.fixture(scope="module")
def lossy() -> Iterator[Cluster]:
    """A head that runs no shard (no CPUs, as on many production clusters) and two nodes of two CPUs."""
    root = make_root()
    c = Cluster(root, 2, head_cpus=0)
    try:
        try:
            c.start()
            c.add_node("node3")
        except Exception as exc:
            from conftest import require

            require("ray", f"a Ray cluster cannot start here: {exc}")
        yield c
    finally:
        c.stop()
        subprocess.run(["rm", "-rf", str(root)], check=False)


def _where(ctl: Path) -> list[tuple[Path, int]]:
    """The hold marks (``run-SID``) written so far, with the session id of the node each names."""
    return [(m, int(m.name[4:])) for m in ctl.glob("run-*") if m.name[4:].isdigit()]


def _held(cluster: Cluster, work: Path, args: list[str], stream: str) -> tuple[Path, subprocess.Popen[str]]:
    """Start the audit ``args`` with stream ``stream``'s shard held, and return (the hold file, the driver) once
    that shard runs (its hold mark written, :func:`_where`)."""
    hold = cluster.control / f"hold-{stream}"
    hold.write_text("")
    p = _cli(cluster, work, args)
    end = time.monotonic() + 120
    while not _where(cluster.control):
        if p.poll() is not None or time.monotonic() >= end:
            hold.unlink()
            p.kill()
            raise AssertionError(p.communicate()[1])
        time.sleep(0.05)
    return hold, p


def _node(cluster: Cluster, sid: int) -> str:
    return next(name for name, s in cluster.groups.items() if s == sid)


@pytest.mark.slow
def test_a_node_lost_beyond_rays_retries_is_one_line_exit_2_and_resumes(lossy: Cluster, work: Path,
                                                                        local: Path) -> None:
    """Shard 5's node is killed every time Ray runs it: once more than Ray's retries."""
    from replaylens.replay._ray import MAX_RETRIES

    hold = lossy.control / "hold-s05"
    hold.write_text("")
    out = work / "lost"
    args = [*_args(work, out), "--backend", "ray", "--ray-address", lossy.address, "--workers", "1"]
    p = _cli(lossy, work, args)
    killed: list[str] = []
    end = time.monotonic() + 240
    try:
        while p.poll() is None:
            assert time.monotonic() < end, "the audit did not stop"
            for mark, sid in _where(lossy.control):
                mark.unlink()
                killed.append(_node(lossy, sid))
                lossy.kill(killed[-1])
                if len(killed) <= MAX_RETRIES:   # a node for the next try (the driver sees CPUs all along)
                    lossy.add_node(f"node{len(killed) + 3}")
            time.sleep(0.05)
    finally:
        hold.unlink()
        if p.poll() is None:
            p.kill()
    err = p.communicate()[1]
    assert p.returncode == 2, err
    assert len(killed) == MAX_RETRIES + 1, killed
    _one_line(err, "a node of the Ray cluster was lost running shard 5 (stream s05) and it could not be rerun "
                   "elsewhere (finished shards are journaled; Ray's log: ")
    assert _done(out) == 5   # shards 0-4, one at a time before it
    _no_result(out)
    code, err = _run(lossy, work, args)
    assert code == 0, err
    assert err.strip() == "resuming: 5 of 24 shards done, 19 to replay", err
    _same(out, local)


@pytest.mark.slow
def test_the_last_nodes_with_cpus_lost_is_one_line_exit_2_and_resumes(lossy: Cluster, work: Path,
                                                                       local: Path) -> None:
    """Every node with CPUs is killed under shard 7 (the head has none): Ray would wait for a node; the driver
    stops.  A node started again, the same command resumes."""
    out = work / "gone"
    args = [*_args(work, out), "--backend", "ray", "--ray-address", lossy.address, "--workers", "1"]
    hold, p = _held(lossy, work, args, "s07")
    try:
        for name in [n for n in lossy.groups if n != "head"]:
            lossy.kill(name)
        _, err = p.communicate(timeout=60)
    finally:
        hold.unlink()
        for mark, _sid in _where(lossy.control):
            mark.unlink()
        if p.poll() is None:
            p.kill()
    assert p.returncode == 2, err
    _one_line(err, "no node of the Ray cluster can run a shard (no CPU left alive); finished shards are journaled")
    assert _done(out) == 7
    _no_result(out)
    lossy.add_node("back")
    code, err = _run(lossy, work, args)
    assert code == 0, err
    assert err.strip() == "resuming: 7 of 24 shards done, 17 to replay", err
    _same(out, local)


@pytest.mark.slow
def test_a_local_instance_listens_on_loopback_only(work: Path, local: Path, root: Path) -> None:
    """No cluster and no address: the instance ReplayLens starts listens on 127.0.0.1 only, its node address
    127.0.0.1 (Ray's own default: every interface, the machine's address as the node's).  Shard 2 holds while the
    test looks at the node's address (from the worker), the GCS address, and the listening sockets of every
    process of the instance (its RAY_TMPDIR in their environment: driver, GCS, raylet, agents, workers)."""
    ctl = root / "control"
    (ctl / "hold-s02").write_text("")
    out = work / "loopback"
    p = subprocess.Popen([sys.executable, "-m", "replaylens", *_args(work, out), "--backend", "ray", "--workers",
                          "1"], cwd=work, env=_local_env(root), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        end = time.monotonic() + 120
        while not _where(ctl):
            assert p.poll() is None and time.monotonic() < end, p.communicate()[1]
            time.sleep(0.05)
        node_ip, gcs = _where(ctl)[0][0].read_text().split()
        addrs = listening(marked(root))
    finally:
        (ctl / "release").write_text("")
    try:
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    _same(out, local)
    assert node_ip == "127.0.0.1" and gcs.startswith("127.0.0.1:"), (node_ip, gcs)
    assert gcs.rsplit(":", 1)[1] in {a.rsplit(":", 1)[1] for a in addrs}, (gcs, addrs)   # the GCS looked at too
    assert all(a.startswith(("127.", "::ffff:127.", "::1:")) for a in addrs), addrs
    assert "the local Ray instance listens on 127.0.0.1 only" in next(out.rglob("ray.log")).read_text()


def test_a_ray_client_address_nothing_listens_on_is_one_line_exit_2_at_once(work: Path, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from replaylens.cli import cli

    monkeypatch.chdir(work)
    with socket.socket() as s:   # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    res = CliRunner().invoke(cli, [*_args(work, tmp_path / "o"), "--backend", "ray",
                                   "--ray-address", f"ray://127.0.0.1:{port}"])
    assert res.exit_code == 2, res.output
    _one_line(res.output, f"cannot reach the Ray cluster at ray://127.0.0.1:{port} (from --ray-address) within "
                          "15 s: Connection refused")
    assert time.monotonic() - t0 < 10
    assert _done(tmp_path / "o") == 0
    _no_result(tmp_path / "o")


def test_a_ray_client_address_without_a_ray_client_server_is_one_line_exit_2(work: Path, root: Path) -> None:
    """Something listens there (a socket that never speaks gRPC): Ray Client waits out its connection timeout
    (shortened to 3 s by its own settings) and warns; the warning goes to ray.log, the console has one line."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        port = s.getsockname()[1]
        out = root / "o"
        t0 = time.monotonic()
        code, err = _local_run(work, root, [*_args(work, out), "--backend", "ray", "--ray-address",
                                            f"ray://127.0.0.1:{port}"],
                               RAY_CLIENT_INITIAL_CONNECTION_TIMEOUT_S="1", RAY_CLIENT_MAX_CONNECTION_TIMEOUT_S="1")
    assert code == 2, err
    _one_line(err, f"cannot join the Ray cluster at ray://127.0.0.1:{port} (from --ray-address): ConnectionError: "
                   "ray client connection timeout (is a Ray Client server listening there?")
    assert time.monotonic() - t0 < 60
    _no_result(out)
    # the log the line names is there to read (a failed run keeps its directory while it holds Ray's log)
    log = Path(err.strip().rsplit("Ray's log: ", 1)[1].rstrip(")"))
    assert log.is_file() and "ray client connection timeout" in log.read_text().lower()


@pytest.mark.slow
def test_the_clusters_head_lost_is_one_line_exit_2_within_seconds_and_resumes(work: Path, local: Path) -> None:
    """The head (its GCS) killed under shard 5: Ray's driver would wait 60 s for the GCS and then end the process
    (exit 1, its own lines on the console); the driver stops once the GCS has not answered for ``HEAD_GRACE_S``
    (20 s: a head restarting with GCS fault tolerance comes back): one line, exit 2, the five shards before
    journaled, and the same command resumes (here on the local path: the journal does not depend on the backend)
    to the local path's bytes.  (Ray's C++ core may print a line of its own as the head goes: the only lines
    allowed beside ours.)"""
    from replaylens.replay._ray import HEAD_GRACE_S

    root = make_root()
    c = Cluster(root, 2, head_cpus=0)
    try:
        try:
            c.start()
        except Exception as exc:
            from conftest import require

            require("ray", f"a Ray cluster cannot start here: {exc}")
        out = work / "headless"
        args = [*_args(work, out), "--backend", "ray", "--ray-address", c.address, "--workers", "1"]
        hold, p = _held(c, work, args, "s05")
        try:
            c.kill("head")
            t0 = time.monotonic()
            _, err = p.communicate(timeout=60)
            took = time.monotonic() - t0
        finally:
            hold.unlink()
            if p.poll() is None:
                p.kill()
        c.stop()
        journaled, written = _done(out), (out / "summary.json").exists() or (out / "decisions.parquet").exists()
        resumed = _run(c, work, [*_args(work, out), "--backend", "serial"])
    finally:
        c.stop()
        subprocess.run(["rm", "-rf", str(root)], check=False)
    assert p.returncode == 2, err
    lines = err.strip().splitlines()
    ours = [ln for ln in lines if ln.startswith("replaylens:")]
    assert ours == lines[-1:] and "Traceback" not in err, err
    assert all(ln.startswith("[") and ".cc:" in ln for ln in lines[:-1]), err   # Ray's native lines only
    assert "the Ray cluster's head stopped answering (its GCS at " + c.address in ours[0], err
    assert "finished shards are journaled: rerun when the cluster is back" in ours[0]
    assert HEAD_GRACE_S <= took < HEAD_GRACE_S + 25, took   # (Ray's own wait: 60 s)
    assert journaled == 5 and not written
    code, err = resumed
    assert code == 0, err
    assert err.strip() == "resuming: 5 of 24 shards done, 19 to replay", err
    _same(out, local)
