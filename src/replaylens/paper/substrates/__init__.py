"""The paper's substrates: the hidden-world synthetic executor and the public-data (measured-outcome) executor."""

from .public import PublicWorld, build_public
from .synthetic import SyntheticWorld, build_synthetic

__all__ = ["PublicWorld", "SyntheticWorld", "build_public", "build_synthetic"]
