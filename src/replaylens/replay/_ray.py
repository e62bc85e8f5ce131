"""The Ray backend: shards as Ray tasks on the cluster Ray would join, or on a local instance started for the run.

* **Where**: ``address`` (``--ray-address``), else ``RAY_ADDRESS``, else the cluster a ``ray start`` on this
  machine left running (Ray's own ``ray.init()`` rule); joined as it is (no resources asked of it).  Only when
  none is found (or the one recorded no longer answers) is a local instance started, with ``workers`` CPUs (all
  of the machine's without it), listening on 127.0.0.1 only (:func:`_loopback`), and shut down after.  An
  address given but not answering within :data:`CONNECT_TIMEOUT_S` is a one-line
  :class:`~replaylens.errors.ConfigError` (a ``ray://`` address, Ray Client, too: its port is tried first, and a
  Ray Client that cannot connect is one line, its warning logged).
* **What**: the job is pickled once with the user's own modules by value (:mod:`._shipping`), put into the
  object store once, and loaded once per worker process, which first checks that it runs the code the driver
  fingerprinted.  ``runtime_env`` (``--ray-runtime-env``) is passed to Ray as given (pip requirements, a
  ``working_dir``, ``py_modules``, environment variables).
* **How many**: as many shards run at once as the cluster has CPUs (at most ``workers`` when given), and on the
  array path as the nodes' memory holds shards of the shard memory budget (each task asks Ray for that memory);
  a few more are queued so that no node waits for the driver.  Results come back one at a time.
* **Failures**: a node lost is Ray's to recover (each task is retried :data:`MAX_RETRIES` times on the nodes
  left); every failure that reaches the driver is one line naming it, a
  :class:`~replaylens.errors.ConfigError` (exit 2: the cluster, its configuration, the code on its nodes) or an
  :class:`~replaylens.errors.AgentError` (exit 3: the agent raised, or a worker died running it); the cluster's
  head silent for :data:`HEAD_GRACE_S` is one too (exit 2).  Finished shards are journaled by the caller as they
  arrive, so a rerun resumes.
* **Noise**: Ray's own log lines (its ``ray`` logger, the error messages it relays from the cluster) go to a log
  file (``OUT/ray.log`` for a journaled run), not to the console.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import logging
import os
import socket
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..agents import Agent
from ..errors import AgentError, ConfigError, ReplayLensError
from ._shipping import ShipError, load_job, payload

__all__ = ["CONNECT_TIMEOUT_S", "MAX_RETRIES", "Ray"]

CONNECT_TIMEOUT_S = 15.0
"""Seconds a cluster address given (``--ray-address``, ``RAY_ADDRESS``) may take to answer before the run stops."""
MAX_RETRIES = 3
"""Times Ray reruns a shard whose worker or node died (Ray's own default for tasks), elsewhere when it can."""
LOOPBACK = "127.0.0.1"
"""The only address a local instance started for a run listens on."""
STATUS_EVERY_S = 2.0
"""Seconds between two looks at the cluster (its nodes, CPUs and memory) while shards run."""
HEAD_TIMEOUT_S = 5.0
"""Seconds the cluster's GCS (its head) may take to accept a connection at one look."""
HEAD_GRACE_S = 20.0
"""Seconds the cluster's GCS may go unanswering (a head restarting with GCS fault tolerance comes back) before the
run stops -- well within the 60 s after which Ray's driver ends its own process (exit 1, its lines on the console)."""
CLIENT_ATTEMPTS = 3
"""Times a Ray Client connection (``ray://``) is tried when the head's Ray Client server reports that the server
it starts for this driver failed to start (:data:`_CLIENT_TRANSIENT`) -- each try a new server process."""
_CLIENT_TRANSIENT = ("Starting Ray client server failed", "Proxy failed to Connect to backend", "psutil.ZombieProcess",
                     "psutil.NoSuchProcess")
"""What the head's proxy says when the per-driver server it forked did not come up: it saw the process end, or
waited for it in vain, or the process was gone before the proxy read its command line.  Measured: under load the
forked child aborts (SIGABRT, gRPC's fork handlers skipped in the multithreaded proxy) in about one try in five
on a 2-core machine; the next try starts a new process."""


class _Job(Protocol):
    """What the backend needs of a :class:`~replaylens.replay._backends.ShardJob`."""

    @property
    def agent(self) -> Agent: ...
    @property
    def path(self) -> str: ...
    @property
    def shards(self) -> tuple[tuple[str, ...], ...]: ...

    def run(self, k: int, tick: Callable[[int], None] | None = None) -> list[np.ndarray]: ...


Results = Iterator[tuple[int, list[np.ndarray]]]


def _shard_task(digest: str, box: list[Any], k: int) -> list[np.ndarray]:
    """One shard on a worker (``box`` holds the job's object reference, so Ray does not fetch it per task)."""
    job: _Job = load_job(digest, box[0])
    return job.run(k)


@dataclass
class Ray:
    """Shards as Ray tasks (see the module's description).  ``workers``: the local instance's CPUs, or at most
    that many shards running at once on a cluster joined; ``log``: where Ray's log lines go; ``status``:
    receives a one-line description of the cluster and the shards while they run."""

    workers: int | None = None
    address: str | None = None
    runtime_env: Mapping[str, Any] | None = None
    log: Path | None = None
    shard_memory: int | None = None
    status: Callable[[str], None] | None = None
    name: str = "ray"
    joined: str | None = field(default=None, init=False)   # the address joined (None: a local instance)

    def run(self, job: _Job, indices: Sequence[int], tick: Callable[[int], None]) -> Results:
        try:
            import ray
        except ImportError:
            raise ConfigError("--backend ray needs the 'ray' extra: pip install 'replaylens[ray]'") from None
        log = self.log or Path(tempfile.gettempdir()) / f"replaylens-ray-{os.getpid()}.log"
        with _quiet(ray, log):
            started = not ray.is_initialized()
            if started:
                self._connect(ray, log)
            try:
                yield from self._run(ray, job, indices, log)
            finally:
                if started:
                    ray.shutdown()

    # -- joining -------------------------------------------------------------------------------------------------
    def _connect(self, ray: Any, log: Path) -> None:
        services: Any = importlib.import_module("ray._private.services")

        asked = self.address or os.environ.get("RAY_ADDRESS") or None
        source = "--ray-address" if self.address else "RAY_ADDRESS"
        if asked is None:   # what `ray.init()` would join: the cluster a `ray start` here recorded
            try:
                recorded = services.canonicalize_bootstrap_address(None)
            except Exception:
                recorded = None
            if recorded is not None and _answers(recorded, 2.0) is None:
                asked, source = recorded, "the cluster running on this machine"
        elif asked not in ("local", "auto"):   # (ray://host:port: Ray Client, its server's port)
            why = _answers(asked.removeprefix("ray://"), CONNECT_TIMEOUT_S)
            if why is not None:
                raise ConfigError(f"cannot reach the Ray cluster at {asked} (from {source}) within "
                                  f"{CONNECT_TIMEOUT_S:g} s: {why}")
        kw: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.INFO}   # into our handler (_quiet)
        if self.runtime_env:
            kw["runtime_env"] = dict(self.runtime_env)
        try:
            with warnings.catch_warnings(record=True) as said:   # (Ray Client's timeout warning, ...)
                warnings.simplefilter("always")
                try:
                    if asked is None or asked == "local":
                        with _loopback():
                            ray.init(address="local", num_cpus=self.workers, include_dashboard=False,
                                     _node_ip_address=LOOPBACK, **kw)
                        logging.getLogger("ray").info("the local Ray instance listens on %s only (its GCS: %s)",
                                                      LOOPBACK, _gcs_address(ray))
                    else:
                        _init_client(ray, asked, kw) if asked.startswith("ray://") else ray.init(address=asked, **kw)
                        self.joined = asked
                finally:
                    for w in said:   # into Ray's log, not the console
                        logging.getLogger("ray").warning("%s: %s", w.category.__name__, w.message)
        except ReplayLensError:
            raise
        except Exception as exc:
            logging.getLogger("ray").error("ray.init: %s: %s", type(exc).__name__, exc)
            where = f"join the Ray cluster at {asked} (from {source})" if asked not in (None, "local") else \
                "start a local Ray instance"
            hint = " (is a Ray Client server listening there? `ray start --head` starts one on port 10001)" \
                if str(asked).startswith("ray://") and "from server" not in str(exc) else ""
            raise ConfigError(f"cannot {where}: {_first_line(exc)}{hint} (Ray's log: {log})") from None

    # -- running ---------------------------------------------------------------------------------------------------
    def _run(self, ray: Any, job: _Job, indices: Sequence[int], log: Path) -> Results:
        data, _check = payload(job, job.agent)
        digest = hashlib.sha256(data).hexdigest()[:16]
        try:
            ref = ray.put(data)
        except Exception as exc:   # the object store full (and its disk), the cluster lost, ...
            what = f"the job ({len(data) / 2**20:.1f} MiB: the agent and the audit's prepared streams)"
            raise _as_error(ray, exc, what, log) from None
        del data
        memory = self.shard_memory if job.path == "array" else None
        view = _Cluster(ray, self.workers, memory)
        opts: dict[str, Any] = {"max_retries": MAX_RETRIES, "retry_exceptions": False, "num_cpus": 1}
        if memory:
            opts["memory"] = min(memory, view.largest_memory) if view.largest_memory else memory
        if self.runtime_env and ray.is_initialized() and not self.joined and not _runtime_env_set(ray):
            opts["runtime_env"] = dict(self.runtime_env)   # a Ray the caller started: the env per task
        remote = ray.remote(_shard_task).options(**opts)
        box = [ref]
        todo = iter(indices)
        pending: dict[Any, int] = {}
        before = len(job.shards) - len(indices)
        finished = 0

        def submit() -> None:
            nxt = next(todo, None)
            if nxt is not None:
                pending[remote.remote(digest, box, nxt)] = nxt

        try:
            while len(pending) < min(view.window(), len(indices)):
                submit()
            self._say(view.describe(len(pending), before + finished, len(job.shards)))
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=STATUS_EVERY_S)
                if view.stale():
                    why = view.head_lost()
                    if why is not None:
                        raise ConfigError(f"the Ray cluster's head stopped answering (its GCS at {view.gcs}: {why}, "
                                          f"for {HEAD_GRACE_S:g} s); finished shards are journaled: rerun when the "
                                          f"cluster is back (Ray's log: {log})")
                    if view.silent_since is None:
                        view.refresh()
                    else:   # (the GCS silent: the nodes are asked again once it answers)
                        view.at = time.monotonic()
                    if view.cpus <= 0:
                        raise ConfigError(f"no node of the Ray cluster can run a shard (no CPU left alive); "
                                          f"finished shards are journaled (Ray's log: {log})")
                for r in ready:
                    k = pending.pop(r)
                    try:
                        arrays = ray.get(r)
                    except Exception as exc:
                        raise _first_failure(ray, pending, k, exc, log, job.shards) from None
                    finished += 1
                    yield k, arrays
                while len(pending) < view.window():
                    n = len(pending)
                    submit()
                    if len(pending) == n:
                        break
                self._say(view.describe(len(pending), before + finished, len(job.shards)))
        finally:
            for r in pending:
                with contextlib.suppress(Exception):
                    ray.cancel(r, force=True)

    def _say(self, line: str) -> None:
        if self.status is not None:
            self.status(line)


class _Cluster:
    """What the driver knows of the cluster (looked at every :data:`STATUS_EVERY_S`): live nodes, their CPUs
    and memory, and from them how many shards to keep in flight."""

    def __init__(self, ray: Any, workers: int | None, memory: int | None) -> None:
        self.ray, self.workers, self.memory = ray, workers, memory
        self.nodes, self.cpus, self.largest_memory, self.by_memory = 0, 0.0, 0.0, 0
        self.at = 0.0
        self.gcs = _gcs_address(ray)   # ("?" through Ray Client: its server, not this driver, talks to the GCS)
        self.silent_since: float | None = None
        self.refresh()

    def head_lost(self) -> str | None:
        """Why the cluster's GCS (on its head) has not answered for :data:`HEAD_GRACE_S`, or None.  Looked at before
        ``ray.nodes()``, which waits on a lost GCS."""
        if self.gcs == "?" or self.ray.util.client.ray.is_connected():
            return None
        why = _answers(self.gcs, HEAD_TIMEOUT_S)
        if why is None:
            self.silent_since = None
            return None
        now = time.monotonic()
        if self.silent_since is None:
            self.silent_since = now
        return why if now - self.silent_since >= HEAD_GRACE_S else None

    def refresh(self) -> None:
        alive = [n for n in self.ray.nodes() if n.get("Alive")]
        res = [n.get("Resources", {}) for n in alive]
        self.nodes = len(alive)
        self.cpus = float(sum(r.get("CPU", 0.0) for r in res))
        mem = [float(r.get("memory", 0.0)) for r in res]
        self.largest_memory = max(mem, default=0.0)
        if self.memory:
            ask = min(self.memory, self.largest_memory) if self.largest_memory else self.memory
            self.by_memory = int(sum(m // ask for m in mem)) if ask else 0
        self.at = time.monotonic()

    def stale(self) -> bool:
        return time.monotonic() - self.at >= STATUS_EVERY_S

    def running(self) -> int:
        """Shards that can run at once: one a CPU (at most ``workers``), within the nodes' memory."""
        n = int(self.cpus)
        if self.workers:
            n = min(n, self.workers)
        if self.memory:
            n = min(n, self.by_memory)
        return max(n, 1)

    def window(self) -> int:
        """Shards in flight: those that can run, plus one queued a node (no node waits for the driver); under a
        ``workers`` cap below the CPUs, exactly the cap (a queued shard would run on a free CPU)."""
        if self.workers and self.workers < self.cpus:
            return self.running()
        return self.running() + max(self.nodes, 1)

    def describe(self, in_flight: int, done: int, total: int) -> str:
        return (f"ray: {self.nodes} node{'s' * (self.nodes != 1)}, {self.cpus:g} CPUs, {min(in_flight, self.running())}"
                f" shards running, {done}/{total} shards done")


@contextlib.contextmanager
def _loopback() -> Iterator[None]:
    """While a local instance starts: Ray keeps a loopback ``_node_ip_address`` as its node's address.  Ray replaces
    one by the machine's own address (``services.resolve_ip_for_localhost``), so that the node can be joined, unless
    it runs no clusters (``ray_constants.ENABLE_RAY_CLUSTER`` false, its own setting on macOS and Windows).  The node
    address is the one its servers (GCS, raylet, object manager, workers, agents) bind: 127.0.0.1 makes them listen
    there only, where the machine's address makes them listen on every interface."""
    constants: Any = sys.modules.get("ray._private.ray_constants")
    if constants is None or not hasattr(constants, "ENABLE_RAY_CLUSTER"):
        yield
        return
    saved = constants.ENABLE_RAY_CLUSTER
    constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        constants.ENABLE_RAY_CLUSTER = saved


def _gcs_address(ray: Any) -> str:
    try:
        return str(ray.get_runtime_context().gcs_address)
    except Exception:
        return "?"


def _answers(address: str, timeout: float) -> str | None:
    """None when something listens at ``host:port``, else why not."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=timeout):
            return None
    except ValueError:
        return f"{address!r} is not host:port"
    except OSError as exc:
        return exc.strerror or type(exc).__name__


def _runtime_env_set(ray: Any) -> bool:
    try:
        return bool(ray.get_runtime_context().runtime_env)
    except Exception:
        return False


def _init_client(ray: Any, address: str, kw: Mapping[str, Any]) -> None:
    """``ray.init`` through Ray Client, tried :data:`CLIENT_ATTEMPTS` times while the head's Ray Client server
    says the server it started for this driver did not come up (each failure logged to Ray's log)."""
    for attempt in range(1, CLIENT_ATTEMPTS + 1):
        try:
            ray.init(address=address, **kw)
            return
        except ConnectionAbortedError as exc:
            if attempt == CLIENT_ATTEMPTS or not any(s in str(exc) for s in _CLIENT_TRANSIENT):
                raise
            logging.getLogger("ray").warning("ray.init through %s, try %d of %d: %s; trying again", address,
                                              attempt, CLIENT_ATTEMPTS, _first_line(exc))
            with contextlib.suppress(Exception):
                ray.shutdown()


def _first_line(exc: BaseException) -> str:
    """``Type: first line`` of the error; where the first line only introduces a traceback relayed from the
    cluster (it ends with a colon), the traceback's last line -- the error the cluster raised -- is added."""
    lines = [x.strip() for x in str(exc).strip().splitlines() if x.strip()]
    if not lines:
        return type(exc).__name__
    head = f"{type(exc).__name__}: {lines[0]}"
    return f"{head} {lines[-1]}" if lines[0].endswith(":") and len(lines) > 1 else head


def _first_failure(ray: Any, pending: dict[Any, int], k: int, exc: BaseException, log: Path,
                   shards: Sequence[Sequence[str]]) -> BaseException:
    """The error a serial run would have raised first: shards before ``k`` still in flight are waited for, and the
    lowest failing one's error is turned into one line (:func:`_as_error`)."""
    failures = {k: exc}
    for r, j in sorted(pending.items(), key=lambda t: t[1]):
        if j < k:
            try:
                ray.get(r)
            except Exception as earlier:
                failures[j] = earlier
                break
    j = min(failures)
    names = list(shards[j][:3]) + (["..."] if len(shards[j]) > 3 else [])
    return _as_error(ray, failures[j], f"shard {j} (stream{'s' * (len(shards[j]) != 1)} {', '.join(names)})", log)


def _as_error(ray: Any, exc: BaseException, k: str, log: Path) -> BaseException:
    """One Ray failure of ``k`` (the shard and its streams) as ReplayLens's one-line error (the agent's own error
    as a serial run raises it)."""
    ex = ray.exceptions
    logging.getLogger("ray").error("%s: %s", k, exc)   # Ray's whole message, in the log the one line names
    tail = f"finished shards are journaled; Ray's log: {log}"
    if isinstance(exc, ex.RayTaskError):
        cause = exc.cause
        if isinstance(cause, ReplayLensError):
            return cause
        if isinstance(cause, ShipError):
            return ConfigError(f"{cause} ({tail})")
        if isinstance(cause, ex.RayError) and not isinstance(cause, ex.RayTaskError):   # Ray's, on the worker
            return _as_error(ray, cause, k, log)                                     # (its result not stored)
        return ConfigError(f"{k} failed on a Ray worker: {_first_line(cause or exc)} ({tail})")
    if isinstance(exc, ex.WorkerCrashedError):
        return AgentError(f"the Ray worker running {k} died (after {MAX_RETRIES} retries): the agent may have "
                          f"crashed the process or exhausted its memory ({tail})")
    if isinstance(exc, ex.OutOfMemoryError):
        return AgentError(f"Ray stopped the worker running {k}: its node ran out of memory (after "
                          f"{MAX_RETRIES} retries); lower --max-shard-memory or give the nodes more memory ({tail})")
    if isinstance(exc, ex.ObjectStoreFullError):
        return ConfigError(f"Ray's object store is full: it cannot hold {k}; give the nodes a larger object store "
                           f"(ray start --object-store-memory) or lower --max-shard-memory ({tail})")
    if isinstance(exc, ex.OutOfDiskError):   # the store full and its spill/fallback disk over Ray's threshold
        return ConfigError(f"Ray's object store is full and its node's disk too (over Ray's "
                           f"local_fs_capacity_threshold): it cannot hold {k}; free disk space on the nodes or give "
                           f"them a larger object store (ray start --object-store-memory) ({tail})")
    if isinstance(exc, (ex.NodeDiedError, ex.LocalRayletDiedError)):
        return ConfigError(f"a node of the Ray cluster was lost running {k} and it could not be "
                           f"rerun elsewhere ({tail})")
    if isinstance(exc, ex.ObjectLostError):
        return ConfigError(f"the result of {k} was lost with its Ray node and could not be recomputed ({tail})")
    if isinstance(exc, ex.RuntimeEnvSetupError):
        return ConfigError(f"Ray could not set up --ray-runtime-env on a worker: {_first_line(exc)} ({tail})")
    if isinstance(exc, ex.TaskUnschedulableError):
        return ConfigError(f"no node of the Ray cluster can run {k}: {_first_line(exc)} ({tail})")
    if isinstance(exc, ex.RayError):
        return ConfigError(f"Ray failed running {k}: {_first_line(exc)} ({tail})")
    return exc


_APART = ("ray.util.client.logsclient",)
"""Ray's loggers that pass no line up to the ``ray`` logger (``propagate = False``) but may not exist yet when a run
starts (Ray Client's, made when it connects)."""


class _LogLines:
    """Ray's console writer (:func:`ray._private.worker.print_to_stdstream`) into the log file instead."""

    def __init__(self, fh: Any) -> None:
        self.fh = fh

    def __call__(self, data: Mapping[str, Any], ignore_prefix: bool = False) -> None:
        pid = data.get("pid", "")
        for line in data.get("lines", ()):
            self.fh.write(f"({pid}) {line}\n")
        self.fh.flush()


@contextlib.contextmanager
def _quiet(ray: Any, log: Path) -> Iterator[None]:
    """Ray's log lines into ``log`` for the block: its ``ray`` logger's handlers (and those of its loggers that do
    not pass their lines up to it: Ray Client's, which relays the log lines of the client's server) and the error
    messages its driver relays from the cluster (all on the console otherwise)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    logger = logging.getLogger("ray")
    apart = {logging.getLogger(n) for n in _APART} | {
        lg for n, lg in list(logging.Logger.manager.loggerDict.items())
        if n.startswith("ray.") and isinstance(lg, logging.Logger) and not lg.propagate}
    saved = [(lg, list(lg.handlers), lg.level, lg.propagate and lg is logger) for lg in (logger, *apart)]
    worker_mod = sys.modules.get("ray._private.worker")
    printer = getattr(worker_mod, "print_to_stdstream", None)
    with log.open("a", encoding="utf-8") as fh:
        handler = logging.StreamHandler(fh)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger.setLevel(logging.INFO)
        for lg in (logger, *apart):   # (Ray's own apart loggers stay apart after: propagate restored False)
            lg.handlers = [handler]
            lg.propagate = False
        if worker_mod is not None and printer is not None:
            setattr(worker_mod, "print_to_stdstream", _LogLines(fh))  # noqa: B010 (a module's function, swapped)
        try:
            yield
        finally:
            for lg, handlers, level, propagate in saved:
                lg.handlers, lg.propagate = handlers, propagate
                lg.setLevel(level)
            if worker_mod is not None and printer is not None:
                setattr(worker_mod, "print_to_stdstream", printer)  # noqa: B010
