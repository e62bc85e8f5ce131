"""Stream layout of the hidden-world substrate and the injective draw index (core §2.4, §6.1).

Per replicate stream r the tasks come in family-major canonical order: for each stratum R₁…R₆,
its development tasks (24), then its adaptation tasks (48, learning blocks R₁–R₄ only), then its
future tasks (48).  The position of a task in this order is its canonical global index j
(0…623 within a stream); q is its local index within (stratum, phase).

Every executor draw comes from ``SeedSequence([BASE, r, fam, ctx, phase, j, role])`` (core §6.1
REC), with role 4 for the latent world shared by the four arms of a task and role a ∈ 0…3 for arm
a's observation noise and query randomness.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ....errors import ConfigError

__all__ = [
    "ARMS",
    "BASE_SEED",
    "CONTEXTS",
    "FAMILIES",
    "LEARNING_BLOCKS",
    "PHASES",
    "SPLIT_SIZES",
    "STRATA",
    "TASKS_PER_STREAM",
    "WORLD_ROLE",
    "PublicTask",
    "draw_seed",
    "phase_code",
    "public_task",
    "seed_sequence",
    "stream_id",
    "task_id",
    "task_index",
]

ARMS: tuple[str, ...] = ("coverage", "adaptive", "replicate", "mixed")
FAMILIES: tuple[str, ...] = ("source", "temporal", "survival")
CONTEXTS: dict[str, tuple[str, str]] = {
    "source": ("low", "high"),
    "temporal": ("low", "high"),
    "survival": ("balanced", "rare"),
}
STRATA: tuple[tuple[str, str], ...] = tuple((f, c) for f in FAMILIES for c in CONTEXTS[f])
LEARNING_BLOCKS: tuple[tuple[str, str], ...] = STRATA[:4]
PHASES: tuple[str, ...] = ("development", "adaptation", "future")
_PHASE_SHORT = ("dev", "adapt", "future")
SPLIT_SIZES: dict[str, int] = {"development": 24, "adaptation": 48, "future": 48}
WORLD_ROLE = 4
BASE_SEED = 20260820
"""Default base seed of :func:`build_synthetic` (the paper names none for the substrate)."""

_U32 = 2**32


def _offsets() -> tuple[dict[tuple[int, int], int], int]:
    out: dict[tuple[int, int], int] = {}
    j = 0
    for s, stratum in enumerate(STRATA):
        for p, phase in enumerate(PHASES):
            if phase == "adaptation" and stratum not in LEARNING_BLOCKS:
                continue
            out[(s, p)] = j
            j += SPLIT_SIZES[phase]
    return out, j


_OFFSET, TASKS_PER_STREAM = _offsets()  # 624 = 6·24 + 4·48 + 6·48


def phase_code(phase: str | int) -> int:
    """0 = development, 1 = adaptation, 2 = future (also accepts ``dev``/``adapt`` and the codes)."""
    if isinstance(phase, (int, np.integer)) and not isinstance(phase, bool):
        if 0 <= int(phase) < len(PHASES):
            return int(phase)
    elif isinstance(phase, str):
        if phase in PHASES:
            return PHASES.index(phase)
        if phase in _PHASE_SHORT:
            return _PHASE_SHORT.index(phase)
    raise ConfigError(f"phase must be one of {PHASES} (or dev/adapt/future, or 0-2); got {phase!r}")


def _family_code(family: str | int) -> int:
    if isinstance(family, (int, np.integer)) and not isinstance(family, bool) and 0 <= int(family) < len(FAMILIES):
        return int(family)
    if isinstance(family, str) and family in FAMILIES:
        return FAMILIES.index(family)
    raise ConfigError(f"family must be one of {FAMILIES} (or 0-2); got {family!r}")


def _context_code(fam: int, context: str | int) -> int:
    names = CONTEXTS[FAMILIES[fam]]
    if isinstance(context, (int, np.integer)) and not isinstance(context, bool) and 0 <= int(context) < 2:
        return int(context)
    if isinstance(context, str) and context in names:
        return names.index(context)
    raise ConfigError(f"context of family {FAMILIES[fam]!r} must be one of {names} (or 0-1); got {context!r}")


def _stratum_code(family: str | int, context: str | int) -> int:
    fam = _family_code(family)
    return 2 * fam + _context_code(fam, context)


def _check_u32(name: str, v: int) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= int(v) < _U32:
        raise ConfigError(f"{name} must be an integer in [0, 2**32); got {v!r}")
    return int(v)


def task_index(family: str | int, context: str | int, phase: str | int, q: int) -> int:
    """The canonical global index j (within a stream) of local task q of (stratum, phase)."""
    s = _stratum_code(family, context)
    p = phase_code(phase)
    if (s, p) not in _OFFSET:
        raise ConfigError(f"stratum {STRATA[s]} has no {PHASES[p]} phase (survival has no adaptation block)")
    n = SPLIT_SIZES[PHASES[p]]
    if isinstance(q, bool) or not isinstance(q, (int, np.integer)) or not 0 <= int(q) < n:
        raise ConfigError(f"local index q of the {PHASES[p]} phase must be in [0, {n}); got {q!r}")
    return _OFFSET[(s, p)] + int(q)


def draw_seed(r: int, family: str | int, context: str | int, phase: str | int, j: int, role: int, *,
              seed: int = BASE_SEED) -> np.random.SeedSequence:
    """The injective index → seed map b: ``SeedSequence([seed, r, fam, ctx, phase, j, role])``.

    ``fam`` ∈ {0 source, 1 temporal, 2 survival}, ``ctx`` the context's position in its family
    (low/balanced 0, high/rare 1), ``phase`` 0/1/2 = development/adaptation/future, ``j`` the
    canonical global task index in the stream (:func:`task_index`), ``role`` 0–3 for that arm's
    observation noise and query randomness, 4 for the latent world shared by the four arms.

    Every coordinate after ``seed`` is one 32-bit word, so the entropy has a fixed length per base
    seed and distinct coordinates give distinct entropy (SeedSequence pads short entropy with
    zeros, so variable-length paths could collide).
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or int(seed) < 0:
        raise ConfigError(f"seed must be a non-negative int; got {seed!r}")
    fam = _family_code(family)
    ctx = _context_code(fam, context)
    ph = phase_code(phase)
    r_ = _check_u32("r", r)
    j_ = _check_u32("j", j)
    if j_ >= TASKS_PER_STREAM:
        raise ConfigError(f"j must be a task index in [0, {TASKS_PER_STREAM}); got {j}")
    if isinstance(role, bool) or not isinstance(role, (int, np.integer)) or not 0 <= int(role) <= WORLD_ROLE:
        raise ConfigError(f"role must be an arm index 0-3 or {WORLD_ROLE} (latent world); got {role!r}")
    return seed_sequence(int(seed), r_, fam, ctx, ph, j_, int(role))


def seed_sequence(seed: int, *coords: int) -> np.random.SeedSequence:
    """``SeedSequence([seed, *coords])`` without validation (the builder's fast path).

    The entropy is passed as a uint32 array when ``seed`` fits one word, which SeedSequence mixes
    exactly like the list of Python ints (same words, same pool) but four times faster.
    """
    if seed < _U32:
        return np.random.SeedSequence(np.array([seed, *coords], dtype=np.uint32))
    return np.random.SeedSequence([seed, *coords])


def stream_id(r: int) -> str:
    """The stream id of replicate r: ``r00``, ``r01``, …"""
    return f"r{r:02d}"


def task_id(r: int, family: str, context: str, phase: str | int, q: int) -> str:
    """``r03/source/low/adapt/07``: stream, stratum, phase (dev/adapt/future) and local index."""
    return f"{stream_id(r)}/{family}/{context}/{_PHASE_SHORT[phase_code(phase)]}/{q:02d}"


@dataclass(frozen=True, slots=True)
class PublicTask:
    """The public input x of one task (core §15 item 15): what a controller may see.

    ``clock`` follows the library's policy-clock convention (``FutureInput.clock``): the last
    adaptation slot already ingested when the task is presented in canonical closed-loop order,
    −1 when none.  For a future task it is T_{r,R}, the last slot of the prefix that feeds R
    (R₁…R₄: their own block, survival: the whole stream).  ``updates`` = clock + 1 is the number
    of adaptation updates made before the task (the OCRR ledger's own clock).
    """

    stream: str
    r: int
    family: str
    context: str
    phase: str
    index: int
    global_index: int
    clock: int
    task: str

    @property
    def stratum(self) -> tuple[str, str]:
        return (self.family, self.context)

    @property
    def updates(self) -> int:
        return self.clock + 1


def _clock(s: int, p: int, q: int) -> int:
    n = SPLIT_SIZES["adaptation"]
    n_learning = len(LEARNING_BLOCKS)
    if p == 1:  # adaptation slot b·48 + q sees slots < itself
        return s * n + q - 1
    if s >= n_learning:  # survival: after all learning blocks
        return n_learning * n - 1
    return (s + 1) * n - 1 if p == 2 else s * n - 1


def public_task(r: int, family: str, context: str, phase: str | int, q: int) -> PublicTask:
    """The :class:`PublicTask` of local task q of (stratum, phase) in stream r."""
    j = task_index(family, context, phase, q)
    s = _stratum_code(family, context)
    p = phase_code(phase)
    return PublicTask(stream_id(r), int(r), family, context, PHASES[p], int(q), j, _clock(s, p, int(q)),
                      task_id(r, family, context, p, int(q)))
