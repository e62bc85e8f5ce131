"""A real two-node Ray cluster on this machine, bound to 127.0.0.1 only, for the Ray backend's tests (issue 51).

A head (``ray start --head --block``) and a second raylet (``ray start --address ... --block``), each with
``cpus`` CPUs, a small object store, ports of their own and one temporary directory (``RAY_TMPDIR``), each in a
process group of its own so that a node can be killed whole and everything is torn down by process group, never
by ``ray stop`` (which would stop every Ray on the machine).  ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` keeps
127.0.0.1 as the nodes' address (Ray replaces a loopback address by the machine's own otherwise); the second
raylet is started through Ray's own CLI with that setting's multi-node refusal lifted for it alone.
``RAY_AUTH_MODE=disabled`` for nodes and drivers alike: a token file left in ``~/.ray`` by anything else would
turn token authentication on for the nodes and not for the drivers.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

_SECOND_NODE = (
    "import sys, types\n"
    "import ray._private.ray_constants as rc\n"
    "from ray.scripts import scripts\n"
    "class _C(types.ModuleType):\n"
    "    def __getattr__(self, name):\n"
    "        return getattr(rc, name)\n"
    "c = _C('ray_constants'); c.ENABLE_RAY_CLUSTER = True\n"
    "scripts.ray_constants = c\n"
    "sys.argv[0] = 'ray'\n"
    "sys.exit(scripts.main())\n"
)


def _free_block(n: int, rng: np.random.Generator) -> list[int]:
    """``n`` consecutive TCP ports free on 127.0.0.1 (bind-tested)."""
    for _ in range(200):
        base = int(rng.integers(20000, 60000 - n))
        socks = []
        try:
            for p in range(base, base + n):
                s = socket.socket()
                socks.append(s)   # (closed below even when its bind fails)
                s.bind(("127.0.0.1", p))
            return list(range(base, base + n))
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no block of free ports")


@dataclass
class Cluster:
    """A running two-node cluster: ``address`` (host:port), ``env`` for drivers, ``control`` (a folder the
    nodes' workers read through ``$REPLAYLENS_TEST_CONTROL``)."""

    root: Path
    cpus: int
    head_cpus: int | None = None   # the head's CPUs (``cpus`` without it; 0: a head that runs no task)
    node_env: dict[str, str] = field(default_factory=dict)   # Ray settings for the nodes alone (RAY_...)
    address: str = ""
    env: dict[str, str] = field(default_factory=dict)
    control: Path = Path()
    groups: dict[str, int] = field(default_factory=dict)   # node name -> its session (and process group) id
    procs: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)   # the `ray start` of each group
    logs: dict[str, Path] = field(default_factory=dict)
    _ports: list[int] = field(default_factory=list)

    def start(self, nodes: int = 2) -> Cluster:
        """The head, then (``nodes`` = 2) the second raylet."""
        rng = np.random.default_rng(os.getpid())
        self._ports = _free_block(2 * 30 + 12, rng)
        head = self._ports[:36]
        self.address = f"127.0.0.1:{head[0]}"
        self.control = self.root / "control"
        self.control.mkdir()
        self.env = {**os.environ, "RAY_TMPDIR": str(self.root), "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
                    "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled",   # (a ~/.ray/auth_token would
                    "REPLAYLENS_TEST_CONTROL": str(self.control)}                 # turn it on for the nodes only)
        self.env.pop("RAY_ADDRESS", None)
        ray = [sys.executable, "-c", "import sys; from ray.scripts.scripts import main; sys.argv[0] = 'ray'; "
               "sys.exit(main())", "start"]
        self._launch("head", [*ray, "--head", "--port", str(head[0]), "--ray-client-server-port", str(head[1]),
                              "--include-dashboard", "false", "--dashboard-port", str(head[2]),
                              *_node_ports(head[3:]), *self._common(self.head_cpus)])
        self._wait("head")   # (a raylet joining a head that is still starting is refused its token)
        if nodes > 1:
            self.add_node()
        return self

    @property
    def client_address(self) -> str:
        """The head's Ray Client server (``ray://127.0.0.1:PORT``)."""
        return f"ray://127.0.0.1:{self._ports[1]}"

    def add_node(self, name: str = "node2") -> None:
        """Another raylet joining the head (``node2`` on the ports set apart at start, any other name on a block
        of its own)."""
        ports = self._ports[36:] if name == "node2" else _free_block(36, np.random.default_rng())
        self._launch(name, [sys.executable, "-c", _SECOND_NODE, "start", "--address", self.address,
                            *_node_ports(ports), *self._common()])
        self._wait(name)

    def _common(self, cpus: int | None = None) -> list[str]:
        return ["--node-ip-address", "127.0.0.1", "--num-cpus", str(self.cpus if cpus is None else cpus),
                "--object-store-memory", str(80 * 2**20), "--disable-usage-stats", "--block"]

    def _launch(self, name: str, argv: list[str]) -> None:
        log = self.root / f"{name}.out"
        with log.open("wb") as fh:
            proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, env={**self.env, **self.node_env},
                                    start_new_session=True, cwd=self.root)
        self.groups[name] = proc.pid
        self.procs[proc.pid] = proc
        self.logs[name] = log

    def _wait(self, name: str, timeout: float = 60.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            text = self.logs[name].read_text(errors="replace")
            if "Ray runtime started" in text:
                return
            if "Error" in text and "PANIC" in text:
                break
            time.sleep(0.2)
        raise RuntimeError(f"Ray node {name} did not start:\n{self.logs[name].read_text(errors='replace')[-3000:]}")

    def kill(self, name: str) -> None:
        """SIGKILL the node's whole session: its raylet and agents (its process group) and its workers (the raylet
        gives each a process group of its own, in the same session)."""
        sid = self.groups.pop(name, None)
        if sid is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(sid, signal.SIGKILL)
        for pid in _session(sid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.procs[sid].wait()

    def pids(self, name: str) -> set[int]:
        """The processes of a node now (its session: raylet, agents, workers)."""
        sid = self.groups.get(name)
        return _session(sid) if sid is not None else set()

    def stop(self) -> None:
        """Both nodes' process groups (TERM, then KILL), then any process still naming the cluster's folder."""
        for pgid in self.groups.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGTERM)
        time.sleep(1.0)
        for name in list(self.groups):
            self.kill(name)
        sweep(self.root)


def marked(root: Path) -> set[int]:
    """The processes (but this one) whose command line or environment names ``root`` (a cluster's or a local
    instance's ``RAY_TMPDIR``: every process of it, the drivers that name it too)."""
    mark = str(root).encode()
    out: set[int] = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid():
            try:
                if mark in (d / "cmdline").read_bytes() or mark in (d / "environ").read_bytes():
                    out.add(int(d.name))
            except (OSError, ProcessLookupError):
                continue
    return out


def sweep(root: Path) -> None:
    """SIGKILL every process :func:`marked` finds for ``root``."""
    for pid in marked(root):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _session(sid: int) -> set[int]:
    """The processes of session ``sid`` now."""
    out: set[int] = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if os.getsid(int(d.name)) == sid:
                    out.add(int(d.name))
    return out


def _node_ports(p: list[int]) -> list[str]:
    return ["--node-manager-port", str(p[0]), "--object-manager-port", str(p[1]), "--runtime-env-agent-port",
            str(p[2]), "--dashboard-agent-grpc-port", str(p[3]), "--dashboard-agent-listen-port", str(p[4]),
            "--metrics-export-port", str(p[5]), "--min-worker-port", str(p[6]), "--max-worker-port", str(p[6] + 24)]


def listening(pids: set[int]) -> list[str]:
    """The addresses (host:port) the processes ``pids`` listen on (TCP, v4 and v6)."""
    inodes: set[str] = set()
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                try:
                    target = os.readlink(fd)
                except OSError:
                    continue
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    out = []
    for table, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A" and f[9] in inodes:   # LISTEN
                host, port = f[1].split(":")
                raw = bytes.fromhex(host)
                if v6:
                    words = [raw[i:i + 4][::-1] for i in range(0, 16, 4)]
                    ip = socket.inet_ntop(socket.AF_INET6, b"".join(words))
                else:
                    ip = socket.inet_ntop(socket.AF_INET, raw[::-1])
                out.append(f"{ip}:{int(port, 16)}")
    return out


def make_root() -> Path:
    """A short folder for the cluster (Ray's socket paths must stay under 108 characters)."""
    return Path(tempfile.mkdtemp(prefix="rl", dir="/tmp"))
