"""Why did a decision change?  Utility consequences per cell and concrete changed decisions with the
history the agent saw before and after the intervention, recomputed from the plan.

Each summary row compares an intervened replay with the aligned one:

* a history cell with baseline ``same`` (value, pair, key_slot, mask, reorder): cell q at ρ = id
  against aligned at id;
* consistent renaming (baseline ``identity``): cell q at each ρ ≠ id against aligned at id;
* the rekey row: aligned at each ρ ≠ id against aligned at id.

The transformed history of one (stream, cell, map, draw) is the paper's cell functional applied
record by record (:func:`~replaylens.interventions.cell_record`) with the draw's slot permutations,
exactly what the per-record reference replay feeds the writer.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..interventions import cell_record, changed_slots
from ..maps import stream_perm
from ..records import FutureTasks, History, block_name
from ..replay import Decisions, prepare_streams

__all__ = ["Comparison", "changed_examples", "comparisons", "consequences"]

ROLES = ("value", "pair", "time", "reorder")


@dataclass(frozen=True)
class Comparison:
    """Which decisions of a summary row are compared: cell ``c`` at maps ``maps`` vs aligned at id."""

    row: str
    c: int
    maps: tuple[int, ...]


def comparisons(d: Decisions) -> Iterator[Comparison]:
    """The comparison behind every summary row, in summary order (see :func:`~replaylens.report.summarize`)."""
    plan = d.plan
    multi = len(plan.maps) > 1
    others = tuple(range(1, len(plan.maps)))
    for c, cell in enumerate(plan.cells):
        if c == 0 or (cell.baseline == "identity" and not multi):
            continue
        yield Comparison(cell.name, c, others if cell.baseline == "identity" else (0,))
    if multi:
        yield Comparison("rekey", 0, others)


def _pairs(d: Decisions, cmp: Comparison) -> tuple[np.ndarray, np.ndarray]:
    """(intervened, aligned-at-id) actions, shape (len(maps), draws, repeats, tasks)."""
    sel = np.asarray(cmp.maps)
    after = d.actions[cmp.c][sel]
    before = np.broadcast_to(d.actions[0, 0][None], after.shape)
    return after, before


def consequences(d: Decisions) -> dict[str, dict[str, Any]]:
    """Per row: how many decisions changed and, among them, the shares with lower / equal / higher utility."""
    out: dict[str, dict[str, Any]] = {}
    before = d.actions[0, 0].reshape(-1)           # aligned at ρ = id: (draws × repeats × tasks)
    width = before.size
    for cmp in comparisons(d):
        n = harm = gain = total = 0
        for m in cmp.maps:   # a map at a time: the changed decisions' temporaries of one map, not of all
            after = d.actions[cmp.c][m].reshape(-1)
            total += int(after.size)
            # the changed decisions only: their aligned counterpart j (same position), their task (the last axis)
            j = np.flatnonzero(after != before) if width else np.zeros(0, dtype=np.intp)
            task = j % max(d.n_tasks, 1)
            diff = d.utility[task, after[j]] - d.utility[task, before[j]]
            n += int(j.size)
            harm, gain = harm + int((diff < -1e-12).sum()), gain + int((diff > 1e-12).sum())
        tie = n - harm - gain
        out[cmp.row] = {"n_decisions": total, "n_changed": n, "harm": harm, "tie": tie, "gain": gain,
                        **{f"{k}_share": (v / n if n else float("nan"))
                           for k, v in (("harm", harm), ("tie", tie), ("gain", gain))}}
    return out


def _fmt_outcome(u: float) -> str:
    return "masked" if math.isnan(u) else f"{u:.3g}"


def changed_examples(d: Decisions, history: History, futures: FutureTasks, *, per_row: int = 3,
                     max_records: int = 24) -> dict[str, list[dict[str, Any]]]:
    """Per row up to ``per_row`` changed decisions (distinct streams first), each with the records the
    decision saw before (aligned, original history) and after the intervention (only changed records,
    at most ``max_records``; ``hidden`` counts the rest)."""
    plan = d.plan
    labels = plan.labels
    out: dict[str, list[dict[str, Any]]] = {}
    offsets = np.r_[0, np.cumsum(np.bincount(d.stream_idx, minlength=len(plan.streams)))]
    picked = []
    for cmp in comparisons(d):
        after, before = _pairs(d, cmp)
        seen: list[int] = []
        chosen = []
        for h in _hits(after != before):  # (map_sel, draw, repeat, task), in C order; prefer distinct streams
            s = int(d.stream_idx[h[3]])
            if s not in seen:
                seen.append(s)
                chosen.append(h)
            if len(chosen) == per_row:
                break
        picked.append((cmp, after, before, chosen))
    # every example's stream encoded in one pass (a stream's encoding does not depend on the others planned)
    wanted = tuple(dict.fromkeys(plan.streams[int(d.stream_idx[h[3]])] for *_, chosen in picked for h in chosen))
    prepared = prepare_streams(replace(plan, streams=wanted), history, futures) if wanted else {}
    for cmp, after, before, chosen in picked:
        examples = []
        for ms, dr, rep, i in chosen:
            m = cmp.maps[int(ms)]
            stream = plan.streams[int(d.stream_idx[i])]
            sd = prepared[stream]
            j = int(i - offsets[d.stream_idx[i]])
            examples.append(_example(plan, sd, cmp.c, m, int(dr), j, max_records) | {
                "repeat": int(rep), "before_action": labels[int(before[ms, dr, rep, i])],
                "after_action": labels[int(after[ms, dr, rep, i])],
                "before_utility": float(d.utility[i, before[ms, dr, rep, i]]),
                "after_utility": float(d.utility[i, after[ms, dr, rep, i]]),
                "oracle": labels[int(d.oracle[i])]})
        out[cmp.row] = examples
    return out


def _hits(changed: np.ndarray, chunk: int = 1 << 16) -> Iterator[np.ndarray]:
    """The indices of ``changed``'s true entries in C order (``np.argwhere``'s rows), found a chunk at a time:
    the caller stops after a few, so the whole index array is never built."""
    flat = changed.reshape(-1)
    for c0 in range(0, flat.size, chunk):
        nz = np.flatnonzero(flat[c0:c0 + chunk]) + c0
        if nz.size:
            yield from np.stack(np.unravel_index(nz, changed.shape), axis=1)


def _example(plan: Any, sd: Any, c: int, m: int, dr: int, j: int, max_records: int) -> dict[str, Any]:
    cell, rho = plan.cells[c], plan.maps[m]
    perms = {role: stream_perm(plan.draws[dr], role, sd.name, sd.block_local) for role in ROLES}
    n = int(sd.prefix[j])
    h = sd.history
    fam, ctx, tasks = (h.text(name, sd.rows) for name in ("family", "context", "task"))   # this stream's rows only
    records: list[dict[str, Any]] = []
    changed = changed_slots(cell, sd.codes[:n], sd.outcomes[:n], rho.array, perms)
    n_changed = int(changed.size)
    for t in changed[:max_records].tolist():   # only the shown records are built one by one
        key, u, x = cell_record(cell, sd.codes, sd.outcomes, t, rho.array, perms)
        k0, u0 = int(sd.codes[t]), float(sd.outcomes[t])
        same_u = (math.isnan(u) and math.isnan(u0)) or u == u0
        src = []
        pos = {what: t if role == "id" else int(perms[role][t])
               for what, role in (("key", cell.key_from), ("outcome", cell.outcome_from), ("task", cell.task_from))}
        if pos["key"] == pos["outcome"] == pos["task"] != t:  # a whole event moved here
            src.append(f"whole event (task, key, outcome) from slot {int(sd.slots[pos['key']])}")
            pos = {}
        elif pos["key"] == pos["outcome"] != t:  # an intact (key, outcome) pair moved here
            src.append(f"pair (key, outcome) from slot {int(sd.slots[pos['key']])}")
            del pos["key"], pos["outcome"]
        src += [f"{what} from slot {int(sd.slots[p])}" for what, p in pos.items() if p != t]
        if cell.history_map and not rho.is_identity and rho.array[k0] != k0:
            src.append(f"key relabelled by ρ = {rho.name}")
        if cell.mask:
            src.append("outcome hidden")
        records.append({"slot": int(sd.slots[t]), "block": block_name(str(fam[t]), str(ctx[t])),
                        "task_before": str(tasks[t]), "task_after": str(tasks[x]),
                        "key_before": plan.labels[k0], "key_after": plan.labels[key],
                        "outcome_before": _fmt_outcome(u0), "outcome_after": _fmt_outcome(u),
                        "key_changed": key != k0, "outcome_changed": not same_u, "source": "; ".join(src)})
    f = sd.futures[j]
    menu = [plan.labels[int(a)] for a in sd.menus[j] if a >= 0]
    shown = [plan.labels[int(rho.array[plan.labels.index(a)])] for a in menu] if cell.menu_map else menu
    return {"stream": sd.name, "task": f.task, "stratum": block_name(*f.stratum), "map": rho.name, "draw": dr,
            "menu": menu, "menu_shown": shown, "visible_records": n, "changed_records": n_changed,
            "records": records, "hidden": n_changed - len(records)}
