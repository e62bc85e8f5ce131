"""Report work done while the statistics run (issue 27).

Much of what an audit writes needs the decisions and the readouts but not the intervals: matplotlib's import,
report.html's utility consequences, changed examples and label-map heatmap, and the JSON text of every
per-stream value of summary.json.  :class:`ReportAhead` does it on one thread from the end of the replay, beside
the statistics (which spend their time in numpy, outside the GIL), so only what needs the intervals is left for
after them.  Each part is computed by the same function the writers call otherwise, from the same inputs, so
every file has the same bytes.  The writers wait for the thread before they touch matplotlib themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from ._audit import strict_json
from ._explain import changed_examples, consequences
from ._html import ReportParts, heatmap_svg
from ._json import float_list

if TYPE_CHECKING:
    from ..readouts import StreamValues
    from ..records import FutureTasks, History
    from ..replay import Decisions

__all__ = ["ReportAhead"]


def _import_pyplot() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot  # imported once, here, for the figures made later


class ReportAhead:
    """The report parts that do not need the statistics, made on one thread from the moment the decisions exist.

    ``history`` / ``futures``: the audit's inputs (report.html's changed examples), or None (no examples)."""

    def __init__(self, decisions: Decisions, history: History | None, futures: FutureTasks | None) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="replaylens-report")
        self._tasks: list[Future[Any]] = [self._pool.submit(_import_pyplot)]
        self._consequences = self._submit(consequences, decisions)
        self._examples = (self._submit(changed_examples, decisions, history, futures)
                          if history is not None and futures is not None else None)
        self._heatmap: Future[str] | None = None

    def _submit(self, fn: Any, *args: Any, **kwargs: Any) -> Future[Any]:
        task = self._pool.submit(fn, *args, **kwargs)
        self._tasks.append(task)
        return task

    def readouts(self, rows: Sequence[tuple[str, StreamValues, StreamValues, StreamValues]],
                 maps: Sequence[str]) -> None:
        """The summary rows' readouts (cell, action, ΔU, ΔO), known before their intervals: their per-stream JSON
        text and the heatmap of the action response per label map."""
        for _, *values in rows:
            for sv in values:
                self._submit(float_list, sv, sv.values, text=True)
        if rows:
            heat = [{"cell": cell, "by_map": {"action": strict_json(action.map_estimates())}}
                    for cell, action, _, _ in rows]
            self._heatmap = self._submit(heatmap_svg, heat, list(maps))

    def parts(self) -> ReportParts:
        """Wait for every part (raising a part's error) and return report.html's."""
        for task in self._tasks:
            task.result()
        self._pool.shutdown()
        return ReportParts(consequences=self._consequences.result(),
                           examples=self._examples.result() if self._examples is not None else None,
                           heatmap=self._heatmap.result() if self._heatmap is not None else None)

    def close(self) -> None:
        """Drop what has not started and wait for what has (nothing is left running); safe to call twice."""
        self._pool.shutdown(wait=True, cancel_futures=True)
