"""Issue 48, point 4: every damaged OUT or journal state gives one line and exit 2, or a clean repair with the
same results -- never a traceback; only directories ReplayLens made (its marker inside) are removed; a
configuration error leaves nothing behind.  A hypothesis fuzz over journal and OUT states checks "one line,
exit 2, or identical results"."""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from replaylens.bandit import make_bandit
from replaylens.cli._main import cli
from replaylens.records import write_evaluator, write_futures, write_history

pytestmark = pytest.mark.slow  # end-to-end runs: left out of the fast subset (README)

FAST = ["--agent", "mean", "--maps", "1032", "--resamples", "200", "--cells", "value,pair", "--quiet"]
NAMES = ("decisions.parquet", "summary.json", "forest.png", "report.md", "report.html", "manifest.json")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    d = tmp_path_factory.mktemp("inputs")
    sub = make_bandit(n_streams=8, slots_per_block=8, n_future=2, rng=5)
    return ["--history", str(write_history(sub.history, d / "history.jsonl")),
            "--future", str(write_futures(sub.futures, d / "future.jsonl")),
            "--utilities", str(write_evaluator(sub.evaluator, d / "utilities.jsonl"))]


@pytest.fixture(scope="module")
def reference(inputs: list[str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished audit (``--path reference``: one shard per stream, so the journal has several lines)."""
    out = tmp_path_factory.mktemp("ref") / "out"
    res = _audit(inputs, out)
    assert res.exit_code == 0, res.output
    return out


def _audit(inputs: list[str], out: Path, *extra: str) -> Result:
    return CliRunner().invoke(cli, ["audit", *inputs, *FAST, "--path", "reference", "--out", str(out), *extra])


def _copy(ref: Path, to: Path) -> Path:
    shutil.copytree(ref, to, symlinks=True)
    return to


def _run_dir(out: Path) -> Path:
    (run,) = (out / "runs").iterdir()
    return run


def _one_error_line(res: Result) -> str:
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output, res.output
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("replaylens: error")]
    assert len(errors) == 1, res.stderr
    assert res.stdout == "", res.stdout
    return errors[0]


def _same_results(out: Path, ref: Path) -> None:
    assert (out / "summary.json").read_bytes() == (ref / "summary.json").read_bytes()
    assert (out / "decisions.parquet").read_bytes() == (ref / "decisions.parquet").read_bytes()


# ---------------------------------------------------------------- each state the issue names


def test_a_directory_at_a_result_name_is_one_line_and_nothing_is_published(inputs: list[str], reference: Path,
                                                                           tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "decisions.parquet").mkdir(parents=True)
    line = _one_error_line(_audit(inputs, out))
    assert "decisions.parquet is a directory" in line
    assert sorted(p.name for p in out.iterdir()) == ["decisions.parquet"]   # no run, no stray link
    again = _copy(reference, tmp_path / "again")   # the same in an OUT holding a run: the run is left as it was
    (again / "summary.json").unlink()
    (again / "summary.json").mkdir()
    assert "summary.json is a directory" in _one_error_line(_audit(inputs, again))
    assert not list(again.glob(".*.tmp")) and (again / "report.html").is_file()


def test_a_journal_file_in_out_is_left_alone(inputs: list[str], reference: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "journal").write_text("my notes")
    res = _audit(inputs, out)
    assert res.exit_code == 0, res.output
    assert (out / "journal").read_text() == "my notes"
    _same_results(out, reference)


@pytest.mark.parametrize("kind", ["dangling-link", "file", "under-a-file"])
def test_an_out_that_cannot_be_a_directory_is_one_line(inputs: list[str], tmp_path: Path, kind: str) -> None:
    out = tmp_path / "out"
    if kind == "dangling-link":
        out.symlink_to(tmp_path / "missing")
    elif kind == "file":
        out.write_text("x")
    else:
        (tmp_path / "f").write_text("x")
        out = tmp_path / "f" / "out"
    line = _one_error_line(_audit(inputs, out))
    assert ("does not exist" in line) if kind == "dangling-link" else ("is a file, not a directory" in line)
    assert not (tmp_path / "missing").exists()


@pytest.mark.parametrize("line", [b"\xff\xfe\x00binary\n", b'{"shard": 0.5, "streams": ["s00"], "sha256": "0"}\n',
                                  b'{"shard": "0", "streams": ["s00"], "sha256": "0"}\n',
                                  b'{"shard": 1e400, "streams": ["s00"], "sha256": "0"}\n',
                                  b'{"shard": 0, "streams": 7, "sha256": "' + b"0" * 64 + b'"}\n'])
def test_a_damaged_journal_line_is_repaired_with_identical_results(inputs: list[str], reference: Path,
                                                                   tmp_path: Path, line: bytes) -> None:
    out = _copy(reference, tmp_path / "out")
    done = _run_dir(out) / "journal" / "done.jsonl"
    lines = done.read_bytes().splitlines(keepends=True)
    done.write_bytes(b"".join(lines[:-2]) + line + lines[-1])   # the line of one shard replaced by the damage
    res = _audit(inputs, out)
    assert res.exit_code == 0, res.output
    assert "resuming: 7 of 8 shards done, 1 to replay" in res.stderr
    _same_results(out, reference)


def test_only_directories_replaylens_made_are_removed(inputs: list[str], reference: Path, tmp_path: Path) -> None:
    out = _copy(reference, tmp_path / "out")
    for name in (".results-keep", ".writing-mine"):
        (out / name).mkdir()
        (out / name / "mine.txt").write_text("keep me")
    run = _run_dir(out)
    (run / ".results-keep").mkdir()
    for extra in ([], ["--seed", "1"], ["--seed", "2", "--overwrite"], ["--restart"]):
        res = _audit(inputs, out, *extra)
        assert res.exit_code == 0, res.output
    for d in (out / ".results-keep", out / ".writing-mine"):
        assert (d / "mine.txt").read_text() == "keep me"
    assert (run / ".results-keep").is_dir()   # the first run was kept (--overwrite replaced the seed-1 run)
    sets = [p for r in (out / "runs").iterdir() for p in r.glob(".results-*") if p.name != ".results-keep"]
    assert len(sets) == 2   # one current set per kept run: earlier sets ReplayLens made are gone


@pytest.mark.parametrize("extra", [["--cells", "value,bogus"], ["--expect", "key_slot=invariant"],
                                   ["--backend", "processes", "--workers", "0"], ["--maps", "QQQQ"]])
def test_a_configuration_error_leaves_nothing_behind(inputs: list[str], tmp_path: Path, extra: list[str]) -> None:
    out = tmp_path / "out"
    res = _audit(inputs, out, *extra)
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert not out.exists() and not out.is_symlink()


def test_a_configuration_error_in_an_existing_out_adds_no_run(inputs: list[str], reference: Path,
                                                              tmp_path: Path) -> None:
    out = _copy(reference, tmp_path / "out")
    before = sorted(p.name for p in (out / "runs").iterdir())
    res = _audit(inputs, out, "--expect", "key_slot=invariant")
    _one_error_line(res)
    assert sorted(p.name for p in (out / "runs").iterdir()) == before
    _same_results(out, reference)


# ---------------------------------------------------------------- fuzz: one line, exit 2, or identical results

Damage = Callable[[Path, Path], None]


def _append(data: bytes) -> Damage:
    def f(out: Path, run: Path) -> None:
        with (run / "journal" / "done.jsonl").open("ab") as fh:
            fh.write(data)
    return f


def _truncate(at: int) -> Damage:
    def f(out: Path, run: Path) -> None:
        p = run / "journal" / "done.jsonl"
        p.write_bytes(p.read_bytes()[:at])
    return f


def _overwrite(rel: str, data: bytes) -> Damage:
    def f(out: Path, run: Path) -> None:
        p = (run if not rel.startswith("OUT/") else out) / rel.removeprefix("OUT/")
        if p.is_symlink() or p.is_file():
            p.unlink()
        elif p.is_dir():
            shutil.rmtree(p)
        p.write_bytes(data)
    return f


def _make_dir(rel: str) -> Damage:
    def f(out: Path, run: Path) -> None:
        p = (run if not rel.startswith("OUT/") else out) / rel.removeprefix("OUT/")
        if p.is_symlink() or p.is_file():
            p.unlink()
        elif p.is_dir():
            shutil.rmtree(p)
        p.mkdir()
    return f


def _dangle(rel: str) -> Damage:
    def f(out: Path, run: Path) -> None:
        p = (run if not rel.startswith("OUT/") else out) / rel.removeprefix("OUT/")
        if p.is_symlink() or p.is_file():
            p.unlink()
        elif p.is_dir():
            shutil.rmtree(p)
        p.symlink_to("no-such-target")
    return f


def _remove(rel: str) -> Damage:
    def f(out: Path, run: Path) -> None:
        p = (run if not rel.startswith("OUT/") else out) / rel.removeprefix("OUT/")
        if p.is_symlink() or p.is_file():
            p.unlink()
        elif p.is_dir():
            shutil.rmtree(p)
    return f


_scalars = st.one_of(st.integers(-3, 3), st.integers(), st.floats(), st.text(max_size=5), st.booleans(), st.none(),
                     st.lists(st.text(max_size=3), max_size=2), st.just(7))
_record = st.fixed_dictionaries({}, optional={"shard": _scalars, "streams": _scalars,
                                              "sha256": st.one_of(_scalars, st.just("0" * 64))})
_line = st.one_of(st.binary(max_size=40),
                  _record.map(lambda r: (json.dumps(r) + "\n").encode()),
                  st.sampled_from([b'{"shard": 1e400, "streams": [], "sha256": "x"}\n', b"[" * 5000 + b"\n",
                                   b'{"shard": ' + b"9" * 5000 + b"}\n", b"\n\n", b"NaN\n"]))
_rels = st.sampled_from(["journal", "journal/journal.json", "journal/done.jsonl", "journal/shard-00000.npz",
                         "journal/shard-00003.npz", ".replaylens", ".results", "OUT/runs", "OUT/.results",
                         "OUT/journal", *(f"OUT/{n}" for n in NAMES)])
_damage = st.one_of(
    _line.map(_append),
    st.integers(0, 2000).map(_truncate),
    st.tuples(_rels, st.binary(max_size=30)).map(lambda t: _overwrite(*t)),
    _rels.map(_make_dir),
    _rels.map(_dangle),
    _rels.map(_remove),
)


@settings(max_examples=30, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],  # no shrinking:
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # each example audits
@given(damages=st.lists(_damage, min_size=1, max_size=3))
def test_fuzz_one_line_exit_2_or_identical_results(inputs: list[str], reference: Path,
                                                    damages: list[Damage]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = _copy(reference, Path(tmp) / "out")
        run = _run_dir(out)
        (out / ".results-keep").mkdir()
        (out / ".results-keep" / "mine.txt").write_text("keep me")
        for damage in damages:
            with contextlib.suppress(OSError):   # an earlier damage may have removed what this one changes
                damage(out, run)
        res = _audit(inputs, out)
        assert "Traceback" not in res.output, res.output
        if res.exit_code == 0:
            _same_results(out, reference)
        else:
            _one_error_line(res)
        assert (out / ".results-keep" / "mine.txt").read_text() == "keep me"
