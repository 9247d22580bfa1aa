"""The protocol as declared: the realised split's counts against the preset's `[expected]`, and a taxonomy
shuffle control that moves development groups only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hierconsole.config.preset import Preset
from hierconsole.levels import Levels
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
    groups: Mapping[str, int] | Sequence[int]
    """The dataset's groups per level, leaf first: level code -> groups, or the counts in level order
    (of `levels`)."""
    levels: Levels | None = None
    """The dataset's levels, when `groups` is a sequence (default: the default levels of its length)."""

    @property
    def level_groups(self) -> dict[str, int]:
        """level code -> the dataset's groups at that level (its leaves at the leaf), leaf first."""
        if isinstance(self.groups, Mapping):
            return {code: int(n) for code, n in self.groups.items()}
        levels = self.levels or Levels.default(len(self.groups))
        return {code: int(n) for code, n in zip(levels.codes, self.groups, strict=True)}


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
    parents: tuple[np.ndarray, ...] | None = None
    """The training taxonomy's parent maps per edge, fine to coarse, as its file holds them (with `record`)."""
    fixed_min: tuple[int, ...] | None = None
    """Per edge, the fewest fixed points the store recorded (`DevelopmentShuffle.fixed_min`; with `record`)."""
    jobs: tuple[tuple[str, str, str | None], ...] = ()
    """(job_id, kind, training taxonomy its spec names) of every job, by id (with `record`)."""


def realised_counts(e: SplitCounts) -> dict[str, Any]:
    """The study's counts under the names of `[expected]` (config.preset.ExpectedConfig): the groups of
    every level (`leaves`, then `{level}_groups`), and per split part the leaves and the groups of every
    level between the leaf and the top (three levels: `part_leaves`, `part_middle_groups`)."""
    protocol, tuning, qg = e.protocol, e.tuning_sizes, e.qg_sizes
    t = e.preset.training
    groups = e.level_groups
    codes = list(groups)

    def per_part(level: str) -> list[int] | None:
        found = protocol["params"].get(f"{level}_groups")
        return None if found is None else [int(found.get(p, 0)) for p in ("train", "val", "test")]

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
        "leaves": groups[codes[0]],
        **{f"{level}_groups": groups[level] for level in codes[1:]},
        "part_leaves": per_part(codes[0]),
        **{f"part_{level}_groups": per_part(level) for level in codes[1:-1]},
    }


def expected_counts(e: SplitCounts) -> Check:
    """The preset's `[expected]` counts against the realised split: a study drawn over other images than
    the protocol's (e.g. all of NABirds instead of its 19,021 + 5,017 bundle) fails here before training."""
    declared = {k: (list(v) if isinstance(v, tuple) else v) for k, v in e.preset.expected.declared().items()}
    if not declared:
        return Check("expected_counts", True, "the preset declares no expected counts ([expected] is empty)")
    realised = realised_counts(e)
    bad = [
        f"{k} is {realised[k]}, expected {v}" if k in realised else f"{k} is not a count of this dataset's levels"
        for k, v in declared.items()
        if realised.get(k) != v
    ]
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
    true, parents, fixed_min = e.true, e.parents, e.fixed_min
    assert true is not None and parents is not None and fixed_min is not None and e.development_leaves is not None
    codes = true.levels.codes
    edges = range(len(true.parents))
    # The development nodes of each edge's child level, fine to coarse: the leaves with a development row,
    # then the nodes above them (as `taxonomy.development_shuffle` draws them).
    dev = [np.unique(e.development_leaves)]
    for k in edges[:-1]:
        dev.append(np.unique(true.parents[k][dev[-1]]))
    other = [np.setdiff1d(np.arange(len(true.nodes[k])), dev[k]) for k in edges]
    bad = []
    shuffled = Taxonomy(true.nodes, tuple(parents), true.level_names)
    if shuffled.sha256() != r["sha256"]:
        bad.append(f"the training-taxonomy file hashes to {shuffled.sha256()[:12]}, the store says {r['sha256'][:12]}")
    moved = sum(int((parents[k][other[k]] != true.parents[k][other[k]]).sum()) for k in edges)
    words = [_nodes_word(true.levels, k) for k in edges]
    if moved:
        bad.append(f"{moved} test-only {' or '.join(words)} were moved")
    if any(sorted(parents[k][dev[k]].tolist()) != sorted(true.parents[k][dev[k]].tolist()) for k in edges):
        bad.append("group sizes differ from the true development taxonomy")
    fixed = tuple(int((parents[k][dev[k]] == true.parents[k][dev[k]]).sum()) for k in edges)
    arrows = [f"{codes[k]}->{codes[k + 1]}" for k in edges]
    if fixed != tuple(fixed_min):
        bad.append(
            f"fixed points {', '.join(f'{a} {f}' for a, f in zip(arrows, fixed, strict=True))}; the minimum is "
            f"{', '.join(map(str, fixed_min))}"
        )
    for job_id, kind, train_taxonomy in e.jobs:
        short = cell_name(job_id)
        if kind in TRAINING_KINDS and train_taxonomy != r["path"]:
            bad.append(f"{short} does not train on the recorded shuffled taxonomy")
        if kind not in TRAINING_KINDS and train_taxonomy is not None:
            bad.append(f"{short} ({kind}) was handed the shuffled taxonomy")
    points = ", ".join(f"{a} {f} (min {m})" for a, f, m in zip(arrows, fixed, fixed_min, strict=True))
    summary = (
        f"seed {r['seed']}, training taxonomy {r['sha256'][:12]}: "
        f"{_and([f'{len(d)} {w}' for d, w in zip(dev, ['development ' + words[0], *words[1:]], strict=True)])} "
        f"shuffled, {_and([f'{len(o)} {w}' for o, w in zip(other, ['test-only ' + words[0], *words[1:]], strict=True)])} "
        f"unmoved; fixed points {points}; validation and test read the true taxonomy"
    )
    return Check(name, not bad, evidence(summary, bad))


def _nodes_word(levels: Levels, k: int) -> str:
    """What the child nodes of edge k are called in the evidence: leaves, then (three levels) middles, or
    `{code} nodes`."""
    if k == 0:
        return "leaves"
    return f"{levels.codes[k]}s" if levels.is_paper else f"{levels.codes[k]} nodes"


def _and(parts: Sequence[str]) -> str:
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"
