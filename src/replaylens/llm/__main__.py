"""``python -m replaylens.llm --latency 0.1``: serve the fake OpenAI-compatible endpoint on 127.0.0.1."""

from ._fake import main

main()
