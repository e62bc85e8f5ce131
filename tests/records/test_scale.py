"""Scale (issue 17): memory-sized shards, linear-time prepare (no per-stream scan), and the statistics
vectorized over clusters with bit-for-bit the bytes of the former per-cluster loops."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replaylens.agents import load_agent
from replaylens.bandit import make_bandit
from replaylens.errors import ConfigError
from replaylens.inference import cluster_bootstrap, sign_flip_test
from replaylens.records import FutureTasks, History
from replaylens.replay import plan_replay, prepare_replay, prepare_streams, replay

engine = importlib.import_module("replaylens.replay._engine")
boot_mod = importlib.import_module("replaylens.inference._bootstrap")
flip_mod = importlib.import_module("replaylens.inference._signflip")


@pytest.fixture(scope="module")
def bandit():
    return make_bandit(n_streams=8, slots_per_block=6, n_future=3)


# --------------------------------------------------------------------------- shards sized by memory


def test_array_shards_are_sized_by_memory(bandit):
    prepared = prepare_replay(bandit.history, bandit.futures, bandit.evaluator, draws=2)
    plan, sds = prepared.plan, prepared.streams
    per = [engine.shard_memory_estimate(plan, sds[s]) for s in plan.streams]
    cdm = len(plan.cells) * len(plan.maps) * len(plan.draws)
    assert per[0] >= sds[plan.streams[0]].length * cdm * engine.BYTES_PER_CELL_RECORD
    # a budget of ~3 streams gives shards of ~3 streams; each shard within budget unless a single stream
    budget = int(per[0] * 3.5)
    shards = engine.shard_layout(plan, sds, path="array", shard_memory=budget)
    assert [s for sh in shards for s in sh] == list(plan.streams)
    assert all(sum(engine.shard_memory_estimate(plan, sds[s]) for s in sh) <= budget or len(sh) == 1
               for sh in shards)
    assert 1 < len(shards) < len(plan.streams)
    assert engine.shard_layout(plan, sds, path="array", shard_memory=1) == [(s,) for s in plan.streams]
    assert engine.shard_layout(plan, sds, path="reference") == [(s,) for s in plan.streams]
    assert engine.shard_layout(plan, sds, path="array", shard_size=3) == plan.shards(3)
    with pytest.raises(ConfigError, match="shard memory"):
        engine.shard_layout(plan, sds, path="array", shard_memory=-5)


def test_shard_memory_changes_layout_not_decisions(bandit):
    agent = load_agent("mean")
    big = replay(bandit.history, bandit.futures, bandit.evaluator, agent, draws=2)
    small = replay(bandit.history, bandit.futures, bandit.evaluator, agent, draws=2, shard_memory=1)
    assert big.actions.tobytes() == small.actions.tobytes()


def test_audit_api_accepts_execution_options(bandit):
    from replaylens.report import audit

    a = audit(bandit.history, bandit.futures, bandit.evaluator, load_agent("mean"), cells="value", n_resamples=200)
    b = audit(bandit.history, bandit.futures, bandit.evaluator, load_agent("mean"), cells="value", n_resamples=200,
              shard_memory=1, concurrency=2)
    assert a.decisions.actions.tobytes() == b.decisions.actions.tobytes()


# --------------------------------------------------------------------------- linear prepare


def test_prepare_streams_does_not_scan_per_stream(bandit, monkeypatch):
    """The old prepare called ``History.stream_slice`` and ``FutureTasks.of`` once per stream, each a scan
    of the whole table (quadratic); the new one groups once."""
    want = prepare_streams(plan_replay(bandit.history, bandit.futures), bandit.history, bandit.futures)

    def refuse(*_a, **_k):
        raise AssertionError("per-stream scan")

    monkeypatch.setattr(History, "stream_slice", refuse)
    monkeypatch.setattr(FutureTasks, "of", refuse)
    got = prepare_streams(plan_replay(bandit.history, bandit.futures), bandit.history, bandit.futures)
    assert list(got) == list(want)
    for s, sd in got.items():
        w = want[s]
        assert sd.rows == w.rows and sd.futures == w.futures
        for f in ("codes", "outcomes", "block_local", "block_global", "slots", "prefix", "menus", "stratum_code"):
            assert np.array_equal(getattr(sd, f), getattr(w, f)), (s, f)


# --------------------------------------------------------------------------- statistics: same bytes


def _loop_weighted_sums(weights_t: np.ndarray, d: np.ndarray) -> np.ndarray:
    """The former implementation (a Python loop over clusters): the bit-for-bit reference."""
    n, c = weights_t.shape
    acc = np.zeros((c, d.shape[1]), dtype=np.float64)
    tmp = np.empty_like(acc)
    for r in range(n):
        np.multiply(weights_t[r][:, None], d[r], out=tmp)
        acc += tmp
    return acc


def _loop_monte_carlo_null(gen: np.random.Generator, v: np.ndarray, n_resamples: int) -> np.ndarray:
    """The former sign-flip null (transposed copies + the loop)."""
    n = v.size
    null = np.empty(n_resamples, dtype=np.float64)
    rows = max(1, min(flip_mod._CHUNK, flip_mod._MAX_CELLS // n))
    for start in range(0, n_resamples, rows):
        c = min(rows, n_resamples - start)
        bits = gen.integers(0, 2, size=(c, n))
        signs_t = np.ascontiguousarray((1.0 - 2.0 * bits).T)
        null[start : start + c] = _loop_weighted_sums(signs_t, v[:, None])[:, 0] / n
    return null


@pytest.mark.parametrize("n,k,strata", [(7, 1, False), (64, 3, False), (300, 2, True), (5, 19, False)])
def test_cluster_bootstrap_bytes_match_the_cluster_loop(monkeypatch, n, k, strata):
    rng = np.random.default_rng(n * 31 + k)
    values = rng.standard_t(3, size=(n, k)) * 10.0 ** rng.integers(-3, 4, size=k)
    values[: n // 3, 0] = -0.0
    lab = np.arange(n) % 3 if strata else None
    new = cluster_bootstrap(values, n_resamples=3001, rng=11, strata=lab)
    monkeypatch.setattr(boot_mod, "_weighted_sums", _loop_weighted_sums)
    monkeypatch.setattr(boot_mod, "ordered_sums_available", lambda: False)  # the reference path, looped
    old = cluster_bootstrap(values, n_resamples=3001, rng=11, strata=lab)
    assert np.asarray(new.distribution).tobytes() == np.asarray(old.distribution).tobytes()
    assert np.asarray(new.low).tobytes() == np.asarray(old.low).tobytes()
    assert np.asarray(new.high).tobytes() == np.asarray(old.high).tobytes()


@pytest.mark.parametrize("n", [3, 40, 5000])
def test_sign_flip_bytes_match_the_transposed_loop(monkeypatch, n):
    rng = np.random.default_rng(n)
    values = rng.normal(0.1, 1.0, size=n)
    values[0] = -0.0
    new = sign_flip_test(values, n_resamples=2000, rng=5, exact=False)
    monkeypatch.setattr(flip_mod, "_monte_carlo_null", _loop_monte_carlo_null)
    old = sign_flip_test(values, n_resamples=2000, rng=5, exact=False)
    assert new.pvalue == old.pvalue
    assert np.asarray(new.null_distribution).tobytes() == np.asarray(old.null_distribution).tobytes()
    zeros = np.full(n, -0.0)
    got = flip_mod._monte_carlo_null(np.random.default_rng(1), zeros, 50)
    assert got.tobytes() == _loop_monte_carlo_null(np.random.default_rng(1), zeros, 50).tobytes()


# --------------------------------------------------------------------------- columnar Parquet input

io_mod = importlib.import_module("replaylens.records._io")


def _row_reader(path, build, *extra):
    """``build`` (a ``*_from_rows`` validator) on the row reader's rows of ``path``."""
    from replaylens.records._columns import read_raw

    t = read_raw(path)
    return build(t.rows, t.source, t.lines, *(getattr(t, name) for name in extra))


def _row_path(path):
    return _row_reader(path, io_mod.history_from_rows, "line_word")


def test_parquet_history_is_read_by_columns(bandit, tmp_path, monkeypatch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from replaylens.records import read_history, write_history

    p = write_history(bandit.history, tmp_path / "h.parquet")
    t = pq.read_table(p)
    # add optional columns with nulls, and stray whitespace the row reader strips
    t = t.append_column("event_id", pa.array([None if i % 2 else f" e{i} " for i in range(t.num_rows)]))
    t = t.append_column("event_time", pa.array([None if i % 3 else float(i) for i in range(t.num_rows)]))
    pq.write_table(t, p)
    want = _row_path(p)
    fast = io_mod._history_from_arrow(pq.read_table(p), str(p))
    assert fast is not None  # the columnar path handled it (no fallback)
    for f in ("stream", "family", "context", "slot", "task", "key", "outcome", "event_time", "event_id", "metadata"):
        a, b = getattr(fast, f), getattr(want, f)
        assert a.dtype.kind == b.dtype.kind and np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), f
    assert fast.fingerprint() == want.fingerprint()
    monkeypatch.setattr(io_mod, "read_raw", lambda *_a: (_ for _ in ()).throw(AssertionError("row path")))
    assert read_history(p).fingerprint() == want.fingerprint()


@pytest.mark.parametrize("column,values,needle", [
    ("outcome", lambda n: [1.5] + [0.5] * (n - 1), "outcome"),
    ("stream", lambda n: ["  "] + ["s"] * (n - 1), "must not be empty"),
    ("slot", lambda n: [-1, *range(1, n)], "slot"),
])
def test_bad_parquet_history_keeps_the_row_error(bandit, tmp_path, column, values, needle):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from replaylens.errors import InputError
    from replaylens.records import read_history, write_history

    p = write_history(bandit.history, tmp_path / "h.parquet")
    t = pq.read_table(p)
    t = t.set_column(t.column_names.index(column), column, pa.array(values(t.num_rows)))
    pq.write_table(t, p)
    with pytest.raises(InputError) as got:
        read_history(p)
    with pytest.raises(InputError) as want:
        _row_path(p)
    assert str(got.value) == str(want.value) and needle in str(got.value) and ".parquet:1: " in str(got.value)


def test_jsonl_history_is_read_by_columns(bandit, tmp_path, monkeypatch):
    from replaylens.records import read_history, write_history

    p = write_history(bandit.history, tmp_path / "h.jsonl")
    lines = p.read_text().splitlines()
    import re

    lines[2] = re.sub(r'"outcome": [0-9.e-]+', '"outcome": null', lines[2])  # a masked outcome
    assert "null" in lines[2]
    p.write_text("\n".join(lines[1:]) + "\n")
    want = _row_path(p)
    table = io_mod._arrow_jsonl(p)
    assert table is not None
    fast = io_mod._history_from_arrow(table, str(p), "line")
    assert fast is not None and fast.fingerprint() == want.fingerprint()
    for f in ("stream", "slot", "task", "key", "outcome", "event_time", "event_id", "metadata"):
        a, b = getattr(fast, f), getattr(want, f)
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), f
    # a blank line moves the line numbers: the row reader handles that file
    p.write_text("\n".join(lines[1:3]) + "\n\n" + "\n".join(lines[3:]) + "\n")
    assert io_mod._arrow_jsonl(p) is None
    assert read_history(p).fingerprint() == _row_path(p).fingerprint()
    # a bad value: same one-line message as the row reader
    bad = [*lines[1:4], lines[4].replace('"slot": ', '"slot": "x", "_": ', 1), *lines[5:]]
    p.write_text("\n".join(bad) + "\n")
    from replaylens.errors import InputError

    with pytest.raises(InputError) as got:
        read_history(p)
    with pytest.raises(InputError) as ref:
        _row_path(p)
    assert str(got.value) == str(ref.value)


def _row_evaluator(path):
    return _row_reader(path, io_mod.evaluator_from_rows)


@pytest.mark.parametrize("suffix", ["parquet", "jsonl"])
def test_utility_table_is_read_by_columns(bandit, tmp_path, monkeypatch, suffix):
    from replaylens.records import read_evaluator, write_evaluator

    p = write_evaluator(bandit.evaluator, tmp_path / f"u.{suffix}")
    want = _row_evaluator(p)
    table = io_mod.read_parquet_table(p) if suffix == "parquet" else io_mod._arrow_jsonl(p, "utility")
    assert io_mod._evaluator_columns(table) is not None  # the columnar path handles it (no fallback)
    monkeypatch.setattr(io_mod, "read_raw", lambda *_a: (_ for _ in ()).throw(AssertionError("row path")))
    fast = read_evaluator(p)
    assert list(fast.table) == list(want.table)  # same (stream, task) order
    assert all(list(fast.table[k].items()) == list(want.table[k].items()) for k in want.table)
    assert fast.source == want.source == str(p)
    assert fast.table == want.table


@pytest.mark.parametrize("column,edit,needle", [
    ("utility", lambda v: [None, *v[1:]], "utility"),
    ("key", lambda v: [" ", *v[1:]], "must not be empty"),
    ("task", lambda v: [v[1], *v[1:]], "duplicate utility"),
])
def test_bad_parquet_utility_table_keeps_the_row_error(bandit, tmp_path, column, edit, needle):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from replaylens.errors import InputError
    from replaylens.records import read_evaluator, write_evaluator

    p = write_evaluator(bandit.evaluator, tmp_path / "u.parquet")
    t = pq.read_table(p)
    if column == "task":  # the first row repeats the second row's (stream, task, key)
        for name in ("stream", "task", "key"):
            t = t.set_column(t.column_names.index(name), name, pa.array(edit(t.column(name).to_pylist())))
    else:
        t = t.set_column(t.column_names.index(column), column, pa.array(edit(t.column(column).to_pylist())))
    pq.write_table(t, p)
    assert io_mod._evaluator_columns(pq.read_table(p)) is None
    with pytest.raises(InputError) as got:
        read_evaluator(p)
    with pytest.raises(InputError) as want:
        _row_evaluator(p)
    assert str(got.value) == str(want.value) and needle in str(got.value)


def _row_futures(path):
    return _row_reader(path, io_mod.futures_from_rows)


@pytest.mark.parametrize("suffix", ["parquet", "jsonl"])
def test_future_tasks_are_read_lazily_from_columns(bandit, tmp_path, monkeypatch, suffix):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from replaylens.records import read_futures, write_futures
    from replaylens.records._arrow_rows import ArrowRows

    p = write_futures(bandit.futures, tmp_path / f"f.{suffix}")
    if suffix == "parquet":  # optional columns with nulls, and whitespace the validator strips
        t = pq.read_table(p)
        n = t.num_rows
        t = t.append_column("feeds_family", pa.array([None if i % 2 else " bandit " for i in range(n)]))
        t = t.append_column("feeds_context", pa.array([None if i % 2 else "easy" for i in range(n)]))
        t = t.append_column("metadata", pa.array([None if i % 3 else f'{{"i": {i}}}' for i in range(n)]))
        pq.write_table(t, p)
    want = _row_futures(p)
    table = io_mod.read_parquet_table(p) if suffix == "parquet" else io_mod._arrow_jsonl(p, "menu")
    rows = ArrowRows.of(table)
    assert rows is not None and len(rows) == len(want.tasks)
    assert [dict(r) for r in rows] == table.to_pylist()  # exactly what to_pylist gives the validator
    monkeypatch.setattr(io_mod, "read_raw", lambda *_a: (_ for _ in ()).throw(AssertionError("row path")))
    got = read_futures(p)
    assert got.tasks == want.tasks and got.source == want.source


@pytest.mark.parametrize("edit,needle", [
    (lambda rows: [rows[1], *rows[1:]], "duplicate future task"),
    (lambda rows: [{**rows[0], "menu": ["a", " "]}, *rows[1:]], "menu"),
    (lambda rows: [{**rows[0], "task": None}, *rows[1:]], "missing required field"),
])
def test_bad_future_tasks_keep_the_row_error(bandit, tmp_path, edit, needle):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from replaylens.errors import InputError
    from replaylens.records import read_futures, write_futures

    p = write_futures(bandit.futures, tmp_path / "f.parquet")
    t = pq.read_table(p)
    pq.write_table(pa.Table.from_pylist(edit(t.to_pylist()), schema=t.schema), p)
    with pytest.raises(InputError) as got:
        read_futures(p)
    with pytest.raises(InputError) as want:
        _row_futures(p)
    assert str(got.value) == str(want.value) and needle in str(got.value)


@settings(max_examples=80, deadline=None)
@given(need=st.lists(st.integers(0, 50), max_size=40), budget=st.integers(1, 120))
def test_shards_are_packed_as_the_stream_by_stream_loop(need: list[int], budget: int) -> None:
    ends, cur, used = [], 0, 0
    for i, x in enumerate(need):   # the loop the search replaced
        if cur and used + x > budget:
            ends.append(i)
            cur, used = 0, 0
        cur += 1
        used += x
    if cur:
        ends.append(len(need))
    assert engine.pack_greedily(np.array(need, dtype=np.int64), budget) == ends
