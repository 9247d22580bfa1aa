"""The jobs of a study, planned from its registered preset: tuning runs, one final job per training seed,
the evaluation of the locked study and its re-scores. Each is a `contract.jobspec.JobSpec` whose paths
are relative to the home.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from hierconsole.config.preset import Preset
from hierconsole.contract import layout
from hierconsole.contract.jobspec import BaselineRef, CellSpec, JobSpec, ModelRef, Rescore, TestSplit
from hierconsole.locations import job_dir, relative
from hierconsole.study.analysis.lock import evaluated_model
from hierconsole.study.db import split_files
from hierconsole.study.db.ids import baseline_run_id, evaluate_job_id, final_job_id, rescore_job_id
from hierconsole.study.db.split_files import final_train_role
from hierconsole.vocabulary import (
    HIER_STYLE,
    HIER_STYLE_LOSS,
    PCA,
    POINCARE,
    TRAINING_KINDS,
    UNTRAINED_BASELINES,
    Aggregation,
    JobKind,
)


@dataclass(frozen=True)
class StudyPaths:
    """Where a study's jobs find their inputs, as stored paths (relative to the home)."""

    home: Path
    study_id: str
    dataset_dir: Path
    dataset_sha256: str | None = None
    """The content hash every job checks its data against."""

    def split(self, role: str) -> str:
        return relative(self.home, split_files.split_file(self.home, self.study_id, role))

    def job(self, job_id: str) -> str:
        return relative(self.home, job_dir(self.home, job_id))

    def train_taxonomy(self) -> str:
        return relative(self.home, split_files.split_file(self.home, self.study_id, split_files.TRAIN_TAXONOMY))


def _spec(
    paths: StudyPaths,
    preset: Preset,
    job_id: str,
    kind: JobKind,
    seed: int,
    *,
    cells: tuple[CellSpec, ...] = (),
    train_split: str | None = None,
    val_split: str | None = None,
    test_splits: tuple[TestSplit, ...] = (),
    models: tuple[ModelRef, ...] = (),
    baselines: tuple[BaselineRef, ...] = (),
    rescore: Rescore | None = None,
) -> JobSpec:
    return JobSpec(
        job_id=job_id,
        study_id=paths.study_id,
        kind=kind,
        seed=seed,
        preset=preset,
        dataset_dir=relative(paths.home, paths.dataset_dir),
        dataset_sha256=paths.dataset_sha256,
        out_dir=paths.job(job_id),
        cells=cells,
        # Training (tuning included) fits the shuffle control's taxonomy; every evaluation reads the true one.
        train_taxonomy=paths.train_taxonomy()
        if preset.controls.taxonomy_shuffle and kind in TRAINING_KINDS
        else None,
        train_split=train_split,
        val_split=val_split,
        test_splits=test_splits,
        models=models,
        baselines=baselines,
        rescore=rescore,
    )


def tune_jobs(paths: StudyPaths, preset: Preset) -> list[JobSpec]:
    """One job per candidate temperature, holding the SupCon cell of every tuned geometry."""
    tuning = preset.temperature.tuning
    return [
        _spec(
            paths,
            preset,
            f"{paths.study_id}/tune-t{tau:g}",
            JobKind.TUNE,
            tuning.seed,
            cells=tuple(
                CellSpec.in_preset(preset, arm, float(tau))
                for g in preset.tuned_geometries
                if (arm := preset.tuning_cell(g)) is not None
            ),
            train_split=paths.split(split_files.TUNE_TRAIN),
            val_split=paths.split(split_files.VAL),
        )
        for tau in tuning.candidates
    ]


def final_cells(preset: Preset, temperatures: dict[str, float]) -> tuple[CellSpec, ...]:
    """The cells the preset trains (every arm of its factorial by default), each cell whose objective takes
    a temperature at its geometry's; a geometry with no such cell needs none."""
    cells = []
    for arm in preset.cells:
        geometry, _ = preset.factorial.cell(arm)
        cells.append(CellSpec.in_preset(preset, arm, temperatures.get(geometry.name)))
    if HIER_STYLE in preset.evaluation.baselines:
        # The HIER-style baseline trains beside the cells, in lockstep: same init, batches and budget.
        cells.append(CellSpec(HIER_STYLE, POINCARE, HIER_STYLE_LOSS))
    return tuple(cells)




def final_jobs(paths: StudyPaths, preset: Preset, temperatures: dict[str, float]) -> list[JobSpec]:
    """One job per training seed, training every cell in lockstep.

    A fixed-endpoint study trains on the whole development data (train + validation); a study that selects
    each cell's epoch on validation fits the train part only, so the selection never scores samples the
    cell was fitted on."""
    training = preset.training
    val = paths.split(split_files.VAL) if training.val_every or training.select_epoch else None
    return [
        _spec(
            paths,
            preset,
            final_job_id(paths.study_id, seed),
            JobKind.FINAL,
            seed,
            cells=final_cells(preset, temperatures),
            train_split=paths.split(final_train_role(preset)),
            val_split=val,
        )
        for seed in preset.training.seeds
    ]








def scoring_job(
    paths: StudyPaths,
    preset: Preset,
    temperatures: dict[str, float],
    *,
    rescore: Aggregation | None = None,
    durations: Mapping[str, int] | None = None,
) -> JobSpec:
    """The evaluation of every final model on every official-test perturbation, or (`rescore`) the
    re-scoring of its stored embeddings under another aggregation. `durations` (arm -> epoch) is what the
    lock froze for a study that selects its epoch."""
    durations = durations or {}
    models = tuple(
        ModelRef(
            run_id=f"{final_job_id(paths.study_id, seed)}/{cell.key}",
            seed=seed,
            cell=cell,
            weights=f"{paths.job(final_job_id(paths.study_id, seed))}/{evaluated_model(preset, cell, durations)}",
        )
        for seed in preset.training.seeds
        for cell in final_cells(preset, temperatures)
    )
    evaluate_id = evaluate_job_id(paths.study_id)
    job_id = evaluate_id if rescore is None else rescore_job_id(paths.study_id, rescore)
    return _spec(
        paths,
        preset,
        job_id,
        JobKind.EVALUATE if rescore is None else JobKind.RESCORE,
        0,
        test_splits=tuple(
            TestSplit(seed, paths.split(split_files.qg_role(seed))) for seed in preset.evaluation.qg_seeds
        ),
        models=models,
        baselines=tuple(
            BaselineRef(baseline_run_id(paths.study_id, b), b)
            for b in preset.evaluation.baselines
            if b in UNTRAINED_BASELINES
        ),
        # PCA fits on the samples the final runs fitted on: training data only, read after the lock.
        train_split=paths.split(final_train_role(preset)) if PCA in preset.evaluation.baselines else None,
        rescore=None
        if rescore is None
        else Rescore(rescore, f"{paths.job(evaluate_id)}/{layout.EMBEDDINGS}"),
    )
