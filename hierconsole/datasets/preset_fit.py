"""Whether a preset's counts fit a dataset: the check that runs before a study is created.

A shipped preset states the paper's counts (NABirds' 242/81/81 Parents, 328/114/113 leaves, its image
counts, its expected taxonomy sizes); on a user's own data they cannot hold. Each misfit is one line that
names the option, says what the dataset has, and gives the `--set` override that fits, so the user's
next command runs.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hierconsole.config.preset import NONE, Preset
from hierconsole.datasets.featureset import FeatureSet
from hierconsole.datasets.splits import OFFICIAL_TEST, split_level_index
from hierconsole.plurals import counted
from hierconsole.vocabulary import PCA

FRACTION_DIGITS = 2
"""Decimals of the fractions a refusal proposes in place of counts (0.6 for 242 of 404 groups)."""
_DATASET_COUNTS = {"leaves": 0, "middle_groups": 1, "high_groups": -1}
"""The `[expected]` counts that are the dataset's own, by option, with their label column."""
THREE_LEVEL_EXPECTED = frozenset({"middle_groups", "high_groups", "part_middle_groups"})
"""The `[expected]` counts of a three-level taxonomy's groups: refused on a tree of another depth."""


def fractions_of(counts: tuple[int, ...]) -> list[float]:
    """`counts` as shares rounded to FRACTION_DIGITS that sum to exactly 1 (the last takes the rest), each
    at least the smallest step (a fraction must be > 0)."""
    total, step = sum(counts), 10.0**-FRACTION_DIGITS
    shares = [max(step, round(c / total, FRACTION_DIGITS)) for c in counts[:-1]]
    return [*shares, round(1 - sum(shares), FRACTION_DIGITS)]


def _list(values: tuple[float, ...] | list[float]) -> str:
    return "[" + ", ".join(f"{v:g}" for v in values) + "]"


def _override(values: Sequence[Any]) -> str:
    """A list as `--set` reads it: numbers shortest, strings double-quoted, no spaces."""
    return "[" + ",".join(f"{v:g}" if isinstance(v, (int, float)) else json.dumps(v) for v in values) + "]"


@dataclass(frozen=True)
class Misfit:
    problem: str
    """The option, what the dataset has, and the fix in words."""
    key: str
    value: Any
    """The override that fits: `--set KEY=VALUE`."""

    @property
    def override(self) -> str:
        """The `--set` arguments, quoted for a POSIX shell where the value needs it."""
        value = _override(self.value) if isinstance(self.value, list) else str(self.value)
        return f"--set {shlex.quote(f'{self.key}={value}')}"

    def line(self) -> str:
        return f"{self.problem}: {self.override}"


def refusal(found: Sequence[Misfit]) -> str:
    """The message refusing `found`: a line each and, for more than one, every override in one line."""
    lines = [m.line() for m in found]
    if len(found) > 1:
        lines.append(f"all of them: {' '.join(m.override for m in found)}")
    return "\n".join(lines)


def overrides_of(found: Sequence[Misfit]) -> dict[str, Any]:
    """The overrides of `found` as `Preset.with_overrides` values."""
    return {m.key: m.value for m in found}


def misfits(preset: Preset, fs: FeatureSet, dataset_id: str) -> list[Misfit]:
    """Each count of `preset` that `fs` cannot meet (empty when everything fits)."""
    labels = fs.labels
    problems: list[Misfit] = []
    sp = preset.split
    if sp.protocol == "hierarchy_disjoint":
        col = split_level_index(fs.taxonomy.levels, sp.level)
        code = fs.taxonomy.levels.codes[col]
        n_groups = len(np.unique(labels[:, col]))
        groups = f"{code} groups"
        if n_groups < 3:
            problems.append(
                Misfit(
                    f"split.level = {sp.level!r}: dataset {dataset_id!r} has "
                    f"{counted(n_groups, code + ' group')}, and a hierarchy-disjoint split needs at least 3 "
                    "(one per part); use the official split",
                    "split.protocol",
                    "official",
                )
            )
        elif sp.counts is not None and sum(sp.counts) != n_groups:
            problems.append(
                Misfit(
                    f"split.counts = {_list(sp.counts)} adds up to {sum(sp.counts)} {groups}, but dataset "
                    f"{dataset_id!r} has {n_groups}; give fractions instead",
                    "split.fractions",
                    fractions_of(sp.counts),
                )
            )
        n_leaves = len(np.unique(labels[:, 0]))
        if sp.leaf_counts is not None and sum(sp.leaf_counts) != n_leaves:
            problems.append(
                Misfit(
                    f"split.leaf_counts = {_list(sp.leaf_counts)} adds up to {sum(sp.leaf_counts)} leaves, but "
                    f"dataset {dataset_id!r} has {n_leaves}; clear the target",
                    "split.leaf_counts",
                    NONE,
                )
            )
        is_test = np.asarray(fs.split) == OFFICIAL_TEST
        if sp.images == "official" and not is_test.any():
            problems.append(
                Misfit(
                    f"split.images = 'official': dataset {dataset_id!r} has no official test images (its labels "
                    "have no split column, or no test row); pool every image instead",
                    "split.images",
                    "all",
                )
            )
        elif sp.image_counts is not None:
            wanted = sp.image_counts
            if sp.images == "official":
                have = [int((~is_test).sum()), int(is_test.sum())]
                fits = wanted[0] + wanted[1] <= have[0] and wanted[2] <= have[1]
                what = f"{have[0]} official train/val and {have[1]} official test images"
            else:
                fits = sum(wanted) == len(labels)
                what = counted(len(labels), "image")
            if not fits:
                problems.append(
                    Misfit(
                        f"split.image_counts = {_list(wanted)}: dataset {dataset_id!r} has {what}; clear the target",
                        "split.image_counts",
                        NONE,
                    )
                )
    baselines = preset.evaluation.baselines
    if PCA in baselines and fs.dim < preset.training.out_dim:
        problems.append(
            Misfit(
                f"evaluation.baselines = {json.dumps(list(baselines))}: the pca baseline projects to "
                f"training.out_dim = {preset.training.out_dim} axes, but dataset {dataset_id!r} has "
                f"{fs.dim}-D features; leave it out",
                "evaluation.baselines",
                [b for b in baselines if b != PCA],
            )
        )
    declared = preset.expected.declared()
    three_level = sorted(key for key in declared if key in THREE_LEVEL_EXPECTED)
    if three_level and not fs.taxonomy.levels.is_paper:
        # The expected_counts audit counts groups by each level's own code: these names would fail it.
        stated = ", ".join(f"expected.{key} = {declared[key]}" for key in three_level)
        problems.append(
            Misfit(
                f"{stated}: [expected] group counts are three-level, and dataset {dataset_id!r} has "
                f"{fs.taxonomy.k} levels ({fs.taxonomy.levels.describe()}); clear them",
                "expected",
                NONE,
            )
        )
    wrong = {
        key: (declared[key], len(np.unique(labels[:, col])))
        for key, col in _DATASET_COUNTS.items()
        if key in declared and declared[key] != len(np.unique(labels[:, col]))
    }
    if wrong:
        stated = ", ".join(f"expected.{key} = {want}" for key, (want, _) in wrong.items())
        has = ", ".join(f"{have} {key.replace('_', ' ')}" for key, (_, have) in wrong.items())
        problems.append(
            Misfit(
                f"{stated}: dataset {dataset_id!r} has {has}, so the preset's [expected] counts describe another "
                "dataset; clear them all",
                "expected",
                NONE,
            )
        )
    return problems
