"""The paper's replication as stages: which exist for the datasets given, what each reads, and which
studies and families each runs at each scale.

Either dataset may be left out; its stages are then absent and the paper tables that need it are named
as omitted. A stage's external inputs are content hashes `inputs` computes (image folders, weights,
taxonomy, the scale and seed) before anything is created. Everything here is plain data: the stage's
action (`actions`) turns a `StudyRun` into a `run` of the shipped preset or family, so a replication is
made of the same studies a user would start by hand.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from hierconsole.config.preset import ExpectedConfig
from hierconsole.study.analysis.paper_datasets import CUB, DATASETS, NABIRDS
from hierconsole.study.replication.graph import Stage
from hierconsole.vocabulary import Aggregation

__all__ = ["CUB", "DATASETS", "NABIRDS"]  # with the names below: the datasets are the stages' vocabulary

SMOKE = "smoke"
PAPER = "paper"
SCALES = (SMOKE, PAPER)
"""paper: the protocol unchanged; smoke: every stage and table, with budgets cut to run in minutes."""

TABLES_STAGE = "tables"
REPORT_STAGE = "report"


@dataclass(frozen=True)
class StudyRun:
    """One study or family a stage runs: a shipped preset or family with the replication's overrides."""

    name: str
    """Its name within the replication; the store's study or family is named `<replication>.<name>`."""
    preset: str
    dataset: str
    family: bool = False
    official_split: bool = False
    """True for a NABirds run on the official split (no Parent-disjoint counts to cut down at smoke scale)."""
    overrides: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    """Paper-scale overrides of the shipped preset (the paper's protocol where the preset alone is not)."""


_TUNE_BOTH = {"temperature.euclidean": "tune", "temperature.poincare": "tune"}

STAGE_RUNS: dict[str, tuple[StudyRun, ...]] = {
    # S6 then the factorial: the temperatures are selected on validation, then every cell is retrained.
    "factorial-cub": (StudyRun("factorial", "cub-tune", CUB),),
    "factorial-nabirds": (StudyRun("factorial", "nabirds-parent-disjoint", NABIRDS, overrides=_TUNE_BOTH),),
    # Sec. 5.5 (CUB outer splits); S9, S10 and Sec. 5.5 (NABirds).
    # Sec. 5.5's outer splits are run twice: with the paper's validation-frozen arms (its reading), and as
    # the fixed-budget 2x2 factorial per split (the same question under the factorial's protocol).
    "families-cub": (
        StudyRun("outer-arms", "cub-genus-disjoint-outer-arms", CUB, family=True),
        StudyRun("genus-disjoint", "cub-genus-disjoint", CUB, family=True),
    ),
    "families-nabirds": (
        StudyRun("semantic-control", "nabirds-semantic-control", NABIRDS, family=True),
        StudyRun("curvature-control", "nabirds-curvature-control", NABIRDS, family=True),
        StudyRun("outer-arms", "nabirds-parent-disjoint-outer-arms", NABIRDS, family=True),
        StudyRun("outer-splits", "nabirds-parent-disjoint-outer", NABIRDS, family=True),
    ),
    # Sec. 5.1's context: frozen features, the HIER-style arm and a 32-D Euclidean regression projector on
    # CUB; the seen-class (official split) HIER-style arm and a Taxonomy-SupCon projector on NABirds.
    "baselines-cub": (StudyRun("baselines", "cub-taxonomy-regression", CUB),),
    "baselines-nabirds": (StudyRun("baselines", "nabirds-seen-class", NABIRDS, official_split=True),),
}
"""The studies and families each stage runs (stages not named here run commands, not studies)."""

RESCORED: dict[str, tuple[str, Aggregation]] = {"rescore-cub": ("factorial-cub", "macro")}
"""S11: the stage that re-scores a factorial's frozen test embeddings, with the aggregation it uses."""

SMOKE_OVERRIDES: dict[str, Any] = {
    "training.epochs": 2,
    "training.seeds": [42, 2024],
    "training.batch_size": 16,
    "training.val_every": 1,
    "evaluation.n_query": 10,
    "temperature.tuning.candidates": [0.1, 0.5],
    "temperature.tuning.epochs": 1,
    "temperature.tuning.n_query": None,
    "baselines.hier.proxies": 8,
    "baselines.hier.triplets_per_anchor": 5,
    "baselines.hier.batch_size": 16,  # the authors' 180 (90 classes x 2) is more than a smoke sample holds
    **{f"expected.{f.name}": None for f in dataclasses.fields(ExpectedConfig)},
}
"""Budgets cut for a smoke replication: two seeds (an SD needs two), two epochs, small batches and query
sets, and no declared counts (a laptop's sample of a dataset does not have the paper's)."""

SMOKE_DISJOINT_SPLIT: dict[str, Any] = {
    "split.counts": None,
    "split.fractions": [0.6, 0.2, 0.2],
    "split.leaf_counts": None,
    "split.image_counts": None,
}
"""NABirds' Parent counts (242 / 81 / 81) as the fractions they are near, for a dataset of another size."""


def run_overrides(run: StudyRun, scale: str) -> dict[str, Any]:
    """The overrides a study or family run takes at a scale (smoke budgets over the paper's protocol)."""
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, not {scale!r}")
    values = dict(run.overrides)
    if scale == SMOKE:
        if run.dataset == NABIRDS and not run.official_split:
            values = {**SMOKE_DISJOINT_SPLIT, **values}
        values.update(SMOKE_OVERRIDES)
    return values


def assignment(key: str, value: Any) -> str:
    """`key=value` as `--set` reads it (a TOML literal; None clears an optional option)."""
    return f"{key}={'none' if value is None else json.dumps(value, separators=(',', ':'))}"


def plan_key(stage: str) -> str:
    """The external input naming what a study stage runs (`run_plans`)."""
    return f"plan:{stage}"


def run_plans(scale: str, preset_sha256: Callable[[StudyRun], str]) -> dict[str, str]:
    """stage -> a hash of what it runs at this scale: each study run's preset or family (the files' bytes,
    from ``preset_sha256``) and overrides. A changed preset, override or budget makes the stage stale."""
    plans: dict[str, str] = {}
    for stage, runs in STAGE_RUNS.items():
        described = [
            [run.name, run.preset, run.family, preset_sha256(run), assignment_list(run_overrides(run, scale))]
            for run in runs
        ]
        plans[plan_key(stage)] = hashlib.sha256(json.dumps(described).encode()).hexdigest()
    return plans


def assignment_list(values: Mapping[str, Any]) -> list[str]:
    return [assignment(key, value) for key, value in values.items()]


def replication_name(model: str, scale: str, seed: int) -> str:
    """A replication's id: its model, scale and seed, not its datasets, so a dataset added later joins it
    (its stages run; those of the dataset already there stay done) and both share one tables folder."""
    return f"{model}-{scale}-seed{seed}"


def replication_scale(replication_id: str) -> str | None:
    """The scale a replication's id names (``replication_name``), or None for an id it did not make."""
    parts = replication_id.rsplit("-", 2)
    return parts[1] if len(parts) == 3 and parts[1] in SCALES and parts[2].startswith("seed") else None


DEFAULT_STAGES_AT_ONCE = 2
"""Stages a replication runs at the same time unless told (`--stages-at-once`): the store's stages run one
after another whatever this says, so two lets an extraction run beside them, which is what overlaps."""


CARRIED_INPUT = "carried"
"""The tables stage's input when a dataset is carried: finished in this replication by an earlier run, its
folder not given to this one, so its stages are not planned again but its studies still fill the tables
(the hash of those stages' recorded outputs)."""

STUDY_STAGES = {
    CUB: ("factorial-cub", "families-cub", "baselines-cub", "rescore-cub"),
    NABIRDS: ("factorial-nabirds", "families-nabirds", "baselines-nabirds"),
}
"""A dataset's stages whose studies (and re-score) the tables read."""


def paper_stages(datasets: frozenset[str], *, carried: bool = False) -> list[Stage]:
    """The stage graph for the datasets given (a non-empty subset of {cub, nabirds}); ``carried``: the
    tables also read the finished studies of a dataset not given (`CARRIED_INPUT`)."""
    if not datasets or not datasets <= set(DATASETS):
        raise ValueError(
            f"datasets must be a non-empty subset of {{{CUB}, {NABIRDS}}}, not {sorted(datasets)}"
        )
    stages: list[Stage] = []
    study_stages = [stage for d in DATASETS if d in datasets for stage in STUDY_STAGES[d]]
    if CUB in datasets:
        stages += [
            Stage("extract-cub", (), ("cub_images", "weights", "model", "seed"), store=False),
            Stage("taxonomy-cub", (), ("cub_labels", "taxonomy_source"), store=False),
            Stage("import-cub", ("extract-cub", "taxonomy-cub"), ()),
            Stage("factorial-cub", ("import-cub",), ("scale", plan_key("factorial-cub"))),
            Stage("families-cub", ("import-cub",), ("scale", plan_key("families-cub"))),
            Stage("baselines-cub", ("import-cub",), ("scale", plan_key("baselines-cub"))),
            Stage("rescore-cub", ("factorial-cub",), ()),
        ]
    if NABIRDS in datasets:
        stages += [
            Stage("extract-nabirds", (), ("nabirds_images", "weights", "model", "seed"), store=False),
            Stage("import-nabirds", ("extract-nabirds",), ("nabirds_hierarchy",)),
            Stage("factorial-nabirds", ("import-nabirds",), ("scale", plan_key("factorial-nabirds"))),
            Stage("families-nabirds", ("import-nabirds",), ("scale", plan_key("families-nabirds"))),
            Stage("baselines-nabirds", ("import-nabirds",), ("scale", plan_key("baselines-nabirds"))),
        ]
    tables_inputs = ("scale", "paper_values", *((CARRIED_INPUT,) if carried else ()))
    stages += [
        Stage(TABLES_STAGE, tuple(study_stages), tables_inputs, derived=True),
        # The report reads each factorial's study, so those are its inputs beside the tables.
        Stage(REPORT_STAGE, (TABLES_STAGE, *factorial_stages(datasets)), (), derived=True),
    ]
    return stages


def factorial_stages(datasets: frozenset[str]) -> dict[str, str]:
    """The factorial stage of each dataset given -> the dataset, in the order of DATASETS."""
    return {f"factorial-{d}": d for d in DATASETS if d in datasets}
