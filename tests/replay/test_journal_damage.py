"""Issue 48, point 4: whatever is found in a journal directory is read defensively.  A ``done.jsonl`` line that
is not a well-formed record of a shard (binary, torn, ``"shard": 0.5`` / ``"0"`` / ``1e400``, ``"streams": 7``,
a number past Python's digit limit, nesting past the recursion limit) is skipped -- that shard is replayed
again -- and anything else not as ReplayLens writes it is one :class:`JournalError` line."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from replaylens.errors import JournalError
from replaylens.replay import Journal

KEY = {"format": 1, "plan": "p", "code": {"a.py": "1"}, "engine": "e"}

BAD_LINES = [
    pytest.param(b"\xff\xfe\x00\x80binary\xc3", id="binary"),
    pytest.param(b'{"shard": 0.5, "streams": ["s00"], "sha256": "' + b"0" * 64 + b'"}', id="shard-0.5"),
    pytest.param(b'{"shard": "0", "streams": ["s00"], "sha256": "' + b"0" * 64 + b'"}', id="shard-text"),
    pytest.param(b'{"shard": 1e400, "streams": ["s00"], "sha256": "' + b"0" * 64 + b'"}', id="shard-1e400"),
    pytest.param(b'{"shard": true, "streams": ["s00"], "sha256": "' + b"0" * 64 + b'"}', id="shard-bool"),
    pytest.param(b'{"shard": -1, "streams": ["s00"], "sha256": "' + b"0" * 64 + b'"}', id="shard-negative"),
    pytest.param(b'{"shard": ' + b"9" * 5000 + b', "streams": [], "sha256": "x"}', id="shard-digits"),
    pytest.param(b'{"shard": 2, "streams": 7, "sha256": "' + b"0" * 64 + b'"}', id="streams-7"),
    pytest.param(b'{"shard": 2, "streams": [7], "sha256": "' + b"0" * 64 + b'"}', id="streams-numbers"),
    pytest.param(b'{"shard": 2, "streams": [], "sha256": 5}', id="sha-number"),
    pytest.param(b"[" * 100_000, id="deep-nesting"),
    pytest.param(b'{"shard": 0, "streams": ["s00"]', id="torn"),
    pytest.param(b"NaN", id="nan"),
]


def _journal_with_two_shards(root: Path) -> Journal:
    jr = Journal(root, KEY)
    jr.record(0, ["s00"], [np.arange(4, dtype=np.int64)])
    jr.record(1, ["s01"], [np.arange(3, dtype=np.int64)])
    return jr


@pytest.mark.parametrize("line", BAD_LINES)
def test_a_malformed_done_line_is_skipped_and_the_journal_stays_usable(tmp_path: Path, line: bytes) -> None:
    _journal_with_two_shards(tmp_path)
    with (tmp_path / "done.jsonl").open("ab") as fh:
        fh.write(line)   # no newline: a torn last line too
    again = Journal(tmp_path, KEY)
    assert again.n_done == 2 and again.done(0) and again.done(1) and not again.done(2)
    assert again.load(1)[0].tolist() == [0, 1, 2]
    again.record(2, ["s02"], [np.arange(2, dtype=np.int64)])   # a later record starts on a line of its own
    assert Journal(tmp_path, KEY).n_done == 3


def test_the_journal_directory_a_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "journal").write_text("mine")
    with pytest.raises(JournalError) as err:
        Journal(tmp_path / "journal", KEY)
    assert "\n" not in str(err.value) and "journal" in str(err.value)
    assert (tmp_path / "journal").read_text() == "mine"


@pytest.mark.parametrize("what", ["head-dir", "head-binary", "head-list"])
def test_a_damaged_head_is_one_line_naming_restart(tmp_path: Path, what: str) -> None:
    head = tmp_path / "journal.json"
    if what == "head-dir":
        head.mkdir()
    else:
        head.write_bytes(b"\xff\xfe" if what == "head-binary" else b"[1, 2]")
    with pytest.raises(JournalError, match="--restart") as err:
        Journal(tmp_path, KEY)
    assert "\n" not in str(err.value)


def test_a_shard_file_that_is_a_directory_is_redone_or_one_line(tmp_path: Path) -> None:
    _journal_with_two_shards(tmp_path)
    shard = tmp_path / "shard-00001.npz"
    shard.unlink()
    shard.mkdir()
    jr = Journal(tmp_path, KEY)
    assert jr.n_done == 1 and not jr.done(1)
    with pytest.raises(JournalError, match="is a directory") as err:
        jr.record(1, ["s01"], [np.arange(3, dtype=np.int64)])
    assert "\n" not in str(err.value) and shard.is_dir()   # a directory is never removed
    with pytest.raises(JournalError, match="is a directory"):
        Journal(tmp_path, KEY, restart=True)


def test_a_shard_with_a_matching_digest_that_is_not_a_shard_is_one_line(tmp_path: Path) -> None:
    jr = _journal_with_two_shards(tmp_path)
    junk = b"not a zip archive"
    (tmp_path / "shard-00005.npz").write_bytes(junk)
    with (tmp_path / "done.jsonl").open("a") as fh:
        fh.write(json.dumps({"shard": 5, "streams": ["s05"], "sha256": hashlib.sha256(junk).hexdigest()}) + "\n")
    jr = Journal(tmp_path, KEY)
    assert jr.done(5)
    with pytest.raises(JournalError, match="not a shard ReplayLens wrote") as err:
        jr.load(5)
    assert "\n" not in str(err.value)


def test_the_key_digest_is_the_stored_keys() -> None:
    a = Journal.digest({"b": (1, 2), "a": {"x": 1}})
    assert a == Journal.digest({"a": {"x": 1}, "b": (1, 2)}) and len(a) == 64
    assert a != Journal.digest({"a": {"x": 2}, "b": (1, 2)})
