"""What each stage of a replication does, counted from its own plan before anything runs: the commands it
calls (in this process; `extract` as a child), the images it extracts and, for a study stage, each study's
jobs as phases with their cell-updates and scored query x gallery pairs (`study.replication.costs` prices
them).

The counts come from the presets the stage runs (with the scale's overrides, family members resolved) and
the dataset folders' own lists (images.txt, train_test_split.txt). Split sizes a preset declares
(`expected.*`, the paper's) are used as declared; otherwise they follow the split protocol's fractions of
the images, which is what the split draws up to rounding.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hierconsole.config.family import load_family, resolve_family
from hierconsole.config.files import load_preset
from hierconsole.config.preset import Preset
from hierconsole.datasets.cub import PairFile, read_pair_file
from hierconsole.datasets.splits import HOLDOUT_FRACTION
from hierconsole.errors import InputError
from hierconsole.study.replication.costs import Phase, StageWork
from hierconsole.study.replication.graph import Stage
from hierconsole.study.replication.stages import (
    REPORT_STAGE,
    RESCORED,
    STAGE_RUNS,
    TABLES_STAGE,
    StudyRun,
    run_overrides,
)
from hierconsole.vocabulary import HIER_STYLE, SUPCON, UNTRAINED_BASELINES

LIGHT_STAGES = (TABLES_STAGE, REPORT_STAGE)
"""Stages that only reshape what the store holds (the tables, the report): one light command each, no jobs."""


@dataclass(frozen=True)
class DatasetSize:
    images: int
    official_train: int
    """Images train_test_split.txt marks as training (the official split's development set)."""


def _pairs(path: Path, columns: tuple[str, str]) -> PairFile:
    """A list file read as `import` reads it (`replicate` has refused a folder whose lists it cannot read)."""
    problems: list[str] = []
    pairs = read_pair_file(path, columns, problems)
    if problems:
        raise InputError(path.parent, problems, hint="each line is '<id> <value>'")
    return pairs


def dataset_size(root: Path) -> DatasetSize:
    """Images and official-train images of a CUB_200_2011- or nabirds-layout folder (its lists only)."""
    images = len(_pairs(root / "images.txt", ("image_id", "path")).keys)
    flags = root / "train_test_split.txt"
    if flags.is_file():
        train = _pairs(flags, ("image_id", "is_training_image")).values.count("1")
    else:
        train = images // 2
    return DatasetSize(images, train)


@dataclass(frozen=True)
class _Sizes:
    development: int
    validation: int
    test: int


def _sizes(preset: Preset, size: DatasetSize) -> _Sizes:
    expected, split = preset.expected, preset.split
    if split.protocol == "official":
        dev = size.official_train
        test = size.images - dev
    else:
        shares = split.image_counts or split.counts or split.leaf_counts or split.fractions or (0.6, 0.2, 0.2)
        whole = sum(shares)
        dev = round(size.images * (shares[0] + shares[1]) / whole)
        test = size.images - dev
    dev = expected.development_images or dev
    test = expected.test_images or test
    return _Sizes(dev, max(1, round(dev * HOLDOUT_FRACTION)), test)


def _updates_per_epoch(preset: Preset, samples: int) -> int:
    batch = preset.training.batch_size
    return max(1, samples // batch if preset.training.drop_last else math.ceil(samples / batch))


def _val_pairs(preset: Preset, validation: int, query_fraction: float) -> int:
    queries = max(1, round(validation * query_fraction))
    return queries * max(1, validation - queries)


def test_shape(preset: Preset, size: DatasetSize) -> tuple[int, int]:
    """(queries, gallery items) of one test perturbation."""
    test = _sizes(preset, size).test
    queries = min(preset.evaluation.n_query, max(1, test - 1))
    return queries, preset.expected.gallery_images or test - queries


def study_phases(preset: Preset, size: DatasetSize) -> tuple[Phase, ...]:
    """A study's jobs: its tuning runs, one final job per seed, its evaluation."""
    sizes = _sizes(preset, size)
    slots = preset.compute.max_parallel_jobs or 1
    training = preset.training
    tuning = preset.temperature.tuning
    phases: list[Phase] = []
    tuned = preset.tuned_geometries
    if tuned:
        fit = sizes.development - sizes.validation
        phases.append(
            Phase(
                jobs=len(tuning.candidates),
                slots=slots,
                updates=tuning.epochs * _updates_per_epoch(preset, fit) * len(tuned),
                comparisons=len(tuned) * _val_pairs(preset, sizes.validation, tuning.query_fraction),
            )
        )
    cells = len(preset.cells) + (HIER_STYLE in preset.evaluation.baselines)
    fit = sizes.development - sizes.validation if training.select_epoch else sizes.development
    passes = 0
    if training.select_epoch:
        passes = len(training.selection_epochs or ()) or max(1, training.epochs // max(1, training.val_every))
    elif training.val_every:
        passes = training.epochs // training.val_every
    phases.append(
        Phase(
            jobs=len(training.seeds),
            slots=slots,
            updates=training.epochs * _updates_per_epoch(preset, fit) * cells,
            comparisons=passes * cells * _val_pairs(preset, sizes.validation, tuning.query_fraction),
        )
    )
    models = len(training.seeds) * cells + sum(b in UNTRAINED_BASELINES for b in preset.evaluation.baselines)
    queries, gallery = test_shape(preset, size)
    phases.append(
        Phase(jobs=1, slots=1, comparisons=models * len(preset.evaluation.qg_seeds) * queries * gallery)
    )
    # The orchestrator keeps its standby while a study trains: every phase after the first is forked by it.
    return tuple(p if i == 0 else dataclasses.replace(p, warm=p.jobs) for i, p in enumerate(phases))


def pooled(studies: Sequence[Sequence[Phase]], slots: int) -> tuple[Phase, ...]:
    """The phases of studies that one orchestrator runs together (a family's members): their k-th phases
    share the family's ``slots``, each pooled phase holding all their jobs at the jobs' mean work."""
    out = []
    for k in range(max((len(p) for p in studies), default=0)):
        parts = [p[k] for p in studies if len(p) > k]
        jobs = sum(p.jobs for p in parts)
        if jobs:
            out.append(
                Phase(
                    jobs=jobs,
                    slots=slots,
                    updates=sum(p.jobs * p.updates for p in parts) / jobs,
                    comparisons=sum(p.jobs * p.comparisons for p in parts) / jobs,
                    warm=sum(p.warm for p in parts),
                )
            )
    return tuple(out)


def run_phases(run: StudyRun, scale: str, size: DatasetSize) -> tuple[Phase, ...]:
    """The phases a stage's run goes through: one study's, or its family members' pooled."""
    presets = run_presets(run, scale)
    if not run.family:
        return study_phases(presets[0], size)
    # `run FAMILY` drives every member at once with the first member's parallel jobs (cli/running.py).
    return pooled([study_phases(p, size) for p in presets], presets[0].compute.max_parallel_jobs or 1)


def run_presets(run: StudyRun, scale: str) -> list[Preset]:
    """The presets of the studies a stage's run starts (one, or a family's members)."""
    values = run_overrides(run, scale)
    if run.family:
        family = load_family(resolve_family(run.preset)).with_overrides(values)
        return [m.preset for m in family.members]
    return [load_preset(run.preset).with_overrides(values=values)]


def _supcon_cells(preset: Preset) -> int:
    return sum(preset.factorial.cell(a)[1].name == SUPCON for a in preset.cells)


def stage_work(
    stages: Iterable[Stage],
    scale: str,
    sizes: Mapping[str, DatasetSize],
    *,
    builds_taxonomy: bool,
) -> dict[str, StageWork]:
    """stage -> its work, for every stage of the graph."""
    work: dict[str, StageWork] = {}
    for stage in stages:
        name = stage.name
        kind, _, dataset = name.partition("-")
        if kind == "extract":
            work[name] = StageWork(torch_commands=1, images=sizes[dataset].images, backbones=1)
        elif kind == "taxonomy":
            work[name] = StageWork(commands=int(builds_taxonomy))
        elif kind == "import":
            work[name] = StageWork(commands=1)
        elif name in STAGE_RUNS:
            runs = STAGE_RUNS[name]
            phases = [phase for run in runs for phase in run_phases(run, scale, sizes[run.dataset])]
            work[name] = StageWork(commands=len(runs), phases=tuple(phases))
        elif name in RESCORED:
            factorial, aggregation = RESCORED[name]
            (run,) = STAGE_RUNS[factorial]
            (preset,) = run_presets(run, scale)
            # The re-score is a study's evaluation again, waiting for the standby's start-up (no training runs
            # before it); under an aggregation other than the registered one a reconciliation under that one
            # follows it, one job at a time (`rescore` drives one), forked by the same standby.
            evaluation = dataclasses.replace(study_phases(preset, sizes[run.dataset])[-1], warm=0)
            phases = [evaluation]
            if aggregation != preset.evaluation.aggregation:
                phases.append(dataclasses.replace(evaluation, warm=evaluation.jobs))
            work[name] = StageWork(commands=1, phases=tuple(phases))
        else:
            work[name] = StageWork(commands=int(name in LIGHT_STAGES))
    return work


def calibration_run(sizes: Mapping[str, DatasetSize]) -> StudyRun:
    """The study the calibration measures the shapes of: the first given dataset's factorial."""
    for stage, runs in STAGE_RUNS.items():
        if stage.startswith("factorial-") and runs[0].dataset in sizes:
            return runs[0]
    raise ValueError(f"no factorial stage for the datasets {sorted(sizes)}")


def calibration_shape(run: StudyRun, scale: str, size: DatasetSize) -> dict[str, int]:
    """What the calibration's unit costs depend on in the plan: the batch, widths, cells, threads, gallery."""
    (preset,) = run_presets(run, scale)
    _, gallery = test_shape(preset, size)
    training = preset.training
    return {
        "batch": training.batch_size,
        "hidden": training.hidden,
        "out_dim": training.out_dim,
        "cells": len(preset.cells),
        "supcon_cells": _supcon_cells(preset),
        "threads": preset.compute.threads_per_worker,
        "gallery": gallery,
    }


def sample_images(root: Path, n: int) -> list[Path]:
    """The first ``n`` images images.txt lists (what the calibration runs the backbone on)."""
    return [root / "images" / path for path in _pairs(root / "images.txt", ("image_id", "path")).values[:n]]
