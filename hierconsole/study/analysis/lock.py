"""The lock hash of a study: one definition, computed when the study is locked and recomputed by the audit
(`lock_hash_matches`), so a stored fact changed after the lock (a final state, a split, a frozen duration,
a scored checkpoint file) shows as a hash that no longer matches."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from hierconsole.config.preset import Preset
from hierconsole.contract import layout
from hierconsole.contract.jobspec import CellSpec
from hierconsole.locations import job_dir
from hierconsole.study.db.storage import Store
from hierconsole.vocabulary import JobKind


def evaluated_model(preset: Preset, cell: CellSpec, durations: Mapping[str, int]) -> str:
    """The checkpoint official test scores (a job-folder path): the fixed endpoint, or the candidate at the
    duration frozen for the cell's arm at the lock (`durations`: arm -> epoch; every seed the same)."""
    return layout.candidate_model(cell, durations[cell.key]) if preset.training.select_epoch else layout.final_model(cell)


def lock_digest(
    store: Store, study_id: str, preset: Preset, preset_sha256: str, durations: Mapping[str, int]
) -> tuple[str, list[str]]:
    """The hash over the preset, every split, every final state and, for a study that selects its epoch,
    the frozen duration per arm and the bytes of each checkpoint test scores; and what is missing for it
    (a final run without a recorded state, a scored checkpoint that is not on disk)."""
    missing = []
    runs = store.rows(
        "SELECT run_id, final_sha256 FROM runs WHERE study_id = ? AND kind = ? ORDER BY run_id",
        [study_id, JobKind.FINAL],
    )
    if any(sha is None for _, sha in runs):
        missing.append("a final run has no recorded final state")
    splits = store.rows("SELECT role, sha256 FROM splits WHERE study_id = ? ORDER BY role", [study_id])
    h = hashlib.sha256(preset_sha256.encode())
    for role, sha in splits:
        h.update(f"{role}={sha}".encode())
    for run_id, sha in runs:
        h.update(f"{run_id}={sha}".encode())
    if preset.training.select_epoch:
        for arm, epoch in sorted(durations.items()):
            h.update(f"{arm}@epoch={epoch}".encode())
        for job_id, arm in store.rows(
            "SELECT job_id, arm FROM runs WHERE study_id = ? AND kind = ? ORDER BY run_id", [study_id, JobKind.FINAL]
        ):
            if arm not in durations:
                missing.append(f"{job_id}/{arm} has no frozen duration")
                continue
            path = job_dir(store.home, job_id) / evaluated_model(preset, CellSpec.of(arm), durations)
            if not path.is_file():
                missing.append(f"{job_id}/{arm} has no checkpoint at its arm's frozen epoch {durations[arm]}")
                continue
            h.update(f"{job_id}/{arm}@selected={hashlib.sha256(path.read_bytes()).hexdigest()}".encode())
    shuffle = store.one("SELECT sha256 FROM taxonomy_shuffles WHERE study_id = ?", [study_id])
    if shuffle is not None:
        h.update(f"train_taxonomy={shuffle[0]}".encode())
    return h.hexdigest(), missing
