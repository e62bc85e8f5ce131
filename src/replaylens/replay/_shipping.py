"""An agent's code on Ray workers: the user's own modules shipped by value, and a check on each worker that it
runs exactly the code the driver fingerprinted (the journal's resume rule, :mod:`._fingerprint`).

The user's own modules are those whose files the code fingerprint counts as the user's (a ``file.py`` target,
which is loaded under a generated module name no worker can import, a ``module:factory`` from the working
directory, and every ``.py`` module loaded from their folders): they travel inside the job, pickled by value, so
a worker needs no copy of them.  Everything else (ReplayLens itself, installed packages, modules in subfolders)
is imported on the worker; before a worker runs its first shard of a job it fingerprints that code itself, and a
difference from the driver's fingerprint stops the run with one line naming the files.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import socket
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from .._imports import loaded_sha256
from ..agents import Agent
from ..errors import ConfigError
from ._fingerprint import _objects, _package_version, _source, agent_fingerprint, engine_fingerprint

__all__ = ["CodeCheck", "ShipError", "code_check", "load_job", "user_modules"]

_PKG = Path(__file__).resolve().parent.parent


class ShipError(Exception):
    """Raised on a worker: the job cannot be loaded there, or the worker's code differs from the driver's."""


@dataclass(frozen=True)
class CodeCheck:
    """What a worker must find: ReplayLens's engine fingerprint, and the fingerprint entries of the files the
    worker imports itself (``by_reference``); ``by_value`` names the files shipped inside the job."""

    engine: str
    by_reference: dict[str, str]
    by_value: tuple[str, ...]


def user_modules(agent: Agent) -> list[ModuleType]:
    """The loaded modules whose files are the user's own by :func:`agent_fingerprint`'s rule (modules in the
    folders of the agent's source files that belong to no installed distribution)."""
    files: set[Path] = set()
    for obj in _objects(agent):
        p = _source(obj)
        if p is not None and p.exists() and _PKG not in p.parents:
            files.add(p)
    folders = {p.parent for p in files if _package_version(p) is None}
    out: list[ModuleType] = []
    for name, mod in list(sys.modules.items()):
        f = getattr(mod, "__file__", None) if mod is not None else None
        if name != "__main__" and f and f.endswith(".py") and Path(f).resolve().parent in folders:
            out.append(mod)
    return sorted(out, key=lambda m: m.__name__)


def code_check(agent: Agent, shipped: list[ModuleType]) -> CodeCheck:
    """The driver's side: its fingerprint split into the files shipped by value and the rest.  A shipped file
    changed on disk since it was loaded is refused (the job would carry other code than the fingerprint names)."""
    code = agent_fingerprint(agent)
    names: set[str] = set()
    for mod in shipped:
        path = Path(str(mod.__file__)).resolve()
        loaded = loaded_sha256(path)
        if loaded is not None and path.exists() and hashlib.sha256(path.read_bytes()).hexdigest() != loaded:
            raise ConfigError(f"the agent's file {path.name} changed on disk after it was loaded; rerun the audit "
                              "so that the code shipped to the Ray workers is the code fingerprinted")
        names.add(path.name)
    return CodeCheck(engine_fingerprint(), {k: v for k, v in code.items() if k not in names}, tuple(sorted(names)))


@contextlib.contextmanager
def by_value(modules: list[ModuleType]) -> Iterator[None]:
    """Ray's cloudpickle pickles ``modules``' functions and classes by value inside the block (registrations
    that were there before are kept)."""
    cloudpickle = _cloudpickle()
    added = []
    for mod in modules:
        if mod.__name__ not in cloudpickle.list_registry_pickle_by_value():
            cloudpickle.register_pickle_by_value(mod)
            added.append(mod)
    try:
        yield
    finally:
        for mod in added:
            cloudpickle.unregister_pickle_by_value(mod)


def _cloudpickle() -> Any:
    """Ray's own copy of cloudpickle (the one its object store and tasks use)."""
    return importlib.import_module("ray.cloudpickle")


def payload(job: Any, agent: Agent) -> tuple[bytes, CodeCheck]:
    """The job pickled with the user's modules by value, and the code check the workers apply."""
    cloudpickle = _cloudpickle()
    mods = user_modules(agent)
    check = code_check(agent, mods)
    with by_value(mods):
        try:
            data = cloudpickle.dumps((check, job), protocol=5)
        except Exception as exc:   # an agent holding a lock, a socket, an open file, ...
            raise ConfigError(f"the agent cannot be sent to Ray workers: {type(exc).__name__}: "
                              f"{str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")) from None
    return data, check


_JOBS: dict[str, Any] = {}   # per worker process: the job of the digest last run (loaded and checked once)


def load_job(digest: str, ref: Any) -> Any:
    """The worker's side: the job of ``digest`` (fetched from the object store and checked on first use)."""
    job = _JOBS.get(digest)
    if job is not None:
        return job
    ray: Any = importlib.import_module("ray")
    where = f"on the Ray worker at {socket.gethostname()} ({ray.util.get_node_ip_address()})"
    try:
        check, job = _cloudpickle().loads(ray.get(ref))
    except Exception as exc:
        raise ShipError(f"the job cannot be loaded {where}: {type(exc).__name__}: {exc} (a module the agent "
                        "imports from outside its own folder must be installed there, or shipped with "
                        "--ray-runtime-env)") from None
    mine = engine_fingerprint()
    if mine != check.engine:
        raise ShipError(f"ReplayLens {where} is not the driver's ({mine} against {check.engine}); install the same "
                        "version on every node")
    got = {k: v for k, v in agent_fingerprint(job.agent).items() if k not in check.by_value}
    if got != check.by_reference:
        names = sorted(k for k in set(got) | set(check.by_reference) if got.get(k) != check.by_reference.get(k))
        raise ShipError(f"the agent code {where} differs from what the driver fingerprinted ({', '.join(names)}); "
                        "install the same code on every node, or ship it with --ray-runtime-env")
    _JOBS.clear()
    _JOBS[digest] = job
    return job
