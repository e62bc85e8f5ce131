"""Retrospective joint history–menu reference challenge (issue 5, item 4; partC C2, partB §15).

On the 48-stream public-data replication, the first 24 adaptation tasks of every block are
re-scheduled by a deterministic PCG64 search so that two reference rules' winners differ on the
6-decimal displayed utilities (ten groups g01–g10 = the unordered rule pairs).  Each history is
shown in five forms (full, value, pair, key_slot, masked) under four history/menu cells
(00/01/10/11) and two namespaces, two fresh repeats each: 48 × 2 × 5 × 4 × 2 = 3,840 requests of
four block items, acquired through :func:`replaylens.llm.run_joint` (journaled run directory).

With the scripted Mean agent (:class:`replaylens.llm.ScriptedBackend`) the four-cell renaming
contrast and Mean-rule agreement are exactly 1.000, as in the paper; the paper's hosted-model
(GPT-6 Astra) values are shown for reference, never as ours.

Search (recorded): for block (stream r, stratum s) and group g, one generator
``derive_rng(SEARCH_SEED, "joint-search", r, family, context, g)`` draws tries in chunks of
:data:`CHUNK`; a try is a permutation of the count vector ((7, 6, 6, 5) for g01, g02, g05, g08,
g09, else (6, 6, 6, 6)) followed by a uniform shuffle of the action multiset over the 24 slots.
The first try (within :data:`SEARCH_BUDGET`) whose two rule winners differ is the block's schedule
for g.  Allocation: groups in ascending order of feasible blocks (ties: group order), each takes
its quota (20 for g01 and g02, 19 otherwise) from its feasible unassigned blocks in block order
(stream-major, then stratum).  Blocks left over (none in our draws) go to their first feasible
group in allocation order below quota, else their first feasible group, else a balanced random
schedule (group ``None``).
"""

from __future__ import annotations

import csv
import hashlib
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from ...agents import REFERENCE_RULES
from ...errors import ConfigError
from ...inference import cluster_bootstrap
from ...llm import AcquireSettings, Backend, Budget, ScriptedBackend, canonical_json, scripted_tokens
from ...rng import derive_rng, derive_seed
from ..joint import CELLS, FORMS, PAPER_CONTEXTS, PAPER_DOMAINS, JointBlock, JointDesign, run_joint
from ..reproduce import Comparison, Kind, Kinds, compare, register_reproduction
from ..substrates.public import PublicWorld
from ._run_export import read_export, run_section, section_rows, write_export

__all__ = [
    "CHUNK",
    "FORMS",
    "DESIGN_SEED",
    "EXPORT_FORMAT",
    "GROUPS",
    "HISTORY_LEN",
    "QUERY_INDEX",
    "SEARCH_BUDGET",
    "SEARCH_SEED",
    "JointChallenge",
    "JointHistories",
    "allocate_groups",
    "assemble_challenge",
    "challenge_design",
    "embedded_profile_rows",
    "export_challenge_run",
    "export_joint_csv",
    "load_challenge_export",
    "rule_winners",
    "run_challenge",
    "search_histories",
]

SEARCH_SEED = 20260920
"""Seed of the deterministic PCG64 schedule search (the paper names no value)."""
DESIGN_SEED = 20260921
"""Seed of ω assignment, σ (value/pair) and σ_k (key-slot) derangements, acquisition order and bootstraps."""
SEARCH_BUDGET = 10_000
"""Tries per (block, group) (not stated in the paper; partC C2.3 recommendation)."""
CHUNK = 1_000
"""Tries drawn per vectorized chunk; the try sequence does not depend on the budget beyond whole chunks."""
HISTORY_LEN = 24
QUERY_INDEX = 11
N_BOOT = 10_000

GROUPS: tuple[tuple[str, str, str], ...] = (
    ("g01", "mean", "sum"), ("g02", "mean", "count"), ("g03", "mean", "latest"), ("g04", "mean", "best"),
    ("g05", "sum", "count"), ("g06", "sum", "latest"), ("g07", "sum", "best"), ("g08", "count", "latest"),
    ("g09", "count", "best"), ("g10", "latest", "best"))
"""The ten history groups in Table J-meta order: (name, rule 1, rule 2)."""
UNBALANCED = frozenset({"g01", "g02", "g05", "g08", "g09"})
QUOTAS = {g: (20 if g in ("g01", "g02") else 19) for g, _, _ in GROUPS}
_UNBAL = np.array([7, 6, 6, 5], dtype=np.int64)
_BAL = np.array([6, 6, 6, 6], dtype=np.int64)

DOMAINS = {"breast-cancer": PAPER_DOMAINS["breast_cancer"], "wine-red": PAPER_DOMAINS["wine"]}
CONTEXTS = {"iid": PAPER_CONTEXTS["iid"], "shifted": PAPER_CONTEXTS["shift"]}


# ------------------------------------------------------------------------------------------ reference rules

def rule_winners(acts: np.ndarray, micro: np.ndarray, rule: str, n_actions: int = 4) -> np.ndarray:
    """Winner of ``rule`` for every row of ``acts`` [N, T] (action indices) with displayed micro-unit
    utilities ``micro`` [N, T] (NaN = not shown): the C2.2 rules with the ReferenceRule tie order
    (first appearance in the ledger, then canonical order); only observed keys compete."""
    acts = np.asarray(acts)
    micro = np.asarray(micro, dtype=np.float64)
    T = acts.shape[1]
    t = np.arange(T, dtype=np.float64)
    mask = acts[:, None, :] == np.arange(n_actions)[None, :, None]  # [N, A, T]
    vis = mask & ~np.isnan(micro)[:, None, :]
    count = mask.sum(axis=2).astype(np.float64)
    first = np.where(mask, t, np.inf).min(axis=2)
    if rule == "count":
        defined, score = count > 0, count
    elif rule == "latest":
        defined, score = count > 0, np.where(mask, t, -1.0).max(axis=2)
    else:
        m = np.where(vis, micro[:, None, :], 0.0)
        nvis = vis.sum(axis=2).astype(np.float64)
        defined = nvis > 0
        if rule == "sum":
            score = m.sum(axis=2)
        elif rule == "best":
            score = np.where(vis, micro[:, None, :], -np.inf).max(axis=2)
        elif rule == "mean":
            score = m.sum(axis=2) / np.where(defined, nvis, 1.0)
        else:
            raise ValueError(f"unknown rule {rule!r}; use one of {REFERENCE_RULES}")
    s = np.where(defined, score, -np.inf)
    any_def = defined.any(axis=1, keepdims=True)
    top = np.where(any_def, defined & (s == s.max(axis=1, keepdims=True)), count > 0)
    f = np.where(top, first, np.inf)
    return np.argmin(f, axis=1)


# ------------------------------------------------------------------------------------------ history search

def _draw_schedules(rng: np.random.Generator, n: int, unbalanced: bool) -> np.ndarray:
    """[n, 24] schedules: a count-vector permutation (unbalanced only), then a shuffle of the multiset."""
    cv = rng.permuted(np.tile(_UNBAL, (n, 1)), axis=1) if unbalanced else np.tile(_BAL, (n, 1))
    cum = np.cumsum(cv, axis=1)
    base = (np.arange(HISTORY_LEN)[None, :, None] >= cum[:, None, :]).sum(axis=2)
    return rng.permuted(base, axis=1)


def _search_one(micro_tab: np.ndarray, rng: np.random.Generator, g: str, r1: str, r2: str,
                budget: int) -> tuple[int, np.ndarray | None]:
    """(try index of the first success or −1, its schedule) for one (block, group)."""
    done = 0
    rows = np.arange(HISTORY_LEN)
    while done < budget:
        n = min(CHUNK, budget - done)
        acts = _draw_schedules(rng, n, g in UNBALANCED)
        micro = micro_tab[rows[None, :], acts]
        ok = np.flatnonzero(rule_winners(acts, micro, r1) != rule_winners(acts, micro, r2))
        if ok.size:
            return done + int(ok[0]), acts[int(ok[0])]
        done += n
    return -1, None


def allocate_groups(feasible: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """Group index per block (−1 = none) from the [blocks, 10] feasibility matrix (C2.3), and the
    allocation order of the groups."""
    n_blocks = feasible.shape[0]
    order = sorted(range(len(GROUPS)), key=lambda j: (int(feasible[:, j].sum()), j))
    assign = np.full(n_blocks, -1, dtype=np.int64)
    for j in order:
        quota = QUOTAS[GROUPS[j][0]]
        for b in np.flatnonzero(feasible[:, j] & (assign < 0))[:quota]:
            assign[b] = j
    for b in np.flatnonzero(assign < 0):
        cand = [j for j in order if feasible[b, j]]
        under = [j for j in cand if int((assign == j).sum()) < QUOTAS[GROUPS[j][0]]]
        if under or cand:
            assign[b] = (under or cand)[0]
    return assign, order


@dataclass(frozen=True)
class JointHistories:
    """Search outcome over blocks (stream-major, then stratum): feasibility, first-success try index
    and schedule per (block, group), the allocation, and the forced histories."""

    blocks: tuple[tuple[int, int], ...]
    feasible: np.ndarray
    first_try: np.ndarray
    schedules: np.ndarray
    assignment: np.ndarray
    order: tuple[int, ...]
    histories: tuple[JointBlock, ...]
    budget: int
    seed: int
    seconds: float = 0.0

    def feasible_counts(self) -> dict[str, int]:
        return {g: int(self.feasible[:, j].sum()) for j, (g, _, _) in enumerate(GROUPS)}

    def group_of(self) -> list[str | None]:
        return [GROUPS[int(j)][0] if j >= 0 else None for j in self.assignment]

    def to_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "budget": self.budget, "chunk": CHUNK,
                "feasible_counts": self.feasible_counts(),
                "allocation_order": [GROUPS[j][0] for j in self.order],
                "groups": self.group_of(), "first_try": self.first_try.tolist()}


def search_histories(world: PublicWorld, *, budget: int = SEARCH_BUDGET, seed: int = SEARCH_SEED) -> JointHistories:
    """The C2.3 PCG64 search on every block of ``world``, the allocation, and the forced histories."""
    t0 = time.perf_counter()
    R, S = world.adapt_utility.shape[:2]
    blocks = tuple((r, s) for r in range(R) for s in range(S))
    G = len(GROUPS)
    feasible = np.zeros((len(blocks), G), dtype=bool)
    first = np.full((len(blocks), G), -1, dtype=np.int64)
    sched = np.full((len(blocks), G, HISTORY_LEN), -1, dtype=np.int64)
    for b, (r, s) in enumerate(blocks):
        micro_tab = np.round(np.asarray(world.adapt_utility[r, s, :HISTORY_LEN]) * 1e6)
        fam, ctx = world.strata[s]
        for j, (g, r1, r2) in enumerate(GROUPS):
            k, acts = _search_one(micro_tab, derive_rng(seed, "joint-search", r, fam, ctx, g), g, r1, r2, budget)
            if acts is not None:
                feasible[b, j], first[b, j], sched[b, j] = True, k, acts
    assign, order = allocate_groups(feasible)
    hist: list[JointBlock] = []
    for b, (r, s) in enumerate(blocks):
        fam, ctx = world.strata[s]
        j = int(assign[b])
        if j >= 0:
            acts = sched[b, j]
        else:
            acts = _draw_schedules(derive_rng(seed, "joint-fallback", r, fam, ctx), 1, False)[0]
        u = np.asarray(world.adapt_utility[r, s, np.arange(HISTORY_LEN), acts])
        hist.append(JointBlock(world.streams[r], fam, ctx, tuple(int(a) for a in acts),
                               tuple(float(x) for x in u), QUERY_INDEX))
    return JointHistories(blocks, feasible, first, sched, assign, tuple(order), tuple(hist), budget, seed,
                          time.perf_counter() - t0)


def challenge_design(histories: JointHistories, *, seed: int = DESIGN_SEED, repeats: int = 2,
                     state_off: bool = False) -> JointDesign:
    """The 3,840-request design (48 streams) over the forced histories; ``state_off`` gives the
    empty-ledger comparator (no records, no cell map: byte-identical prompts across forms and cells)."""
    return JointDesign(blocks=histories.histories, seed=seed, repeats=repeats, domains=dict(DOMAINS),
                       contexts=dict(CONTEXTS), state_off=state_off)


# ------------------------------------------------------------------------------------------ analyses

def _tgr(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Repeat-corrected T_gr over the last (repeat) axis of two equal-shape action arrays (2 repeats)."""
    cross = np.mean([(a[..., r] != b[..., q]) for r in range(2) for q in range(2)], axis=0)
    within = 0.5 * ((a[..., 0] != a[..., 1]).astype(np.float64) + (b[..., 0] != b[..., 1]))
    return np.asarray(cross - within, dtype=np.float64)


@dataclass
class JointChallenge:
    """A finished joint challenge: decoded actions ``Y`` [stream, namespace, form, cell, repeat, block]
    (semantic indices), rule predictions ``P[rule]`` [stream, namespace, form, cell, block] decoded
    like model outputs (−1 = undefined), and the query counterfactual table ``U`` [stream, block, arm]."""

    histories: JointHistories
    design: JointDesign
    agent: str
    Y: np.ndarray
    P: dict[str, np.ndarray]
    U: np.ndarray
    omega: tuple[str, ...]
    n_requests: int
    n_attempts: int
    gate_ok: bool
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def namespaces(self) -> tuple[str, ...]:
        return self.design.namespaces

    def _ix(self, form: str, cell: str) -> tuple[int, int]:
        return FORMS.index(form), CELLS.index(cell)

    def t_gr(self, form_c: str, cell_c: str, form_e: str, cell_e: str) -> np.ndarray:
        """Per (stream, namespace) T_gr, averaged over blocks: [stream, namespace]."""
        fc, cc = self._ix(form_c, cell_c)
        fe, ce = self._ix(form_e, cell_e)
        a = np.moveaxis(self.Y[:, :, fc, cc], 2, -1)  # [S, NS, B, R]
        b = np.moveaxis(self.Y[:, :, fe, ce], 2, -1)
        return _tgr(a, b).mean(axis=2)

    def within(self, form: str, cell: str) -> np.ndarray:
        f, c = self._ix(form, cell)
        y = self.Y[:, :, f, c]
        return np.asarray((y[:, :, 0] != y[:, :, 1]).mean(axis=2), dtype=np.float64)

    def renaming_contrast(self, form: str = "full") -> np.ndarray:
        """[stream, namespace]: ½[T(00,10) + T(11,01)] − ½[T(00,11) + T(10,01)]."""
        t = self.t_gr
        return 0.5 * (t(form, "00", form, "10") + t(form, "11", form, "01")) \
            - 0.5 * (t(form, "00", form, "11") + t(form, "10", form, "01"))

    def main_effects(self) -> dict[tuple[str, str, str], float]:
        """(namespace, form, column) → mean over streams; columns full / rekey / hist+menu (Table J-eff)."""
        out: dict[tuple[str, str, str], float] = {}
        for k, ns in enumerate(self.namespaces):
            for form in FORMS:
                if form != "full":
                    out[(ns, form, "full")] = float(self.t_gr(form, "00", "full", "00")[:, k].mean())
                out[(ns, form, "rekey")] = float(self.t_gr(form, "10", form, "00")[:, k].mean())
                out[(ns, form, "hist+menu")] = float(self.t_gr(form, "11", form, "00")[:, k].mean())
        return out

    def agreement(self, rule: str, form: str, cell: str = "00") -> np.ndarray:
        """[stream, namespace] share of decoded actions equal to the rule's decoded prediction (NaN if undefined)."""
        f, c = self._ix(form, cell)
        p = self.P[rule][:, :, f, c]  # [S, NS, B]
        if (p < 0).all():
            return np.full(p.shape[:2], np.nan)
        y = self.Y[:, :, f, c]  # [S, NS, R, B]
        return np.asarray((y == p[:, :, None, :]).mean(axis=(2, 3)), dtype=np.float64)

    def utility(self, form: str, cell: str) -> tuple[np.ndarray, np.ndarray]:
        """([stream, namespace] mean query utility, oracle agreement) over blocks and repeats."""
        f, c = self._ix(form, cell)
        y = self.Y[:, :, f, c]  # [S, NS, R, B]
        u = np.take_along_axis(self.U[:, None, None, :, :], y[..., None], axis=-1)[..., 0]
        o = y == np.argmax(self.U, axis=-1)[:, None, None, :]
        return u.mean(axis=(2, 3)), o.mean(axis=(2, 3)).astype(np.float64)

    def eligible(self, group: str, form: str) -> np.ndarray:
        """[block] (flat, stream-major) True where the group's two rules disagree on this form's displayed
        history (first namespace, cell 00) and the block belongs to the group."""
        _, r1, r2 = next(x for x in GROUPS if x[0] == group)
        f = FORMS.index(form)
        p1, p2 = self.P[r1][:, 0, f, 0], self.P[r2][:, 0, f, 0]
        dis = (p1 >= 0) & (p2 >= 0) & (p1 != p2)
        mine = np.array([g == group for g in self.histories.group_of()]).reshape(dis.shape)
        return np.asarray((dis & mine).reshape(-1))

    def group_metadata(self) -> dict[str, dict[str, int]]:
        """Table J-meta: nominal blocks / streams, and per involution stratum."""
        groups = np.array(self.histories.group_of(), dtype=object).reshape(self.Y.shape[0], -1)
        out: dict[str, dict[str, int]] = {}
        for g, _, _ in GROUPS:
            m = groups == g
            row = {"B": int(m.sum()), "S": int(m.any(axis=1).sum())}
            for name in sorted(set(self.omega)):
                sm = m & (np.array(self.omega) == name)[:, None]
                row[f"{name} B"], row[f"{name} S"] = int(sm.sum()), int(sm.any(axis=1).sum())
            out[g] = row
        return out

    def bootstrap(self, per_stream: np.ndarray, purpose: str) -> tuple[float, float, float]:
        """Estimate and 95% stratified (involution strata) stream-bootstrap interval, 10,000 draws."""
        res = cluster_bootstrap(per_stream, n_resamples=N_BOOT, level=0.95, strata=np.array(self.omega),
                                rng=derive_seed(self.design.seed, "joint-bootstrap", purpose))
        return float(np.asarray(res.estimate)), float(np.asarray(res.low)), float(np.asarray(res.high))

    def main_effects_per_stream(self) -> dict[tuple[str, str, str], np.ndarray]:
        """(namespace, form, column) → [stream] T_gr behind :meth:`main_effects` (same keys, same order)."""
        out: dict[tuple[str, str, str], np.ndarray] = {}
        for k, ns in enumerate(self.namespaces):
            for form in FORMS:
                if form != "full":
                    out[(ns, form, "full")] = self.t_gr(form, "00", "full", "00")[:, k]
                out[(ns, form, "rekey")] = self.t_gr(form, "10", form, "00")[:, k]
                out[(ns, form, "hist+menu")] = self.t_gr(form, "11", form, "00")[:, k]
        return out

    def main_effects_intervals(self) -> dict[tuple[str, str, str], tuple[float, float]]:
        """95% percentile stream-bootstrap interval (10,000 paired draws, stratified by involution stratum)
        for every :meth:`main_effects` entry."""
        per = self.main_effects_per_stream()
        keys = list(per)
        res = cluster_bootstrap(np.stack([per[k] for k in keys], axis=1), n_resamples=N_BOOT, level=0.95,
                                strata=np.array(self.omega),
                                rng=derive_seed(self.design.seed, "joint-bootstrap", "main-effects"))
        lo, hi = np.asarray(res.low).reshape(-1), np.asarray(res.high).reshape(-1)
        return {k: (float(lo[i]), float(hi[i])) for i, k in enumerate(keys)}

    def group_agreement(self, group: str, rule: str, form: str, cell: str = "00") -> tuple[np.ndarray, np.ndarray]:
        """Reference-rule agreement on the group's eligible blocks (:meth:`eligible`, C2.7 subgroup analyses):
        ([stream, namespace] share of decoded actions equal to the rule's decoded prediction over the stream's
        eligible blocks and repeats, NaN where the stream has none or the rule is undefined on the form;
        [stream] number of eligible blocks)."""
        f, c = self._ix(form, cell)
        S = self.Y.shape[0]
        elig = self.eligible(group, form).reshape(S, -1)  # [S, B]
        n = elig.sum(axis=1)
        p = self.P[rule][:, :, f, c]  # [S, NS, B]
        if (p[np.broadcast_to(elig[:, None, :], p.shape)] < 0).any() or (p < 0).all():
            return np.full(p.shape[:2], np.nan), n
        y = self.Y[:, :, f, c]  # [S, NS, R, B]
        hit = (y == p[:, :, None, :]).mean(axis=2)  # [S, NS, B]
        tot = np.where(elig[:, None, :], hit, 0.0).sum(axis=2)
        with np.errstate(invalid="ignore", divide="ignore"):
            a = np.where(n[:, None] > 0, tot / np.maximum(n, 1)[:, None], np.nan)
        return np.asarray(a, dtype=np.float64), n

    def group_agreement_pooled(self, group: str, rule: str, form: str,
                               cell: str = "00") -> tuple[np.ndarray, int, int]:
        """([namespace] mean over streams with eligible blocks of :meth:`group_agreement` (NaN if none or the
        rule is undefined), eligible blocks, eligible streams)."""
        a, n = self.group_agreement(group, rule, form, cell)
        m = n > 0
        pooled = a[m].mean(axis=0) if m.any() else np.full(a.shape[1], np.nan)
        return np.asarray(pooled, dtype=np.float64), int(n.sum()), int(m.sum())


def _predictions(design: JointDesign, streams: Sequence[str]) -> dict[str, np.ndarray]:
    """Reference-rule predictions on every displayed history, decoded through λ_A⁻¹ like a model output."""
    labels = design.labels
    S, NS, F, C = len(streams), len(design.namespaces), len(FORMS), len(CELLS)
    B = len(design.blocks_of(streams[0]))
    out = {r: np.full((S, NS, F, C, B), -1, dtype=np.int64) for r in REFERENCE_RULES}
    si = {s: i for i, s in enumerate(streams)}
    for req in design.requests("analysis"):
        m = req.meta
        if m["repeat"] != 0:
            continue
        idx = (si[m["stream"]], design.namespaces.index(m["namespace"]), FORMS.index(m["form"]),
               CELLS.index(m["cell"]))
        for rule in REFERENCE_RULES:
            if m["form"] == "masked" and rule in ("mean", "sum", "best"):
                continue
            toks = scripted_tokens(req.prompt, rule)
            if toks is None:
                continue
            out[rule][idx] = [labels.index(d.decode[t]) for d, t in zip(req.decoders, toks, strict=True)]
    return out


def run_challenge(world: PublicWorld, *, rule: str = "mean", noise: float = 0.0,
                  run_dir: str | os.PathLike[str] | None = None, histories: JointHistories | None = None,
                  budget: int = SEARCH_BUDGET, search_seed: int = SEARCH_SEED,
                  design_seed: int = DESIGN_SEED, state_off: bool = False, backend: Backend | None = None,
                  acquire: AcquireSettings | None = None, offline: bool = False,
                  spend: Budget | None = None) -> JointChallenge:
    """Search, design, acquire (into ``run_dir``, else a temporary directory that is removed
    afterwards) and decode into a :class:`JointChallenge`.

    The agent is ``backend`` (any :class:`~replaylens.llm.Backend`: an OpenAI-compatible endpoint, the
    embedded model, ...) or, when none is given, the scripted ``rule`` agent.  Rerunning on the same
    ``run_dir`` resumes an interrupted acquisition; ``offline=True`` analyses recorded decisions only.

    ``state_off=True`` runs the empty-ledger comparator instead (same request matrix and future
    support, records removed before serialization); its T_gr against Full/00 is the same-estimand
    repeated-call reference, exactly 0 for a deterministic agent.  ``spend``: a request / cost budget
    (:class:`~replaylens.llm.BudgetExhausted` when reached; the run directory resumes)."""
    timings: dict[str, float] = {}
    hist = histories or search_histories(world, budget=budget, seed=search_seed)
    timings["search_s"] = hist.seconds
    design = challenge_design(hist, seed=design_seed, state_off=state_off)
    if backend is None:
        backend = ScriptedBackend(rule, noise=noise,
                                  seed=int(derive_rng(design_seed, "scripted", rule).integers(2**31)) if noise else 0)
        acquire = acquire or AcquireSettings(concurrency=16, retries=0)
    t0 = time.perf_counter()
    if run_dir is None:
        with tempfile.TemporaryDirectory(prefix="replaylens-joint-") as tmp:
            run = run_joint(design, backend, tmp, acquire=acquire, offline=offline, spend=spend)
    else:
        run = run_joint(design, backend, run_dir, acquire=acquire, offline=offline, spend=spend)
    timings["acquire_s"] = time.perf_counter() - t0
    st = backend.settings
    agent = st.model.partition("/")[2] if st.provider == "scripted" else st.model
    return assemble_challenge(world, hist, design, agent, run.results.rows, gate_ok=run.report.ok,
                              n_attempts=run.report.n_attempts, timings=timings)


def assemble_challenge(world: PublicWorld, hist: JointHistories, design: JointDesign, agent: str,
                       rows: Sequence[dict[str, Any]], *, gate_ok: bool, n_attempts: int,
                       timings: dict[str, float] | None = None) -> JointChallenge:
    """Decode decision rows (``JointResults.rows``) into a :class:`JointChallenge` (``Y = −1`` where a
    decision is missing; the gate is then failed)."""
    timings = dict(timings or {})
    streams = design.streams
    labels = design.labels
    NS, F, C, R = len(design.namespaces), len(FORMS), len(CELLS), design.repeats
    B = len(design.blocks_of(streams[0]))
    Y = np.full((len(streams), NS, F, C, R, B), -1, dtype=np.int64)
    si = {s: i for i, s in enumerate(streams)}
    for row in rows:
        Y[si[row["stream"]], design.namespaces.index(row["namespace"]), FORMS.index(row["form"]),
          CELLS.index(row["cell"]), int(row["repeat"]), int(row["block"])] = labels.index(row["action"])
    t0 = time.perf_counter()
    P = _predictions(design, streams)
    timings["predictions_s"] = time.perf_counter() - t0
    ridx = {s: i for i, s in enumerate(world.streams)}
    U = np.stack([np.stack([np.asarray(world.future_utility[ridx[b.stream], world.strata.index((b.family, b.context)),
                                                            QUERY_INDEX]) for b in design.blocks_of(s)])
                  for s in streams])
    om = design.omega()
    return JointChallenge(hist, design, agent, Y, P, U, tuple(om[s].name for s in streams), design.n_requests,
                          n_attempts, gate_ok and bool((Y >= 0).all()), timings)


# ------------------------------------------------------------------------------------------ compact export

EXPORT_FORMAT = "replaylens-joint-export/1"
_EXPORT_KEYS = ("stream", "namespace", "form", "cell", "repeat", "block", "token", "action", "attempt_kind")


def _design_digest(design: JointDesign) -> str:
    return hashlib.sha256(canonical_json(design.to_dict()).encode("utf-8")).hexdigest()


def export_challenge_run(run_dir: str | os.PathLike[str], path: str | os.PathLike[str]) -> Path:
    """Write a compact, self-checking export of a finished joint run (gzip JSON): the frozen manifest
    and its sha256, the gate's report, token usage and one row per block decision.  The export is
    what a repository ships so the tables are recomputed without a model call
    (:func:`load_challenge_export`); the full run directory (prompts, attempts) stays with the run."""
    def row(req: Any, i: int, tok: str | None, act: str, kind: str | None) -> list[Any]:
        m = req.meta
        return [m["stream"], m["namespace"], m["form"], m["cell"], int(m["repeat"]), i, tok, act, kind]

    doc: dict[str, Any] = {"format": EXPORT_FORMAT, **run_section(run_dir, _EXPORT_KEYS, row)}
    doc["design_sha256"] = hashlib.sha256(canonical_json(doc["manifest"]["design"]).encode("utf-8")).hexdigest()
    return write_export(doc, path)


def load_challenge_export(path: str | os.PathLike[str], world: PublicWorld, *,
                          histories: JointHistories | None = None) -> tuple[JointChallenge, dict[str, Any]]:
    """Recompute a :class:`JointChallenge` from a compact export with zero model calls.  The design is
    rebuilt from the seeds (search and design) and must be byte-identical to the one frozen in the
    export's manifest; otherwise the export belongs to another design and is refused."""
    p = Path(path)
    doc = read_export(p, EXPORT_FORMAT)
    man = doc["manifest"]
    hist = histories or search_histories(world)
    design = challenge_design(hist, seed=int(man.get("seed", DESIGN_SEED)),
                              state_off=bool(man["design"].get("state_off", False)))
    if _design_digest(design) != doc["design_sha256"]:
        raise ConfigError(f"{p}: field 'design_sha256' does not match the design rebuilt from the seeds "
                          "(the export belongs to another design or code version)")
    rows = section_rows(doc, str(p))
    agent = str(man["settings"]["model"])
    ch = assemble_challenge(world, hist, design, agent, rows, gate_ok=bool(doc["validation"]["ok"]),
                            n_attempts=int(doc["validation"]["n_attempts"]))
    return ch, doc


# ------------------------------------------------------------------------------------------ CSV export

def export_joint_csv(challenge: JointChallenge, out_dir: str | os.PathLike[str]) -> list[Path]:
    """Write the numeric matrices behind the joint tables as CSV into ``out_dir`` (created if needed) and
    return the paths (floats written with ``repr``, so they re-read exactly):

    * ``joint_tgr_per_stream.csv``: per stream × namespace × form × cell, T_gr against Full in the same cell
      (Panel A; 0 for Full itself), T_gr against the form's own 00 cell (Table J-eff rekey / hist.+menu
      columns) and the within-cell disagreement;
    * ``joint_group_agreement_per_stream.csv``: per group × form × rule × namespace × stream with eligible
      blocks, the agreement on those blocks (:meth:`JointChallenge.group_agreement`);
    * ``joint_group_agreement.csv``: the pooled per-group agreement (:meth:`JointChallenge.group_agreement_pooled`),
      rows with no eligible blocks or an undefined rule omitted, as in the reproduction."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ch = challenge
    streams = ch.design.streams
    paths: list[Path] = []

    def write(name: str, header: Sequence[str], rows: list[list[Any]]) -> None:
        path = out / name
        with path.open("w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(header)
            w.writerows([[repr(x) if isinstance(x, float) else x for x in r] for r in rows])
        paths.append(path)

    rows: list[list[Any]] = []
    for form in FORMS:
        for cell in CELLS:
            vs_full = ch.t_gr(form, cell, "full", cell)
            vs_own = ch.t_gr(form, cell, form, "00")
            within = ch.within(form, cell)
            for i, st in enumerate(streams):
                for k, ns in enumerate(ch.namespaces):
                    rows.append([st, ch.omega[i], ns, form, cell, float(vs_full[i, k]), float(vs_own[i, k]),
                                 float(within[i, k])])
    write("joint_tgr_per_stream.csv", ["stream", "stratum", "namespace", "form", "cell", "t_gr_vs_full_same_cell",
                                       "t_gr_vs_form_00", "within"], rows)
    per: list[list[Any]] = []
    pooled_rows: list[list[Any]] = []
    for g, r1, r2 in GROUPS:
        for form in FORMS:
            for rule in REFERENCE_RULES:
                pooled, nb, nst = ch.group_agreement_pooled(g, rule, form)
                if nb == 0 or np.isnan(pooled).all():
                    continue
                a, n = ch.group_agreement(g, rule, form)
                for k, ns in enumerate(ch.namespaces):
                    pooled_rows.append([g, r1, r2, form, rule, ns, nb, nst, float(pooled[k])])
                    for si in np.flatnonzero(n > 0):
                        per.append([g, form, rule, ns, streams[int(si)], int(n[si]), float(a[si, k])])
    write("joint_group_agreement_per_stream.csv", ["group", "form", "rule", "namespace", "stream", "eligible_blocks",
                                                   "agreement"], per)
    write("joint_group_agreement.csv", ["group", "rule1", "rule2", "form", "rule", "namespace", "eligible_blocks",
                                        "eligible_streams", "agreement"], pooled_rows)
    return paths


# ------------------------------------------------------------------------------------------ reproductions

SCRIPTED_NOTE = ("ours: scripted Mean agent (ScriptedBackend, no noise) through the journaled acquisition layer on "
                 "the 48-stream public-data replication (seed 20260901); paper: GPT-6 Astra (hosted), shown for "
                 "reference only")
EXACT_NOTE = "exact for the scripted Mean agent (structural), compared exactly"


@cache
def _challenge() -> JointChallenge:
    from .public_data import public_world

    return run_challenge(public_world(), rule="mean")


_NS_LABEL = {"semantic": "Sem", "opaque-joint": "Opq"}
_FORM_LABEL = {"full": "Full", "value": "Value reassigned", "pair": "Pair", "key_slot": "Key-slot",
               "masked": "Utility-masked"}
_J_EFF: dict[str, tuple[float | None, float, float, float | None, float, float]] = {
    "full": (None, 1.000, 0.000, None, 1.000, 0.000), "value": (0.807, 1.000, 0.000, 0.807, 1.000, 0.000),
    "pair": (0.000, 1.000, 0.000, 0.000, 1.000, 0.000), "key_slot": (0.766, 1.000, 0.000, 0.766, 1.000, 0.000),
    "masked": (0.531, 0.135, 0.125, 0.527, 0.021, -0.003)}
_J_REF = {"mean": (1.000, 1.000, 1.000, 1.000), "sum": (0.635, 0.615, 0.635, 0.615),
          "count": (0.182, 0.276, 0.182, 0.276), "latest": (0.203, 0.229, 0.203, 0.229),
          "best": (0.453, 0.474, 0.453, 0.474)}
_J_META = {"g01": (20, 10), "g02": (20, 6), "g03": (19, 6), "g04": (19, 6), "g05": (19, 9), "g06": (19, 5),
           "g07": (19, 5), "g08": (19, 6), "g09": (19, 6), "g10": (19, 5)}
_J_META_STRATA = {"g01": (6, 4, 9, 4, 5, 2), "g02": (4, 1, 4, 2, 12, 3), "g03": (4, 1, 5, 2, 10, 3),
                  "g04": (5, 2, 4, 1, 10, 3), "g05": (10, 4, 6, 3, 3, 2), "g06": (15, 4, 4, 1, 0, 0),
                  "g07": (4, 1, 7, 2, 8, 2), "g08": (0, 0, 11, 4, 8, 2), "g09": (1, 1, 10, 3, 8, 2),
                  "g10": (15, 4, 4, 1, 0, 0)}
_RHO = {"ρ01": "1032", "ρ02": "2301", "ρ03": "3210"}
"""Involution strata: ρ0j swaps 0 and j (map names are the images in canonical order)."""
_COL = {"full": "Full", "rekey": "hist. rekey", "hist+menu": "hist.+menu"}
_RULE_LABEL = {"mean": "Mean", "sum": "Sum", "count": "Count", "latest": "Latest record", "best": "Best"}
_BOOT_NOTE = ("ours only; 95% percentile interval, 10,000 paired stream resamples stratified by involution stratum "
              "(derive_seed(design seed, 'joint-bootstrap', 'main-effects'))")
_STRUCTURAL_EFF: dict[tuple[str, str], float] = {
    **{(f, "rekey"): 1.0 for f in ("full", "value", "pair", "key_slot")},
    **{(f, "hist+menu"): 0.0 for f in ("full", "value", "pair", "key_slot")}, ("pair", "full"): 0.0}
"""(form, column) of Table J-eff whose per-stream T_gr is the same constant for the scripted Mean agent."""


@register_reproduction("joint-renaming", "Joint challenge: four-cell history/menu renaming control (scripted Mean)",
                       issue="5")
def joint_renaming() -> list[Comparison]:
    ch = _challenge()
    rows: list[Comparison] = []
    con = ch.renaming_contrast("full")
    for k, ns in enumerate(ch.namespaces):
        pairs = (("Consistent renaming (00–11)", "00", "11", 0.0), ("Reassigned renaming (10–01)", "10", "01", 0.0),
                 ("Assignment (00–10)", "00", "10", 1.0), ("Assignment (11–01)", "11", "01", 1.0))
        for label, c, e, paper in pairs:
            rows.append(compare("joint four-cell control (Full form)", label, _NS_LABEL[ns], paper,
                                float(ch.t_gr("full", c, "full", e)[:, k].mean()), 0.0, EXACT_NOTE, self_check=True))
        rows.append(compare("joint four-cell control (Full form)", "Assignment minus renaming", _NS_LABEL[ns], 1.0,
                            float(con[:, k].mean()), 0.0, EXACT_NOTE, self_check=True))
    est, lo, hi = ch.bootstrap(con.mean(axis=1), "renaming")
    for col, v in (("pooled estimate", est), ("95% lower", lo), ("95% upper", hi)):
        rows.append(compare("joint four-cell control (Full form)", "Assignment minus renaming", col, 1.0, v, 0.0,
                            f"{EXACT_NOTE}; 10,000 stratified resamples (16 streams per involution stratum)",
                            self_check=True))
    for cell in CELLS:
        rows.append(compare("joint four-cell control (Full form)", f"within-cell disagreement {cell}", "pooled", 0.0,
                            float(ch.within("full", cell).mean()), 0.0, EXACT_NOTE, self_check=True))
    for label, paper in (("Assignment minus renaming (Astra, G4 pooled)", 1.000),
                         ("Consistent renaming (Astra, G4 pooled)", 0.000)):
        rows.append(compare("tab:global-renaming (hosted model)", label, "pooled", paper, None, None,
                            "paper's hosted-model value (Astra, Sol/Arm trace), shown for reference; "
                            "no hosted run here"))
    return rows


@register_reproduction("joint-main-effects", "Joint challenge: T_gr action responses per form and cell "
                       "(tab:joint-main-effects; scripted Mean vs the paper's hosted model)", issue="5")
def joint_main_effects() -> list[Comparison]:
    ch = _challenge()
    eff = ch.main_effects()
    rows: list[Comparison] = []
    for form in FORMS:
        paper = _J_EFF[form]
        for k, ns in enumerate(ch.namespaces):
            for j, col in enumerate(("full", "rekey", "hist+menu")):
                pv = paper[3 * k + j]
                if col == "full" and form == "full":
                    continue
                rows.append(compare("tab:joint-main-effects", _FORM_LABEL[form], f"{_NS_LABEL[ns]}: {_COL[col]}",
                                    pv, eff[(ns, form, col)], None, SCRIPTED_NOTE))
    # structural claims that the scripted Mean agent must satisfy exactly
    for form in ("full", "value", "pair", "key_slot"):
        for cell in CELLS:
            rows.append(compare("joint structural (scripted Mean)", f"{_FORM_LABEL[form]} within-cell {cell}",
                                "pooled", 0.0, float(ch.within(form, cell).mean()), 0.0, EXACT_NOTE, self_check=True))
        rows.append(compare("joint structural (scripted Mean)", f"{_FORM_LABEL[form]} hist. rekey", "pooled", 1.0,
                            float(ch.t_gr(form, "10", form, "00").mean()), 0.0, EXACT_NOTE, self_check=True))
        rows.append(compare("joint structural (scripted Mean)", f"{_FORM_LABEL[form]} hist.+menu", "pooled", 0.0,
                            float(ch.t_gr(form, "11", form, "00").mean()), 0.0, EXACT_NOTE, self_check=True))
    rows.append(compare("joint structural (scripted Mean)", "Pair vs Full", "pooled", 0.0,
                        float(ch.t_gr("pair", "00", "full", "00").mean()), 0.0, EXACT_NOTE, self_check=True))
    rows.append(compare("joint structural (scripted Mean)", "Pair vs Value (direct)", "pooled", None,
                        float(ch.t_gr("pair", "00", "value", "00").mean()), None, "ours only (value–pair panel)"))
    for form in FORMS:
        for cell in CELLS:
            u, o = ch.utility(form, cell)
            u0, o0 = ch.utility("full", cell)
            rows.append(compare("joint utility (ours)", f"{_FORM_LABEL[form]} {cell}", "U", None, float(u.mean()),
                                None, "mean query utility (future index 11), repeats averaged; no paper value"))
            if form != "full":
                rows.append(compare("joint utility (ours)", f"{_FORM_LABEL[form]} {cell}", "ΔU vs Full", None,
                                    float((u - u0).mean()), None, "replay-minus-Full utility (Panel B)"))
                rows.append(compare("joint utility (ours)", f"{_FORM_LABEL[form]} {cell}", "ΔO vs Full", None,
                                    float((o - o0).mean()), None, "replay-minus-Full oracle agreement"))
    ci = ch.main_effects_intervals()
    for form in FORMS:
        for ns in ch.namespaces:
            for col in ("full", "rekey", "hist+menu"):
                if col == "full" and form == "full":
                    continue
                exact = _STRUCTURAL_EFF.get((form, col))
                for side, v in zip(("95% lower", "95% upper"), ci[(ns, form, col)], strict=True):
                    rows.append(compare("tab:joint-main-effects (95% stratified stream bootstrap)", _FORM_LABEL[form],
                                        f"{_NS_LABEL[ns]}: {_COL[col]} {side}", exact, v,
                                        None if exact is None else 0.0,
                                        _BOOT_NOTE if exact is None else f"{EXACT_NOTE} (degenerate interval); "
                                        f"{_BOOT_NOTE}", self_check=exact is not None))
    return rows


@register_reproduction("joint-reference-agreement", "Joint challenge: reference-rule agreement, aligned cell "
                       "(tab:joint-main-reference; scripted Mean)", issue="5")
def joint_reference_agreement() -> list[Comparison]:
    ch = _challenge()
    rows: list[Comparison] = []
    for rule in REFERENCE_RULES:
        paper = _J_REF[rule]
        for k, ns in enumerate(ch.namespaces):
            for j, (form, label) in enumerate((("full", "Full ledger"), ("value", "Value swap"))):
                ours = float(ch.agreement(rule, form)[:, k].mean())
                if rule == "mean":
                    rows.append(compare("tab:joint-main-reference", _RULE_LABEL[rule], f"{_NS_LABEL[ns]}: {label}",
                                        paper[2 * k + j], ours, 0.0, EXACT_NOTE, self_check=True))
                else:
                    rows.append(compare("tab:joint-main-reference", _RULE_LABEL[rule], f"{_NS_LABEL[ns]}: {label}",
                                        paper[2 * k + j], ours, None, SCRIPTED_NOTE))
    for form in FORMS:
        for cell in CELLS:
            if form == "masked":
                continue
            a = ch.agreement("mean", form, cell)
            rows.append(compare("joint Mean agreement (all cells)", _FORM_LABEL[form], cell, 1.0, float(a.mean()), 0.0,
                                EXACT_NOTE, self_check=True))
    est, lo, hi = ch.bootstrap(ch.agreement("sum", "full").mean(axis=1), "agreement-sum-full")
    for col, v in (("estimate", est), ("95% lower", lo), ("95% upper", hi)):
        rows.append(compare("joint Sum agreement (Full, pooled, stratified bootstrap)", "Sum", col, None, v, None,
                            "ours only; 10,000 stratified stream resamples"))
    rows.extend(_subgroup_agreement_rows(ch))
    return rows


def _subgroup_agreement_rows(ch: JointChallenge) -> list[Comparison]:
    """Table J-meta analyses (C2.7): per group and form, agreement with each rule on the group's eligible blocks
    (aligned cell, average within stream, then over the group's eligible streams); rows with no eligible blocks
    or an undefined rule prediction are omitted.  Exact where structural for the scripted Mean agent: the Mean
    rule agrees everywhere (1), and in the Mean groups g01–g04 the partner rule disagrees on every eligible
    block (0); otherwise ours only (the paper gives no per-group values)."""
    rows: list[Comparison] = []
    table = "joint subgroup reference agreement (Table J-meta groups, eligible blocks, aligned cell)"
    for g, r1, r2 in GROUPS:
        for form in FORMS:
            for rule in REFERENCE_RULES:
                pooled, nb, ns_ = ch.group_agreement_pooled(g, rule, form)
                if nb == 0 or np.isnan(pooled).all():
                    continue
                exact = 1.0 if rule == "mean" else (0.0 if "mean" in (r1, r2) and rule in (r1, r2) else None)
                for k, ns in enumerate(ch.namespaces):
                    rows.append(compare(table, f"{g} {_RULE_LABEL[r1]}–{_RULE_LABEL[r2]}: {_RULE_LABEL[rule]}",
                                        f"{_NS_LABEL[ns]}: {_FORM_LABEL[form]}", exact, float(pooled[k]),
                                        None if exact is None else 0.0,
                                        (f"{EXACT_NOTE}; " if exact is not None else "ours only (no paper value); ")
                                        + f"{nb} eligible blocks in {ns_} streams", self_check=exact is not None))
    return rows


@cache
def _state_off() -> JointChallenge:
    from .public_data import public_world

    return run_challenge(public_world(), rule="mean", histories=_challenge().histories, state_off=True)


@register_reproduction("joint-state-off", "Joint challenge: empty-ledger state-off comparator (scripted Mean; "
                       "byte-identical prompts)", issue="5")
def joint_state_off() -> list[Comparison]:
    off = _state_off()
    rows: list[Comparison] = []
    note = ("exact: with no records the prompts of every form and cell are byte-identical, so a deterministic "
            "agent gives 0; the paper's tab:llm-state-off (hosted Sol, other trace) is a repeated-call reference")
    typed = (("Rekey (hist. rekey)", "full", "10"), ("Value", "value", "00"), ("Pair", "pair", "00"),
             ("Key-slot", "key_slot", "00"), ("Utility-masked", "masked", "00"), ("Hist.+menu", "full", "11"))
    paper_a = {"Rekey (hist. rekey)": 0.270, "Value": 0.264, "Pair": 0.245}
    for label, form, cell in typed:
        a = off.t_gr(form, cell, "full", "00").mean(axis=1)
        u, o = off.utility(form, cell)
        u0, o0 = off.utility("full", "00")
        rows.append(compare("joint empty-ledger comparator", label, "A (T_gr vs Full 00)", 0.0, float(a.mean()), 0.0,
                            note, self_check=True))
        rows.append(compare("joint empty-ledger comparator", label, "ΔU", 0.0, float((u - u0).mean()), 0.0, note,
                            self_check=True))
        rows.append(compare("joint empty-ledger comparator", label, "ΔO", 0.0, float((o - o0).mean()), 0.0, note,
                            self_check=True))
        if label in paper_a:
            rows.append(compare("tab:llm-state-off (hosted model)", label, "A", paper_a[label], None, None,
                                "paper's hosted-model value, shown for reference"))
    on = _challenge()
    for label, form in (("Full", "full"), ("Value", "value")):
        u_on, o_on = on.utility(form, "00")
        u_off, o_off = off.utility("full", "00")
        rows.append(compare("joint state-on minus state-off (ours)", label, "changed actions", None,
                            float(np.mean(on.Y[:, :, FORMS.index(form), 0] != off.Y[:, :, 0, 0])), None,
                            "share of decisions that differ from the empty-ledger decision"))
        rows.append(compare("joint state-on minus state-off (ours)", label, "ΔU", None, float((u_on - u_off).mean()),
                            None, "query utility, state-on minus empty ledger"))
        rows.append(compare("joint state-on minus state-off (ours)", label, "ΔO", None, float((o_on - o_off).mean()),
                            None, "oracle agreement, state-on minus empty ledger"))
    return rows


# ------------------------------------------------------------------------------------------ embedded model

EMBEDDED_EXPORT = Path(__file__).parent / "data" / "joint-embedded.json.gz"
EMBEDDED_OFF_EXPORT = Path(__file__).parent / "data" / "joint-embedded-state-off.json.gz"
EMBEDDED_COMMAND = ("replaylens paper joint --model local/embedded --run-dir runs/joint-embedded "
                    "--export src/replaylens/paper/experiments/data/joint-embedded.json.gz")
EMBEDDED_OFF_COMMAND = ("replaylens paper joint --model local/embedded --state-off --run-dir runs/joint-embedded-off "
                        "--export src/replaylens/paper/experiments/data/joint-embedded-state-off.json.gz")


def _model_label(doc: dict[str, Any]) -> str:
    st = doc["manifest"]["settings"]
    name = Path(str(st["model"]).partition("/")[2]).name or str(st["model"])
    params = st.get("params") or {}
    return f"{name} ({params.get('readout', '?')} readout, {params.get('prompt_format', '?')} prompt)"


def embedded_profile_rows(ch: JointChallenge, doc: dict[str, Any],
                          off: JointChallenge | None = None) -> list[Comparison]:
    """The joint challenge's tables for a model run (ours), with the paper's hosted-model values beside
    them for reference only (status n/a: a different model, nothing is expected to match)."""
    who = _model_label(doc)
    note = f"ours: {who}, reanalysed from the committed export (zero model calls); paper: GPT-6 Astra (hosted)"
    ours_only = f"ours only: {who}"
    rows: list[Comparison] = []
    val, use = doc["validation"], doc.get("usage") or {}
    for label, v in (("requests planned", val["n_planned"]), ("requests decided", val["n_selected"]),
                     ("attempts", val["n_attempts"]), ("format retries", val["format_retries"]),
                     ("gate passed", float(bool(val["ok"])))):
        rows.append(compare("joint model run (provenance)", label, "count", None, float(v), None, ours_only))
    totals = use.get("all", use) if isinstance(use, dict) else {}
    for key in ("input_tokens", "cached_input_tokens", "output_tokens"):
        tot = totals.get(key) if isinstance(totals, dict) else None
        if isinstance(tot, int | float):
            rows.append(compare("joint model run (provenance)", key, "tokens", None, float(tot), None, ours_only))
    eff = ch.main_effects()
    ci = ch.main_effects_intervals()
    for form in FORMS:
        paper = _J_EFF[form]
        for k, ns in enumerate(ch.namespaces):
            for j, col in enumerate(("full", "rekey", "hist+menu")):
                if col == "full" and form == "full":
                    continue
                lo, hi = ci[(ns, form, col)]
                rows.append(compare("tab:joint-main-effects (model run)", _FORM_LABEL[form],
                                    f"{_NS_LABEL[ns]}: {_COL[col]}", paper[3 * k + j], eff[(ns, form, col)], None,
                                    f"{note}; ours 95% stratified stream bootstrap [{lo:.3f}, {hi:.3f}]"))
    con = ch.renaming_contrast("full")
    for k, ns in enumerate(ch.namespaces):
        for label, c, e in (("Consistent renaming (00–11)", "00", "11"), ("Reassigned renaming (10–01)", "10", "01"),
                            ("Assignment (00–10)", "00", "10"), ("Assignment (11–01)", "11", "01")):
            rows.append(compare("joint four-cell control (model run, Full form)", label, _NS_LABEL[ns], None,
                                float(ch.t_gr("full", c, "full", e)[:, k].mean()), None, ours_only))
    est, lo, hi = ch.bootstrap(con.mean(axis=1), "renaming")
    for col, v, pv in (("pooled estimate", est, 1.0), ("95% lower", lo, None), ("95% upper", hi, None)):
        rows.append(compare("joint four-cell control (model run, Full form)", "Assignment minus renaming", col, pv,
                            v, None, f"{note}; 10,000 stratified resamples; a consistent-renaming response well "
                            "above 0 exposes label dependence"))
    for form in FORMS:
        rows.append(compare("joint repeat noise (model run)", _FORM_LABEL[form], "within-cell disagreement", None,
                            float(np.mean([ch.within(form, c).mean() for c in CELLS])), None,
                            f"{ours_only}; 0 for a deterministic readout (fresh repeats are fresh calls)"))
    for rule in REFERENCE_RULES:
        for k, ns in enumerate(ch.namespaces):
            for j, (form, label) in enumerate((("full", "Full ledger"), ("value", "Value swap"))):
                rows.append(compare("tab:joint-main-reference (model run)", _RULE_LABEL[rule],
                                    f"{_NS_LABEL[ns]}: {label}", _J_REF[rule][2 * k + j],
                                    float(ch.agreement(rule, form)[:, k].mean()), None, note))
    # position and label profile: which menu row (semantic order) and which shown label the model picks
    for k, ns in enumerate(ch.namespaces):
        y = ch.Y[:, k]
        for a, name in enumerate(ch.design.labels):
            rows.append(compare("joint choice profile (model run)", f"menu row {a + 1} ({name})", _NS_LABEL[ns], None,
                                float((y == a).mean()), None, f"{ours_only}; share of all decisions; the query "
                                "oracle picks this row in "
                                f"{float((np.argmax(ch.U, axis=-1) == a).mean()):.3f} of blocks"))
    for form in FORMS:
        u, o = ch.utility(form, "00")
        rows.append(compare("joint utility (model run)", _FORM_LABEL[form], "U (cell 00)", None, float(u.mean()),
                            None, f"{ours_only}; mean query utility"))
        rows.append(compare("joint utility (model run)", _FORM_LABEL[form], "oracle agreement (cell 00)", None,
                            float(o.mean()), None, ours_only))
    if off is not None:
        for label, form in (("Full", "full"), ("Value", "value")):
            u_on = ch.utility(form, "00")[0]
            u_off = off.utility("full", "00")[0]
            rows.append(compare("joint state-on minus state-off (model run)", label, "changed actions", None,
                                float(np.mean(ch.Y[:, :, FORMS.index(form), 0] != off.Y[:, :, 0, 0])), None,
                                f"{ours_only}; share of decisions that differ from the empty-ledger decision"))
            rows.append(compare("joint state-on minus state-off (model run)", label, "ΔU", None,
                                float((u_on - u_off).mean()), None, ours_only))
        rows.append(compare("joint empty-ledger comparator (model run)", "Rekey (hist. rekey)", "A (T_gr vs Full 00)",
                            None, float(off.t_gr("full", "10", "full", "00").mean()), None,
                            f"{ours_only}; same-estimand repeated-call reference (byte-identical prompts)"))
    return rows


@register_reproduction("joint-embedded", "Joint challenge with the embedded SmolLM2-135M model: its profile "
                       "(T_gr per form and cell, renaming control, rule agreement, position bias)", issue="5")
def joint_embedded() -> list[Comparison]:
    if not EMBEDDED_EXPORT.exists():
        return [compare("joint challenge (embedded model)", "whole challenge, 3,840 requests", "status", None, None,
                        None, f"not run in this checkout: `{EMBEDDED_COMMAND}` (resumable; ~3 h on 2 CPU cores), "
                        "then rerun this reproduction")]
    from .public_data import public_world

    world = public_world()
    ch, doc = load_challenge_export(EMBEDDED_EXPORT, world)
    off = load_challenge_export(EMBEDDED_OFF_EXPORT, world)[0] if EMBEDDED_OFF_EXPORT.exists() else None
    rows = embedded_profile_rows(ch, doc, off)
    if off is None:
        rows.append(compare("joint empty-ledger comparator (model run)", "state-off run", "status", None, None, None,
                            f"not run in this checkout: `{EMBEDDED_OFF_COMMAND}`"))
    return rows


FEASIBILITY_KINDS = Kinds(columns=(("tab:joint-app-reference-subgroup-metadata", "Nom. B", Kind.DESIGN),
                                    ("joint search", "of 192", Kind.DESIGN)))
"""Allocation quotas and the 192 allocated blocks are constants of the design."""


@register_reproduction("joint-feasibility", "Joint challenge: PCG64 history search feasibility and group "
                       "allocation (Table J-meta)", issue="5", kinds=FEASIBILITY_KINDS)
def joint_feasibility() -> list[Comparison]:
    ch = _challenge()
    h = ch.histories
    note = (f"depends on our public-data draws and search (seed {h.seed}, {h.budget:,} tries per (block, group), "
            f"chunks of {CHUNK}); shown, not compared")
    rows: list[Comparison] = []
    counts = h.feasible_counts()
    for g, r1, r2 in GROUPS:
        rows.append(compare("joint search feasibility (of 192 blocks)", f"{g} {_RULE_LABEL[r1]}–{_RULE_LABEL[r2]}",
                            "feasible blocks", 100.0 if g == "g05" else None, counts[g], None, note))
    meta = ch.group_metadata()
    for g, _, _ in GROUPS:
        pb, ps = _J_META[g]
        rows.append(compare("tab:joint-app-reference-subgroup-metadata", g, "Nom. B", pb, meta[g]["B"], 0.0,
                            "allocation quota (20 for g01/g02, 19 otherwise)"))
        rows.append(compare("tab:joint-app-reference-subgroup-metadata", g, "Nom. S", ps, meta[g]["S"], None, note))
        for rho, name in _RHO.items():
            for k in ("B", "S"):
                pv = _J_META_STRATA[g][2 * (int(rho[-1]) - 1) + (k == "S")]
                rows.append(compare("tab:joint-app-reference-subgroup-metadata", g, f"{rho} {k}", pv,
                                    meta[g].get(f"{name} {k}", 0), None, note))
    rows.append(compare("joint search", "blocks allocated", "of 192", 192.0,
                        float(sum(1 for x in h.group_of() if x is not None)), 0.0, "every block receives a group"))
    for form, present in (("full", set(_J_META)), ("masked", {"g08"})):
        for g, _, _ in GROUPS:
            rows.append(compare("joint subgroup rows present", g, _FORM_LABEL[form], float(g in present),
                                float(ch.eligible(g, form).any()), 0.0,
                                "structural: Full has all groups by construction; masked only count–latest",
                                self_check=True))
    for form, absent in (("value", {"g05"}), ("pair", set()), ("key_slot", {"g05"})):
        for g, _, _ in GROUPS:
            rows.append(compare("joint subgroup rows present", g, _FORM_LABEL[form], float(g not in absent),
                                float(ch.eligible(g, form).any()), None, note))
    t = ch.timings  # a `timing` row, which `reproduce --check` leaves out: wall seconds differ between runs
    for key, label in (("search_s", "history search"), ("acquire_s", "acquire 3,840 requests"),
                       ("predictions_s", "predictions")):
        rows.append(compare("timing", f"joint challenge: {label}", "wall seconds", None, t.get(key, 0.0), None,
                            "wall seconds on the machine that generated this section"))
    return rows
