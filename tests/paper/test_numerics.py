"""The learned fits' pinned floating-point path (replaylens.paper.numerics; issue 28, third pass)."""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from replaylens.paper import numerics as nx
from replaylens.paper.fitted import haar_orthogonal

ULP_BOUND = 4.0   # measured worst case on 10⁴–10⁵ points: exp 1, sigmoid 2, tanh / log1p / softplus 3, expm1 4


def _ulps(got: np.ndarray, ref: np.ndarray) -> float:
    return float(np.max(np.abs(got - ref) / np.spacing(np.abs(ref))))


def _points() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(20261126)
    return {"wide": rng.uniform(-700.0, 700.0, 10_000), "unit": rng.normal(0.0, 3.0, 10_000),
            "small": rng.normal(0.0, 1e-4, 10_000), "tiny": rng.normal(0.0, 1e-12, 1_000),
            "u01": np.concatenate([rng.uniform(0.0, 1.0, 10_000), 10.0 ** rng.uniform(-300, 0, 2_000)])}


def _vec(f: Callable[[float], float]) -> Callable[[np.ndarray], np.ndarray]:
    return lambda x: np.array([f(float(v)) for v in x])


CASES: list[tuple[str, Callable[[np.ndarray], np.ndarray], Callable[[float], float], tuple[str, ...]]] = [
    ("exp", nx.exp, math.exp, ("wide", "unit", "small")),
    ("expm1", nx.expm1, math.expm1, ("unit", "small", "tiny")),
    ("tanh", nx.tanh, math.tanh, ("unit", "small", "tiny")),
    ("sigmoid", nx.sigmoid, lambda v: 1.0 / (1.0 + math.exp(-v)), ("unit", "small")),
    ("log1p", nx.log1p, math.log1p, ("u01",)),
    ("softplus", nx.softplus, lambda v: max(v, 0.0) + math.log1p(math.exp(-abs(v))), ("unit", "small", "wide")),
]


@pytest.mark.parametrize(("name", "fn", "ref", "sets"), CASES, ids=[c[0] for c in CASES])
def test_pinned_kernels_are_within_a_few_ulp(name: str, fn: Callable[[np.ndarray], np.ndarray],
                                             ref: Callable[[float], float], sets: tuple[str, ...]) -> None:
    pts = _points()
    with nx.pinned_numerics(True):
        for s in sets:
            x = pts[s]
            assert _ulps(fn(x), _vec(ref)(x)) <= ULP_BOUND, (name, s)


def test_pinned_kernels_edge_values() -> None:
    with nx.pinned_numerics(True):
        t = nx.tanh(np.array([0.0, -0.0, 25.0, -25.0, np.inf, -np.inf]))
        assert t.tolist() == [0.0, 0.0, 1.0, -1.0, 1.0, -1.0]
        assert math.copysign(1.0, float(t[1])) == -1.0   # tanh(−0) = −0
        assert np.isnan(nx.tanh(np.array([np.nan])))[0]
        with np.errstate(over="ignore"):   # e^800 overflows to inf, as np.exp's does
            e = nx.exp(np.array([0.0, -800.0, 800.0, -np.inf]))
        assert e.tolist() == [1.0, 0.0, np.inf, 0.0]
        sp = nx.softplus(np.array([-800.0, 0.0, 800.0]))
        assert sp[0] == 0.0 and sp[2] == 800.0
        assert _ulps(sp[1:2], np.array([math.log(2.0)])) <= ULP_BOUND
        with pytest.raises(ValueError, match="on \\[0, 1\\]"):
            nx.log1p(np.array([1.5]))


def test_numpy_path_is_numpy_exactly() -> None:
    x = _points()["unit"]
    a, b = np.random.default_rng(1).normal(size=(3, 5, 40)), np.random.default_rng(2).normal(size=(3, 40, 7))
    with nx.pinned_numerics(False):
        assert not nx.is_pinned()
        assert np.array_equal(nx.tanh(x), np.tanh(x)) and np.array_equal(nx.exp(x), np.exp(x))
        assert np.array_equal(nx.softplus(x), np.logaddexp(0.0, x))
        assert np.array_equal(nx.sigmoid(x), 1.0 / (1.0 + np.exp(-x)))
        assert np.array_equal(nx.matmul(a, b), np.matmul(a, b))
        assert nx.norm2(a[0]) == float(np.linalg.norm(a[0], 2))
        assert nx.dot(a, a) == float(np.vdot(a, a))
        assert "numpy/BLAS" in nx.path_label()


def test_pinned_switch_restores_and_reaches_worker_environment() -> None:
    before, env = nx.is_pinned(), os.environ.get(nx.ENV_VAR)
    with nx.pinned_numerics(True):
        assert nx.is_pinned() and os.environ[nx.ENV_VAR] == "1" and "pinned" in nx.path_label()
        with nx.pinned_numerics(False):
            assert not nx.is_pinned() and os.environ[nx.ENV_VAR] == "0"
        assert nx.is_pinned()
    assert nx.is_pinned() == before and os.environ.get(nx.ENV_VAR) == env


@pytest.mark.parametrize(("sa", "sb"), [((3, 16, 18), (3, 18, 50)), ((300, 12), (12, 20)), ((10, 900), (900, 16)),
                                        ((16,), (16,)), ((5, 3), (3,)), ((40,), (40, 9)), ((2, 1, 4, 6), (3, 6, 2)),
                                        ((4, 0), (0, 3))])
def test_pinned_matmul_has_numpy_semantics(sa: tuple[int, ...], sb: tuple[int, ...]) -> None:
    rng = np.random.default_rng(7)
    a, b = rng.normal(size=sa), rng.normal(size=sb)
    ref = np.matmul(a, b)
    with nx.pinned_numerics(True):
        got = nx.matmul(a, b)
        assert np.shape(got) == np.shape(ref)
        assert np.allclose(got, ref, rtol=1e-12, atol=1e-12)
        ai, bi = np.round(a * 8), np.round(b * 8)   # small integers: every order of summation is exact
        assert np.array_equal(nx.matmul(ai, bi), np.matmul(ai, bi))
        if np.ndim(ref) >= 1:
            out = np.empty_like(ref)
            assert nx.matmul(a, b, out=out) is out and np.array_equal(out, got)


def test_pinned_matmul_bytes_depend_on_shapes_not_memory_layout() -> None:
    rng = np.random.default_rng(8)
    a = rng.normal(size=(5, 37)) * 10.0 ** rng.integers(-8, 9, size=(5, 37))
    b = rng.normal(size=(37, 4))
    with nx.pinned_numerics(True):
        got = nx.matmul(a, b)
        assert np.array_equal(nx.matmul(np.asfortranarray(a), b), got)
        assert np.array_equal(nx.matmul(a, np.asfortranarray(b)), got)
        assert np.array_equal(nx.matmul(a[:, ::-1][:, ::-1], b), got)
        assert np.array_equal(nx.matmul(a[None], b[None])[0], got)


def test_pinned_dot_is_the_pairwise_sum_of_the_products() -> None:
    a, b = np.random.default_rng(9).normal(size=(2, 7, 33))
    with nx.pinned_numerics(True):
        assert nx.dot(a, b) == float(np.sum(a.ravel() * b.ravel()))
        assert math.isclose(nx.dot(a, b), float(np.vdot(a, b)), rel_tol=1e-12)


def test_pinned_qr_and_norm2() -> None:
    g = np.random.default_rng(3).normal(size=(16, 16))
    with nx.pinned_numerics(True):
        q, r = nx.qr(g)
        assert np.allclose(q @ r, g, atol=1e-13) and np.allclose(q.T @ q, np.eye(16), atol=1e-14)
        assert np.allclose(np.tril(r, -1), 0.0, atol=1e-13)
        assert math.isclose(nx.norm2(g), float(np.linalg.norm(g, 2)), rel_tol=1e-14)
        h = haar_orthogonal(np.random.default_rng(4), 16)
    with nx.pinned_numerics(False):
        h_np = haar_orthogonal(np.random.default_rng(4), 16)
    assert np.allclose(h, h_np, atol=1e-13)   # the same orthogonal matrix, up to rounding


PROBE = Path(__file__).with_name("numerics_probe.py")

SETTINGS = {"Haswell kernel, default dispatch": {"OPENBLAS_CORETYPE": "Haswell"},
            "Sandybridge kernel": {"OPENBLAS_CORETYPE": "Sandybridge"},
            "baseline numpy dispatch": {"OPENBLAS_CORETYPE": "Haswell", "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4"}}


def _probe(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "NPY_DISABLE_CPU_FEATURES")}
    env.update(extra, **{nx.ENV_VAR: "1"})
    src = str(Path(__file__).resolve().parents[2] / "src")
    env["PYTHONPATH"] = os.pathsep.join([src, env.get("PYTHONPATH", "")])
    got = subprocess.run([sys.executable, str(PROBE)], env=env, capture_output=True, text=True, timeout=600)
    assert got.returncode == 0, got.stderr[-2000:]
    out: dict[str, str] = json.loads(got.stdout.strip().splitlines()[-1])
    return out


@pytest.mark.slow
@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="x86 BLAS kernels and dispatch")
def test_small_fits_are_byte_identical_across_blas_kernels_and_numpy_dispatch() -> None:
    """Every learned fit (learned pair, learned control, fitted writers and interface, persistent agent,
    selected-only writer), the kernels and the data generators: the same bytes under each setting."""
    runs = {name: _probe(extra) for name, extra in SETTINGS.items()}
    first = runs["Haswell kernel, default dispatch"]
    assert first.pop("pinned") is True and len(first) >= 10
    for name, got in runs.items():
        got.pop("pinned", None)
        assert got == first, (name, {k: (v, first.get(k)) for k, v in got.items() if v != first.get(k)})


def test_the_default_path_is_pinned() -> None:
    """Without the environment variable the fits take the pinned path (every committed learned section was
    generated on it); ``0`` selects numpy/BLAS."""
    src = str(Path(__file__).resolve().parents[2] / "src")
    code = "import replaylens.paper.numerics as n; print(n.is_pinned())"
    for value, expected in ((None, "True"), ("0", "False"), ("1", "True")):
        env = {k: v for k, v in os.environ.items() if k != nx.ENV_VAR}
        env["PYTHONPATH"] = os.pathsep.join([src, env.get("PYTHONPATH", "")])
        if value is not None:
            env[nx.ENV_VAR] = value
        got = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        assert got.stdout.strip() == expected, (value, got.stderr[-500:])
