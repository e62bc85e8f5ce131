"""Store benchmark: ingest and query throughput per backend through ReplayLens's adapter vs the backend's own API in
the same run, and the peak memory of a 100,000-record ingestion.

Both paths get the same vectors from the same embedder (a table of seeded random unit vectors, so embedding costs
next to nothing and the adapter's own overhead shows): the native path calls the package directly the way the
adapter does (same batch sizes, same index parameters, the same stored payload, and FAISS's own ``normalize_L2``
where cosine similarity needs unit vectors; numpy's row norms for the exact baseline), the adapter path goes
through ``make_store``. Both return the same information per hit (id, score, metadata; the adapter as ``Hit``
tuples, the native path as plain tuples).
Every timing is the best of ``--repeat`` fresh builds (``time.perf_counter``; the two builds alternate which goes
first, and, as ``timeit`` does, garbage is collected before and the collector is off inside a timed section, so
neither path pays for collecting the other's objects; an ingest includes building the empty index); a query
pass asks ``--queries`` queries at k = 10, in two workloads: one by one (``store.query`` vs one native search per
query) and batched,
``--batch`` queries a call (``store.query_many``, the retrieval agent's path, vs the native batched search the
adapter makes: FAISS ``search`` on chunks below its BLAS threshold, hnswlib ``knn_query`` and Chroma ``query`` on
the whole batch, Qdrant one ``query_points`` per query after one embedding call, LangGraph and mem0 one by one).
mem0 adds one memory per call, so it gets ``--mem0-records``; mem0 and LangGraph (whose search scores every item
in Python) get at most 100 queries.

The memory part runs each backend (exact, hnswlib, faiss) in a fresh subprocess that builds a 100,000-record
store and reports its peak RSS during ingestion (VmHWM, reset through /proc/self/clear_refs just before) over the
RSS it had then, beside the raw float32 vectors' size (Linux only).

Run from the repository root (needs the ``stores`` extra)::

    python bench/stores.py
    python bench/stores.py --records 5000 --json out.json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from importlib import metadata
from typing import Any

import numpy as np

from replaylens.memory.stores import STORES, StoreItem, make_store, query_many

SEED = 20261125
DIM = 128
K = 10
BATCH = 50
SLOW_QUERIES = ("mem0", "langgraph")  # LangGraph scores every item in Python (~0.25 s a query at 5,000): 100 queries


class TableEmbedder:
    """Seeded random unit vectors looked up by text ("r<i>" / "q<i>"): identical for both paths, nearly free."""

    name = "table"
    batch_invariant = True

    def __init__(self, n: int, q: int, dim: int = DIM) -> None:
        rng = np.random.default_rng(SEED)
        m = rng.standard_normal((n + q, dim)).astype(np.float32)
        m /= np.linalg.norm(m, axis=1, keepdims=True)
        self._row = {f"r{i}": i for i in range(n)} | {f"q{i}": n + i for i in range(q)}
        self._m = m
        self.dim = dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._m[[self._row[t] for t in texts]]

    def fingerprint(self) -> str:
        return f"table:{SEED}:{self.dim}"


Row = tuple[str, float, Any]  # (id, score, metadata): what the native path returns per hit
One = Callable[[str], list[Row]]
Many = Callable[[list[str]], list[list[Row]]]


# ---- the backends' own APIs, used the way the adapters use them -------------------------------------------------

def _native_exact(emb: TableEmbedder, items: list[StoreItem]) -> tuple[Any, One, Many]:
    def unit(x: np.ndarray) -> np.ndarray:  # cosine similarity as a dot product of unit rows, in float64
        x64 = x.astype(np.float64)
        return x64 / np.linalg.norm(x64, axis=-1, keepdims=True)

    m64 = np.concatenate([unit(emb.embed([it.text for it in items[i:i + 1024]])) for i in range(0, len(items), 1024)])
    ids, meta = [it.id for it in items], [it.metadata for it in items]

    def rows(q: np.ndarray) -> list[Row]:
        s = m64 @ unit(q)
        order = np.argsort(-s, kind="stable")[:K].tolist()
        return [(ids[i], x, meta[i]) for i, x in zip(order, s[order].tolist(), strict=True)]

    return m64, lambda text: rows(emb.embed([text])[0]), lambda texts: [rows(q) for q in emb.embed(texts)]


def _native_faiss(emb: TableEmbedder, items: list[StoreItem]) -> tuple[Any, One, Many]:
    import faiss

    def unit(x: np.ndarray) -> np.ndarray:  # cosine similarity as inner product: FAISS's own normalize_L2
        x = np.array(x, dtype=np.float32)
        faiss.normalize_L2(x)
        return x

    index = faiss.IndexFlatIP(emb.dim)
    for i in range(0, len(items), 1024):
        index.add(unit(emb.embed([it.text for it in items[i:i + 1024]])))
    ids, meta = [it.id for it in items], [it.metadata for it in items]
    step = faiss.cvar.distance_compute_blas_threshold - 1  # the adapter's chunks (same kernel as one query)

    def query(text: str) -> list[Row]:
        d, lab = index.search(unit(emb.embed([text])), K)
        return [(ids[j], x, meta[j]) for x, j in zip(d[0].tolist(), lab[0].tolist(), strict=True)]

    def many(texts: list[str]) -> list[list[Row]]:
        qs, out = unit(emb.embed(texts)), []
        for lo in range(0, len(qs), step):
            d, lab = index.search(qs[lo:lo + step], K)
            out += [[(ids[j], x, meta[j]) for x, j in zip(dr, lr, strict=True)]
                    for dr, lr in zip(d.tolist(), lab.tolist(), strict=True)]
        return out

    return index, query, many


def _native_hnswlib(emb: TableEmbedder, items: list[StoreItem]) -> tuple[Any, One, Many]:
    import hnswlib

    index = hnswlib.Index(space="cosine", dim=emb.dim)
    index.init_index(max_elements=len(items), ef_construction=200, M=16, random_seed=100)
    index.set_ef(10)
    for i in range(0, len(items), 1024):
        batch = items[i:i + 1024]
        index.add_items(emb.embed([it.text for it in batch]), np.arange(i, i + len(batch)), num_threads=1)
    ids, meta = [it.id for it in items], [it.metadata for it in items]

    def query(text: str) -> list[Row]:
        lab, d = index.knn_query(emb.embed([text]), k=K, num_threads=1)
        return [(ids[j], 1.0 - x, meta[j]) for j, x in zip(lab[0].tolist(), d[0].tolist(), strict=True)]

    def many(texts: list[str]) -> list[list[Row]]:
        lab, d = index.knn_query(emb.embed(texts), k=K, num_threads=1)
        return [[(ids[j], 1.0 - x, meta[j]) for j, x in zip(lr, dr, strict=True)]
                for lr, dr in zip(lab.tolist(), d.tolist(), strict=True)]

    return index, query, many


def _native_chroma(emb: TableEmbedder, items: list[StoreItem]) -> tuple[Any, One, Many]:
    import chromadb
    from chromadb.config import Settings

    client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
    coll = client.create_collection(f"bench-{uuid.uuid4().hex}", embedding_function=None,
                                    configuration={"hnsw": {"space": "cosine"}})
    for i in range(0, len(items), 256):
        batch = items[i:i + 256]
        coll.add(ids=[it.id for it in batch], embeddings=emb.embed([it.text for it in batch]),
                 documents=[it.text for it in batch], metadatas=[dict(it.metadata) for it in batch])

    def many(texts: list[str]) -> list[list[Row]]:
        res = coll.query(query_embeddings=emb.embed(texts), n_results=K, include=["metadatas", "distances"])
        return [[(i, 1.0 - float(x), m) for i, x, m in zip(res["ids"][j], res["distances"][j], res["metadatas"][j],
                                                           strict=True)] for j in range(len(texts))]

    return coll, lambda text: many([text])[0], many


def _native_qdrant(emb: TableEmbedder, items: list[StoreItem]) -> tuple[Any, One, Many]:
    from qdrant_client import QdrantClient, models

    client = QdrantClient(location=":memory:")
    client.create_collection("bench", vectors_config=models.VectorParams(size=emb.dim,
                                                                         distance=models.Distance.COSINE))
    for i in range(0, len(items), 256):
        batch = items[i:i + 256]
        vecs = emb.embed([it.text for it in batch])
        client.upsert("bench", points=[models.PointStruct(id=str(uuid.uuid5(uuid.NAMESPACE_URL, it.id)),
                                                          vector=v.tolist(),
                                                          payload={"id": it.id, "text": it.text,
                                                                   "md": dict(it.metadata)})
                                       for it, v in zip(batch, vecs, strict=True)], wait=True)

    def rows(q: np.ndarray) -> list[Row]:
        res = client.query_points("bench", query=q.tolist(), limit=K, with_payload=True)
        return [(p.payload["id"], float(p.score), p.payload["md"]) for p in res.points]

    return client, lambda text: rows(emb.embed([text])[0]), lambda texts: [rows(q) for q in emb.embed(texts)]


def _native_langgraph(emb: TableEmbedder, items: list[StoreItem]) -> tuple[Any, One, Many]:
    from langgraph.store.base import PutOp
    from langgraph.store.memory import InMemoryStore

    store = InMemoryStore(index={"dims": emb.dim, "embed": lambda t: emb.embed(list(t)).tolist(), "fields": ["text"]})
    for i in range(0, len(items), 64):
        store.batch([PutOp(("bench",), it.id, {"text": it.text, "metadata": dict(it.metadata)})
                     for it in items[i:i + 64]])

    def query(text: str) -> list[Row]:
        return [(it.key, float(it.score or 0.0), it.value["metadata"])
                for it in store.search(("bench",), query=text, limit=K)]

    return store, query, lambda texts: [query(t) for t in texts]


def _native_mem0(emb: TableEmbedder, items: list[StoreItem]) -> tuple[Any, One, Many]:
    os.environ.setdefault("MEM0_TELEMETRY", "False")
    from mem0 import Memory
    from mem0.embeddings.base import EmbeddingBase

    class _E(EmbeddingBase):  # type: ignore[misc]
        def embed(self, text: str, memory_action: str | None = None) -> list[float]:
            return [float(x) for x in emb.embed([text])[0]]

    root = tempfile.mkdtemp(prefix="bench-mem0-")
    unused = {"api_key": "unused", "model": "unused", "openai_base_url": "http://127.0.0.1:9/v1"}
    mem = Memory.from_config({
        "vector_store": {"provider": "qdrant", "config": {"collection_name": "bench", "embedding_model_dims": emb.dim,
                                                          "path": f"{root}/qdrant", "on_disk": True}},
        "embedder": {"provider": "openai", "config": unused}, "llm": {"provider": "openai", "config": unused},
        "history_db_path": f"{root}/history.db"})
    mem.embedding_model = _E()
    for it in items:
        mem.add([{"role": "user", "content": it.text}], user_id="bench", metadata={**it.metadata, "rl_id": it.id},
                infer=False)

    def query(text: str) -> list[Row]:
        found = mem.search(text, top_k=K, filters={"user_id": "bench"})
        return [(m["metadata"]["rl_id"], float(m["score"]), m["metadata"]) for m in found["results"]]

    return mem, query, lambda texts: [query(t) for t in texts]


NATIVE = {"exact": _native_exact, "faiss": _native_faiss, "hnswlib": _native_hnswlib, "chroma": _native_chroma,
          "qdrant": _native_qdrant, "langgraph": _native_langgraph, "mem0": _native_mem0}


def _close(handle: Any) -> None:
    close = getattr(handle, "close", None)
    if callable(close) and not hasattr(handle, "add"):  # a client; a Chroma collection or a store has nothing to close
        close()
    vs = getattr(handle, "vector_store", None)  # mem0
    if vs is not None:
        vs.client.close()


def bench_backend(name: str, n: int, q: int, repeat: int, batch: int = BATCH) -> dict[str, float]:
    emb = TableEmbedder(n, q)
    items = [StoreItem(f"r{i}", f"r{i}", {"t": i}) for i in range(n)]
    queries = [f"q{i}" for i in range(q)]
    keys = ("native_ingest", "adapter_ingest", "native_query", "adapter_query", "native_batch", "adapter_batch")
    out: dict[str, list[float]] = {k: [] for k in keys}
    agree = batch_same = True
    handle, _, _ = NATIVE[name](emb, items[:50])  # warm-up (imports, first-call setup), not timed
    _close(handle)
    warm = make_store(name, emb)
    warm.add(items[:50])
    warm.close()
    slices = [queries[i:i + batch] for i in range(0, q, batch)]
    for rep in range(repeat):
        for side in ("native", "adapter") if rep % 2 == 0 else ("adapter", "native"):  # alternate who goes first
            gc.collect()  # as timeit does: no collection of the other build's garbage inside a timed section
            gc.disable()
            try:
                t0 = time.perf_counter()
                if side == "native":
                    handle, nq, nmany = NATIVE[name](emb, items)  # builds the index and ingests
                else:
                    store = make_store(name, emb)  # likewise: construction is part of the adapter's ingest
                    store.add(items)
                out[f"{side}_ingest"].append(time.perf_counter() - t0)
            finally:
                gc.enable()
        got: dict[str, list[list[str]]] = {"nq": [], "aq": [], "nb": [], "ab": []}
        gc.collect()
        gc.disable()
        for chunk in slices:  # the passes interleaved slice by slice, so machine load hits all alike
            t4 = time.perf_counter()
            one = [nq(x) for x in chunk]
            t5 = time.perf_counter()
            hits = [store.query(x, K) for x in chunk]
            t6 = time.perf_counter()
            many = nmany(chunk)
            t7 = time.perf_counter()
            hits_many = query_many(store, chunk, K)
            t8 = time.perf_counter()
            out["native_query"].append(t5 - t4)
            out["adapter_query"].append(t6 - t5)
            out["native_batch"].append(t7 - t6)
            out["adapter_batch"].append(t8 - t7)
            got["nq"] += [[r[0] for r in rows] for rows in one]
            got["nb"] += [[r[0] for r in rows] for rows in many]
            got["aq"] += [[h.id for h in hs] for hs in hits]
            got["ab"] += [[h.id for h in hs] for hs in hits_many]
        gc.enable()
        _close(handle)
        store.close()
        agree &= got["nq"] == got["aq"]  # two builds: equal unless the backend's build is nondeterministic
        batch_same &= got["nq"] == got["nb"] and got["aq"] == got["ab"]  # batched = one by one, same build
    for key in keys[2:]:  # the best pass: per slice, the best over repeats
        v = out[key]
        out[key] = [sum(min(v[r * len(slices) + i] for r in range(repeat)) for i in range(len(slices)))]
    best = {k: min(v) for k, v in out.items()}
    return {**best, "records": n, "queries": q, "batch": batch, "same_answers": float(agree),
            "batched_same_as_one_by_one": float(batch_same),
            "ingest_ratio": best["adapter_ingest"] / best["native_ingest"],
            "query_ratio": best["adapter_query"] / best["native_query"],
            "batch_ratio": best["adapter_batch"] / best["native_batch"]}


def _memory_child(name: str, n: int) -> None:
    """In a fresh process: RSS before and peak RSS after ingesting ``n`` records (printed as JSON)."""
    emb = TableEmbedder(n, 1)
    items = [StoreItem(f"r{i}", f"r{i}", {"t": i}) for i in range(n)]
    store = make_store(name, emb, params={"capacity": n} if name == "hnswlib" else {})
    with open("/proc/self/clear_refs", "w") as f:  # reset the peak (VmHWM) to the current RSS
        f.write("5")
    before = _status_kib("VmHWM") * 1024
    t0 = time.perf_counter()
    store.add(items)
    seconds = time.perf_counter() - t0
    store.query("q0", K)
    peak = _status_kib("VmHWM") * 1024
    print(json.dumps({"before": before, "peak": peak, "seconds": seconds, "vectors": n * emb.dim * 4}))


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def bench_memory(name: str, n: int) -> dict[str, float]:
    res = subprocess.run([sys.executable, __file__, "--memory-child", name, "--records", str(n)], check=True,
                         capture_output=True, text=True)
    return dict(json.loads(res.stdout.strip().splitlines()[-1]))


def bench_audit(backend: str, records: int, folder: str) -> dict[str, float]:
    """A store audit at scale: ``replaylens check-migration --store BACKEND`` (its default migrations and the
    same-order rebuild control) on the tool-use example grown to ``records`` records (100 streams), in a fresh
    process; wall seconds and that process's peak RSS (``os.wait4``'s ``ru_maxrss``)."""
    from replaylens.memory.retrieval import build_example

    streams = 100
    hist, fut = os.path.join(folder, "history.jsonl"), os.path.join(folder, "future.jsonl")
    if not os.path.exists(hist):
        rows = build_example("tool-use", streams=streams, records=max(1, records // streams))
        for name, path in (("history.jsonl", hist), ("future.jsonl", fut)):
            with open(path, "w") as f:
                f.writelines(json.dumps(r) + "\n" for r in rows[name])
    cmd = [sys.executable, "-m", "replaylens", "check-migration", "--store", backend, "--events", hist, "--queries",
           fut, "--json", "--out", os.path.join(folder, f"out-{backend}")]
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {err.read().decode()[-500:]}")
    return {"records": streams * max(1, records // streams), "streams": streams, "seconds": seconds,
            "peak": usage.ru_maxrss * 1024}


def _versions() -> dict[str, str]:
    out = {}
    for dist in ("numpy", "chromadb", "qdrant-client", "langgraph", "faiss-cpu", "hnswlib", "mem0ai"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=5000)
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--mem0-records", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--batch", type=int, default=BATCH, help="queries a call in the batched workload")
    ap.add_argument("--memory-records", type=int, default=100_000, help="records of the ingestion part (0: skip it)")
    ap.add_argument("--audit-records", type=int, default=100_000, help="records of the store audit (0: skip it)")
    ap.add_argument("--audit-backends", default="exact,faiss")
    ap.add_argument("--backends", default=",".join(s for s in STORES))
    ap.add_argument("--json")
    ap.add_argument("--memory-child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.memory_child:
        _memory_child(args.memory_child, args.records)
        return
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores; "
          + ", ".join(f"{k} {v}" for k, v in _versions().items()))
    results: dict[str, Any] = {"throughput": {}, "memory": {}}
    print(f"\n{'backend':10} {'records':>7} {'ingest/s native':>16} {'adapter':>10} {'ratio':>6}   "
          f"{'query/s native':>15} {'adapter':>10} {'ratio':>6}   {'batched native':>15} {'adapter':>10} "
          f"{'ratio':>6}  same (native=adapter / batched=one-by-one)")
    for name in args.backends.split(","):
        n = args.mem0_records if name == "mem0" else args.records
        q = min(args.queries, 100) if name in SLOW_QUERIES else args.queries
        try:
            r = bench_backend(name, n, q, args.repeat, args.batch)
        except ImportError as exc:
            print(f"{name:10} skipped: {exc}")
            continue
        results["throughput"][name] = r
        print(f"{name:10} {n:7d} {n / r['native_ingest']:16.0f} {n / r['adapter_ingest']:10.0f} "
              f"{r['ingest_ratio']:5.2f}x   {q / r['native_query']:15.0f} {q / r['adapter_query']:10.0f} "
              f"{r['query_ratio']:5.2f}x   {q / r['native_batch']:15.0f} {q / r['adapter_batch']:10.0f} "
              f"{r['batch_ratio']:5.2f}x  {'yes' if r['same_answers'] else 'NO'}"
              f"/{'yes' if r['batched_same_as_one_by_one'] else 'NO'}", flush=True)
    if args.memory_records:
        print(f"\npeak memory of a {args.memory_records:,}-record ingestion (fresh process each; dim {DIM}):")
    for name in ("exact", "hnswlib", "faiss") if args.memory_records else ():
        m = bench_memory(name, args.memory_records)
        results["memory"][name] = m
        print(f"  {name:8} +{(m['peak'] - m['before']) / 2**20:7.1f} MiB over the pre-ingest RSS "
              f"(raw vectors {m['vectors'] / 2**20:.1f} MiB; peak RSS {m['peak'] / 2**20:.1f} MiB; "
              f"{m['seconds']:.1f} s)", flush=True)
    if args.audit_records:
        print(f"\nstore audit at scale: check-migration --store BACKEND (default migrations + rebuild control) on "
              f"the tool-use example grown to {args.audit_records:,} records, a fresh process each:")
        results["audit"] = {}
        with tempfile.TemporaryDirectory(prefix="bench-store-audit-") as folder:
            for name in args.audit_backends.split(","):
                a = bench_audit(name, args.audit_records, folder)
                results["audit"][name] = a
                print(f"  {name:8} {a['records']:,} records in {a['streams']} streams: {a['seconds']:.1f} s wall, "
                      f"peak RSS {a['peak'] / 2**20:.1f} MiB", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    thr = results["throughput"]
    if thr:
        def worst(key: str) -> str:
            b = max(thr, key=lambda x: thr[x][key])
            return f"{thr[b][key]:.2f}x ({b})"

        print("\nheadline: adapter / native time for the same workload, worst backend: ingest "
              f"{worst('ingest_ratio')}, one-by-one query {worst('query_ratio')}, batched query "
              f"({args.batch} a call, the retrieval agent's path) {worst('batch_ratio')}; per backend "
              "ingest/one-by-one/batched: " + ", ".join(
                  f"{b} {r['ingest_ratio']:.2f}/{r['query_ratio']:.2f}/{r['batch_ratio']:.2f}" for b, r in thr.items()))


if __name__ == "__main__":
    main()


# ---------------------------------------------------------------- operation audit (issue 49), appended
# Runs after the store benchmark when the script is run (``REPLAYLENS_BENCH_OPERATION_RECORDS``: records of the
# operation audit, default 100,000; 0 skips it). ``python -c "import runpy; ..."`` or an import can call
# ``bench_operation_audit`` alone.

OPERATION_AUDIT_OPS = "dedup,keep-latest,forget-count:50,merge-text"


def bench_operation_audit(records: int, folder: str, ops: str = OPERATION_AUDIT_OPS,
                          agent: str = "mean") -> dict[str, Any]:
    """``replaylens check-operation`` at scale: ``ops`` (relations, idempotency, order independence, monotonicity
    where declared, and the ``agent``'s decisions before and after) on the shipped operation example grown to
    ``records`` records (100 streams x 2 blocks), in a fresh process; wall seconds and its peak RSS."""
    from replaylens.memory.operations import build_operation_example
    from replaylens.records import write_evaluator, write_futures, write_history

    streams = 100
    per_block = max(1, records // (streams * 2))
    paths = {n: os.path.join(folder, f"op-{n}.jsonl") for n in ("history", "future", "utilities")}
    if not os.path.exists(paths["history"]):
        ex = build_operation_example(n_streams=streams, records_per_block=per_block, n_future=12)
        write_history(ex.history, paths["history"])
        write_futures(ex.futures, paths["future"])
        write_evaluator(ex.evaluator, paths["utilities"])
    cmd = [sys.executable, "-m", "replaylens", "check-operation", "--history", paths["history"], "--future",
           paths["future"], "--utilities", paths["utilities"], "--op", ops, "--agent", agent, "--json"]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t0
        if os.waitstatus_to_exitcode(status) != 0:
            err.seek(0)
            raise RuntimeError(f"{' '.join(cmd)} failed: {err.read().decode()[-500:]}")
        out.seek(0)
        rows = json.loads(out.read().decode())
    return {"records": streams * 2 * per_block, "streams": streams, "seconds": seconds,
            "peak": usage.ru_maxrss * 1024, "ops": len(rows),
            "after": {r["op"]: r["records_after"] for r in rows},
            "status": {r["op"]: r["status"] for r in rows}}


def _operation_audit_main() -> None:
    n = int(os.environ.get("REPLAYLENS_BENCH_OPERATION_RECORDS", "100000"))
    if n <= 0:
        return
    print(f"\noperation audit at scale: check-operation --op {OPERATION_AUDIT_OPS} --agent mean on the operation "
          f"example grown to {n:,} records, a fresh process:")
    with tempfile.TemporaryDirectory(prefix="bench-operation-audit-") as folder:
        a = bench_operation_audit(n, folder)
    print(f"  {a['records']:,} records in {a['streams']} streams, {a['ops']} operations: {a['seconds']:.1f} s wall, "
          f"peak RSS {a['peak'] / 2**20:.1f} MiB; records after: "
          + ", ".join(f"{k} {v:,}" for k, v in a["after"].items())
          + "; verdicts for mean: " + ", ".join(f"{k} {v}" for k, v in a["status"].items()), flush=True)


if __name__ == "__main__":
    _operation_audit_main()
