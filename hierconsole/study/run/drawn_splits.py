"""A study's splits drawn from its preset and dataset before anything is written (their plan, what each
part holds and where it comes from, is shown by `present.tables.split_plan`).

A dataset without a validation part (a generic train/test import) has validation carved from its train
part, and the plan says so and how many, rather than doing it silently.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hierconsole.config.preset import NONE, Preset
from hierconsole.datasets import FeatureSet
from hierconsole.datasets.preset_fit import Misfit, misfits, overrides_of, refusal
from hierconsole.datasets.splits import (
    Split,
    hierarchy_disjoint_split,
    official_split,
    qg_perturbation,
    tuning_split,
)
from hierconsole.errors import ConfigError, HierconsoleError
from hierconsole.plurals import counted
from hierconsole.vocabulary import HIER_AUTHORS, HIER_STYLE

QUERY_SHARE = 0.2
"""The query share a refusal of evaluation.n_query proposes: NABirds' 1,003 of 5,017 test images."""


@dataclass(frozen=True, eq=False)
class DrawnSplits:
    protocol: Split
    train: np.ndarray
    val: np.ndarray | None
    """The protocol's validation part; None when the dataset has none and validation is carved from train."""
    development: np.ndarray
    """What fixed-endpoint final runs fit on: train and val."""
    test: np.ndarray
    tuning: Split
    qgs: dict[int, Split]


def draw_splits(preset: Preset, fs: FeatureSet, dataset_id: str) -> DrawnSplits:
    """Every split of a study of `preset` on `fs`, validated; raise ConfigError (a line per option, then
    every override in one line) when a count of the preset does not fit the dataset, before anything is
    created. The counts that depend on the drawn split (query counts) are checked on a trial draw with the
    other overrides applied, so one refusal names every override the next command needs."""
    found = misfits(preset, fs, dataset_id)
    trial = preset
    if found:
        try:
            trial = preset.with_overrides(values=overrides_of(found))
        except ConfigError:
            raise ConfigError(refusal(found)) from None
    try:
        drawn, later = _draw(trial, fs, dataset_id)
    except ConfigError:
        if found:
            raise ConfigError(refusal(found)) from None
        raise
    if found or later:
        raise ConfigError(refusal([*found, *later]))
    return drawn


def _draw(preset: Preset, fs: FeatureSet, dataset_id: str) -> tuple[DrawnSplits, list[Misfit]]:
    """The splits, with the query counts that do not fit them (then drawn at the count proposed)."""
    labels = fs.labels
    sp = preset.split
    if sp.protocol == "official":
        protocol = official_split(fs)
    else:
        protocol = hierarchy_disjoint_split(
            labels,
            level=sp.level,
            levels=fs.taxonomy.levels,
            counts=sp.counts,
            fractions=sp.fractions,
            seed=sp.seed,
            official=fs.split if sp.images == "official" else None,
            leaf_counts=sp.leaf_counts,
            image_counts=sp.image_counts,
        )
    parts = protocol.parts
    for needed in ("train", "test"):
        if needed not in parts or len(parts[needed]) == 0:
            raise HierconsoleError(
                f"dataset {dataset_id!r} has no {needed} samples under the {sp.protocol!r} split protocol"
            )
    train = parts["train"]
    val = parts.get("val")
    if val is not None and len(val) == 0:
        val = None
    development = np.sort(np.concatenate([train, val])) if val is not None else train
    test = parts["test"]
    later: list[Misfit] = []
    n_query = preset.evaluation.n_query
    if n_query >= len(test):
        if len(test) < 2:
            raise HierconsoleError(f"dataset {dataset_id!r}: the test split holds {counted(len(test), 'image')}")
        n_query = max(1, min(len(test) - 1, round(QUERY_SHARE * len(test))))
        later.append(
            Misfit(
                f"evaluation.n_query = {preset.evaluation.n_query}: the test split of dataset {dataset_id!r} "
                f"holds only {counted(len(test), 'image')}; choose fewer queries",
                "evaluation.n_query",
                n_query,
            )
        )
    tuning_options = preset.temperature.tuning
    tune_query = tuning_options.n_query
    if tune_query is not None and val is not None and tune_query >= len(val):
        later.append(
            Misfit(
                f"temperature.tuning.n_query = {tune_query}: the validation part of dataset {dataset_id!r} "
                f"holds only {counted(len(val), 'image')}; use the query share instead",
                "temperature.tuning.n_query",
                NONE,
            )
        )
        tune_query = None
    try:
        tuning = tuning_split(
            labels, train, val, query_fraction=tuning_options.query_fraction, seed=tuning_options.seed,
            n_query=tune_query, levels=fs.taxonomy.levels,
        )  # fmt: skip
    except ConfigError as exc:
        raise ConfigError(f"temperature.tuning: {exc} (dataset {dataset_id!r})") from None
    training = preset.training
    fits = [len(tuning.parts["fit"])] if training.select_epoch or preset.tuned_geometries else []
    if not training.select_epoch:
        fits.append(len(development))
    smallest = min(fits)
    if training.drop_last and smallest < training.batch_size:
        if smallest < 2:
            raise HierconsoleError(f"dataset {dataset_id!r}: {counted(smallest, 'training image')} cannot form a batch")
        later.append(
            Misfit(
                f"training.batch_size = {training.batch_size}: the smallest training set of dataset "
                f"{dataset_id!r} holds {counted(smallest, 'image')}, which cannot fill one batch (drop_last); "
                "take a smaller batch",
                "training.batch_size",
                1 << (smallest.bit_length() - 1),
            )
        )
    hier = preset.baselines.hier
    final_fit = len(tuning.parts["fit"]) if training.select_epoch else len(development)
    if HIER_STYLE in preset.evaluation.baselines and hier.recipe == HIER_AUTHORS and final_fit < hier.batch_size:
        if final_fit < hier.per_class:
            raise HierconsoleError(
                f"dataset {dataset_id!r}: {counted(final_fit, 'training image')} cannot form a class-balanced "
                f"batch of baselines.hier.per_class = {hier.per_class}"
            )
        later.append(
            Misfit(
                f"baselines.hier.batch_size = {hier.batch_size}: the final training set of dataset "
                f"{dataset_id!r} holds {counted(final_fit, 'image')}, which cannot fill one class-balanced "
                "batch of the HIER-style arm (authors' recipe); take a smaller batch",
                "baselines.hier.batch_size",
                final_fit // hier.per_class * hier.per_class,
            )
        )
    qgs = {
        s: qg_perturbation(labels, test, n_query=n_query, seed=s, levels=fs.taxonomy.levels)
        for s in preset.evaluation.qg_seeds
    }
    return DrawnSplits(protocol, train, val, development, test, tuning, qgs), later
