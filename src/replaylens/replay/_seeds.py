"""Per-decision seeds (SPEC 7; README "Randomness"): a pure function of recorded seed and NAMES.

Every decision's generator is ``default_rng(seed)`` for a 64-bit seed derived, with
:func:`replaylens.rng.mix64` over :func:`replaylens.rng.stable_int` fingerprints, from

* ``rng="independent"`` (default): (root seed, stream id, future task id, cell name, label-map
  identity (its image string), slot-draw identity (its seeds and laws), repeat);
* ``rng="common"`` (common random numbers): (root seed, stream id, future task id, repeat) only,
  so the aligned and every intervened decision of one task and repeat share their draws.

No position (of a cell in ``--cells``, a map in ``--maps``, a task in its stream) enters, so
reordering or subsetting cells and maps leaves every shared decision unchanged.  The per-record
path, the array path and every backend derive seeds here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np

from ..errors import ConfigError
from ..interventions import Cell
from ..maps import LabelMap, SlotSpec
from ..rng import mix64, stable_int, stable_ints

__all__ = ["RNG_MODES", "check_rng_mode", "combo_key", "decision_seeds", "query_seeds", "stream_key", "task_keys"]

RNG_MODES = ("independent", "common")
_U = np.uint64


def check_rng_mode(mode: str) -> str:
    """``mode`` if it is one of :data:`RNG_MODES`, else a one-line :class:`ConfigError`."""
    if mode not in RNG_MODES:
        raise ConfigError(f"rng must be one of {', '.join(RNG_MODES)}; got {mode!r}")
    return mode


def map_identity(rho: LabelMap) -> str:
    """A label map's identity: its canonical images, e.g. ``1,0,3,2``."""
    return ",".join(str(i) for i in rho.images)


def draw_identity(spec: SlotSpec) -> str:
    """A slot draw's identity: its seeds and laws (canonical JSON)."""
    return json.dumps(spec.to_dict(), sort_keys=True)


def combo_key(mode: str, cell: Cell, rho: LabelMap, spec: SlotSpec) -> np.uint64:
    """The (cell, map, draw) part of a decision's seed: 0 under common random numbers."""
    if check_rng_mode(mode) == "common":
        return _U(0)
    k = mix64(_U(stable_int(f"cell:{cell.name}")))
    k = mix64(k ^ _U(stable_int(f"map:{map_identity(rho)}")))
    return _U(mix64(k ^ _U(stable_int(f"draw:{draw_identity(spec)}"))))


def stream_key(seed: int, stream: str) -> np.uint64:
    """The (root seed, stream id) part of a decision's seed."""
    return _U(mix64(_U(seed) ^ _U(stable_int(f"stream:{stream}"))))


def task_keys(tasks: Sequence[str]) -> np.ndarray:
    """(J,) uint64 fingerprints of future task ids."""
    return stable_ints(tasks, "task:")


def _finish(skey: np.ndarray, combo: np.ndarray, tkey: np.ndarray, repeat: np.ndarray) -> np.ndarray:
    k = mix64(mix64(skey ^ combo) ^ tkey)
    return mix64(k ^ (repeat.astype(_U) + _U(1)))


def decision_seeds(seed: int, mode: str, stream: str, tasks: np.ndarray, repeats: int,
                   cell: Cell, rho: LabelMap, spec: SlotSpec) -> np.ndarray:
    """(J, P) seeds of stream ``stream``'s decisions for task keys ``tasks`` (:func:`task_keys`) and
    repeats 0..P−1 under (cell, map, draw) — the per-record path's (reference) derivation."""
    skey = np.full(tasks.shape[0], stream_key(seed, stream), dtype=_U)
    combo = np.full(tasks.shape[0], combo_key(mode, cell, rho, spec), dtype=_U)
    cols = [_finish(skey, combo, tasks, np.full(tasks.shape[0], p, dtype=_U)) for p in range(repeats)]
    return np.stack(cols, axis=1) if cols else np.empty((tasks.shape[0], 0), dtype=_U)


def query_seeds(seed: int, mode: str, streams: Sequence[str], combos: np.ndarray, q_stream: np.ndarray,
                q_combo: np.ndarray, q_task: np.ndarray, q_repeat: np.ndarray) -> np.ndarray:
    """:func:`decision_seeds` for a batch of queries as one array (same arithmetic, same bytes): query q
    reads stream ``streams[q_stream[q]]``, (cell, map, draw) key ``combos[q_combo[q]]``
    (:func:`combo_key`), task key ``q_task[q]`` (:func:`task_keys`) and repeat ``q_repeat[q]``."""
    skeys = mix64(_U(seed) ^ stable_ints(streams, "stream:"))  # stream_key of every stream
    combos = np.asarray(combos, dtype=_U)
    # _finish's first mix, mix64(stream key ^ combo key), once per (stream, combination), then gathered
    first = mix64(skeys[:, None] ^ combos[None, :]).reshape(-1)
    k = first[np.asarray(q_stream, dtype=np.int64) * combos.shape[0] + q_combo]  # a fresh array: mixed in place
    k ^= q_task.astype(_U, copy=False)
    mix64(k, out=k)
    k ^= q_repeat.astype(_U) + _U(1)
    return mix64(k, out=k)
