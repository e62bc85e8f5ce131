"""Private: compiled inner loops through numba (the optional ``fast`` extra), shared by every layer that has one.

A loop is plain Python over numpy arrays; :func:`compiled` hands back its numba-compiled form (no GIL, cached on
disk beside the module) or ``None`` where numba is missing or cannot compile it, and the caller then keeps its
numpy path.  Every compiled loop reproduces its numpy path's bytes (each has a test that says so); numba only
changes how fast, so whether it is installed never changes a result.

Loading numba costs about 1.4 s (import, then LLVM starting on the first compiled loop) and 0.1 GB resident,
so callers use a loop only for work that pays for that (:func:`worth_it`), or once numba is loaded anyway
(:func:`preload_for` loads it on a thread of its own for a large run).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import os
import sys
import threading
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["LARGE_RUN_DECISIONS", "compiled", "loaded", "loop_helper", "mul_hi64", "native_helper", "pcg64_next",
           "preload_for", "worth_it"]

#: from this many decisions a run loads numba where installed (about 1.4 s on a thread of its own, paid back
#: by the compiled slot draws and statistics of such a run; the results are the same either way)
LARGE_RUN_DECISIONS = 1 << 24

_DONE: dict[Callable[..., Any], Callable[..., Any] | None] = {}
_LOCK = threading.Lock()  # one compile per loop, whichever thread asks first
_HELPERS: set[Callable[..., Any]] = set()   # plain functions that compiled loops call (compiled with them)
_NATIVE: dict[Callable[..., Any], str] = {}  # helpers whose compiled form is written for numba (_jit_native)
_FORMS: dict[Callable[..., Any], Any] = {}   # each helper's compiled form, made once


def loop_helper(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark ``fn`` as a helper of compiled loops: a loop that calls it by a module-level name gets it compiled
    (and inlined) when the loop is compiled; called from plain Python it is the plain function."""
    _HELPERS.add(fn)
    return fn


def native_helper(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark ``fn`` as a loop helper whose compiled form is ``replaylens._jit_native.<name>`` (written for numba
    itself, e.g. with an LLVM intrinsic) rather than ``fn`` compiled; ``fn`` stays its plain-Python meaning."""
    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        _HELPERS.add(fn)
        _NATIVE[fn] = name
        return fn
    return mark


def _helper_form(numba: Any, fn: Callable[..., Any]) -> Any:
    """The compiled form of helper ``fn`` (its own helpers bound first), made once."""
    if fn not in _FORMS:
        if fn in _NATIVE:
            _FORMS[fn] = getattr(importlib.import_module("replaylens._jit_native"), _NATIVE[fn])
        else:
            _bind_helpers(numba, fn)
            _FORMS[fn] = numba.njit(nogil=True, cache=True, inline="always")(fn)
    return _FORMS[fn]


def _named_helpers(fn: Callable[..., Any]) -> Iterator[tuple[str, Callable[..., Any]]]:
    """``(name, helper)`` for each loop helper that ``fn`` names in its module's globals, a name already bound to
    a compiled form read as its plain helper (any other global, hashable or not -- an array, a dict -- is not
    a helper)."""
    plain = {id(form): helper for helper, form in _FORMS.items()}
    for name in fn.__code__.co_names:
        obj = fn.__globals__.get(name)
        dep = plain.get(id(obj), obj)
        for helper in _HELPERS:
            if dep is helper:
                yield name, helper
                break


def _bind_helpers(numba: Any, loop: Callable[..., Any]) -> None:
    """Replace each helper that ``loop`` names (in its module's globals) by its numba-compiled form."""
    for name, fn in list(_named_helpers(loop)):
        loop.__globals__[name] = _helper_form(numba, fn)


@native_helper("mul_hi64")
def mul_hi64(a: Any, b: Any) -> Any:
    """The high 64 bits of the 128-bit product of uint64 ``a`` and ``b`` (four 32-bit products here; one
    multiply in the compiled form)."""
    m32 = np.uint64(0xFFFFFFFF)
    s32 = np.uint64(32)
    a0, a1 = a & m32, a >> s32
    b0, b1 = b & m32, b >> s32
    p01 = a0 * b1
    p10 = a1 * b0
    mid = ((a0 * b0) >> s32) + (p01 & m32) + (p10 & m32)
    return a1 * b1 + (p01 >> s32) + (p10 >> s32) + (mid >> s32)


@loop_helper
def pcg64_next(s_hi: Any, s_lo: Any, inc_hi: Any, inc_lo: Any) -> tuple[Any, Any, Any]:
    """numpy's PCG64 step on uint64 halves: the state ``(s_hi, s_lo) * M + (inc_hi, inc_lo)`` (mod 2**128)
    and its XSL-RR 64-bit output, as ``(new_hi, new_lo, output)`` (the compiled loops' shared generator)."""
    mult_hi = np.uint64(0x2360ED051FC65DA4)
    mult_lo = np.uint64(0x4385DF649FCCF645)
    new_hi = mul_hi64(s_lo, mult_lo) + s_lo * mult_hi + s_hi * mult_lo
    new_lo = s_lo * mult_lo
    lo = new_lo + inc_lo
    hi = new_hi + inc_hi + (np.uint64(1) if lo < new_lo else np.uint64(0))
    x = hi ^ lo
    rot = hi >> np.uint64(58)
    return hi, lo, (x >> rot) | (x << ((np.uint64(64) - rot) & np.uint64(63)))


def compiled(loop: Callable[..., Any], probe: Callable[[Callable[..., Any]], object], *,
             reassociate: bool = False) -> Callable[..., Any] | None:
    """``loop`` compiled by numba (``nogil``, cached), checked by calling ``probe(compiled_loop)`` once; ``None``
    where numba is not installed or the compile or the probe fails.  Memoized per loop.

    ``reassociate``: let the compiler reorder and fuse the loop's floating-point additions and products (LLVM's
    ``reassoc``, ``contract`` and ``nsz`` flags: vectorized sums, fused multiply-adds, a zero's sign free), for a
    loop whose every sum is exact, so that no order changes a bit but the sign of a zero (which the caller
    normalizes)."""
    with _LOCK:
        if loop not in _DONE:
            _DONE[loop] = _compile(loop, probe, reassociate)
        return _DONE[loop]


#: the floating-point freedoms of a ``reassociate`` loop (never ``nnan``/``ninf``/``afn``: those change values)
_REASSOCIATE = frozenset({"reassoc", "contract", "nsz"})


def _compile(loop: Callable[..., Any], probe: Callable[[Callable[..., Any]], object],
             reassociate: bool = False) -> Callable[..., Any] | None:
    fn: Callable[..., Any] | None = None
    try:  # imported by name: numba ships no type information
        numba: Any = importlib.import_module("numba")
    except ImportError:
        numba = None
    if numba is not None:
        try:
            # (read before the helpers' names are bound to compiled forms; the flags too: numba's cache
            # index does not key a loop on them)
            digest = _helpers_digest(loop) + (" reassociate" if reassociate else "")
            _bind_helpers(numba, loop)
            flags = set(_REASSOCIATE) if reassociate else False
            fn = numba.njit(nogil=True, cache=True, fastmath=flags)(loop)
            _fresh_cache(fn, loop, digest)
            probe(fn)
        except Exception:  # a numba that cannot compile here: keep the numpy path
            fn = None
    return fn


def _helpers_digest(loop: Callable[..., Any]) -> str:
    """sha256 of the code of every helper ``loop`` reaches (through helpers' own helpers too), and of the native
    forms' module for a native helper: what numba's disk cache does not key a loop on (its own file and bytecode)."""
    seen: dict[Callable[..., Any], None] = {}

    def visit(fn: Callable[..., Any]) -> None:
        for _, dep in _named_helpers(fn):
            if dep not in seen:
                seen[dep] = None
                visit(dep)

    visit(loop)
    h = hashlib.sha256()
    for dep in sorted(seen, key=lambda f: (f.__module__, f.__qualname__)):
        h.update(f"{dep.__module__}.{dep.__qualname__}\0".encode() + _code_bytes(dep.__code__))
        if dep in _NATIVE:
            spec = importlib.util.find_spec("replaylens._jit_native")
            if spec is not None and spec.origin:
                h.update(Path(spec.origin).read_bytes())
    return h.hexdigest()


def _code_bytes(code: types.CodeType) -> bytes:
    """A code object's bytecode, names and constants (nested code objects by their own bytes, never by a repr
    that holds their address), the same in every process."""
    parts = [code.co_code, repr(code.co_names).encode()]
    for const in code.co_consts:
        parts.append(_code_bytes(const) if isinstance(const, types.CodeType) else repr(const).encode())
    return b"\0".join(parts)


def _fresh_cache(fn: Any, loop: Callable[..., Any], digest: str) -> None:
    """Empty ``fn``'s disk cache index when the helpers it inlines changed since the cache was written (their
    digest is kept in a stamp file beside the index), so the loop is compiled again, then record the digest.
    Best effort: a cache that cannot be read or written is left to numba."""
    cache = getattr(fn, "_cache", None)
    where = getattr(cache, "_cache_path", None)
    if cache is None or not where:
        return
    stamp = Path(where) / f"{loop.__module__}.{loop.__qualname__}.helpers"
    try:
        if stamp.read_text(encoding="ascii") == digest:
            return
    except (OSError, ValueError):
        pass
    with contextlib.suppress(Exception):
        cache.flush()   # an empty index: every signature compiled again, then cached again
    with contextlib.suppress(OSError):
        tmp = stamp.with_name(f"{stamp.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(digest, encoding="ascii")
        os.replace(tmp, stamp)


def loaded() -> bool:
    """Whether numba is imported in this process (its cost is paid)."""
    return "numba" in sys.modules


def _noop(x: int) -> int:
    return x + 1


def _load() -> None:
    """Import numba and bring up its compiler (the first compiled loop costs about 0.9 s: LLVM starts)."""
    with contextlib.suppress(Exception):
        compiled(_noop, lambda fn: fn(1))


def preload_for(decisions: int) -> threading.Thread | None:
    """For a run of ``decisions`` (at least :data:`LARGE_RUN_DECISIONS`), load numba on a daemon thread now,
    beside the run's other work, so its compiled loops are ready when the run reaches them; else nothing."""
    if decisions < LARGE_RUN_DECISIONS or loaded():
        return None
    thread = threading.Thread(target=_load, name="replaylens-numba", daemon=True)
    thread.start()
    return thread


def worth_it(work: int, threshold: int) -> bool:
    """Whether a compiled loop should be used for ``work`` units: at least ``threshold`` of them, or numba is
    already imported."""
    return work >= threshold or loaded()
