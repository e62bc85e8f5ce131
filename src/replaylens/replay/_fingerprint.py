"""Code fingerprints for the run journal: a resumed run must never mix decisions of two code versions.

The fingerprint of an agent hashes the source files its writer, policy and array form come from
(classes, functions and the callables wrapped by the adapters), the sibling ``.py`` files of a
user's ``file.py`` that are loaded, and the installed version of the package a file belongs to;
ReplayLens's own version and a hash of its replay/agents/interventions/maps sources are added so
an engine change invalidates old shards too.
"""

from __future__ import annotations

import hashlib
import inspect
import sys
from collections.abc import Iterator
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from ..agents import Agent

__all__ = ["agent_fingerprint", "describe_change", "engine_fingerprint"]

_PKG = Path(__file__).resolve().parent.parent           # src/replaylens
_ENGINE_PARTS = ("replay", "agents", "interventions", "maps", "records")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@cache
def engine_fingerprint() -> str:
    """ReplayLens's version plus a hash of the sources that decide what an agent is shown."""
    h = hashlib.sha256()
    for part in _ENGINE_PARTS:
        for p in sorted((_PKG / part).rglob("*.py")):
            h.update(str(p.relative_to(_PKG)).encode())
            h.update(p.read_bytes())
    h.update((_PKG / "rng.py").read_bytes())  # the per-decision seed derivation's mixing helpers
    version = getattr(sys.modules.get("replaylens"), "__version__", "unknown")
    return f"{version}+{h.hexdigest()[:16]}"


def _objects(agent: Agent) -> Iterator[Any]:
    """Every object whose defining source decides the agent's behaviour (adapters unwrapped)."""
    seen: set[int] = set()
    todo: list[Any] = [agent.writer, agent.policy, agent.array]
    while todo:
        obj = todo.pop()
        if obj is None or id(obj) in seen:
            continue
        seen.add(id(obj))
        yield obj
        fields = getattr(type(obj), "__dataclass_fields__", None)
        if fields:  # adapters (from_callables, HistoryReader) keep the user's callables in fields
            todo.extend(getattr(obj, f) for f in fields if callable(getattr(obj, f, None)))
        func = getattr(obj, "__func__", None)
        if func is not None:
            todo.append(func)
        for cell in getattr(obj, "__closure__", None) or ():
            try:
                todo.append(cell.cell_contents)
            except ValueError:
                continue


def _source(obj: Any) -> Path | None:
    target: Any = obj if inspect.isfunction(obj) or inspect.isclass(obj) or inspect.ismethod(obj) else type(obj)
    if inspect.ismethod(target):
        target = target.__func__
    try:
        f = inspect.getsourcefile(target)
    except TypeError:
        return None
    return Path(f).resolve() if f else None


def _package_version(path: Path) -> str | None:
    """The installed distribution version of the top-level package holding ``path`` (if any)."""
    for name, mod in list(sys.modules.items()):
        if "." in name or mod is None:
            continue
        f = getattr(mod, "__file__", None)
        if f and Path(f).name == "__init__.py" and Path(f).resolve().parent in path.parents:
            try:
                return f"{name}=={metadata.version(name)}"
            except metadata.PackageNotFoundError:
                return None
    return None


def agent_fingerprint(agent: Agent) -> dict[str, str]:
    """{file name: sha256[:16] (and ``package==version``)} of every source file the agent runs.

    Files of ReplayLens itself are covered by :func:`engine_fingerprint`; for a user's ``file.py``
    the loaded sibling ``.py`` files (modules it imports from its folder) are hashed as well.
    """
    files: set[Path] = set()
    for obj in _objects(agent):
        p = _source(obj)
        if p is not None and p.exists() and _PKG not in p.parents:
            files.add(p)
    folders = {p.parent for p in files if _package_version(p) is None}
    for mod in list(sys.modules.values()) if folders else ():   # (no user file: no module path to resolve)
        f = getattr(mod, "__file__", None)
        if f and f.endswith(".py") and Path(f).resolve().parent in folders:
            files.add(Path(f).resolve())
    out: dict[str, str] = {}
    for p in sorted(files):
        pkg = _package_version(p)
        out[p.name if pkg is None else f"{pkg}:{p.name}"] = _sha(p)[:16]
    return out


def describe_change(old: dict[str, Any], new: dict[str, Any]) -> str:
    """A short phrase naming what differs between two journal keys ("agent code changed (a.py)")."""
    oc, nc = old.get("code") or {}, new.get("code") or {}
    if isinstance(oc, dict) and isinstance(nc, dict) and oc != nc:
        names = sorted({k for k in set(oc) | set(nc) if oc.get(k) != nc.get(k)})
        return f"agent code changed ({', '.join(names)})"
    if old.get("engine") != new.get("engine"):
        return f"ReplayLens changed ({old.get('engine')} -> {new.get('engine')})"
    keys = sorted(k for k in set(old) | set(new) if k not in ("code", "engine") and old.get(k) != new.get(k))
    named = {"agent": "agent or its parameters", "arguments": "command arguments", "history": "history input",
             "futures": "future tasks", "plan": "replay plan"}
    return "different " + ", ".join(named.get(k, k) for k in keys) if keys else "a different run"
