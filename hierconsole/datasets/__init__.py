"""Feature sets and where they come from: generic files, CUB and NABirds folders, synthetic data; splits."""

from hierconsole.datasets.cub import import_cub
from hierconsole.datasets.features_io import read_features
from hierconsole.datasets.featureset import SPLIT_NAMES, FeatureSet
from hierconsole.datasets.generic import import_generic
from hierconsole.datasets.nabirds import import_nabirds
from hierconsole.datasets.splits import (
    DEFAULT_QG_SEEDS,
    Split,
    hierarchy_disjoint_split,
    official_split,
    qg_perturbation,
    qg_perturbations,
    strict_valid_counts,
    tuning_split,
)
from hierconsole.datasets.synthetic import CUB_SIZED_CONFIG, DEMO_CONFIG, SyntheticConfig, make_synthetic

__all__ = [
    "CUB_SIZED_CONFIG",
    "DEFAULT_QG_SEEDS",
    "DEMO_CONFIG",
    "SPLIT_NAMES",
    "FeatureSet",
    "Split",
    "SyntheticConfig",
    "hierarchy_disjoint_split",
    "import_cub",
    "import_generic",
    "import_nabirds",
    "make_synthetic",
    "official_split",
    "qg_perturbation",
    "qg_perturbations",
    "read_features",
    "strict_valid_counts",
    "tuning_split",
]
