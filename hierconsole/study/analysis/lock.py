"""The lock hash of a study: one definition, computed when the study is locked and recomputed by the audit
(`lock_hash_matches`), so a stored fact changed after the lock (a final state, a split, a frozen duration,
a scored checkpoint file) shows as a hash that no longer matches."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from hierconsole.config.preset import Preset
from hierconsole.contract import layout
from hierconsole.contract.jobspec import CellSpec


def evaluated_model(preset: Preset, cell: CellSpec, durations: Mapping[str, int]) -> str:
    """The checkpoint official test scores (a job-folder path): the fixed endpoint, or the candidate at the
    duration frozen for the cell's arm at the lock (`durations`: arm -> epoch; every seed the same)."""
    return layout.candidate_model(cell, durations[cell.key]) if preset.training.select_epoch else layout.final_model(cell)


@dataclass(frozen=True)
class LockInputs:
    """What the lock hash covers, as the store and the job folders hold it now."""

    preset_sha256: str
    splits: list[tuple[str, str]]
    """(role, sha256) of every split, by role."""
    runs: list[tuple[str, str, str, str | None]]
    """(run_id, job_id, arm, final-state sha256) of every final run, by run id."""
    select_epoch: bool
    durations: Mapping[str, int]
    """Arm -> the epoch frozen for it."""
    checkpoints: Mapping[tuple[str, str], str | None]
    """(job_id, arm) -> the sha256 of the checkpoint test scores at its arm's frozen epoch; None where that
    file is not on disk (a study that selects its epoch only)."""
    shuffle_sha256: str | None
    """The training taxonomy of a shuffle control."""


def lock_digest(inputs: LockInputs) -> tuple[str, list[str]]:
    """The hash over the preset, every split, every final state and, for a study that selects its epoch,
    the frozen duration per arm and the bytes of each checkpoint test scores; and what is missing for it
    (a final run without a recorded state, a scored checkpoint that is not on disk)."""
    missing = []
    if any(sha is None for *_, sha in inputs.runs):
        missing.append("a final run has no recorded final state")
    h = hashlib.sha256(inputs.preset_sha256.encode())
    for role, sha in inputs.splits:
        h.update(f"{role}={sha}".encode())
    for run_id, _, _, final in inputs.runs:
        h.update(f"{run_id}={final}".encode())
    if inputs.select_epoch:
        for arm, epoch in sorted(inputs.durations.items()):
            h.update(f"{arm}@epoch={epoch}".encode())
        for _, job_id, arm, _ in inputs.runs:
            if arm not in inputs.durations:
                missing.append(f"{job_id}/{arm} has no frozen duration")
                continue
            selected = inputs.checkpoints.get((job_id, arm))
            if selected is None:
                missing.append(f"{job_id}/{arm} has no checkpoint at its arm's frozen epoch {inputs.durations[arm]}")
                continue
            h.update(f"{job_id}/{arm}@selected={selected}".encode())
    if inputs.shuffle_sha256 is not None:
        h.update(f"train_taxonomy={inputs.shuffle_sha256}".encode())
    return h.hexdigest(), missing
