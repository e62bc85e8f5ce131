"""Optional embedded local model: greedy single-token readout (llama-cpp-python, skipped when absent)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import replaylens as rl
from replaylens.errors import ConfigError
from replaylens.llm import PAPER_ACTIONS, LLMAgent, make_backend
from replaylens.llm._local import LlamaCppBackend, split_items
from replaylens.substrates import make_bandit


class _CountingLlama:
    """A stand-in with llama_cpp.Llama's surface: the next-token logit of ' X' is how often 'key=X' occurs."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}
        self.scores = np.zeros((1, 1))
        self.n_tokens = 0
        self._text = ""

    def tokenize(self, data: bytes, add_bos: bool = True) -> list[int]:
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
            assert st.selected(rid)["parsed_decisions"] == [req.decoders[0].enum[int(np.argmax(counts))]]
    text = "=== Item 1 of 2 ===\nA\nAnswer:\n\n=== Item 2 of 2 ===\nB\nAnswer:\n\nReturn JSON"
    assert split_items(text) == ["=== Item 1 of 2 ===\nA\nAnswer:", "=== Item 2 of 2 ===\nB\nAnswer:"]


def test_local_backend_refuses_without_the_extra_or_the_weights(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        make_backend(f"local/{tmp_path / 'missing.gguf'}")


@pytest.mark.skipif(not os.environ.get("REPLAYLENS_GGUF"), reason="set REPLAYLENS_GGUF to a local GGUF model")
def test_real_local_model(tmp_path: Path) -> None:  # pragma: no cover - needs weights and llama-cpp-python
    pytest.importorskip("llama_cpp")
    agent = LLMAgent(make_backend(f"local/{os.environ['REPLAYLENS_GGUF']}"), tmp_path / "run", namespace="AD",
                     actions=PAPER_ACTIONS).agent()
    sub = make_bandit(n_streams=1, slots_per_block=8, n_future=1, rng=5)
    dec = rl.replay(sub.history, sub.futures, sub.evaluator, agent, cells="value", maps="id")
    assert dec.actions.size > 0
