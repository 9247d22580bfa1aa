"""Small synthetic data and job specs for the engine tests."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from hierconsole.datasets import FeatureSet, SyntheticConfig, make_synthetic
from hierconsole.jobspec import ARMS, CellSpec, Hyper, JobSpec, arm_parts
from hierconsole.protocol import Preset, load_preset

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
}


def tiny_preset(epochs: int = 2, seeds=(42, 2024), **values) -> Preset:
    return load_preset("demo").with_overrides(
        epochs=epochs, seeds=list(seeds), values={**TINY_VALUES, **values}
    )


TINY_HYPER = Hyper(batch_size=32, epochs=3, hidden=32, out_dim=8, lr=1e-3, c=1.0, r=0.4)


@pytest.fixture(scope="session")
def tiny_fs() -> FeatureSet:
    return make_synthetic(TINY)


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory, tiny_fs: FeatureSet) -> Path:
    d = tmp_path_factory.mktemp("datasets") / "tiny"
    tiny_fs.save(d)
    return d


def cells_for(arms: tuple[str, ...] = ARMS, tau: float = 0.2) -> tuple[CellSpec, ...]:
    out = []
    for arm in arms:
        geometry, loss = arm_parts(arm)
        out.append(CellSpec(arm, geometry, loss, tau if loss == "supcon" else None))
    return tuple(out)


def make_spec(
    folder: Path,
    fs: FeatureSet,
    fs_dir: Path,
    *,
    arms: tuple[str, ...] = ARMS,
    seed: int = 42,
    hyper: Hyper = TINY_HYPER,
    val: bool = True,
    **changes,
) -> JobSpec:
    """A final-job spec training on the train split, validating on a train-internal query/gallery split."""
    folder.mkdir(parents=True, exist_ok=True)
    train = np.flatnonzero(fs.split == 0)
    np.savez(folder / "train.npz", fit=train)
    splits = {"train": str(folder / "train.npz")}
    if val:
        rng = np.random.default_rng(0)
        pool = rng.permutation(train)[:120]
        np.savez(folder / "val.npz", query=np.sort(pool[:30]), gallery=np.sort(pool[30:]))
        splits["val"] = str(folder / "val.npz")
    spec = JobSpec(
        job_id=f"test/{folder.name}",
        study_id="test",
        kind="final",
        seed=seed,
        dataset_dir=str(fs_dir),
        out_dir=str(folder / "job"),
        cells=cells_for(arms),
        hyper=hyper,
        device="cpu",
        threads=1,
        splits=splits,
        val_every=2,
    )
    spec = replace(spec, **changes)
    spec.write(Path(spec.out_dir) / "spec.json")
    return spec
