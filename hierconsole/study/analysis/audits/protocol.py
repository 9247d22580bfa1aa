"""The protocol as declared: the realised split's counts against the preset's `[expected]`, and a taxonomy
shuffle control that moves development groups only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from hierconsole.config.preset import Preset
from hierconsole.study.analysis.audits.result import Check, Row, cell_name, evidence, updates_per_epoch
from hierconsole.taxonomy import Taxonomy
from hierconsole.vocabulary import TRAINING_KINDS


@dataclass(frozen=True)
class SplitCounts:
    """The splits and dataset recorded at creation: the counts need no training."""

    preset: Preset
    protocol: dict[str, Any]
    """The protocol split's row: {"sizes": part sizes, "params": generator parameters}."""
    tuning_sizes: dict[str, int]
    qg_sizes: list[dict[str, int]]
    """The part sizes of each Q/G split."""
    development_fit: int
    """The rows of the final-train split's `fit` (the development images)."""
    final_fit: int
    """The rows a final run fits (its split file; the final-train rows record the protocol's part sizes)."""
    groups: tuple[int, int, int]
    """The dataset's leaves, middle groups and high groups."""


@dataclass(frozen=True)
class ShuffleControl:
    asked: bool
    """Whether the preset asks for a taxonomy shuffle."""
    record: Row | None
    """The study's row of `taxonomy_shuffles`; None when the store records none."""
    true: Taxonomy | None = None
    """The dataset's taxonomy (with `record`)."""
    development_leaves: np.ndarray | None = None
    """The leaf label of each development row (with `record`)."""
    leaf_middle: np.ndarray | None = None
    middle_high: np.ndarray | None = None
    """The training taxonomy's parent maps, as its file holds them (with `record`)."""
    jobs: tuple[tuple[str, str, str | None], ...] = ()
    """(job_id, kind, training taxonomy its spec names) of every job, by id (with `record`)."""


def realised_counts(e: SplitCounts) -> dict[str, Any]:
    """The study's counts under the names of `[expected]` (config.preset.ExpectedConfig)."""
    protocol, tuning, qg = e.protocol, e.tuning_sizes, e.qg_sizes
    t = e.preset.training

    def per_part(level: str) -> list[int] | None:
        groups = protocol["params"].get(f"{level}_groups")
        return None if groups is None else [int(groups.get(p, 0)) for p in ("train", "val", "test")]

    def one(values: set[int]) -> int | list[int]:
        # Every Q/G perturbation must agree; several values are shown as they are.
        return values.pop() if len(values) == 1 else sorted(values)

    return {
        "development_images": e.development_fit,
        "test_images": int(protocol["sizes"].get("test", 0)),
        "query_images": one({int(q["query"]) for q in qg}),
        "gallery_images": one({int(q["gallery"]) for q in qg}),
        "tuning_fit_images": int(tuning["fit"]),
        "tuning_query_images": int(tuning["query"]),
        "tuning_gallery_images": int(tuning["gallery"]),
        "updates_per_epoch": updates_per_epoch(e.final_fit, t.batch_size, t.drop_last),
        "leaves": int(e.groups[0]),
        "middle_groups": int(e.groups[1]),
        "high_groups": int(e.groups[2]),
        "part_leaves": per_part("leaf"),
        "part_middle_groups": per_part("middle"),
    }


def expected_counts(e: SplitCounts) -> Check:
    """The preset's `[expected]` counts against the realised split: a study drawn over other images than
    the protocol's (e.g. all of NABirds instead of its 19,021 + 5,017 bundle) fails here before training."""
    declared = {k: (list(v) if isinstance(v, tuple) else v) for k, v in e.preset.expected.declared().items()}
    if not declared:
        return Check("expected_counts", True, "the preset declares no expected counts ([expected] is empty)")
    realised = realised_counts(e)
    bad = [f"{k} is {realised[k]}, expected {v}" for k, v in declared.items() if realised[k] != v]
    summary = f"{len(declared) - len(bad)} of {len(declared)} declared counts match"
    # At most 13 counts: every offender is named, not the first few.
    return Check("expected_counts", not bad, "; ".join([summary, *bad]))


def taxonomy_shuffle_development_only(e: ShuffleControl) -> Check:
    """A shuffle control trains on a development-only shuffle and evaluates on the true taxonomy."""
    name = "taxonomy_shuffle_development_only"
    if not e.asked:
        return Check(name, True, "no shuffle control: every job trains and evaluates on the true taxonomy")
    r = e.record
    if r is None:
        return Check(name, False, "the preset asks for a taxonomy shuffle but the store records none")
    true, lm, mh = e.true, e.leaf_middle, e.middle_high
    assert true is not None and lm is not None and mh is not None and e.development_leaves is not None
    dev_leaves = np.unique(e.development_leaves)
    dev_middles = np.unique(true.leaf_middle[dev_leaves])
    bad = []
    shuffled = Taxonomy.three(
        leaves=true.leaves, middles=true.middles, highs=true.highs, leaf_middle=lm, middle_high=mh,
        level_names=true.level_names,
    )
    if shuffled.sha256() != r["sha256"]:
        bad.append(f"the training-taxonomy file hashes to {shuffled.sha256()[:12]}, the store says {r['sha256'][:12]}")
    other_leaves = np.setdiff1d(np.arange(true.n_leaves), dev_leaves)
    other_middles = np.setdiff1d(np.arange(true.n_middles), dev_middles)
    moved = int((lm[other_leaves] != true.leaf_middle[other_leaves]).sum()) + int(
        (mh[other_middles] != true.middle_high[other_middles]).sum()
    )
    if moved:
        bad.append(f"{moved} test-only leaves or middles were moved")
    if sorted(lm[dev_leaves].tolist()) != sorted(true.leaf_middle[dev_leaves].tolist()) or sorted(
        mh[dev_middles].tolist()
    ) != sorted(true.middle_high[dev_middles].tolist()):
        bad.append("group sizes differ from the true development taxonomy")
    leaf_fixed = int((lm[dev_leaves] == true.leaf_middle[dev_leaves]).sum())
    middle_fixed = int((mh[dev_middles] == true.middle_high[dev_middles]).sum())
    if (leaf_fixed, middle_fixed) != (r["leaf_min"], r["middle_min"]):
        bad.append(
            f"fixed points leaf->middle {leaf_fixed}, middle->high {middle_fixed}; the minimum is "
            f"{r['leaf_min']}, {r['middle_min']}"
        )
    for job_id, kind, train_taxonomy in e.jobs:
        short = cell_name(job_id)
        if kind in TRAINING_KINDS and train_taxonomy != r["path"]:
            bad.append(f"{short} does not train on the recorded shuffled taxonomy")
        if kind not in TRAINING_KINDS and train_taxonomy is not None:
            bad.append(f"{short} ({kind}) was handed the shuffled taxonomy")
    summary = (
        f"seed {r['seed']}, training taxonomy {r['sha256'][:12]}: {len(dev_leaves)} development leaves and "
        f"{len(dev_middles)} middles shuffled, {len(other_leaves)} test-only leaves and {len(other_middles)} "
        f"middles unmoved; fixed points leaf->middle {leaf_fixed} (min {r['leaf_min']}), middle->high "
        f"{middle_fixed} (min {r['middle_min']}); validation and test read the true taxonomy"
    )
    return Check(name, not bad, evidence(summary, bad))
