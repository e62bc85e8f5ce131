"""Repeatability of store verdicts (issue 47): per store backend that installs, one ``check-migration --store``
run repeated ``runs`` times in one process on a small shipped log, and the share of runs giving the modal verdicts.

```bash
python bench/verdicts_stores.py            # 10 runs per backend; headline last
python bench/verdicts_stores.py --runs 3
```

The check: the first 45 records of the first two streams of the shipped tool-use log (verbatim duplicates —
ties — among them; 24 queries), k = 3, migrations ``reorder`` and ``batch`` (plus the same-order rebuild
control), the default ``--control-rebuilds``; mem0 (about 0.1 s per record) reads the first 12 records of the
first stream. A run's verdict
is the tuple of every migration's status (SAFE / UNSAFE / INCONCLUSIVE / N/A); a backend repeats when all runs
give the same tuple (target 10/10). A last row runs Chroma at 256 records per ``add`` call, which stays
nondeterministic: its migrations are judged by the permutation test against the rebuilds.
``bench/verdicts.py`` imports :func:`store_repeatability`.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

BACKENDS = ("exact", "chroma", "qdrant", "faiss", "hnswlib", "langgraph", "mem0")
NOISY = ("chroma", {"add_batch": 256})
"""One more row: Chroma at 256 records per add call, a store that stays nondeterministic (judged by the test)."""
OPS = ("reorder", "batch")
STREAMS = 2
RECORDS = 45
K = 3
MEM0_RECORDS = 12


def _inputs(backend: str) -> list[Any]:
    from replaylens.memory.retrieval import example_path, streams_from_history
    from replaylens.records import read_futures, read_history

    h = read_history(example_path("history.jsonl", "tool-use"))
    f = read_futures(example_path("future.jsonl", "tool-use"))
    streams = [replace(s, items=s.items[:RECORDS]) for s in streams_from_history(h, f)[:STREAMS]]
    if backend == "mem0":
        streams = [replace(s, items=s.items[:MEM0_RECORDS]) for s in streams[:1]]
    return streams


def _installed(backend: str) -> str | None:
    """None when the backend builds here, else the one-line reason."""
    from replaylens.errors import ConfigError
    from replaylens.memory.stores import HashingEmbedder, make_store

    try:
        make_store(backend, HashingEmbedder(16)).close()
    except ConfigError as exc:
        return str(exc)
    return None


def store_repeatability(runs: int = 10) -> list[dict[str, Any]]:
    """Per backend: the verdict tuple of each of ``runs`` identical checks, the modal tuple and its share
    (``repeat``: runs with the modal verdicts / runs), the control's status and the wall time; a backend that does
    not install has ``skipped`` (its reason) instead."""
    from replaylens.memory.retrieval import StoreSpec, check_store_migrations, plan_migrations

    out: list[dict[str, Any]] = []
    for backend, params in [*((b, {}) for b in BACKENDS), NOISY]:
        label = backend + "".join(f" {k}={v}" for k, v in params.items())
        why = _installed(backend)
        if why is not None:
            out.append({"backend": label, "skipped": why})
            continue
        streams = _inputs(backend)
        base = StoreSpec(backend, dict(params))
        migs = plan_migrations(base, list(OPS))
        verdicts: list[tuple[str, ...]] = []
        judged: set[str] = set()
        t0 = time.perf_counter()
        for _ in range(runs):
            res = check_store_migrations(streams, base, migs, k=K, n_resamples=200)
            verdicts.append(tuple(f"{r.name}={r.status}" for r in res))
            judged.update(f"{r.name}:{'census' if r.test is None else 'test'}" for r in res[1:])
        modal, n_modal = Counter(verdicts).most_common(1)[0]
        out.append({"backend": label, "runs": runs, "modal": list(modal), "repeat": n_modal / runs,
                    "n_modal": n_modal, "distinct": len(set(verdicts)), "judged_by": sorted(judged),
                    "queries": sum(len(s.queries) for s in streams),
                    "records": sum(len(s.items) for s in streams), "seconds": time.perf_counter() - t0})
    return out


def lines(rows: list[dict[str, Any]]) -> list[str]:
    """The table and the headline (last)."""
    out = [f"store verdict repeatability: {STREAMS} tool-use streams x {RECORDS} records, k = {K}, migrations "
           f"{', '.join(OPS)} "
           "(+ the rebuild control)", "| backend | records | queries | runs with the modal verdicts | modal verdicts "
           "| judged by | seconds |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "skipped" in r:
            out.append(f"| {r['backend']} | | | not installed: {r['skipped']} | | | |")
            continue
        out.append(f"| {r['backend']} | {r['records']} | {r['queries']} | {r['n_modal']}/{r['runs']} | "
                   f"{', '.join(r['modal'])} | {', '.join(r['judged_by'])} | {r['seconds']:.1f} |")
    done = [r for r in rows if "skipped" not in r]
    if not done:
        out.append("headline: no store backend installed (pip install 'replaylens[stores]')")
        return out
    worst = min(r["repeat"] for r in done)
    lows = [r["backend"] for r in done if r["repeat"] == worst]
    low = "" if worst == 1 else f"; lowest repeat {worst:.0%} ({', '.join(lows)})"
    out.append(f"headline: store verdicts identical in {sum(r['repeat'] == 1 for r in done)} of {len(done)} "
               f"backends over {done[0]['runs']} identical runs{low}; target 100%")
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args(argv)
    for line in lines(store_repeatability(args.runs)):
        print(line)


if __name__ == "__main__":
    main()
