"""Paper experiments: thin compositions of the public API, registered as reproductions."""

from ..reproduce import REPRODUCTIONS, Reproduction
from . import exact_zeros


def all_reproductions() -> dict[str, Reproduction]:
    """Every registered reproduction (importing this package registers the paper's)."""
    return dict(REPRODUCTIONS)


__all__ = ["all_reproductions", "exact_zeros"]
