"""Paper experiments: thin compositions of the public API, registered as reproductions."""

from . import exact_zeros

__all__ = ["exact_zeros"]
