"""Outer label maps ρ acting on the canonical action vocabulary (index tuples)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..errors import ConfigError

__all__ = [
    "DERANGEMENTS_4",
    "INVOLUTIONS_4",
    "LabelMap",
    "all_permutations",
    "cyclic_shifts",
    "derangements",
    "identity",
    "parse_map",
    "resolve_maps",
]


@dataclass(frozen=True)
class LabelMap:
    """A bijection ρ of n canonical labels: label i ↦ label ``images[i]``.

    The name lists the images, e.g. ``1032`` for (01)(23); over the labels
    (coverage, adaptive, replicate, mixed) the paper writes it by initials, ``ACMR``.
    """

    images: tuple[int, ...]

    def __post_init__(self) -> None:
        if sorted(self.images) != list(range(len(self.images))):
            raise ConfigError(f"a label map must be a permutation of 0..n-1; got {self.images}")

    @property
    def n(self) -> int:
        return len(self.images)

    @property
    def is_identity(self) -> bool:
        return all(i == v for i, v in enumerate(self.images))

    @property
    def is_derangement(self) -> bool:
        return all(i != v for i, v in enumerate(self.images))

    @cached_property
    def array(self) -> np.ndarray:
        return np.asarray(self.images, dtype=np.int64)

    @cached_property
    def inverse(self) -> LabelMap:
        inv = [0] * self.n
        for i, v in enumerate(self.images):
            inv[v] = i
        return LabelMap(tuple(inv))

    @property
    def name(self) -> str:
        if self.is_identity:
            return "id"
        sep = "" if self.n <= 10 else ","
        return sep.join(str(v) for v in self.images)

    def letters(self, labels: Sequence[str]) -> str:
        """The paper's initials form (``ACMR``) when the labels' initials are distinct."""
        initials = [s[0].upper() for s in labels]
        if len(set(initials)) != len(initials):
            return self.name
        return "".join(initials[v] for v in self.images)

    def __call__(self, codes: np.ndarray) -> np.ndarray:
        return self.array[codes]

    def compose(self, other: LabelMap) -> LabelMap:
        """(self ∘ other)(i) = self(other(i))."""
        return LabelMap(tuple(self.images[j] for j in other.images))


def identity(n: int) -> LabelMap:
    return LabelMap(tuple(range(n)))


def derangements(n: int) -> tuple[LabelMap, ...]:
    """All fixed-point-free maps of n labels in lexicographic order (9 for n = 4)."""
    if n < 2:
        return ()
    return tuple(LabelMap(p) for p in itertools.permutations(range(n)) if all(i != v for i, v in enumerate(p)))


def all_permutations(n: int) -> tuple[LabelMap, ...]:
    """All n! maps in lexicographic order (24 for n = 4; the label-equivariance calibration)."""
    return tuple(LabelMap(p) for p in itertools.permutations(range(n)))


def cyclic_shifts(n: int) -> tuple[LabelMap, ...]:
    """The n − 1 nonidentity cyclic shifts i ↦ i + k (mod n)."""
    return tuple(LabelMap(tuple((i + k) % n for i in range(n))) for k in range(1, n))


DERANGEMENTS_4: tuple[LabelMap, ...] = derangements(4)
"""The nine derangements 𝒟₄ in lexicographic order (ACMR, ARMC, AMCR, RCMA, RMCA, RMAC, MCAR, MRCA, MRAC)."""

INVOLUTIONS_4: tuple[LabelMap, ...] = (LabelMap((1, 0, 3, 2)), LabelMap((2, 3, 0, 1)), LabelMap((3, 2, 1, 0)))
"""The three fixed-point-free involutions (01)(23), (02)(13), (03)(12)."""


def parse_map(text: str, labels: Sequence[str]) -> LabelMap:
    """Parse one map: ``id``; images ``1,0,3,2`` or ``1032``; initials ``ACMR``; or JSON ``{"A": "B", ...}``."""
    n = len(labels)
    s = text.strip()
    if s in ("id", "identity"):
        return identity(n)
    if s.startswith("{"):
        try:
            d = json.loads(s)
        except json.JSONDecodeError:
            raise ConfigError(f"cannot parse label map {text!r}: invalid JSON") from None
        idx = {lab: i for i, lab in enumerate(labels)}
        if set(d) != set(labels) or not all(isinstance(v, str) for v in d.values()) or set(d.values()) != set(labels):
            raise ConfigError(f"label map {text!r} must map every label of {list(labels)} onto them bijectively")
        return LabelMap(tuple(idx[d[lab]] for lab in labels))
    parts = s.split(",") if "," in s else list(s)
    if all(p.strip().isdigit() for p in parts) and len(parts) == n:
        try:
            return LabelMap(tuple(int(p) for p in parts))
        except ConfigError:
            raise ConfigError(f"label map {text!r} is not a permutation of 0..{n - 1}") from None
    initials = [lab[0].upper() for lab in labels]
    if len(s) == n and len(set(initials)) == n and set(s.upper()) <= set(initials):
        pos = {c: i for i, c in enumerate(initials)}
        try:
            return LabelMap(tuple(pos[c] for c in s.upper()))
        except ConfigError:
            raise ConfigError(f"label map {text!r} is not a bijection of {initials}") from None
    raise ConfigError(f"cannot parse label map {text!r} for the {n} labels {list(labels)}")


def resolve_maps(
    spec: str | Sequence[str], labels: Sequence[str], *, include_identity: bool = True
) -> tuple[LabelMap, ...]:
    """Resolve a map-set spec: ``derangements``, ``involutions``, ``cyclic``, ``all`` or explicit maps.

    Several specs may be joined with ``+`` or given as a sequence.  The identity comes first
    when ``include_identity`` (every readout compares against ρ = id).
    """
    n = len(labels)
    items = spec.split("+") if isinstance(spec, str) else list(spec)
    out: list[LabelMap] = [identity(n)] if include_identity else []
    for item in items:
        item = item.strip()
        if not item:
            continue
        if item == "derangements":
            if n > 7:
                raise ConfigError(f"{n} labels have too many derangements to replay; use 'cyclic' or explicit maps")
            got: Sequence[LabelMap] = derangements(n)
        elif item == "involutions":
            if n != 4:
                raise ConfigError("'involutions' is defined for 4 labels")
            got = INVOLUTIONS_4
        elif item == "cyclic":
            got = cyclic_shifts(n)
        elif item == "all":
            if n > 6:
                raise ConfigError(f"{n} labels have too many permutations to replay")
            got = all_permutations(n)
        else:
            got = [parse_map(item, labels)]
        for m in got:
            if m not in out:
                out.append(m)
    return tuple(out)
