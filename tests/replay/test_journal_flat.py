"""Journal shards as one flat array (issue 27): the same arrays come back; older per-array files still load."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from replaylens.replay._journal import Journal


def test_flat_shard_round_trip_and_the_former_layout(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    arrays = [rng.integers(0, 9, size=(3, 2, 1, 1, j)) for j in (4, 0, 7)]
    j = Journal(tmp_path, {"k": 1})
    j.record(0, ["a", "b", "c"], arrays)
    with np.load(tmp_path / "shard-00000.npz") as z:
        assert sorted(z.files) == ["flat", "shapes"]
    back = Journal(tmp_path, {"k": 1})  # reopened: the shard is done and loads as recorded
    assert back.done(0)
    got = back.load(0)
    assert [g.shape for g in got] == [a.shape for a in arrays]
    assert all(g.dtype == a.dtype and np.array_equal(g, a) for g, a in zip(got, arrays, strict=True))
    # a shard written one entry per array (the former layout) still loads
    buf = io.BytesIO()
    np.savez(buf, *arrays)
    (tmp_path / "shard-00001.npz").write_bytes(buf.getvalue())
    old = back.load(1)
    assert all(np.array_equal(g, a) for g, a in zip(old, arrays, strict=True))
