"""Worked example 2: keep, per action, the single best event seen so far (ties: the earlier logical time).

    replaylens check-migration --memory docs.examples.best_per_action_memory:make --events events.jsonl

Expected verdict: every operation is SAFE — the stored set depends only on the multiset of events
(ties are broken by logical time, which travels with the event), and relabelling renames consistently.
"""


class BestPerAction:
    def __init__(self) -> None:
        self.best = {}

    def ingest(self, event):
        old = self.best.get(event.action)
        if old is None or (event.utility, -event.time) > (old.utility, -old.time):
            self.best[event.action] = event

    def export(self):
        return [{"action": a, "utility": round(e.utility, 6), "time": e.time} for a, e in sorted(self.best.items())]

    def retrieve(self, query, k=8):
        ranked = sorted(self.best.values(), key=lambda e: (-e.utility, e.time))[:k]
        return [f"action={e.action} n=1 u={e.utility:.6f} t={e.time:g}" for e in ranked]


def make() -> BestPerAction:
    return BestPerAction()
