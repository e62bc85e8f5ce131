"""The shard index arithmetic (:mod:`replaylens.replay._layout`) equals the per-stream loop it replaced."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from replaylens.replay._layout import query_layout, stream_decisions, task_layout


def _streams(draw: st.DrawFn) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    out = []
    for _ in range(draw(st.integers(1, 5))):
        j = draw(st.integers(1, 7))
        prefix = np.array(draw(st.lists(st.integers(0, 4), min_size=j, max_size=j)), dtype=np.int64)
        stratum = np.array(draw(st.lists(st.integers(0, 2), min_size=j, max_size=j)), dtype=np.int64)
        menus = np.array(draw(st.lists(st.lists(st.integers(-1, 2), min_size=2, max_size=2), min_size=j,
                                       max_size=j)), dtype=np.int64)
        out.append((prefix, stratum, menus))
    return out


@st.composite
def shards(draw: st.DrawFn) -> tuple[list[tuple[np.ndarray, np.ndarray, np.ndarray]], bool, int, int]:
    return _streams(draw), draw(st.booleans()), draw(st.integers(1, 3)), draw(st.integers(1, 2))


@settings(max_examples=60, deadline=None)
@given(shards())
def test_layout_equals_per_stream_loop(case: tuple[list[tuple[np.ndarray, np.ndarray, np.ndarray]], bool, int, int]
                                       ) -> None:
    streams, dedupe, cdm, p_n = case
    lay = task_layout(np.array([p.shape[0] for p, _, _ in streams]), np.concatenate([p for p, _, _ in streams]),
                      np.concatenate([s for _, s, _ in streams]), np.concatenate([m for _, _, m in streams]),
                      dedupe=dedupe)
    ql = query_layout(lay, cdm, p_n)
    # the loop of the earlier engine
    k_max = max(np.unique(p).shape[0] for p, _, _ in streams)
    q_task: list[np.ndarray] = []
    off = 0
    a_off = 0
    for i, (prefix, stratum, menus) in enumerate(streams):
        pre = np.unique(prefix)
        assert lay.cuts[i].tolist() == np.r_[pre, np.full(k_max - pre.shape[0], pre[-1])].tolist()
        assert lay.cut[off:off + prefix.shape[0]].tolist() == np.searchsorted(pre, prefix).tolist()
        if dedupe:
            _, first, back = np.unique(np.column_stack([prefix, stratum, menus]), axis=0, return_index=True,
                                       return_inverse=True)
        else:
            first = back = np.arange(prefix.shape[0])
        n_a = first.shape[0]
        assert lay.asked[a_off:a_off + n_a].tolist() == (first + off).tolist()
        assert lay.back[off:off + prefix.shape[0]].tolist() == back.reshape(-1).tolist()
        q_task.append(np.tile(np.repeat(first + off, p_n), cdm))
        off += prefix.shape[0]
        a_off += n_a
    assert ql.task.tolist() == np.concatenate(q_task).tolist()
    assert ql.repeat.tolist() == (np.arange(ql.task.shape[0]) % p_n).tolist()
    # every decision's answer comes from the query of its own task, combination and repeat
    c_n, d_n, m_n = cdm, 1, 1
    got = stream_decisions(np.arange(ql.task.shape[0]), lay, ql, (c_n, m_n, d_n, p_n))
    first_task = 0
    for i, (prefix, _, _) in enumerate(streams):
        j = prefix.shape[0]
        q = got[i]
        assert q.shape == (c_n, m_n, d_n, p_n, j)
        assert (ql.stream[q] == i).all()
        assert (ql.combo[q] == np.arange(c_n)[:, None, None, None, None]).all()
        assert (ql.repeat[q] == np.arange(p_n)[:, None]).all()
        asked = ql.task[q]
        ctx = np.column_stack([streams[i][0], streams[i][1], streams[i][2]])
        if dedupe:  # the asked task has the same (prefix, stratum, menu)
            assert (ctx[asked - first_task] == ctx[None, None, None, None]).all()
        else:
            assert (asked == first_task + np.arange(j)).all()
        first_task += j
    if got.block is not None:   # the shard's block: every stream's array side by side, the arrays its views
        assert np.array_equal(got.block, np.concatenate(list(got), axis=-1))
        assert all(np.shares_memory(a, got.block) for a in got if a.size)


@settings(max_examples=40, deadline=None)
@given(s_n=st.integers(1, 6), j=st.integers(1, 5), dims=st.tuples(*[st.integers(1, 3)] * 4), same=st.booleans())
def test_the_shard_block_puts_each_decision_at_its_query(s_n: int, j: int, dims: tuple[int, int, int, int],
                                                         same: bool) -> None:
    """Streams of one shape give one block (cells, maps, draws, repeats, all tasks): decision (c, m, d, p, t) of
    stream i answered by query start_i + (((c·D + d)·M + m)·A + asked(t))·P + p (queries ordered stream, cell,
    draw, map, asked task, repeat), with every task asked or, ``same``, one asked task for them all."""
    c_n, m_n, d_n, p_n = dims
    prefix = np.tile(np.zeros(j, dtype=np.int64), s_n)
    ctx = np.zeros(s_n * j, dtype=np.int64) if same else np.tile(np.arange(j, dtype=np.int64), s_n)
    lay = task_layout(np.full(s_n, j), prefix, ctx, np.zeros((s_n * j, 2), dtype=np.int64), dedupe=True)
    a = 1 if same else j
    ql = query_layout(lay, c_n * d_n * m_n, p_n)
    got = stream_decisions(np.arange(ql.task.shape[0]), lay, ql, dims)
    assert got.block is not None and got.block.shape == (c_n, m_n, d_n, p_n, s_n * j)
    c, m, d, p, t = np.ix_(*[np.arange(k) for k in (c_n, m_n, d_n, p_n, j)])
    for i in range(s_n):
        want = ql.start[i] + (((c * d_n + d) * m_n + m) * a + (0 * t if same else t)) * p_n + p
        assert np.array_equal(got[i], want)
        assert np.array_equal(got.block[..., i * j:(i + 1) * j], want)


def test_utilities_for_equals_the_evaluator_task_by_task() -> None:
    from replaylens.bandit import make_bandit
    from replaylens.replay import plan_replay, prepare_streams
    from replaylens.replay._engine import utilities_for

    sub = make_bandit(n_streams=6, slots_per_block=4, n_future=3, rng=5)
    plan = plan_replay(sub.history, sub.futures, cells="value")
    sds = prepare_streams(plan, sub.history, sub.futures)
    ordered = [sds[s] for s in plan.streams]
    util, oracle = utilities_for(ordered, sub.evaluator, len(plan.labels))
    code = {lab: i for i, lab in enumerate(plan.labels)}
    i = 0
    for sd in ordered:
        for f in sd.futures:
            want = np.full(len(plan.labels), np.nan)
            want[[code[a] for a in f.menu]] = sub.evaluator.utilities(f)
            np.testing.assert_array_equal(util[i], want)
            assert oracle[i] == code[sub.evaluator.oracle(f)]
            i += 1
    assert i == util.shape[0] == oracle.shape[0]
    # streams out of the prepared order: their rows concatenated (not the run-wide arrays), the same values
    back, b_oracle = utilities_for(ordered[::-1], sub.evaluator, len(plan.labels))
    spans = np.cumsum([0, *(len(sd.futures) for sd in ordered)])
    flip = np.concatenate([np.arange(a, b) for a, b in itertools.pairwise(spans)][::-1])
    np.testing.assert_array_equal(back, util[flip])
    np.testing.assert_array_equal(b_oracle, oracle[flip])


def test_task_rows_is_the_run_wide_array_for_the_prepared_order() -> None:
    from replaylens.bandit import make_bandit
    from replaylens.replay import plan_replay, prepare_streams
    from replaylens.replay._streams import task_rows

    sub = make_bandit(n_streams=5, slots_per_block=3, n_future=2, rng=2)
    plan = plan_replay(sub.history, sub.futures, cells="value")
    sds = prepare_streams(plan, sub.history, sub.futures)
    ordered = [sds[s] for s in plan.streams]
    for name in ("prefix", "menus", "stratum_code"):
        want = np.concatenate([getattr(sd, name) for sd in ordered])
        whole = task_rows(ordered, name)
        np.testing.assert_array_equal(whole, want)
        assert whole is getattr(ordered[0]._enc, name) and not whole.flags.writeable   # no copy
        part = task_rows(ordered[1:], name)   # not from the first task: concatenated
        np.testing.assert_array_equal(part, np.concatenate([getattr(sd, name) for sd in ordered[1:]]))
        assert part.flags.writeable


def test_array_shard_gives_the_reference_codes_in_the_actions_type() -> None:
    """The array path's per-stream arrays are the per-record path's codes, in action_dtype (one byte here)."""
    from replaylens.agents import load_agent
    from replaylens.bandit import make_bandit
    from replaylens.replay import plan_replay, prepare_streams, run_shard
    from replaylens.replay._engine import block_vocabulary
    from replaylens.replay._layout import action_dtype

    sub = make_bandit(n_streams=4, slots_per_block=4, n_future=3, rng=7)
    plan = plan_replay(sub.history, sub.futures, cells="value,key_slot,rename", draws=2)
    sds = prepare_streams(plan, sub.history, sub.futures)
    ordered = [sds[s] for s in plan.streams]
    blocks = block_vocabulary(sub.history, sub.futures)
    agent = load_agent("mean")
    arr = run_shard(plan, ordered, agent, path="array", blocks=blocks)
    ref = run_shard(plan, ordered, agent, path="reference", blocks=blocks)
    assert len(arr) == len(ref) == len(ordered)
    for a, r in zip(arr, ref, strict=True):
        assert a.dtype == action_dtype(len(plan.labels)) == np.int8
        np.testing.assert_array_equal(a, r)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(-3, 3), st.integers(0, 2), st.integers(-1, 4)), min_size=1, max_size=30),
       st.booleans())
def test_sorted_groups_equal_lexsort(rows: list[tuple[int, int, int]], wide: bool) -> None:
    """One stable sort of the mixed-radix code (or, for keys too wide for it, the lexsort) orders the rows as
    lexsort does, and marks the same group starts."""
    from replaylens.replay._layout import _group_starts, _sorted_groups

    keys = [np.array(c, dtype=np.int64) for c in zip(*rows, strict=True)]
    if wide:  # ranges beyond 62 bits together
        keys = [k * (2**40) for k in keys]
    order, new = _sorted_groups(keys)
    want = np.lexsort(tuple(reversed(keys)))
    assert order.tolist() == want.tolist()
    assert new.tolist() == _group_starts(keys, want).tolist()


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.integers(0, 4), st.integers(1, 5), st.integers(1, 3), st.integers(0, 2**32))
def test_query_layout_grid_equals_the_ragged_arithmetic(s_n: int, a: int, cdm: int, p_n: int, seed: int) -> None:
    """Streams asking as many tasks each: the broadcast grid equals the general index arithmetic."""
    from replaylens.replay._layout import TaskLayout, _query_layout_ragged

    rng = np.random.default_rng(seed)
    tasks = rng.integers(a, a + 3, size=s_n)
    first = np.r_[0, np.cumsum(tasks)][:-1]
    asked = np.concatenate([f + np.sort(rng.choice(t, size=a, replace=False))
                            for f, t in zip(first, tasks, strict=True)])
    n = int(tasks.sum())
    lay = TaskLayout(s_n, tasks, np.zeros((s_n, 1), dtype=np.int64), np.zeros(n, dtype=np.int64),
                     asked.astype(np.int64), np.full(s_n, a, dtype=np.int64), np.zeros(n, dtype=np.int64))
    got, want = query_layout(lay, cdm, p_n), _query_layout_ragged(lay, cdm, p_n)
    for name in ("stream", "combo", "task", "repeat", "start"):
        assert getattr(got, name).tolist() == getattr(want, name).tolist(), name
        assert getattr(got, name).dtype == np.int64
