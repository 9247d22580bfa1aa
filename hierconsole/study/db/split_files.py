"""The split index files of a study and the roles they are recorded under in the `splits` table.

A study writes every split when it is created (so their hashes are fixed before any training): the
split protocol's parts, what the final and tuning runs fit on, the validation query/gallery, and one
official-test query/gallery perturbation per Q/G seed. The rows name the files relative to the home.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from hierconsole.locations import study_dir

if TYPE_CHECKING:
    import numpy as np  # imported by save_split: the roles are read by `runs`, which needs no numpy

    from hierconsole.config.preset import Preset

PROTOCOL = "protocol"
"""The split protocol's parts (train, val, test)."""
FINAL_TRAIN = "final_train"
"""Part "fit": what the final runs train on (train plus val, the development data)."""
TUNING = "tuning"
TUNE_TRAIN = "tune_train"
"""Part "fit": what the tuning runs train on."""
VAL = "val"
"""Parts "query" and "gallery": the validation record and tuning score (never test samples)."""
QG_PREFIX = "qg:"
"""Roles `qg:<seed>`: an official-test query/gallery perturbation, read only after the lock."""
QG_ROLES_SQL = f"role LIKE '{QG_PREFIX}%'"
"""A SQL condition on `splits.role` matching the official-test perturbations."""


TRAIN_TAXONOMY = "train_taxonomy"
"""Not a split: the npz of a shuffle control's training taxonomy beside them, one parent array per edge keyed by
`levels.Levels.edge_key` (three levels: leaf_middle, middle_high)."""


def qg_role(seed: int) -> str:
    return f"{QG_PREFIX}{seed}"


def split_file(home: Path, study_id: str, role: str) -> Path:
    return study_dir(home, study_id) / "splits" / f"{role.replace(':', '-')}.npz"


def save_split(path: Path, parts: dict[str, np.ndarray]) -> None:
    # Any: numpy's stub types **kwds alongside `allow_pickle: bool`, so unpacked arrays could be that flag.
    import numpy as np

    arrays: dict[str, Any] = {k: np.asarray(v, dtype=np.int64) for k, v in parts.items()}
    np.savez(path, **arrays)


def final_train_role(preset: Preset) -> str:
    """The split role final runs fit on: development data, or its train part when epochs are selected."""
    return TUNE_TRAIN if preset.training.select_epoch else FINAL_TRAIN
