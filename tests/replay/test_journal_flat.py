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


def test_a_shard_block_is_journaled_once_in_its_narrowest_type(tmp_path: Path) -> None:
    """A shard that comes as one block (:class:`ShardActions`) is written as that block (int8 where its codes
    fit) and the streams' task counts; it loads back as the same block with the same per-stream arrays, and
    goes to and from a worker process as the block alone."""
    import pickle

    from replaylens.replay._layout import ShardActions

    rng = np.random.default_rng(1)
    block = rng.integers(0, 100, size=(2, 3, 1, 2, 9))   # int64, as a shard makes it
    shard = ShardActions.from_block(block, [4, 0, 5])
    assert [a.shape[-1] for a in shard] == [4, 0, 5]
    j = Journal(tmp_path, {"k": 1})
    j.record(0, ["a", "b", "c"], shard)
    with np.load(tmp_path / "shard-00000.npz") as z:
        assert sorted(z.files) == ["block", "tasks"]
        assert z["block"].dtype == np.int8 and z["tasks"].tolist() == [4, 0, 5]
    got = Journal(tmp_path, {"k": 1}).load(0)
    assert isinstance(got, ShardActions) and got.block is not None
    assert np.array_equal(got.block, block)
    assert all(np.array_equal(g, a) for g, a in zip(got, shard, strict=True))
    wide = ShardActions.from_block(block * 300, [9])   # codes past int8 (up to 29,700): int16
    j.record(1, ["d"], wide)
    with np.load(tmp_path / "shard-00001.npz") as z:
        assert z["block"].dtype == np.int16
    back = pickle.loads(pickle.dumps(shard))
    assert back.block is not None and np.array_equal(back.block, block)
    assert all(np.shares_memory(g, back.block) for g in back if g.size)
    assert [g.tolist() for g in back] == [a.tolist() for a in shard]
