"""Worked example 1: a plain deque-based FIFO memory (keeps the last 16 events).

    replaylens check-migration --memory docs.examples.deque_memory:make --events events.jsonl

Expected verdict: `reorder` and `merge` are UNSAFE (a different set of events survives),
`reindex` and `relabel` are SAFE.
"""

from collections import deque


class DequeMemory:
    def __init__(self, capacity: int = 16) -> None:
        self.items = deque(maxlen=capacity)

    def ingest(self, event):
        self.items.append(event)

    def export(self):
        return [{"action": e.action, "utility": round(e.utility, 6), "time": e.time} for e in self.items]

    def retrieve(self, query, k=8):
        def dist(e):
            return sum((a - b) ** 2 for a, b in zip(e.descriptors, query, strict=True))

        best = sorted(self.items, key=lambda e: (dist(e), -e.time))[:k]
        return [f"action={e.action} n=1 u={e.utility:.6f} t={e.time:g}" for e in best]


def make() -> DequeMemory:
    return DequeMemory()
