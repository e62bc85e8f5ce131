"""Shared pytest configuration: a deterministic hypothesis profile for CI and the public-data fixture."""

import shutil
from pathlib import Path

import pytest
from hypothesis import settings

from _registry import registry_unreachable

settings.register_profile("ci", derandomize=True, deadline=None, max_examples=60)
settings.load_profile("ci")


@pytest.fixture(scope="session")
def public_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both verified public data copies in an isolated directory (copied from the user cache, else fetched)."""
    from replaylens.data import DataError, fetch, verified_path

    d = tmp_path_factory.mktemp("public-data-shared")
    for name in ("breast-cancer", "wine-red"):
        try:
            shutil.copyfile(verified_path(name), d / f"{name}.csv")
            continue
        except DataError:
            pass
        if name == "wine-red" and registry_unreachable() is not None:
            pytest.skip("wine-red is not cached and the package registry is unreachable")
        fetch(name, data_dir=d)
    return d


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


@pytest.fixture(autouse=True)
def _isolated_request_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test gets its own cross-run request cache file, never the user's (issue 18)."""
    monkeypatch.setenv("REPLAYLENS_CACHE", str(tmp_path_factory.mktemp("request-cache") / "requests.sqlite"))
