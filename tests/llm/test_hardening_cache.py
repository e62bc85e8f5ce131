"""Issue 26, point 3: a damaged or changed request cache is named or discarded, never served, never an agent
error (exit 3); a format retry never receives a cached answer; summary.json and the manifest count and digest."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from replaylens.bandit import make_bandit
from replaylens.cli._main import cli
from replaylens.llm import FakeOpenAIServer, make_backend
from replaylens.llm._cache import (
    ATTEMPT_ROLE,
    CACHE_KEY_ENV,
    CACHE_NOTE,
    DISCARDED_NOTE,
    CachedBackend,
    RequestCache,
    answer_digest,
    cache_secret,
    entry_digest,
    request_cache_key,
)
from replaylens.llm._serialize import ItemDecoder, canonical_json, sha256_text
from replaylens.llm._types import Completion, make_request
from replaylens.records import write_evaluator, write_futures, write_history


@pytest.fixture(scope="module", autouse=True)
def _own_cache_key(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """This module's cache secret in a file of its own (never the user's)."""
    path = tmp_path_factory.mktemp("cache-key") / "cache.key"
    before = os.environ.get(CACHE_KEY_ENV)
    os.environ[CACHE_KEY_ENV] = str(path)
    yield path
    if before is None:
        os.environ.pop(CACHE_KEY_ENV, None)
    else:
        os.environ[CACHE_KEY_ENV] = before


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    d = tmp_path_factory.mktemp("cache-corrupt-inputs")
    sub = make_bandit(n_streams=3, slots_per_block=8, n_future=2, rng=3)
    return ["--history", str(write_history(sub.history, d / "h.jsonl")),
            "--future", str(write_futures(sub.futures, d / "f.jsonl")),
            "--utilities", str(write_evaluator(sub.evaluator, d / "u.jsonl"))]


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(model="fake-model") as srv:
        yield srv


def _audit(inputs: list[str], srv: FakeOpenAIServer, out: Path, *cache: str) -> tuple[int, str]:
    args = ["audit", *inputs, "--out", str(out), "--agent", "llm", "--model", "openai/fake-model", "--base-url",
            srv.url, "--api-key-env", "", "--agent-param", 'params={"temperature": 0}', "--cells", "value,pair",
            "--maps", "id+ACMR", "--resamples", "50", "--quiet", *cache]
    res = CliRunner().invoke(cli, args)
    return res.exit_code, res.output


@pytest.fixture(scope="module")
def truth(inputs: list[str], server: FakeOpenAIServer, tmp_path_factory: pytest.TempPathFactory
          ) -> tuple[pd.DataFrame, Path]:
    """The decisions of an uncached run, and a cache file filled by a second run (checkpointed, closed)."""
    d = tmp_path_factory.mktemp("cache-truth")
    code, out = _audit(inputs, server, d / "true", "--no-cache")
    assert code == 0, out
    cache = d / "filled.sqlite"
    code, out = _audit(inputs, server, d / "fill", "--cache", str(cache))
    assert code == 0, out
    db = sqlite3.connect(cache)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert db.execute("SELECT count(*) FROM responses").fetchone()[0] > 8
    db.close()
    return pd.read_parquet(d / "true" / "decisions.parquet"), cache


def _sql(path: Path, fn: Callable[[sqlite3.Connection], None]) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    fn(db)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


def _random_pages(p: Path) -> None:
    rng = np.random.default_rng(26)
    data = bytearray(p.read_bytes())
    for page in range(1, len(data) // 4096):
        off = page * 4096 + 16
        data[off:off + 512] = rng.integers(0, 256, 512, dtype=np.uint8).tobytes()
    p.write_bytes(bytes(data))


def _non_json(p: Path) -> None:  # the stored text changed, its digest not: a mismatch
    _sql(p, lambda db: db.execute("UPDATE responses SET completion = 'not json {'"))


def _non_json_redigested(p: Path) -> None:  # bound correctly, but the stored completion does not decode
    def f(db: sqlite3.Connection) -> None:
        for (k,) in db.execute("SELECT key FROM responses").fetchall():
            db.execute("UPDATE responses SET completion = ?, digest = ? WHERE key = ?",
                       ("not json {", entry_digest(k, "not json {"), k))
    _sql(p, f)


def _wrong_schema(p: Path) -> None:
    _sql(p, lambda db: (db.execute("DROP TABLE responses"), db.execute("CREATE TABLE responses (k TEXT, v BLOB)")))


def _rotated_answers(p: Path) -> None:
    """Every stored answer replaced by another entry's answer (valid menu labels, same format)."""
    def f(db: sqlite3.Connection) -> None:
        rows = db.execute("SELECT key, completion FROM responses ORDER BY key").fetchall()
        texts = [json.loads(c)["text"] for _, c in rows]
        for i, (k, c) in enumerate(rows):
            other = next((t for t in texts[i + 1:] + texts[:i] if t != texts[i]), None)
            assert other is not None
            db.execute("UPDATE responses SET completion = ? WHERE key = ?",
                       (json.dumps({**json.loads(c), "text": other}), k))
    _sql(p, f)


def _undecodable_answer(p: Path) -> None:
    """A bound entry (digest recomputed) whose answer does not decode: it must not reach the format retry."""
    def f(db: sqlite3.Connection) -> None:
        for k, c in db.execute("SELECT key, completion FROM responses").fetchall():
            blob = json.dumps({**json.loads(c), "text": "I pick the best arm"}, sort_keys=True,
                              separators=(",", ":"))
            db.execute("UPDATE responses SET completion = ?, digest = ? WHERE key = ?", (blob, entry_digest(k, blob),
                                                                                          k))
    _sql(p, f)


def _poisoned(p: Path, digest: Callable[[str, str], str]) -> None:
    """Every stored answer replaced by another entry's (valid menu labels) and re-digested by ``digest``."""
    def f(db: sqlite3.Connection) -> None:
        rows = db.execute("SELECT key, completion FROM responses ORDER BY key").fetchall()
        texts = [json.loads(c)["text"] for _, c in rows]
        for i, (k, c) in enumerate(rows):
            other = next(t for t in texts[i + 1:] + texts[:i] if t != texts[i])
            blob = json.dumps({**json.loads(c), "text": other}, sort_keys=True, separators=(",", ":"))
            db.execute("UPDATE responses SET completion = ?, digest = ? WHERE key = ?", (blob, digest(k, blob), k))
    _sql(p, f)


def _poisoned_public_sha256(p: Path) -> None:  # issue 48: the unkeyed digest anyone could compute
    _poisoned(p, lambda k, blob: sha256_text(canonical_json([k, blob])))


def _poisoned_other_key(p: Path) -> None:  # the keyed digest under a secret that is not this user's
    _poisoned(p, lambda k, blob: entry_digest(k, blob, b"\x07" * 32))


def _truncated(p: Path) -> None:
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2 + 100])


def _not_a_database(p: Path) -> None:
    p.write_text("this is not a database\n" * 300)


def _pre_digest(p: Path) -> None:  # a cache from before digests: no digest column
    _sql(p, lambda db: db.execute("ALTER TABLE responses DROP COLUMN digest"))


# each corruption and its outcome: 2 (one line naming the file) or 0 (the entries discarded, the endpoint asked)
CORRUPTIONS = {"random bytes over pages": (_random_pages, 2), "non-JSON stored completion": (_non_json, 0),
               "undecodable completion, digest recomputed": (_non_json_redigested, 0),
               "wrong schema table": (_wrong_schema, 2), "changed but valid answers": (_rotated_answers, 0),
               "undecodable answer": (_undecodable_answer, 0), "truncated file": (_truncated, 2),
               "not a database": (_not_a_database, 2), "entries without digest": (_pre_digest, 0),
               "poisoned, re-digested with the public sha256": (_poisoned_public_sha256, 0),
               "poisoned, re-digested under another key": (_poisoned_other_key, 0)}


@pytest.mark.parametrize("name", list(CORRUPTIONS))
def test_a_corrupted_cache_is_a_miss_or_one_line_naming_the_file(name: str, inputs: list[str],
                                                                 server: FakeOpenAIServer,
                                                                 truth: tuple[pd.DataFrame, Path],
                                                                 tmp_path: Path) -> None:
    decisions, filled = truth
    cache = tmp_path / "cache.sqlite"
    shutil.copy(filled, cache)
    corrupt, expected = CORRUPTIONS[name]
    corrupt(cache)
    calls = server.n_requests
    code, output = _audit(inputs, server, tmp_path / "out", "--cache", str(cache))
    assert code == expected, output                    # never 3: a damaged cache is not the agent's error
    assert "Traceback" not in output and "asyncio" not in output
    if code == 2:
        line = next(ln for ln in output.splitlines() if str(cache) in ln)
        assert "replaylens: error:" in line and "--no-cache" in line and "--cache PATH" in line
        return
    # a miss: every decision is the true run's (nothing served wrongly), the endpoint was asked
    got = pd.read_parquet(tmp_path / "out" / "decisions.parquet")
    pd.testing.assert_frame_equal(got, decisions)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    rc = summary["request_cache"]
    assert rc["discarded"] > 0 and server.n_requests - calls >= rc["discarded"]
    assert output.count(DISCARDED_NOTE) == 1               # reported once
    logs = list((tmp_path / "out").glob("**/attempts.jsonl"))  # OUT/llm/ (the layout varies: found, not assumed)
    assert len(logs) == 1, logs
    log = logs[0]
    attempts = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
    for a in attempts:  # no cached answer was ever invalid, and no format retry was ever answered from the cache
        cached = any(CACHE_NOTE in n for n in a["provider_notifications"])
        assert not cached or (a["status"] == "ok" and a["role"] == "original")
    # the manifest records the digest of every answer used
    man = json.loads((tmp_path / "out" / "manifest.json").read_text())["agent"]["request_cache"]
    ok = [a for a in attempts if a["status"] == "ok"]
    assert sorted(man["answers_sha256"].values()) == sorted(answer_digest(Completion(text=a["raw_response"]))
                                                            for a in ok)


def test_an_intact_cache_serves_and_counts(inputs: list[str], server: FakeOpenAIServer,
                                          truth: tuple[pd.DataFrame, Path], tmp_path: Path) -> None:
    decisions, filled = truth
    cache = tmp_path / "cache.sqlite"
    shutil.copy(filled, cache)
    calls = server.n_requests
    code, output = _audit(inputs, server, tmp_path / "out", "--cache", str(cache))
    assert code == 0, output
    assert server.n_requests == calls and DISCARDED_NOTE not in output
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "out" / "decisions.parquet"), decisions)
    rc = json.loads((tmp_path / "out" / "summary.json").read_text())["request_cache"]
    assert rc["hits"] > 0
    assert rc["discarded"] == 0 and rc["misses"] == 0


def test_a_format_retry_is_never_answered_from_the_cache(tmp_path: Path) -> None:
    be = make_backend("scripted/mean")
    cached = CachedBackend(be, RequestCache(tmp_path / "c.sqlite"), sampled=True)
    req = make_request("p", [ItemDecoder(("A", "B"), {"A": "a", "B": "b"})], settings_digest="d", repeat="0")
    key = request_cache_key(cached.settings, req)
    cached.cache.put(key, Completion(text='{"item_01": "A"}', model=be.settings.model))

    async def ask(role: str) -> Completion:
        ATTEMPT_ROLE.set(role)
        return await cached.complete(req, 1.0)

    assert CACHE_NOTE in " ".join(asyncio.run(ask("original")).notifications)
    for role in ("format_retry", "replacement"):
        comp = asyncio.run(ask(role))
        assert not any(CACHE_NOTE in n for n in comp.notifications), role
    assert cached.hits == 1 and cached.misses == 2


def test_an_sqlite_error_mid_run_names_the_file(tmp_path: Path) -> None:
    """Damage noticed after the cache opened (any sqlite3 error on a read or write) is the same one line."""
    from replaylens.errors import ConfigError

    cache = RequestCache(tmp_path / "c.sqlite")
    cache.put("k", Completion(text="{}", model="m"))
    cache._db.close()  # every further statement raises sqlite3.ProgrammingError
    for op in (lambda: cache.get("k"), lambda: cache.put("k2", Completion(text="{}", model="m")), lambda: len(cache)):
        with pytest.raises(ConfigError, match=r"request cache .*c\.sqlite is damaged .*--no-cache.*--cache PATH"):
            op()


def test_the_cache_secret_is_created_private_and_refused_when_open_to_others(tmp_path: Path) -> None:
    """Issue 48, point 5: the key lives in its own 0600 file outside the cache; a shared or damaged one is one line."""
    from replaylens.errors import ConfigError

    path = tmp_path / "sub" / "cache.key"
    secret = cache_secret(path)
    assert len(secret) == 32 and cache_secret(path) == secret
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and list(path.parent.iterdir()) == [path]
    path.chmod(0o644)
    with pytest.raises(ConfigError, match=r"cache key .*cache\.key: mode -rw-r--r--.*chmod 600"):
        cache_secret(path)
    path.chmod(0o600)
    path.write_bytes(b"short")
    with pytest.raises(ConfigError, match=r"5 bytes, not 32: damaged"):
        cache_secret(path)


def test_a_forged_entry_is_discarded_and_the_vector_table_too(tmp_path: Path) -> None:
    cache = RequestCache(tmp_path / "c.sqlite", secret=b"\x01" * 32)
    cache.put("k", Completion(text='{"item_01": "A"}', model="m"))
    cache.put_vector("v", "m", b"\0" * 8)
    assert cache.get("k") is not None and cache.get_vector("v") == b"\0" * 8
    forged = canonical_json({"text": '{"item_01": "B"}', "model": "m"})
    cache._sql("UPDATE responses SET completion = ?, digest = ? WHERE key = 'k'",
               (forged, sha256_text(canonical_json(["k", forged]))))
    cache._sql("UPDATE vectors SET vector = ?, digest = ? WHERE key = 'v'",
               (b"\1" * 8, entry_digest("v", "x", b"\x02" * 32)))
    assert cache.get("k") is None and cache.get_vector("v") is None
    assert cache.discarded == ["k", "v"] and len(cache) == 0
    # the same file read under another user's secret serves nothing of this one's
    cache.put("k", Completion(text='{"item_01": "A"}', model="m"))
    cache.close()
    assert RequestCache(tmp_path / "c.sqlite", secret=b"\x03" * 32).get("k") is None
