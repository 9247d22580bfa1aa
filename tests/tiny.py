"""The tiny synthetic dataset and a tiny study preset on it: what most tests train, score and show."""

from __future__ import annotations

from hierconsole.config import Preset, load_preset
from hierconsole.datasets import SyntheticConfig

TINY = SyntheticConfig(
    name="tiny",
    n_leaves=12,
    n_middles=6,
    n_highs=3,
    n_singleton_middles=2,
    n_train=260,
    n_test=160,
    dim=48,
)
# A tiny study preset on the tiny data: the shipped demo preset with a small model and query count.
TINY_VALUES = {
    "data.dataset": "tiny",
    "evaluation.n_query": 40,
    "training.hidden": 32,
    "training.out_dim": 8,
    "training.batch_size": 32,
    "training.lr": 1e-3,
    "training.val_every": 1,
    "compute.device": "cpu",
    # The demo's baseline arms are scored only by the tests about them (tests/study/run/test_baselines.py).
    "evaluation.baselines": [],
}


def tiny_preset(epochs: int = 2, seeds=(42, 2024), **values) -> Preset:
    return load_preset("demo").with_overrides(
        epochs=epochs, seeds=list(seeds), values={**TINY_VALUES, **values}
    )
