"""Calibrate the stated token approximation of ``--estimate`` (issue 23 point 6).

Builds every request of the built-in example (docs/guide/llm.md's worked example: the demo bandit with 4 streams,
cells value and rename, map 1032) exactly as ``--estimate`` does, counts each chat request with the embedded
SmolLM2's own tokenizer and chat template (json_object and json_schema modes), and prints the ratio of those
counts to the pre-tokenizer piece count and the per-message template tokens.  Needs the ``local`` extra.

    python scripts/calibrate_tokens.py
"""

from __future__ import annotations

import tempfile

from replaylens.bandit import make_bandit
from replaylens.llm import embedded_model_path, make_agent
from replaylens.llm._backends import format_messages
from replaylens.llm._budget import APPROX_PIECES, TokenCounter
from replaylens.replay import replay


def main() -> None:
    gguf = embedded_model_path()
    if gguf is None:
        raise SystemExit("the embedded model (the local extra) is not installed")
    sub = make_bandit(n_streams=4, n_future=16)
    with tempfile.TemporaryDirectory() as d:
        agent = make_agent("openai/gpt-x", base_url="https://api.example/v1", api_key_env=None, mode="estimate",
                           run_dir=d)
        replay(sub.history, sub.futures, sub.evaluator, agent, cells="value,rename", maps="1032")
        reqs = list(agent.array.estimated.values())  # type: ignore[union-attr]
    exact = TokenCounter(gguf)
    for mode in ("json_object", "json_schema"):
        pieces = texts = chat = n_msgs = 0
        for r in reqs:
            msgs = format_messages(r, mode)
            pieces += sum(len(APPROX_PIECES.findall(m["content"])) for m in msgs)
            texts += sum(exact.count(m["content"]) for m in msgs)
            chat += exact.count_messages(msgs)
            n_msgs += len(msgs)
        print(f"{mode}: {len(reqs)} requests, {n_msgs} messages; tokenizer {texts:,} text tokens, "
              f"{chat:,} with the chat template; {pieces:,} pre-tokenizer pieces")
        print(f"  tokens per piece {texts / pieces:.3f}; template tokens per message {(chat - texts) / n_msgs:.2f}")


if __name__ == "__main__":
    main()
