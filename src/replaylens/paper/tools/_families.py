# ruff: noqa: E501  (the bug catalogue is source text; wrapping it would obscure the bodies)
"""The eight bug-fixing function families (C5.2): specs, two correct bodies, a bug catalogue, tests.

Each instance is ``(header, correct bodies, bug bodies, public args, hidden edge args, reference, random
argument generator)``. Bodies are indented Python source appended to the header. The reference is the
trusted oracle for expected outputs; candidate bodies only ever run in the sandbox.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

FAMILIES = ("offset", "clamping", "ordered-dedup", "top-k", "rotation", "sign", "suffix-mean", "dict-lookup")


@dataclass(frozen=True)
class Instance:
    family: str
    index: int
    func: str
    spec: str
    header: str
    correct: tuple[str, str]
    bugs: tuple[str, ...]
    public: tuple[tuple[Any, ...], ...]
    hidden_edge: tuple[tuple[Any, ...], ...]
    reference: Callable[..., Any]
    draw: Callable[[np.random.Generator], tuple[Any, ...]]


def _ints(g: np.random.Generator, n: int, lo: int = -9, hi: int = 10) -> list[int]:
    return [int(v) for v in g.integers(lo, hi, size=n)]


def _offset(i: int) -> Instance:
    k_fixed = (None, 3, -2)[i]
    public: tuple[tuple[Any, ...], ...]
    edge: tuple[tuple[Any, ...], ...]
    header = "def shift(xs, k):\n" if k_fixed is None else f"def shift(xs):\n    k = {k_fixed}\n"
    correct = ("    return [x + k for x in xs]\n",
               "    out = []\n    for x in xs:\n        out.append(x + k)\n    return out\n")
    bugs = ("    return [x + k + 1 for x in xs]\n", "    return [x - k for x in xs]\n", "    return [x + 1 for x in xs]\n",
            "    return [xs[0] + k] + xs[1:] if xs else []\n", "    for i in range(len(xs)):\n        xs[i] += k\n",
            "    return [x * k for x in xs]\n", "    return [x + k for x in xs[:-1]]\n", "    return list(xs)\n",
            "    return [x + 2 * k for x in xs]\n", "    return [x + abs(k) for x in xs]\n",
            "    return [x + k for x in xs] if k > 0 else list(xs)\n", "    return [x + k for x in sorted(xs)]\n")
    if k_fixed is None:
        public = (([1, 2, 3], 2), ([], 5), ([0, -4], -3), ([10, 7], 1))
        edge = (([5, 5], 0), ([-1], -1), ([], 0), ([3, 1, 2], 4))

        def ref(xs: list[int], k: int) -> list[int]:
            return [x + k for x in xs]

        def draw(g: np.random.Generator) -> tuple[Any, ...]:
            return (_ints(g, int(g.integers(1, 6))), int(g.integers(-5, 6)))
    else:
        kk = k_fixed
        public = (([1, 2, 3],), ([],), ([0, -4],), ([9, 7, 8],))
        edge = (([5, 5],), ([-1],), ([0],), ([3, 1, 2, 2],))

        def ref(xs: list[int]) -> list[int]:  # type: ignore[misc]
            return [x + kk for x in xs]

        def draw(g: np.random.Generator) -> tuple[Any, ...]:
            return (_ints(g, int(g.integers(1, 6))),)
    return Instance("offset", i, "shift", "shift(xs[, k]): a new list with k added to every element; xs unchanged",
                    header, correct, bugs, public, edge, ref, draw)


def _clamp(i: int) -> Instance:
    header = "def clamp(x, lo, hi):\n"
    correct = ("    return min(max(x, lo), hi)\n",
               "    if x < lo:\n        return lo\n    if x > hi:\n        return hi\n    return x\n")
    bugs = ("    return max(min(x, lo), hi)\n", "    return min(max(x, lo), hi - 1)\n",
            "    if x < lo:\n        return hi\n    return min(x, hi)\n", "    return max(x, lo)\n", "    return min(x, hi)\n",
            "    return int(min(max(x, lo), hi))\n", "    return min(max(x, lo + 1), hi)\n",
            "    if x > hi:\n        return lo\n    return max(x, lo)\n", "    return min(max(x, lo), hi) if x > 0 else x\n",
            "    return x\n", "    return min(max(x, hi), lo)\n",
            "    if lo == hi:\n        return x\n    return min(max(x, lo), hi)\n",
            "    return (lo + hi) / 2 if x < lo or x > hi else x\n")
    public: tuple[tuple[Any, ...], ...]
    edge: tuple[tuple[Any, ...], ...]
    if i == 0:
        public = ((5, 0, 10), (-3, 0, 10), (15, 0, 10), (-8, -5, 5))
        edge = ((0, 0, 10), (10, 0, 10), (-5, -5, 5), (7, 7, 7))
    elif i == 1:
        public = ((2.5, 0.0, 10.0), (-1.5, 0.0, 1.0), (3.7, -1.0, 2.5), (-4.2, -3.5, 3.5))
        edge = ((0.0, 0.0, 1.0), (1.0, 0.0, 1.0), (0.5, 0.5, 0.5), (-0.25, -1.0, -0.5))
    else:
        public = ((4, 4, 4), (3, 4, 4), (9, 2, 2), (-3, 0, 10))
        edge = ((-1, -1, -1), (0, 1, 1), (2, 1, 1), (5, 0, 10))

    def ref(x: Any, lo: Any, hi: Any) -> Any:
        return min(max(x, lo), hi)

    def draw(g: np.random.Generator) -> tuple[Any, ...]:
        lo = int(g.integers(-6, 3))
        hi = lo + int(g.integers(0 if i == 2 else 1, 8))
        x = int(g.integers(-10, 11))
        return (x + 0.5, lo + 0.0, hi + 0.0) if i == 1 else (x, lo, hi)
    return Instance("clamping", i, "clamp", "clamp(x, lo, hi) = min(max(x, lo), hi), lo <= hi", header, correct, bugs,
                    public, edge, ref, draw)


def _dedupe(i: int) -> Instance:
    header = "def dedupe(xs):\n"
    correct = ("    seen = set()\n    out = []\n    for x in xs:\n        if x not in seen:\n            seen.add(x)\n"
               "            out.append(x)\n    return out\n", "    return list(dict.fromkeys(xs))\n")
    bugs = ("    return list(set(xs))\n", "    return sorted(set(xs))\n",
            "    return list(reversed(list(dict.fromkeys(reversed(xs)))))\n",
            "    out = []\n    for x in xs:\n        if not out or out[-1] != x:\n            out.append(x)\n    return out\n",
            "    return list(dict.fromkeys(xs))[::-1]\n", "    return [x for x in xs if xs.count(x) == 1]\n",
            "    return list(dict.fromkeys(xs[1:]))\n",
            "    seen = set()\n    out = []\n    for x in xs:\n        key = x.lower() if isinstance(x, str) else x\n"
            "        if key not in seen:\n            seen.add(key)\n            out.append(x)\n    return out\n",
            "    return xs\n", "    out = []\n    for x in xs:\n        if x not in out[:1]:\n            out.append(x)\n    return out\n",
            "    return list(dict.fromkeys(xs))[:-1]\n")
    public: tuple[tuple[Any, ...], ...]
    edge: tuple[tuple[Any, ...], ...]
    if i == 0:
        public = (([3, 1, 3, 2, 1],), ([5, 5, 5],), ([2, 1],), ([4, 1, 4, 9, 1, 4],))
        edge = (([],), ([7],), ([1, 2, 1, 2],), ([9, 8, 7, 9],))
    elif i == 1:
        public = ((["b", "a", "b"],), (["x", "x"],), (["q", "p"],), (["m", "n", "m", "o", "n"],))
        edge = (([],), (["z"],), (["a", "b", "a", "c", "b"],), (["k", "j", "k", "k"],))
    else:
        public = ((["A", "a", "b", "A"],), ([1, "1", 1],), (["x", "X", "x"],), (["q", 2, "q", 3, 2],))
        edge = (([],), (["Ab", "aB", "Ab"],), ([0, False, 0],), (["z", "Z", "z", "y"],))

    def ref(xs: list[Any]) -> list[Any]:
        out: list[Any] = []
        for x in xs:
            if x not in out:
                out.append(x)
        return out

    def draw(g: np.random.Generator) -> tuple[Any, ...]:
        vals = _ints(g, int(g.integers(2, 8)), 0, 5)
        if i == 0:
            return (vals,)
        letters = "abcde" if i == 1 else "aAbBc"
        return ([letters[v] for v in vals],)
    return Instance("ordered-dedup", i, "dedupe", "dedupe(xs): first occurrences in their original order", header,
                    correct, bugs, public, edge, ref, draw)


def _top_k(i: int) -> Instance:
    header = "def top_k(xs, k):\n" if i != 1 else "def top_k(xs):\n    k = 3\n"
    correct = ("    return sorted(xs, reverse=True)[:k]\n",
               "    out = list(xs)\n    out.sort()\n    out.reverse()\n    return out[:k]\n")
    bugs = ("    return sorted(xs)[-k:]\n", "    return sorted(xs)[:k]\n", "    return sorted(xs, reverse=True)[:k + 1]\n",
            "    return sorted(xs, reverse=True)[:k - 1]\n", "    return sorted(set(xs), reverse=True)[:k]\n",
            "    return [x for x in xs if x in sorted(xs, reverse=True)[:k]]\n",
            "    return sorted(xs, reverse=True)[1:k + 1]\n",
            "    return sorted(range(len(xs)), key=lambda i: -xs[i])[:k]\n",
            "    if k > len(xs):\n        raise IndexError('k too large')\n    return sorted(xs, reverse=True)[:k]\n",
            "    return [max(xs)] * k if xs else []\n")
    public: tuple[tuple[Any, ...], ...]
    edge: tuple[tuple[Any, ...], ...]
    if i == 0:
        public = (([5, 1, 4, 2], 2), ([3, 3, 1], 2), ([1, 2], 5), ([2, 9, 4, 9, 1], 3))
        edge = (([], 2), ([4], 1), ([1, 2, 3], 0), ([6, 6, 6, 1], 2))
    elif i == 1:
        public = (([5, 1, 4, 2],), ([3, 3, 1, 3],), ([1, 2],), ([2, 9, 4, 9, 1],))
        edge = (([],), ([4],), ([1, 1, 1, 1],), ([0, -1, -2, -3],))
    else:
        public = (([2, 2, 2, 1], 2), ([4, 4, 5, 5], 3), ([1, 1], 3), ([0, 3, 3, 0, 3], 2))
        edge = (([], 1), ([7, 7], 1), ([1, 2, 2, 3, 3, 3], 4), ([5, 5, 5, 5], 0))
    kk = 3

    def ref(xs: list[int], k: int = kk) -> list[int]:
        return sorted(xs, reverse=True)[:k]

    def draw(g: np.random.Generator) -> tuple[Any, ...]:
        xs = _ints(g, int(g.integers(1, 8)), 0, 4 if i == 2 else 20)
        return (xs,) if i == 1 else (xs, int(g.integers(1, 5)))
    return Instance("top-k", i, "top_k", "top_k(xs, k): the k largest values, descending, duplicates kept", header,
                    correct, bugs, public, edge, ref, draw)


def _rotate(i: int) -> Instance:
    header = "def rotate(xs, k):\n" + ("    k = -k\n" if i == 1 else "")
    correct = ("    if not xs:\n        return []\n    k %= len(xs)\n    return xs[k:] + xs[:k]\n",
               "    n = len(xs)\n    if n == 0:\n        return []\n    return [xs[(i + k) % n] for i in range(n)]\n")
    bugs = ("    if not xs:\n        return []\n    k = (-k) % len(xs)\n    return xs[k:] + xs[:k]\n",
            "    return xs[k:] + xs[:k]\n", "    k %= len(xs)\n    return xs[k:] + xs[:k]\n",
            "    if not xs:\n        return []\n    k = (k + 1) % len(xs)\n    return xs[k:] + xs[:k]\n",
            "    return xs[1:] + xs[:1]\n", "    return xs[::-1]\n",
            "    if not xs:\n        return []\n    k = abs(k) % len(xs)\n    return xs[k:] + xs[:k]\n", "    return list(xs)\n",
            "    if not xs:\n        return []\n    n = len(xs)\n    k = (n - k) % n\n    k = (2 * k) % n\n"
            "    return xs[k:] + xs[:k]\n",
            "    if not xs:\n        return []\n    k %= len(xs)\n    return xs[k + 1:] + xs[:k]\n", "    return sorted(xs)\n")
    public: tuple[tuple[Any, ...], ...]
    edge: tuple[tuple[Any, ...], ...]
    if i == 2:
        public = (([1, 2, 3, 4], -1), ([1, 2, 3], 5), ([], -2), ([1, 2, 3, 4, 5], 2))
        edge = (([9], -7), ([1, 2], -2), ([4, 3, 2, 1], -6), ([], 0))
    else:
        public = (([1, 2, 3, 4], 1), ([1, 2, 3], 5), ([], 2), ([1, 2, 3, 4, 5], 2))
        edge = (([9], 7), ([1, 2], 2), ([4, 3, 2, 1], 6), ([5, 6, 7], 0))
    sgn = -1 if i == 1 else 1

    def ref(xs: list[int], k: int) -> list[int]:
        if not xs:
            return []
        kk = (sgn * k) % len(xs)
        return xs[kk:] + xs[:kk]

    def draw(g: np.random.Generator) -> tuple[Any, ...]:
        return (_ints(g, int(g.integers(0, 7)), 0, 9), int(g.integers(-8 if i == 2 else 0, 9)))
    spec = ("rotate(xs, k): right rotation by k mod n" if i == 1 else "rotate(xs, k): left rotation by k mod n") + \
        "; [] -> []"
    return Instance("rotation", i, "rotate", spec, header, correct, bugs, public, edge, ref, draw)


def _sign(i: int) -> Instance:
    header = "def sign(x):\n" if i != 2 else "def sign_diff(a, b):\n    x = a - b\n"
    correct = ("    if x > 0:\n        return 1\n    if x < 0:\n        return -1\n    return 0\n",
               "    return (x > 0) - (x < 0)\n")
    bugs = ("    return 1 if x >= 0 else -1\n", "    return 1 if x > 0 else -1\n", "    return int(x / abs(x))\n",
            "    return x > 0\n", "    return 1 if x > 0 else 0\n", "    return abs(x)\n",
            "    if abs(x) < 1:\n        return 0\n    return 1 if x > 0 else -1\n", "    return (x < 0) - (x > 0)\n",
            "    return x\n", "    if x == 0:\n        return -1.0\n    return 1 if x > 0 else -1\n",
            "    return float((x > 0) - (x < 0))\n")
    public: tuple[tuple[Any, ...], ...]
    edge: tuple[tuple[Any, ...], ...]
    if i == 0:
        public, edge = ((5,), (-3,), (0,), (1,)), ((-1,), (100,), (-100,), (2,))
    elif i == 1:
        public, edge = ((2.5,), (-0.5,), (0.0,), (7.0,)), ((-0.0,), (1e-9,), (-1e9,), (0.75,))
    else:
        public, edge = ((5, 2), (1, 4), (3, 3), (0.5, 0.25)), ((0, 0), (-2, -1), (2.0, 1.5), (-1, -1))

    def ref(*args: Any) -> int:
        x = args[0] - args[1] if i == 2 else args[0]
        return int(x > 0) - int(x < 0)

    def draw(g: np.random.Generator) -> tuple[Any, ...]:
        if i == 2:
            return (int(g.integers(-5, 6)), int(g.integers(-5, 6)))
        v = int(g.integers(-20, 21))
        return (v / 4,) if i == 1 else (v,)
    spec = "sign_diff(a, b) = sign(a - b) in {-1, 0, 1}" if i == 2 else "sign(x) in {-1, 0, 1} (an int)"
    return Instance("sign", i, "sign_diff" if i == 2 else "sign", spec, header, correct, bugs, public, edge, ref, draw)


def _suffix_mean(i: int) -> Instance:
    k_fixed = (None, 3, 2)[i]
    public: tuple[tuple[Any, ...], ...]
    edge: tuple[tuple[Any, ...], ...]
    header = "def suffix_mean(xs, k):\n" if k_fixed is None else f"def suffix_mean(xs):\n    k = {k_fixed}\n"
    guard = "    if k <= 0 or not xs:\n        return 0.0\n"
    correct = (guard + "    tail = xs[-k:]\n    return sum(tail) / len(tail)\n",
               "    if k <= 0 or len(xs) == 0:\n        return 0.0\n    m = min(k, len(xs))\n    total = 0\n"
               "    for x in xs[len(xs) - m:]:\n        total += x\n    return total / m\n")
    bugs = (guard + "    head = xs[:k]\n    return sum(head) / len(head)\n",
            guard + "    tail = xs[-(k + 1):]\n    return sum(tail) / len(tail)\n",
            guard + "    return sum(xs[-k:]) / k\n", guard + "    tail = xs[-k:]\n    return sum(tail) // len(tail)\n",
            guard + "    return sum(xs[-k:])\n",
            "    if not xs:\n        return 0.0\n    tail = xs[-k:]\n    return sum(tail) / len(tail)\n",
            guard + "    tail = sorted(xs[-k:])\n    return float(tail[len(tail) // 2])\n",
            guard + "    return sum(xs[-k:]) / len(xs)\n",
            guard + "    tail = xs[-k - 1:-1]\n    if not tail:\n        return 0.0\n    return sum(tail) / len(tail)\n",
            "    if k <= 0:\n        return 0.0\n    tail = xs[-k:]\n    return sum(tail) / len(tail)\n",
            guard + "    return float(max(xs[-k:]))\n", guard + "    tail = xs[-k:]\n    return round(sum(tail) / len(tail))\n",
            guard + "    tail = xs[-k:]\n    return (tail[0] + tail[-1]) / 2\n")
    if k_fixed is None:
        public = (([1, 2, 3, 4], 2), ([5], 3), ([2, 4, 6], 0), ([1, 2, 3, 10], 3))
        edge = (([], 2), ([3, 3], -1), ([7, 1], 1), ([1, 2, 3], 3))

        def ref(xs: list[int], k: int) -> float:
            return 0.0 if k <= 0 or not xs else sum(xs[-k:]) / len(xs[-k:])

        def draw(g: np.random.Generator) -> tuple[Any, ...]:
            return (_ints(g, int(g.integers(0, 7))), int(g.integers(-1, 6)))
    else:
        kk = k_fixed
        public = (([1, 2, 3, 4],), ([5],), ([2, 4],), ([1, 2, 3, 10],))
        edge = (([],), ([7, 1],), ([0, 0, 9],), ([1, 2, 3, 4, 5, 6],))

        def ref(xs: list[int]) -> float:  # type: ignore[misc]
            return 0.0 if not xs else sum(xs[-kk:]) / len(xs[-kk:])

        def draw(g: np.random.Generator) -> tuple[Any, ...]:
            return (_ints(g, int(g.integers(0, 7))),)
    return Instance("suffix-mean", i, "suffix_mean", "suffix_mean(xs[, k]): mean of the last min(k, len) items; 0.0 "
                    "if k <= 0 or xs is empty", header, correct, bugs, public, edge, ref, draw)


def _lookup(i: int) -> Instance:
    header = "def lookup(d, key, default):\n"
    correct = ("    if key in d:\n        return d[key]\n    return default\n",
               "    try:\n        return d[key]\n    except KeyError:\n        return default\n")
    bugs = ("    return d.get(key) or default\n", "    return d[key]\n", "    return d.get(key)\n", "    return key\n",
            "    for v in d.values():\n        if v == key:\n            return v\n    return default\n", "    return default\n",
            "    for k2, v in d.items():\n        if str(k2).lower() == str(key).lower():\n            return v\n"
            "    return default\n", "    return d.get(default)\n", "    return next(iter(d.values()), default)\n",
            "    if key in d.keys():\n        return default\n    return d.get(key)\n",
            "    return d.get(str(key), default)\n", "    if key in d:\n        return d[key]\n    return None\n")
    public: tuple[tuple[Any, ...], ...]
    edge: tuple[tuple[Any, ...], ...]
    if i == 0:
        public = (({"a": 1, "b": 2}, "b", 0), ({"a": 1}, "z", -1), ({"a": 4, "A": 3}, "A", 0), ({}, "q", "none"))
        edge = (({"k": 0}, "k", 5), ({"x": 1}, "X", 2), ({"a": None}, "a", 1), ({"b": 2, "c": 3}, "c", 0))
    elif i == 1:
        public = (({1: 10, 2: 20}, 2, 0), ({1: 10}, 3, -1), ({5: 50, 6: 60}, 5, None), ({}, 7, 0))
        edge = (({0: 0}, 0, 9), ({1: 1}, 1, 1), ({2: 3, 3: 2}, 3, 0), ({4: 5}, 5, 4))
    else:
        public = (({"a": 0, "b": 2}, "a", 9), ({"a": ""}, "a", "x"), ({"k": None}, "z", 1), ({"k": False}, "k", True))
        edge = (({"z": []}, "z", [1]), ({"a": 0.0}, "a", 1.0), ({"A": 1}, "a", 0), ({"x": 5, "y": 0}, "y", 7))

    def ref(d: dict[Any, Any], key: Any, default: Any) -> Any:
        return d.get(key, default)

    def draw(g: np.random.Generator) -> tuple[Any, ...]:
        keys = ["a", "b", "c", "d"] if i != 1 else [1, 2, 3, 4]
        vals = _ints(g, 4, 0 if i == 2 else 1, 4)
        d = {keys[j]: vals[j] for j in range(int(g.integers(0, 4)))}
        return (d, keys[int(g.integers(0, 4))], int(g.integers(5, 9)))
    return Instance("dict-lookup", i, "lookup", "lookup(d, key, default) = d[key] if key in d else default "
                    "(stored falsy values are returned)", header, correct, bugs, public, edge, ref, draw)


_MAKERS = {"offset": _offset, "clamping": _clamp, "ordered-dedup": _dedupe, "top-k": _top_k, "rotation": _rotate,
           "sign": _sign, "suffix-mean": _suffix_mean, "dict-lookup": _lookup}


def make_instance(family: str, index: int) -> Instance:
    """The ``index``-th (0–2) instance of ``family``."""
    return _MAKERS[family](index)
