"""Job specs for the engine tests, on the tiny data (tests/tiny.py)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from hierconsole.config import Preset
from hierconsole.contract.events import Event, to_line
from hierconsole.contract.jobspec import CellSpec, JobSpec
from hierconsole.datasets import FeatureSet
from hierconsole.vocabulary import ARMS, JobKind
from tests.tiny import tiny_preset


def spec_preset(**values) -> Preset:
    """The preset of the engine tests' job specs: the tiny model, 3 epochs, validation every 2."""
    return tiny_preset(epochs=3, **{"training.val_every": 2, **values})


SPEC_PRESET = spec_preset()
TINY_TRAINING = SPEC_PRESET.training
TINY_POINCARE = SPEC_PRESET.geometry.poincare


def recorded(events: Iterable[Event]) -> list[dict]:
    """Events as a worker writes them to events.jsonl (plain JSON objects)."""
    return [json.loads(to_line(e)) for e in events]


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory, tiny_fs: FeatureSet) -> Path:
    d = tmp_path_factory.mktemp("datasets") / "tiny"
    tiny_fs.save(d)
    return d


def cells_for(arms: tuple[str, ...] = ARMS, tau: float = 0.2) -> tuple[CellSpec, ...]:
    return tuple(CellSpec.of(arm, tau) for arm in arms)


def make_spec(
    folder: Path,
    fs: FeatureSet,
    fs_dir: Path,
    *,
    arms: tuple[str, ...] = ARMS,
    seed: int = 42,
    preset: Preset = SPEC_PRESET,
    val: bool = True,
    **changes,
) -> JobSpec:
    """A final-job spec training on the train split, validating on a train-internal query/gallery split."""
    folder.mkdir(parents=True, exist_ok=True)
    train = np.flatnonzero(fs.split == 0)
    np.savez(folder / "train.npz", fit=train)
    val_split = None
    if val:
        rng = np.random.default_rng(0)
        pool = rng.permutation(train)[:120]
        np.savez(folder / "val.npz", query=np.sort(pool[:30]), gallery=np.sort(pool[30:]))
        val_split = str(folder / "val.npz")
    spec = JobSpec(
        job_id=f"test/{folder.name}",
        study_id="test",
        kind=JobKind.FINAL,
        seed=seed,
        preset=preset,
        dataset_dir=str(fs_dir),
        out_dir=str(folder / "job"),
        cells=cells_for(arms),
        train_split=str(folder / "train.npz"),
        val_split=val_split,
    )
    spec = replace(spec, **changes)
    spec.write(Path(spec.out_dir) / "spec.json")
    return spec
