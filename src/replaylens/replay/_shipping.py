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
import inspect
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
from ._fingerprint import _objects, _package_version, _source, engine_fingerprint

__all__ = ["CodeCheck", "ShipError", "code_check", "load_job", "payload", "reference_fingerprint", "user_modules"]

_PKG = Path(__file__).resolve().parent.parent


class ShipError(Exception):
    """Raised on a worker: the job cannot be loaded there, or the worker's code differs from the driver's."""


@dataclass(frozen=True)
class CodeCheck:
    """What a worker must find: ReplayLens's engine fingerprint, and the fingerprint entries (the journal's rule:
    file name, or ``package==version:file``, and its sha256) of the agent's code the worker imports itself, all but
    the modules pickled by value (``by_value``: their names; their files are checked on the driver)."""

    engine: str
    by_reference: dict[str, str]
    by_value: tuple[str, ...]


def user_modules(agent: Agent) -> list[ModuleType]:
    """The loaded modules whose files are the user's own by :func:`agent_fingerprint`'s rule (modules in the
    folders of the agent's source files that belong to no installed distribution)."""
    folders = {p.parent for p in _files(agent, frozenset()) if _package_version(p) is None}
    out: list[ModuleType] = []
    for name, mod in list(sys.modules.items()):
        f = getattr(mod, "__file__", None) if mod is not None else None
        if name != "__main__" and f and f.endswith(".py") and Path(f).resolve().parent in folders:
            out.append(mod)
    return sorted(out, key=lambda m: m.__name__)


def _files(agent: Agent, skip: frozenset[str]) -> set[Path]:
    """The source files of the agent's objects (adapters unwrapped) outside ReplayLens, but for objects defined in
    a module of ``skip`` (or a submodule of one)."""
    files: set[Path] = set()
    for obj in _objects(agent):
        target = obj if inspect.isfunction(obj) or inspect.isclass(obj) else getattr(obj, "__func__", type(obj))
        module = str(getattr(target, "__module__", None) or "")
        if skip and (any(module == m or module.startswith(m + ".") for m in skip) or not _by_reference(target)):
            continue   # its code travels inside the job
        p = _source(obj)
        if p is not None and p.exists() and _PKG not in p.parents:
            files.add(p)
    return files


def _by_reference(obj: Any) -> bool:
    """Whether cloudpickle sends ``obj`` (a function or class) by reference (imported where it is unpickled);
    a lambda, a nested function or anything of a module registered by value travels by value."""
    try:
        return bool(importlib.import_module("ray.cloudpickle.cloudpickle")._should_pickle_by_reference(obj))
    except Exception:   # not a function or class, or a cloudpickle without the helper: counted as imported
        return True


def reference_fingerprint(agent: Agent, skip: frozenset[str]) -> dict[str, str]:
    """:func:`agent_fingerprint`'s entries for the code that is imported where the agent runs: every module but
    those of ``skip`` (pickled by value), computed alike on the driver and on each worker."""
    files = _files(agent, skip)
    folders = {p.parent for p in files if _package_version(p) is None}
    for name, mod in list(sys.modules.items()) if folders else ():
        f = getattr(mod, "__file__", None) if mod is not None else None
        if (name != "__main__" and not any(name == m or name.startswith(m + ".") for m in skip) and f
                and f.endswith(".py") and Path(f).resolve().parent in folders):
            files.add(Path(f).resolve())
    out: dict[str, str] = {}
    for p in sorted(files):
        pkg = _package_version(p)
        out[p.name if pkg is None else f"{pkg}:{p.name}"] = hashlib.sha256(p.read_bytes()).hexdigest()[:16]
    return out


def code_check(agent: Agent, shipped: list[ModuleType], skip: frozenset[str]) -> CodeCheck:
    """The driver's side (``skip``: every module pickled by value).  A shipped file changed on disk since it was
    loaded is refused: the job would carry other code than the fingerprint names."""
    for mod in shipped:   # the journal's fingerprint hashes these files as they are on disk: the code loaded
        path = Path(str(mod.__file__)).resolve()
        loaded = loaded_sha256(path)
        if loaded is not None and (not path.exists() or hashlib.sha256(path.read_bytes()).hexdigest() != loaded):
            raise ConfigError(f"the agent's file {path.name} changed on disk after it was loaded; rerun the audit "
                              "so that the code shipped to the Ray workers is the code fingerprinted")
    return CodeCheck(engine_fingerprint(), reference_fingerprint(agent, skip), tuple(sorted(skip)))


@contextlib.contextmanager
def by_value(modules: list[ModuleType]) -> Iterator[frozenset[str]]:
    """Ray's cloudpickle pickles ``modules``' functions and classes by value inside the block (registrations
    that were there before are kept); yields the names of every module pickled by value (``__main__`` too)."""
    cloudpickle = _cloudpickle()
    added = []
    for mod in modules:
        if mod.__name__ not in cloudpickle.list_registry_pickle_by_value():
            cloudpickle.register_pickle_by_value(mod)
            added.append(mod)
    try:
        yield frozenset({"__main__", *cloudpickle.list_registry_pickle_by_value()})
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
    with by_value(mods) as skip:
        check = code_check(agent, mods, skip)
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
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""   # (Ray's errors run to many lines)
        raise ShipError(f"the job cannot be loaded {where}: {type(exc).__name__}: {first} (a module the agent "
                        "imports from outside its own folder must be installed there, or shipped with "
                        "--ray-runtime-env)") from None
    mine = engine_fingerprint()
    if mine != check.engine:
        raise ShipError(f"ReplayLens {where} is not the driver's ({mine} against {check.engine}); install the same "
                        "version on every node")
    got = reference_fingerprint(job.agent, frozenset(check.by_value))
    if got != check.by_reference:
        names = sorted(k for k in set(got) | set(check.by_reference) if got.get(k) != check.by_reference.get(k))
        raise ShipError(f"the agent code {where} differs from what the driver fingerprinted ({', '.join(names)}); "
                        "install the same code on every node, or ship it with --ray-runtime-env")
    _JOBS.clear()
    _JOBS[digest] = job
    return job
