"""What the lock freezes, read from the store and the job folders: each arm's duration (stored, or chosen
now from the stored validation scores) and the inputs of the lock hash."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from hierconsole.config.preset import Preset
from hierconsole.contract.jobspec import CellSpec
from hierconsole.locations import job_dir
from hierconsole.study.analysis import durations
from hierconsole.study.analysis.durations import Curves, Duration
from hierconsole.study.analysis.lock import LockInputs, evaluated_model, lock_digest
from hierconsole.study.db.catalog import study_levels
from hierconsole.study.db.storage import Store
from hierconsole.vocabulary import JobKind


def validation_curves(store: Store, study_id: str, preset: Preset) -> Curves:
    """Each final run's stored validation score at each candidate epoch, by arm and seed."""
    _, metric = durations.score_parts(preset.training.selection_score)
    rows = store.rows(
        "SELECT r.arm, r.seed, v.epoch, v.level, v.value FROM val_metrics v JOIN runs r USING (run_id) "
        "WHERE r.study_id = ? AND r.kind = ? AND v.aggregation = ? AND v.metric = ?",
        [study_id, JobKind.FINAL, preset.evaluation.aggregation, metric],
    )
    return durations.validation_curves(rows, preset, study_levels(store, study_id).hier)


def final_arms(store: Store, study_id: str) -> list[str]:
    """The arms the study's final runs train, by name."""
    return [a for (a,) in store.rows(
        "SELECT DISTINCT arm FROM runs WHERE study_id = ? AND kind = ? ORDER BY arm", [study_id, JobKind.FINAL]
    )]  # fmt: skip


def arm_durations(store: Store, study_id: str, preset: Preset) -> tuple[dict[str, Duration], list[str]]:
    """The duration each trained arm would be frozen at now, and a line for each arm none can be chosen for."""
    return durations.arm_durations(validation_curves(store, study_id, preset), final_arms(store, study_id), preset)


def stored_durations(store: Store, study_id: str) -> dict[str, Duration]:
    """The durations frozen at the lock (empty before it, and for a fixed-endpoint study)."""
    return {
        arm: Duration(arm, int(epoch), float(score), int(seeds))
        for arm, epoch, score, seeds in store.rows(
            "SELECT arm, epoch, score, seeds FROM arm_durations WHERE study_id = ? ORDER BY arm", [study_id]
        )
    }


def lock_inputs(
    store: Store, study_id: str, preset: Preset, preset_sha256: str, frozen: Mapping[str, int]
) -> LockInputs:
    """What the lock hash of the study covers now, with `frozen` (arm -> epoch) as its durations."""
    runs = store.rows(
        "SELECT run_id, job_id, arm, final_sha256 FROM runs WHERE study_id = ? AND kind = ? ORDER BY run_id",
        [study_id, JobKind.FINAL],
    )
    checkpoints: dict[tuple[str, str], str | None] = {}
    if preset.training.select_epoch:
        for _, job_id, arm, _ in runs:
            if arm in frozen:
                path = job_dir(store.home, job_id) / evaluated_model(preset, CellSpec.in_preset(preset, arm), frozen)
                checkpoints[(job_id, arm)] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
    shuffle = store.one("SELECT sha256 FROM taxonomy_shuffles WHERE study_id = ?", [study_id])
    return LockInputs(
        preset_sha256=preset_sha256,
        splits=store.rows("SELECT role, sha256 FROM splits WHERE study_id = ? ORDER BY role", [study_id]),
        runs=runs,
        select_epoch=preset.training.select_epoch,
        durations=frozen,
        checkpoints=checkpoints,
        shuffle_sha256=None if shuffle is None else shuffle[0],
    )


def current_lock_digest(
    store: Store, study_id: str, preset: Preset, preset_sha256: str, frozen: Mapping[str, int]
) -> tuple[str, list[str]]:
    """The lock hash over what the store and job folders hold now, and what is missing for it."""
    return lock_digest(lock_inputs(store, study_id, preset, preset_sha256, frozen))
