"""replaylens._jit: compiled loops where numba is installed, the numpy path (None) where it is not."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import require
from replaylens import _jit


def _twice(x: int) -> int:
    return 2 * x


def test_without_numba_no_loop_is_compiled_and_nothing_is_preloaded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "numba", None)  # import numba raises ImportError
    monkeypatch.setattr(_jit, "_DONE", {})
    assert _jit.compiled(_twice, lambda fn: fn(1)) is None
    assert _jit.preload_for(_jit.LARGE_RUN_DECISIONS - 1) is None


def test_a_failing_probe_keeps_the_numpy_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_jit, "_DONE", {})

    def probe(fn: object) -> None:
        raise ValueError("this build computes something else")

    assert _jit.compiled(_twice, probe) is None


def test_worth_it_from_the_threshold_or_once_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_jit, "loaded", lambda: False)
    assert _jit.worth_it(10, 10) and not _jit.worth_it(9, 10)
    monkeypatch.setattr(_jit, "loaded", lambda: True)
    assert _jit.worth_it(0, 10)


def test_with_numba_a_loop_compiles_once_and_a_large_run_loads_it_on_a_thread(
        monkeypatch: pytest.MonkeyPatch) -> None:
    if importlib.util.find_spec("numba") is None:
        require("fast", "numba (the fast extra) is not installed")
    monkeypatch.setattr(_jit, "_DONE", {})
    fn = _jit.compiled(_twice, lambda f: f(1))
    assert fn is not None and fn(21) == 42 and _jit.compiled(_twice, lambda f: f(1)) is fn
    monkeypatch.setattr(_jit, "loaded", lambda: False)
    thread = _jit.preload_for(_jit.LARGE_RUN_DECISIONS)
    assert thread is not None and thread.daemon
    thread.join(120)
    assert not thread.is_alive() and "numba" in sys.modules



#: a module-level array and dict a compiled loop reads (unhashable globals among its names)
_SCALE = __import__("numpy").array([3.0])
_TABLE: dict[str, int] = {}


def _scaled(x: float) -> float:
    return float(_SCALE[0] * x) + len(_TABLE)


def _plain_scaled(x: float) -> float:
    return float(_SCALE[0] * x)


def test_a_loop_that_names_unhashable_globals_still_compiles(monkeypatch: pytest.MonkeyPatch) -> None:
    """A loop's global names may be arrays or dicts (unhashable): looking for loop helpers among them must not
    fail (it made the compile fail, so the loop silently kept the numpy path)."""
    if importlib.util.find_spec("numba") is None:
        require("fast", "numba (the fast extra) is not installed")
    monkeypatch.setattr(_jit, "_DONE", {})
    assert [name for name, _ in _jit._named_helpers(_scaled)] == []
    assert len(_jit._helpers_digest(_scaled)) == 64
    fn = _jit.compiled(_plain_scaled, lambda f: f(1.0))
    assert fn is not None and fn(2.0) == 6.0


def test_the_shared_pcg64_step_is_numpys() -> None:
    """``pcg64_next`` (the compiled loops' generator, plain Python here) gives PCG64's outputs and states."""
    import numpy as np

    bg = np.random.PCG64(2026)
    st = bg.state["state"]
    mask = (1 << 64) - 1
    hi, lo = np.uint64(st["state"] >> 64), np.uint64(st["state"] & mask)
    inc_hi, inc_lo = np.uint64(st["inc"] >> 64), np.uint64(st["inc"] & mask)
    outs = []
    with np.errstate(over="ignore"):
        for _ in range(5):
            hi, lo, out = _jit.pcg64_next(hi, lo, inc_hi, inc_lo)
            outs.append(int(out))
    assert outs == bg.random_raw(5).tolist()
    assert (int(hi) << 64) | int(lo) == bg.state["state"]["state"]


def test_mul_hi64_is_the_high_word_of_the_product_plain_and_compiled() -> None:
    import numpy as np

    rng = np.random.default_rng(7)
    pairs = [(a, b) for a, b in rng.integers(0, 2**64, size=(200, 2), dtype=np.uint64)]
    top = np.uint64(2**64 - 1)
    pairs += [(top, top), (np.uint64(0), np.uint64(5)), (np.uint64(1 << 63), np.uint64(2))]
    with np.errstate(over="ignore"):
        plain = [int(_jit.mul_hi64(a, b)) for a, b in pairs]
    assert plain == [(int(a) * int(b)) >> 64 for a, b in pairs]
    if importlib.util.find_spec("numba") is None:
        require("fast", "numba (the fast extra) is not installed")
    native = importlib.import_module("replaylens._jit_native")
    assert [int(native.mul_hi64(a, b)) for a, b in pairs] == plain


_HELPERS_SRC = '''
from replaylens._jit import loop_helper


@loop_helper
def bump(x):
    return x + {step}
'''
_LOOP_SRC = '''
import sys

from replaylens._jit import compiled

from .helpers import bump


def loop(x):
    return bump(x)


fn = compiled(loop, lambda f: f(1))
print(fn(10) if fn is not None else "no numba")
'''


def test_a_cached_loop_is_compiled_again_when_a_helper_it_inlines_changes(tmp_path: Path) -> None:
    """numba's disk cache keys a loop by its own file and bytecode only; a helper edited in another file (the
    shared PCG64 step in _jit.py, say) must not leave the loop's old machine code in use."""
    if importlib.util.find_spec("numba") is None:
        require("fast", "numba (the fast extra) is not installed")
    pkg = tmp_path / "jitpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "loops.py").write_text(_LOOP_SRC)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    env.pop("NUMBA_CACHE_DIR", None)
    env.pop("NUMBA_DISABLE_JIT", None)

    def run(step: int) -> str:
        (pkg / "helpers.py").write_text(_HELPERS_SRC.format(step=step))
        got = subprocess.run([sys.executable, "-c", "import jitpkg.loops"], env=env, capture_output=True,
                             text=True, timeout=300, check=True)
        return got.stdout.strip()

    assert run(1) == "11"
    assert any(p.suffix == ".nbi" for p in (pkg / "__pycache__").iterdir())   # the loop was cached on disk
    assert run(5) == "15"    # the helper changed: compiled again, not the cached 11
    assert run(5) == "15"    # and cached again
    assert run(1) == "11"


def test_the_helpers_digest_is_the_same_in_every_process() -> None:
    # a nested code object's repr holds its address: the digest hashes its bytes instead, so a cached loop is not
    # compiled again by every new process
    probe = ("from replaylens import _jit\n"
             "def helper(x):\n"
             "    f = lambda y: y + 1\n"
             "    return f(x)\n"
             "_jit._HELPERS.add(helper)\n"
             "def loop(x):\n"
             "    return helper(x)\n"
             "print(_jit._helpers_digest(loop))\n")
    got = {subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                          timeout=120).stdout for _ in range(2)}
    assert len(got) == 1 and len(got.pop().strip()) == 64
